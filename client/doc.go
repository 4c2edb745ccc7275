// Package client is the Go SDK of GeoEvent over its binary protocol: TCP
// connections carrying the frames of package core (core.AppendFrame,
// core.ReadFrame).
//
// Runnable programs, and the tests that run them against real replicas,
// are in client/examples: quickstart (connect, insert, a radius query, the
// latest position of an entity) and failover (writes and reads that go on
// while a cluster loses its leader).
//
// # Ids and positions
//
// Every method and request takes ids as core.Uint128, the protocol's type.
// A uuid.UUID (github.com/google/uuid) converts to one with core.FromUUID
// or IDOf, and back with Uint128.UUID; the 16 bytes are big-endian, so the
// UUID and the id print the same string. The generic helpers IDOf, IDs and
// NewEvent take either type (the constraint ID):
//
//	ev, err := client.NewEvent(truck, 38.115, 13.361) // truck: a uuid.UUID or a core.Uint128
//	latest, err := c.GetLatest(ctx, client.IDOf(truck))
//	all, err := c.GetLatestBatch(ctx, client.IDs(truck, van))
//
// The methods themselves take core.Uint128 alone because Go gives no better
// typed choice: a method cannot have type parameters, a union such as ID
// can only constrain one, and an interface both types satisfy would rest
// on a method of uuid.UUID that core.Uint128 copies (String,
// MarshalBinary), which unrelated types have too: that trades the
// compile-time check for a run-time one. Twin methods (GetLatestUUID, ...)
// would double the API and still leave the ids inside requests
// (HistoryQuery.EntityID, TTLSetRequest.EntityID, GeoEvent.EntityID) as
// core.Uint128. One id type with one conversion each way works the same
// for arguments and for fields.
//
// Positions are nanodegrees (int64) on the wire. Position and NewEvent
// take degrees as float64 and round them to the nearest nanodegree, halves
// away from zero, from the float64's exact value: exact for the value the
// program holds, though decimal text with more than nine decimals may round
// one nanodegree differently from its text (see Position). Degrees reads
// nanodegrees back as the nearest float64, and Position(Degrees(c)) is c.
//
// # Sessions
//
// A Client holds Options.PoolSize sessions. A session is a server-side
// session: before its first write it connects to a replica (session i
// starts at address i modulo the number of addresses) and sends
// MsgRegister with Options.Cluster; the MsgRegisterReply gives its session
// id. Each request carries that id as its client id and a request number
// one above the session's previous one, starting at 1. A read on a session
// that has not registered goes without one (client id 0, the cluster id
// before the request: core.AppendSessionlessRead): it needs no
// deduplication, and registering is a write, which a replica out of disk
// space cannot do while it still answers reads. A session carries one request at a
// time: a call checks a session out of the pool for its whole duration
// (retries included), so PoolSize sessions allow PoolSize calls in
// parallel, and further calls wait for a free session, or for their context.
// The free session used last goes first: calls one after another use one
// session, and a session registers only when concurrency first needs it
// for a write.
//
// The sessions share one TCP connection per replica: each frame's header
// (session id and request number; a per-connection nonce for a register
// and for a read without a session)
// says which call an answer belongs to, and frames that several calls send
// at once leave in one write. Under load one system call then carries the
// frames of many sessions on both ends. A call that times out when nothing
// at all arrived on the connection during the second half of its wait
// closes it (the replica is taken for dead; a large answer still arriving,
// however slowly, keeps it); a late answer to a call that gave up is
// dropped.
//
// Options.Dial replaces TCP with another transport, a Conn that carries one
// frame exchange at a time: the HTTP gateway's sessions use in-process
// connections to the replica of their own process (io.Server.DialLocal)
// this way, with the same sessions, request numbers and retries.
//
// # Retries
//
// Every call follows SPEC.md's client-side retry defaults:
//
//   - A call is retried at most Options.MaxRetries times (default 5), after
//     a connection error (dial, write, read, a frame that is malformed or
//     fails its checksum, a reply that does not answer the request), an
//     attempt that timed out (Options.RequestTimeout, default 30 s), or a
//     result code whose Retryable flag is set in core's code table (for
//     example 211 CLUSTER_UNAVAILABLE, 212 CLUSTER_BUSY, 216
//     REPLICATION_TIMEOUT). 202 REQUEST_IN_FLIGHT is retried too: it means
//     an earlier request of the session that the client gave up on is still
//     running, and it clears once that request finishes.
//   - Before retry number k (k = 0, 1, ...) the client waits
//     min(MaxBackoff, BaseBackoff*2^k) plus a jitter uniform in
//     [0, BaseBackoff/2] (defaults 100 ms and 1600 ms). A replica that
//     cannot be dialed, or that answers 211, 214, 215 or 220 (see below),
//     sends the call to the next address at once, without a wait and
//     without counting a retry, until every address has been tried since
//     the last wait: a failover then costs the election, not a growing
//     backoff for each dead replica on the way.
//   - A call never outlives Options.TotalTimeout (default 30 s) or its
//     context: when the next wait would end past either deadline, the call
//     gives up at once; a cancelled context aborts a blocked read or write.
//   - Any other code is returned at once as a *core.Error, notably
//     validation errors (100-199), resource limits (300-399), protocol
//     codes (1-99) and 204 WRONG_CLUSTER. Use errors.As to get it.
//   - A call that runs out of retries, or that TotalTimeout, its context or
//     Close stops, returns a *RetryError: it says how many attempts were
//     made and wraps the last attempt's error and the reason
//     (ErrTotalTimeout, the context's cause, ErrClosed). A call stopped
//     while it waits for a free session, before any attempt, returns an
//     error wrapping that reason.
//   - Options.OnRetry, when set, is told of each retry and of the error that
//     caused it (a load generator counts 212 CLUSTER_BUSY refusals so).
//   - Options.DisableRetries sends each request once and returns its error
//     as it is (after a 201 the session still registers again, on the next
//     call).
//
// A retry resends the same request with the same session id and request
// number, so the server recognises it and answers a write that was already
// applied from its session cache instead of applying it twice. (The server
// keeps the request's checksum with its reply: another request under a
// number already used is answered 16 REQUEST_MISMATCH. And it lets one
// connection hold at most 1,024 live sessions, 205 SESSION_LIMIT beyond:
// a PoolSize above that takes a second Client.) After a
// connection error or a timeout the session moves to the next address in
// the list, round robin (connecting when the client has no connection
// there), and resends with its session id and request number; answers 211 CLUSTER_UNAVAILABLE, 214 STALE_FOLLOWER, 215
// PRIMARY_UNREACHABLE and 220 NOT_SHARD_LEADER also move the session to the
// next address.
//
// When the server answers 201 SESSION_EXPIRED (the session was evicted or
// is unknown), the session registers again (a new session id; request
// numbers restart at 1) and resends the request once, at once. The new
// session knows nothing of the old one's requests: if an earlier attempt of
// this request was applied before the eviction and its reply was lost, the
// resend applies it a second time. This is the spec's rule that a new client
// id loses dedupe protection, and it concerns only that one request. A
// second 201 in the same call is returned (and the next call registers
// again).
//
// A write whose call fails with a connection error, a timeout or a
// *RetryError may or may not have been applied (SPEC.md: "after a timeout
// the operation may have committed"). Upsert is the mode for retrying such
// writes at the application level: an event that carries its own
// timestamp, upserted again, is written once (client/examples/failover
// does this).
//
// # Large batches
//
// Insert and Upsert send a batch of at most Options.MaxBatchEvents events
// (default 10,000, the spec's limit) as one request, which the server
// commits atomically. A larger batch is split into consecutive chunks of at
// most MaxBatchEvents events, sent one after the other, each its own call
// with its own retries and TotalTimeout. Atomicity then holds per chunk,
// not for the whole batch: the merged reply's Results carry each event's
// index in the caller's batch, and Committed is true only when every chunk
// committed. A chunk that fails (an error, or Committed false because
// events failed validation) stops the rest: the call returns the merged
// reply of the chunks sent (the committed ones and the failed one's
// per-event results, if any) together with a *BatchError that says which
// events were committed.
//
// # Fences and the feed
//
// PutFence, GetFence, ListFences and DeleteFence manage geofences;
// ReadFeed reads a page of the feed of their transitions, and Watch
// follows it: Watcher.Next returns each notification in order, polling
// while there is none, and goes on across failovers, since every replica
// holds the same feed. A Watch begun from an earlier Watcher's Last
// resumes with nothing missed and nothing repeated.
//
// PutHook, Hook, Hooks and DeleteHook manage webhooks, to which the
// leader posts the feed's notifications (at least once); HookDelivered is
// the leader's acknowledgement of a delivery.
// WatchPositions is over HTTP, not the binary protocol: it reads a
// replica gateway's GET /feed/positions, every event that replica applies
// inside a box or a fence from now on (not durable: no resume).
//
// # Robustness
//
// Nothing the server sends makes the client panic: a frame that is
// malformed, fails its checksum, has an unexpected type, answers no call
// or carries an undecodable payload closes that connection (every call on
// it sees a connection error and retries).
package client
