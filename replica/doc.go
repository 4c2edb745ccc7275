// Package replica is GeoEvent's replica: the log, commit, client sessions,
// snapshots and the leader's timestamps, around the state machine.
//
// A Replica is single-threaded and deterministic. Everything it does is a
// reaction to one input — a client frame ([Replica.Receive]), a clock tick
// ([Replica.Tick]) or a storage completion ([Replica.Synced],
// [Replica.SnapshotSaved]) — and everything it does to the world goes
// through the [core.IO] it was given. It never blocks, never starts a
// goroutine and never reads a clock but the [core.Clock] it was given, so
// the simulator can run it from a seed and the production event loop (package
// io) can run the very same code.
//
// This version runs a cluster of one replica; consensus across replicas
// (Raft) adds followers and elections to the same shape.
//
// # Invariants
//
//   - applied <= commit <= durable <= lastIndex. An entry is applied, and its
//     client answered, only once it is committed; with one replica an entry
//     is committed once it is durable and an entry of the current term is
//     durable at or after it (Raft's commit rule; a new term starts with a
//     no-op entry so that earlier entries commit).
//   - Group commit: at most one Sync is in flight. Entries made while it is
//     in flight wait in queued and go to storage together, with one Sync,
//     when it completes.
//   - Every operation entry carries its timestamp; the leader assigns them
//     strictly increasing (at least the wall clock, above every earlier one)
//     and applying never reads a clock. Insert and upsert entries carry each
//     event's S2 cell, computed once by the leader.
//   - The replicated state is the state machine, the session table and the
//     last applied timestamp; a snapshot holds exactly that.
//   - Reads do not enter the log: the leader answers them from its applied
//     state, which holds every write it has acknowledged.
//   - Queues are bounded: beyond MaxPendingEntries unapplied entries a new
//     write is refused with the retryable 212 CLUSTER_BUSY.
package replica
