// Package io is the production runtime of one GeoEvent replica: the event
// loop, the framed TCP server, the disk goroutine over package store, the
// real clock and random source, and the cluster file that `replica format`
// writes. It holds no protocol logic: every decision is the replica's.
//
// # Goroutines
//
//   - The event loop (Server.Run) owns the *replica.Replica and is the only
//     goroutine that calls it. It takes one input at a time — a frame, a
//     closed connection, a storage completion, a tick — and after each checks
//     Replica.Err; a replica that failed stops the server. On every tick,
//     and whenever the role, term or leader changes, it publishes the
//     replica's state (Server.Health: role, term, leader, commit and
//     applied index, its heartbeat time, the data counts once a second)
//     for health probes and metrics, which read it from other goroutines
//     and never wait for the loop. After every input it also publishes
//     the feed's newest sequence when it has moved (FeedNews), and, while
//     the HTTP gateway's position stream listens, keeps each applied
//     entry's history writes in a bounded ring (PositionsAfter): the
//     gateway's feed readers wait on these instead of polling
//     (publish.go). With Options.Metrics the readers count
//     client requests by operation (and, with the writers, time them
//     until their answers are written) and the disk goroutine times its
//     fsyncs and snapshot files (metrics.go); the loop itself records
//     nothing but leader changes.
//   - The disk goroutine performs AppendLog, SaveHardState, Sync and
//     SaveSnapshot against package store, in the order the replica asked,
//     and reports Synced and SnapshotSaved back to the loop. It does group
//     commit: the replica asks for a Sync after each input that wrote,
//     without waiting for the one in flight, and the disk goroutine makes
//     one fsync serve every Sync queued while it was busy, right after the
//     fsync before, with no round trip through the loop. While an fsync
//     runs it holds no Go processor (package store waits for it through
//     the kernel's asynchronous IO on Linux), so a server on one processor
//     (GOMAXPROCS=1) runs the loop meanwhile; where that is unavailable
//     (store.PlainSyncs), it logs so, and again when it is back. Its queue is
//     bounded by the replica's (MaxPendingEntries: entries wait to be
//     applied until synced). A write that fails for want of space is tried
//     again until there is space (the replica meanwhile sees a disk that
//     does not answer: no acknowledgements, reads go on); in a cluster of
//     several for 2 s (a leader) or 10 s (a follower) at most, then it
//     stops the server as any other failed write, and any failed fsync,
//     does: the state of the files is then unknown and only a restart
//     (recovery) may go on.
//   - The historian (historian.go) owns the history store (package
//     history, in DIR/history): it applies WriteHistory batches in the
//     order the replica queued them, answers ReadHistory from a view taken
//     in that order (reported to the loop as HistoryRead), checkpoints the
//     store into DIR/snapshot-N.history when the replica asks for the
//     snapshot at N (the snapshot writer writes the snapshot's file only
//     once the checkpoint is made, so a snapshot on disk has its history;
//     checkpoints go with their snapshots). It also carries history
//     streams (histstream.go): for a follower's snapshot it checkpoints
//     the store, in queue order, into DIR/stream.history and reads it a
//     chunk at a time as the replica asks (ReadSnapshotStream); on a
//     follower it writes a leader's stream into DIR/staging.history
//     (WriteSnapshotStream), checking every file's checksum, and
//     installing the leader's snapshot makes that the store. Neither side
//     holds a stream in memory beyond a chunk; both log its progress
//     every 5 s. The answers reach the loop as the reads' do. At start
//     (recoverHistory, history.Recover), the store is kept as the crash left it when it
//     holds the entries up to an index between the recovered snapshot's
//     and the last the log knows committed, and no recovered entry at or
//     below that index may read the store (replica.FirstHistoryRead):
//     pebble's WAL is off, and each batch records its entry's index, so
//     the store holds exactly those entries; the replay of the log above
//     the snapshot skips their writes. Otherwise it is restored from the
//     recovered snapshot's checkpoint (empty without a snapshot) and the
//     replay writes every entry above it. A failed write to the store
//     stops the server. A block that fails its checksum is never answered
//     from (rebuild.go): the read that finds it fails the replica (a
//     client's history query is answered 501 CORRUPTION first), and the
//     loop logs the damaged file and key range; a replica of a cluster of
//     one then stops (restore the data directory from a backup), one with
//     peers rebuilds: the disk goroutine durably sets the hard state's
//     Repairing flag, empties the log and removes the snapshots, the
//     historian then empties the store and removes its checkpoints, and a
//     new replica starts on the empty log, repairing, which the leader
//     fills with its log or a snapshot. Their answers to the discarded
//     replica's requests are dropped. A store damaged where opening it
//     reads (pebble's MANIFEST, the applied index) stops a lone replica
//     from starting and makes one with peers start so, empty and
//     repairing.
//   - A snapshot encoder (one goroutine per EncodeSnapshot) encodes the
//     frozen view of the state the replica hands it, while the loop goes
//     on, waits for the historian's history stream of it, and reports
//     SnapshotEncoded back to the loop. A decoder (one
//     goroutine per DecodeSnapshot) builds the state of a leader's
//     snapshot for a follower likewise, and reports SnapshotDecoded.
//   - The snapshot writer writes snapshot files beside the log, so that a
//     large one (seconds) does not hold up the log's fsyncs; the disk
//     goroutine then compacts the log and reports SnapshotSaved. For a
//     WriteSnapshot (the replica's periodic snapshots) it is also the
//     encoder: the frozen view's bytes go through a 1 MiB buffer into the
//     file, never whole in memory. A follower's install of the leader's
//     snapshot, which resets the log, is written by the disk goroutine
//     itself, in order.
//   - The accept goroutine, started with the loop, and, per accepted
//     connection, one reader and one writer. Connections are accepted at
//     once, before the replica has synced anything: the replica itself
//     holds client frames until it has applied what it recovered (so no
//     client sees the state from before a restart), and a follower may
//     sync nothing until it hears from a leader, which needs this
//     listener. A reader reads frames into read buffers (see "Reading
//     frames: memory and limits") and hands the loop, as one event, the
//     complete frames a buffer holds, with the buffer, which the loop
//     gives back once it has handled them (the payloads alias it); at most
//     two such events per connection are in the loop at once. A writer drains its
//     connection's bounded send queue, writing every frame queued so far
//     with one writev, and then hands the memory of the replies sent
//     with SendReply (which nothing else keeps) back to the server's
//     spare reply buffers, where ReplyBuffer finds it for the next
//     replies. SendClient never blocks the loop: when a connection's
//     queue is full (a client that does not read), the connection is
//     closed.
//   - In-process client connections (Server.DialLocal, a LocalConn: the
//     HTTP gateway's) have no goroutine of their own: the caller's
//     Exchange puts the frame on the loop's channel, as a reader does, and
//     waits for the answer, which SendClient hands over on a one-frame
//     channel instead of a send queue (a second answer not taken closes
//     the connection). The payload belongs to the loop from then on: the
//     caller never changes it, so the loop needs no ack. The replica sees
//     an ordinary client connection: its id, register, requests, Closed.
//   - While the replica leads, a reader (or an Exchange) does the work of
//     a frame that needs nothing but the frame before handing it to the
//     loop: a client's insert or upsert batch becomes its log entry
//     (replica.PrepareRequest), and a large polygon query, a client's or
//     one a follower forwarded, is decoded and its polygon built, or
//     shared with a recent build of the same rings (prepare.go: at most
//     two builds at once, bounded memory).
//   - Per other replica, one dialer that keeps an outbound connection to
//     it (reconnecting with backoff) and writes the replica's messages for
//     it (SendPeer) from a bounded queue, with one writev per batch, plus a
//     watcher that notices when the peer closes the connection. SendPeer
//     never blocks the loop either: a full queue, or a peer that cannot be
//     reached, drops the message (Raft sends again). See peers.go for the
//     hello that opens these connections.
//   - With StartWebhooks (cmd/replica starts it), a webhook dispatcher
//     that follows the role the loop publishes and, while the replica
//     leads, one worker per hook that reads the feed, posts its
//     notifications to the hook's URL and submits the delivered position
//     through a client of the local replica, as the gateway does
//     (webhooks.go). They never call into the loop but as a client.
//
// # Reading frames: memory and limits
//
// A reader reads into a 64 KiB chunk from a pool that all connections
// share; after handing over the complete frames a buffer holds, it moves
// the start of the next frame to a fresh one. A frame longer than a chunk
// grows a buffer as its bytes arrive: each time the buffer is full, to four
// times its size (256 KiB, 1 MiB, 4 MiB, kept in pools of their own for the
// next long frames), then to the frame's length. An announced length is
// checked (at most core.MaxFrameBody) but never allocated up front: a
// buffer is never more than four times the bytes that have arrived. A reader with nothing to read gives
// its chunk back after 200 ms and waits in a 512-byte buffer of its own, so
// an idle connection holds that, its two goroutines and its socket.
//
// Options bound the rest:
//
//   - ReadBudgetBytes (default 64 MiB) counts every chunk and grown buffer,
//     the readers' and those whose frames the loop has yet to handle. A
//     reader that starts a frame when the budget is spent waits for it,
//     reading nothing more from its socket meanwhile (backpressure). A frame
//     that needs its buffer grown beyond the budget is answered with a
//     MsgError CLUSTER_BUSY (retryable) and its connection closed: a reader
//     that waited holding part of the budget could wait for ever on others
//     doing the same. The process's memory for frames in flight is a few
//     times the budget at most: the garbage collector's headroom, and the
//     pooled buffers not in use, come on top of it. Once a budget that was
//     more than half spent is below an eighth again, or open connections
//     (at least 1,000) have fallen below a quarter, the server gives freed
//     memory back to the system at once (debug.FreeOSMemory, at most every
//     30 s) rather than over the minutes the runtime takes on its own.
//   - ReadTimeout (default 30 s) closes a connection whose frame is not
//     complete that long after its first byte (a wait for the budget does
//     not count).
//   - IdleTimeout (default 5 minutes) closes a client connection with
//     nothing read or written for that long and none of its registers or
//     requests unanswered. Another replica's connection has none. The Go
//     client (package client) dials again on its next call: that call pays
//     one retry (its first backoff, 100-150 ms; a client with
//     DisableRetries gets the connection error).
//   - MaxConnections (default 10,000) bounds the open connections, clients'
//     and other replicas' (which cannot be told apart before their first
//     frame); one more is answered with a MsgError CLUSTER_BUSY, client id
//     and request number 0, and closed.
//
// A bad frame (length, checksum, version, reserved bytes, type) is answered
// with a MsgError of its code, MALFORMED_REQUEST or CHECKSUM_MISMATCH,
// echoing the frame's client id and request number where it has them,
// before the connection closes (not on another replica's connection, on
// which nothing is written). An error frame is followed by a graceful
// close: FIN, then what the client still sends is read and dropped for up
// to a second, since closing with bytes unread resets the connection, and
// a reset can discard the error before the client reads it. The log lines
// that clients can set off (bad frames, frame timeouts, budget refusals,
// refused connections) come at most once a second each, with the number
// held back since the last.
//
// # Replicas and clients on one address
//
// A replica listens on one address (its entry of Options.Addresses) for
// clients and for the other replicas. A connection whose first frame is a
// peer hello (MsgPeerHello: cluster id, sender index, the index it meant
// to reach and its address list) is another replica's outbound
// connection: it carries only that replica's
// replica-to-replica messages (types 64..126, client id = its index), each
// handed to Replica.ReceivePeer; replies go back over this replica's own
// outbound connection to it. Any other connection is a client's, carrying
// client messages (types 1..5) to Replica.Receive; a replica-to-replica
// frame on it closes it, as does a bad hello (wrong cluster, bad index,
// another address list: the refusal is answered with its reason, and both
// replicas log it).
//
// The payload handed to Replica.Receive and Replica.ReceivePeer aliases the
// reader's buffer and is valid only during the call: what the replica keeps
// it must copy, and that includes a frame it passes on to SendClient or
// SendPeer, which queue the slice as it is, to be written later.
//
// # Storage semantics the replica relies on
//
// AppendLog at an index within the log first truncates from there on. A
// snapshot beyond the log's end, or at an index the log holds with another
// term, empties the log (store.Log.Reset) so the next append starts right
// after the snapshot; an append beyond the log's end is accepted only when
// the newest snapshot covers the gap. Recovery applies the same rule to
// what it finds (a crash can interrupt the emptying), and refuses, as
// corruption, a log that leaves entries missing after the newest valid
// snapshot.
//
// Recovery truncates a torn tail (what a crash leaves at the end of the log
// beyond its durable end, which each segment's header records: never
// acknowledged) and logs it. Other damage to the log — a record that fails
// its checksum with more of the log after it, a log cut, zeroed or with a
// segment deleted before its durable end, a damaged segment — may hold
// entries this replica acknowledged. A replica of a cluster of one stops
// with a Corruption error naming the file, the byte offset and the entries
// lost. A replica with peers repairs it: it durably sets the hard state's
// Repairing flag first, then cuts the log just before the damage
// (store.LogOptions.Repair), logs a warning naming the file, the offset and
// the index the log now ends at, and recovers from what is left; the
// replica then neither
// votes nor campaigns until a leader of a later term has given the lost
// entries back (core.HardState.Repairing), but follows, acknowledges and
// forwards client requests meanwhile.
//
// # Data directory
//
//	cluster                       the cluster file (Format): cluster id, replica index, replica count; checksummed
//	LOCK                          the lock file (LockDir): its holder's pid; Format and Open hold an exclusive lock on it
//	log-<first index>.seg         log segments (package store)
//	log.manifest                  the log's first and last segments (package store)
//	hardstate                     term, vote, commit, the repairing flag (package store)
//	snapshot-<index>-<term>.snap  snapshots, the newest and one fallback (package store)
//	snapshot-<index>.history/     each snapshot's history checkpoint (historian.go)
//	history/                      the history store (package history)
//	backup-pin-*/                 a backup's links to the snapshot and checkpoint it copies (backup.go)
//	backup.sock                   where `replica start` and `dev` serve backups (cmd/replica)
//
// # Backups
//
// Server.Backup writes a consistent backup of the running replica, and
// BackupDir one of a data directory no replica serves; RestoreBackup lays
// a backup out as a new data directory, every part checked first
// (backup.go, backup_restore.go).
package io
