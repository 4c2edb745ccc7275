// Package sim is GeoEvent's deterministic simulator: it runs a cluster of
// 1, 3 or 5 replicas with simulated clocks, disks, a network between the
// replicas and client connections, a workload of clients, and fault
// injection, all in one goroutine from one seed, and checks what the
// clients saw and what the replicas hold.
//
//	res := sim.Run(seed, ticks, sim.Options{})
//	if res.Failed() { fmt.Println(res.Failure, res.ReplayCommand()) }
//
// # Determinism
//
// A run reads no real clock and uses no global random source: every choice
// (workload, delays, faults, latencies) is drawn from one PCG source seeded
// by the seed, events are processed in (tick, sequence) order, and no map is
// iterated where the order could reach the run. The same seed and tick count
// give the same run, byte for byte: Result.Digest hashes every event (every
// frame delivered, every disk completion, every crash and partition, every
// operation's call and return). Options that are drawn from the seed when
// not given (the replica count) are drawn either way, so giving the value
// the seed draws replays the same run (Result.ReplayCommand names it). The
// history checkers run after the run; porcupine checks one entity at a
// time (in a goroutine of its own, which does not affect the result: there
// is no timeout, only a deterministic step budget).
//
// # The world
//
// Time advances in ticks of 1 ms. Each tick: faults are injected (and a
// partition that is over heals), due events are delivered (frames between
// clients and replicas and between replicas, disk completions, restarts),
// each live replica gets Tick(), the checkers look at every replica's
// Status, and each client acts (starts an operation, resends after a
// timeout or backoff, connects again). Replica i has its own Clock, its own
// disk, its own seeded random source (election timeouts), the connections
// clients opened to it, and a link to every other replica. Events name
// their replica and incarnation (epoch): disk completions of an earlier
// incarnation are dropped, frames between replicas go to whichever
// incarnation is up when they arrive.
//
// Options.Replicas is the cluster's size (1, 3 or 5; by default drawn from
// the seed: 1, 3 or 5 with chances 1/4, 1/2, 1/4); Options.Faults is the
// fault profile: FaultsAll (the default), FaultsNone, FaultsNetwork,
// FaultsPartition or FaultsCrash (faults.go). The replicas run Raft with
// election timeouts of 150, 200 or 300 ms and heartbeats every 20, 30 or
// 50 ms, drawn from the seed.
//
// The replicas' other settings are drawn too (config.go): the bound on
// pending entries, snapshots every 7 or 40 entries or by bytes, how many
// applied entries the in-memory log sheds at a time (1, 16 or 256, so that
// short runs shed as a long-lived server does), and how many committed
// entries one input applies (1, 5 or 4,096): a backlog is applied a part
// per evApplyMore event, in the tick it arose, as the production loop
// takes ApplyMore in turn with its other inputs. A reply the replica sends
// with SendReply reaches the client as a copy, and its memory is poisoned
// and handed out again by ReplyBuffer, so a replica that kept such a reply
// would answer with garbage.
//
// Clocks. Each replica's clock runs at its own rate, up to 0, 50 or
// 200 ppm (drawn from the seed) fast or slow, and its realtime starts up to
// 0, 1 or 10 ms after the others'; its monotonic clock starts at a base of
// its own. Clocks never jump. The checkers bound an operation's timestamp
// by the smallest and largest realtime of all clocks during the operation.
//
// # Fault model
//
// Network, client connections. Each frame is delayed by a random number of
// ticks (so frames reorder), and may be lost or duplicated. A connection
// may drop at any tick: frames in flight on it are lost, the replica gets
// Closed, and the client connects again and resends. A crash drops every
// connection of the replica. Frames are never corrupted (checksums are the
// core package's business and fuzzed there); a frame that no longer
// decodes when it arrives was changed after it was sent, which fails the
// run.
//
// Network, between replicas (network.go). Each frame is checked when sent
// (one whole frame of a replica message type that names its sender), then
// delayed by a random number of ticks, lost or duplicated, and now and then
// held back for up to two election timeouts (a straggler from an old
// term). A frame to a crashed replica is lost; a frame is delivered to the
// incarnation that is up when it arrives. The replica is handed a copy of
// the payload, which is overwritten when ReceivePeer returns: a replica
// must copy what it keeps, as with the production network's buffers.
// Partitions cut links one direction at a time: a split into a minority
// and a majority, an isolated leader, a deaf leader (its inbound links
// cut), a mute leader (outbound cut), one replica's inbound or outbound
// links, or random links (partial connectivity). At most one is on at a
// time; it heals after 100 ticks to a few seconds, and when faults stop.
// Client connections are not partitioned.
//
// Crashes. A replica crashes at any tick, whatever the others do (the
// leader more often than its share); it comes back after 10 to 50 or 500
// ticks. Synced data survives, so even a cluster that is all down at once
// loses nothing acknowledged.
//
// Disk (one per replica). AppendLog and SaveHardState queue writes in
// order; Sync covers what is queued and completes after a random latency,
// answered by Synced(last durable index, Syncs answered): the Syncs that
// complete at one tick are answered together, as production storage
// answers those one fsync served. SaveSnapshot completes after a random
// latency, answered by SnapshotSaved, and then compacts the log; it
// is ordered with the writes (a Sync asked after it completes after it; a
// follower that installs its leader's snapshot beyond its log appends
// after it). EncodeSnapshot also completes after a random latency and runs
// the encoding only then, so that the replica's writes in between must not
// show in the frozen view it encodes; WriteSnapshot likewise, which then
// saves the bytes as a SaveSnapshot made at that moment; DecodeSnapshot
// likewise, so that a follower takes other inputs while it decodes its
// leader's snapshot.
// The history store (historystore.go) is production's, package
// io/history, over pebble's crashable memory filesystem, one per replica:
// WriteHistory applies at once; ReadHistory is answered from the store as
// it is at the call, after a Sync's latency; WriteSnapshot checkpoints the
// store at the call and the snapshot keeps the checkpoint, so that the
// snapshot recovered restores its history, the log above it replayed;
// EncodeSnapshot checkpoints the store at the call as the history stream
// for followers, which ReadSnapshotStream reads a chunk at a time and
// WriteSnapshotStream writes into a staging directory (io/history's
// Stream and Receiver), each answered after a Sync's latency, and
// SaveSnapshot installs the staged stream. Snapshot frames enter the
// trace by type alone: their bytes are pebble's files, whose names and
// sizes vary with its background work from run to run. A crash keeps only
// what the filesystem synced, and discards a stream being sent or staged
// (the restarted replica starts it over). Digests hash the state
// machine's digest with the store's.
// ReadLog reads what the disk holds when it is called (the durable log
// with the queued appends over it) and answers after a Sync's latency;
// with faults that include crashes it may find the record damaged and
// answer nothing, at a rate drawn per seed. A crash may happen at any tick,
// including while a Sync is in flight, and
//
//   - loses every write not yet synced, except that a random prefix of the
//     pending log entries survives (a torn tail: storage truncates a torn
//     record but keeps the complete ones before it; entries written after
//     a snapshot that was lost are lost with it), and, independently, a
//     random prefix of the pending hard-state saves (the hard state is its
//     own file, replaced atomically);
//   - keeps or loses each snapshot not yet saved (an atomic replace);
//   - never loses synced data by itself. The disk checks its own guarantee
//     (a crash never takes away an entry Synced reported, unless the
//     replica overwrote it since), and the checkers below check end to end
//     that a crash, mid-Sync or not, never takes away an acknowledged
//     write.
//
// Damaged logs (a cluster of 3 or 5 only: one replica has no peer to
// repair from, and refuses to start on a damaged log). A crash may also
// damage one synced record of the crashed replica's log, at a rate drawn
// from the seed (none, 1/5, 1/2 or every crash): an entry after its newest
// snapshot, often the first one (the log is then empty after the snapshot)
// or the last, otherwise any. Its restart finds the damage as production
// storage does and handles it the same way (io.recoverStorage): it durably
// sets the hard state's Repairing flag (term, vote and commit as they
// were), cuts the log just before the damaged record (dropping every later
// entry, acknowledged ones included), and starts the replica on what is
// left with HardState.Repairing set; the replica clears the flag with a
// hard-state write like any other once a leader has given its entries back.
// Only a minority is damaged at a time: a crash damages the log only if at
// most (n-1)/2 replicas (this one included) then have a damage pending or
// Repairing set in their durable hard state, so a majority of intact
// replicas holds every acknowledged entry and can elect a leader, and
// every checker below (no acknowledged write lost, linearizability,
// digests, convergence, liveness) holds as without the fault. The disk's
// overwrite check (below) counts, after a cut, only the commit index the
// cut log still holds, until the replica makes a larger one durable: the
// replica appends the entries it lost again as it gets them back.
//
// Damaged history (a cluster of 3 or 5 only, under the same minority
// rule). A crash may also damage, at a rate drawn from the seed (none, 1/5
// or 1/2 of crashes), the tables of the history checkpoint of the crashed
// replica's durable snapshot (bytes flipped in each table's first data
// block; the live store restored from it shares them). Its restart opens
// the restored store and reads all of it: the damage, found by pebble's
// block checksums, makes it rebuild as production does (io/rebuild.go): it
// sets the hard state's Repairing flag, discards its log, snapshot and
// history, and starts empty; the leader's snapshot gives everything back.
// (Production finds such damage when a read meets it; the simulator reads
// the store whole at recovery, so that every damage is found and the
// rebuild runs under the checkers.)
//
// The disk also fails the run if the replica appends with a gap or
// overwrites entries at or below the commit index it made durable (even
// with identical ones: production storage truncates first). Restart builds
// replica.Recovered from the disk (hard state, snapshot, the entries after
// it) and calls replica.New again. Options.BugForgetSyncedOnCrash breaks
// the model on purpose (a crash forgets up to three synced entries), for
// the test that proves the checkers catch lost writes;
// Options.BugDamageWithoutRepairing cuts a damaged log without setting
// Repairing, for the test that proves the checkers catch a replica that
// votes with a log it lost acknowledged entries of.
//
// Faults (loss, duplication, stragglers, drops, partitions, crashes,
// damaged logs and histories) stop for the last part of the run (the quiet period), so
// that liveness can be checked; delays and drift go on.
//
// # Clients and workload
//
// Each client speaks the binary protocol over one connection to any replica
// (a follower forwards to the leader): it registers for a session; a
// request is encoded once and resent with the same session id and request
// number after a timeout (on the same connection, or on a new one, in a
// cluster to another replica), so the replicas must deduplicate; 212
// CLUSTER_BUSY, 211 CLUSTER_UNAVAILABLE (no leader known), 215
// PRIMARY_UNREACHABLE (a leader change overwrote the request's entry) and
// other retryable codes are resent after a backoff (100 ms doubling to
// 1.6 s, with jitter), after 211 and 215 perhaps to another replica; a
// client whose replica is down connects to another; 201 SESSION_EXPIRED
// ends the operation (a write's outcome is then unknown, a read is dropped)
// and the client registers again.
// Clients also restart as new instances now and then, and some seeds have a
// session table barely larger than the clients, so sessions are evicted.
//
// The workload (2-8 clients) issues every operation on a pool of 4-12
// entities in a square of about 2 km: inserts and upserts (batches of 1-4
// events, server or client timestamps, some with TTLs, a few invalid),
// deletes, TTL set/extend/clear, cleanup, radius, polygon, bbox and nearest
// queries (with group filters, holes, paging, a few invalid), get latest, latest batch,
// latest across all, history (ranges, paging) and stats, status, topology
// and ping. Every event carries its write's operation id and batch index in
// UserData, so every event a read returns can be traced to its write. The
// checker's own client (a perfect link) reads every entity at the start,
// after every restart, whenever a new leader is seen (it must hold every
// acknowledged write) and at the end.
//
// # Checkers
//
// During the run: no replica reports Err(); every frame a replica sends a
// client is one well-formed frame of a reply type whose payload decodes,
// and every frame it sends a replica is one well-formed replica message
// naming its sender; a reply answers the operation it was asked; only the
// expected protocol errors arrive (201, retryable ones); the disk's own
// checks above; the replicas send at most 50 frames each to each other in
// one tick, on average (more is a message storm, which would stall the
// run). After every tick, for every replica (convergence.go):
// applied <= commit <= last index, neither applied nor commit goes back
// within an incarnation, and no two replicas lead the same term (election
// safety).
//
// State digests (convergence.go): a replica's state digest is noted with
// the index it has applied through, every 150 ticks when that index
// moved, after it saves a snapshot, when it starts, before it crashes and
// at the end; any two notes of one index must agree, whichever replicas
// and incarnations made them. So followers must apply what the leader
// applied, a follower that installs a snapshot must have the state it was
// made of, and a restarted replica must replay to the states it had.
//
// Convergence: after the last tick the cluster runs on, without clients
// and faults, until every replica has applied the same index (at most
// 3 s); their digests must then agree.
//
// After the run, in order (the first problem is reported):
//
//   - Liveness: every operation is answered, and within the liveness bound
//     (a timeout, a maximal backoff and a restart, plus a margin, and in a
//     cluster ten election timeouts for a leader to emerge) of its call or
//     of the start of the quiet period, whichever is later.
//   - Replies on their own: codes (only those the request can get), result
//     counts and indexes, committed exactly when every event succeeded,
//     paging (limits, has_more with a cursor), order (cell then entity,
//     newest first, ascending history), group filters, radii, since_ns,
//     ping (pong, or a reason when the replica is unhealthy).
//   - Observed events: every event any read returned was written by a write
//     of the workload exactly as sent (but for the timestamp and cell the
//     leader sets), has the S2 cell statemachine.AssignCells gives, and the
//     timestamp its write reported; no read returns an event of a batch
//     that did not commit or failed, or of a write not yet called.
//   - Durability and atomicity (checkMustSee): an event written with a
//     server timestamp and no TTL, once its write is known to have happened
//     (acknowledged, or some event of its batch was seen), must be in every
//     later whole-history read of its entity, and be the latest position in
//     every later latest read, unless an operation that could remove or
//     replace it ran in between. This is checked on every read, the
//     checker's reads after each restart and leader change included, so a
//     write acknowledged before a crash, or by an earlier leader, that is
//     missing after it fails here; and because seeing
//     one event of a batch proves the batch happened, a batch seen in part
//     fails here too.
//   - Linearizability (porcupine): the history is partitioned by entity,
//     and each entity's projection is checked against a sequential model of
//     one entity (model.go): its events (content, timestamp bounds) and its
//     expiry. The entity's expiry (set by its latest event's TTL, changed
//     by /ttl/*) hides the whole entity; each older event (all but the
//     latest) is also hidden once its own TTL has passed (its timestamp
//     plus its ttl_seconds), whatever the entity's expiry: history reads
//     show only the visible events, an insert gets 8 EVENT_EXISTS only on a
//     key a visible event holds, and a write on the key of an expired
//     older event takes its place with updated false.
//   - Digests and convergence (above): reported after the history
//     checkers, so that a lost write is reported where the history shows
//     it.
//
// # Partitioning
//
// Every operation is projected onto each entity it touches: a batch
// becomes, in each of its entities' partitions, the operation "write these
// events of this entity, committed or not" (a batch's commit depends on all
// its events, but the projection carries the commit flag and the entity's
// own event results from the reply); a delete becomes "erase this entity"
// (with its counts checked only when it names one entity); TTL operations
// and get latest belong to their entity; a latest batch becomes, per
// entity, the results at the positions naming it; history belongs to its
// entity. Queries over all entities (radius, polygon, bbox, nearest, latest
// across all) appear in every entity's partition as "this entity's part of
// the result": present with its latest event, or absent, which the model
// accepts only when the entity is invisible, filtered out by group, outside
// the region (judged with a 1 m margin by the checker's own geometry; a box
// exactly), not newer than since_ns, or possibly on another page. A nearest
// query's region is its max_distance, and an absence from it proves
// nothing (only the k nearest are returned): its page's order by distance
// is checked with the reply.
//
// This is sound: projecting a linearization of the whole history onto one
// entity gives a linearization of its partition, so a correct replica
// always passes. It is weaker than checking the whole history at once, as
// each partition may place a multi-entity operation at its own point; the
// atomicity of batches is what checkMustSee adds across partitions.
// Cleanup, stats, status, topology and ping are left out: the model treats
// removal of expired data as invisible (expired data, an expired entity or
// an expired older event, is already invisible and stays so; a write
// erases an expired entity first, and finds an expired older event absent
// as it finds a removed one), and counts span all entities.
//
// Operation timestamps (which decide expiry) are assigned by the replica;
// the model knows each operation's only within the realtime of its call and
// return (plus a small slack), and the exact values the replies reveal.
// Where that leaves expiry undecided, the model is nondeterministic
// (porcupine's NondeterministicModel) and follows both cases: whether the
// entity has expired, and whether an older event at a key a write names
// has (a history read accepts an older event whose expiry is undecided
// shown or not). A write whose outcome is unknown (its session expired, or
// it was never answered) may or may not have happened: the model follows
// both, and an event it may have written has a timestamp known only within
// bounds.
package sim
