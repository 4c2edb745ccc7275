// Package sim is GeoEvent's deterministic simulator: it runs a replica
// (later a cluster) with simulated clocks, disks and client connections,
// a workload of clients, and fault injection, all in one goroutine from one
// seed, and checks what the clients saw.
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
// frame delivered, every disk completion, every crash, every operation's
// call and return). The checkers run after the run; porcupine checks one
// entity at a time (in a goroutine of its own, which does not affect the
// result: there is no timeout, only a deterministic step budget).
//
// # The world
//
// Time advances in ticks of 1 ms. Each tick: faults are injected, due
// events are delivered (frames, disk completions, restarts), each live
// replica gets Tick(), and each client acts (starts an operation, resends
// after a timeout or backoff, connects again). Replica i has its own Clock
// (monotonic and realtime nanoseconds advancing with the tick; Clock.DriftPPM
// is the hook for drift), its own disk, and the connections clients opened
// to it. The shape is ready for more replicas: nodes is a slice, events
// name their node and incarnation (epoch), and a replica-to-replica network
// is one more event kind with its own links.
//
// # Fault model
//
// Network (client connections). Each frame is delayed by a random number
// of ticks (so frames reorder), and may be lost or duplicated. A connection
// may drop at any tick: frames in flight on it are lost, the replica gets
// Closed, and the client connects again and resends. A crash drops every
// connection of the replica. Frames are never corrupted (checksums are the
// core package's business and fuzzed there).
//
// Disk (one per replica). AppendLog and SaveHardState queue writes in
// order; Sync covers what is queued and completes after a random latency,
// answered by Synced(last durable index); SaveSnapshot completes after a
// random latency, answered by SnapshotSaved, and then compacts the log.
// A crash may happen at any tick, including while a Sync is in flight, and
//
//   - loses every write not yet synced, except that a random prefix of the
//     pending log entries survives (a torn tail: storage truncates a torn
//     record but keeps the complete ones before it), and, independently, a
//     random prefix of the pending hard-state saves (the hard state is its
//     own file, replaced atomically);
//   - keeps or loses each snapshot not yet saved (an atomic replace);
//   - never damages synced data: a single replica cannot repair it, so
//     corruption belongs to the replicated fault model, with repair from
//     peers. The disk checks its own guarantee (a crash never takes away an
//     entry Synced reported), and the checkers below check end to end that
//     a crash, mid-Sync or not, never takes away an acknowledged write.
//
// The disk also fails the run if the replica appends with a gap or
// overwrites entries at or below the commit index it made durable. Restart
// builds replica.Recovered from the disk (hard state, snapshot, the entries
// after it) and calls replica.New again. Options.BugForgetSyncedOnCrash
// breaks the model on purpose (a crash forgets up to three synced entries),
// for the test that proves the checkers catch lost writes.
//
// Faults (loss, duplication, drops, crashes) stop for the last part of the
// run (the quiet period), so that liveness can be checked.
//
// # Clients and workload
//
// Each client speaks the binary protocol over its connection: it registers
// for a session; a request is encoded once and resent with the same session
// id and request number after a timeout (on the same connection, or on a new
// one), so the replica must deduplicate; 212 CLUSTER_BUSY and other
// retryable codes are resent after a backoff (100 ms doubling to 1.6 s,
// with jitter); 201 SESSION_EXPIRED ends the operation (a write's outcome
// is then unknown, a read is dropped) and the client registers again.
// Clients also restart as new instances now and then, and some seeds have a
// session table barely larger than the clients, so sessions are evicted.
//
// The workload (2-8 clients) issues every operation on a pool of 4-12
// entities in a square of about 2 km: inserts and upserts (batches of 1-4
// events, server or client timestamps, some with TTLs, a few invalid),
// deletes, TTL set/extend/clear, cleanup, radius and polygon queries (with
// group filters, holes, paging, a few invalid), get latest, latest batch,
// latest across all, history (ranges, paging) and stats, status, topology
// and ping. Every event carries its write's operation id and batch index in
// UserData, so every event a read returns can be traced to its write. The
// checker's own client (a perfect link) reads every entity after every
// restart and at the end.
//
// # Checkers
//
// During the run: the replica never reports Err(); every frame it sends is
// one well-formed frame of a reply type whose payload decodes; a reply
// answers the operation it was asked; only the expected protocol errors
// arrive (201, retryable ones); the disk's own checks above.
//
// After the run, in order (the first problem is reported):
//
//   - Liveness: every operation is answered, and within the liveness bound
//     (a timeout, a maximal backoff and a restart, plus a margin) of its
//     call or of the start of the quiet period, whichever is later.
//   - Replies on their own: codes (only those the request can get), result
//     counts and indexes, committed exactly when every event succeeded,
//     paging (limits, has_more with a cursor), order (cell then entity,
//     newest first, ascending history), group filters, radii, since_ns.
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
//     checker's reads after each restart included, so a write acknowledged
//     before a crash that is missing after it fails here; and because seeing
//     one event of a batch proves the batch happened, a batch seen in part
//     fails here too.
//   - Linearizability (porcupine): the history is partitioned by entity,
//     and each entity's projection is checked against a sequential model of
//     one entity (model.go): its events (content, timestamp bounds) and its
//     expiry.
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
// entity. Queries over all entities (radius, polygon, latest across all)
// appear in every entity's partition as "this entity's part of the result":
// present with its latest event, or absent, which the model accepts only
// when the entity is invisible, filtered out by group, outside the region
// (judged with a 1 m margin by the checker's own geometry), not newer than
// since_ns, or possibly on another page.
//
// This is sound: projecting a linearization of the whole history onto one
// entity gives a linearization of its partition, so a correct replica
// always passes. It is weaker than checking the whole history at once, as
// each partition may place a multi-entity operation at its own point; the
// atomicity of batches is what checkMustSee adds across partitions.
// Cleanup, stats, status, topology and ping are left out: the model treats
// removal of expired data as invisible (expired data is already invisible,
// and writes erase it first), and counts span all entities.
//
// Operation timestamps (which decide expiry) are assigned by the replica;
// the model knows each operation's only within the realtime of its call and
// return (plus a small slack), and the exact values the replies reveal.
// Where that leaves expiry undecided, the model is nondeterministic
// (porcupine's NondeterministicModel) and follows both cases. A write whose
// outcome is unknown (its session expired, or it was never answered) may or
// may not have happened: the model follows both, and an event it may have
// written has a timestamp known only within bounds.
package sim
