// Package replica is GeoEvent's replica: Raft consensus, the log, commit,
// client sessions, linearizable reads, snapshots and the leader's
// timestamps, around the state machine.
//
// A Replica is single-threaded and deterministic. Everything it does is a
// reaction to one input — a client frame ([Replica.Receive], or
// [Replica.ReceivePrepared] after IO ran [PrepareRequest] on it, or
// [Replica.ReceivePreparedRead] after [PrepareRead]), a frame from another
// replica ([Replica.ReceivePeer], or [Replica.ReceivePeerPrepared] after
// [PreparePeer]), a clock tick ([Replica.Tick]) or
// a storage completion ([Replica.Synced], [Replica.SnapshotSaved],
// [Replica.LogRead], [Replica.HistoryRead], and a snapshot's history
// stream read or written: [Replica.SnapshotStreamRead],
// [Replica.SnapshotStreamWritten]), a
// snapshot encoded or decoded away from it ([Replica.SnapshotEncoded],
// [Replica.SnapshotDecoded]), the next part of a backlog of committed
// entries ([Replica.ApplyMore], while [Replica.Backlog] says there is
// one: an input applies at most Config.MaxApplyEntries) — and
// everything it does to the world goes through the [core.IO] it was given.
// It never blocks, never starts a goroutine, never reads a clock but the
// [core.Clock] it was given and never draws randomness but from the
// [core.Rand] it was given (election timeouts), so the simulator can run a
// cluster from a seed and the production event loop (package io) runs the
// very same code.
//
// # Files
//
//	replica.go      the client path: sessions, dedupe, applying, executing
//	log.go          the in-memory log, the Syncs in flight, durability, taking snapshots
//	                (periodic ones encoded straight into storage)
//	raft.go         roles, terms, elections (pre-vote, check-quorum)
//	replication.go  the leader's appends and snapshots, the follower's side
//	readback.go     applied entries' data given up, and read back for laggards
//	reads.go        linearizable reads by read index and heartbeat rounds; reads
//	                prepared beside the loop (PrepareRead)
//	forward.go      followers forwarding client frames to the leader
//	health.go       what a topology reports of each replica; the leader's health reports
//	messages.go     the replica-to-replica wire format
//	entry.go        the log entry format
//	sessions.go     the replicated session table, in the order registers evict
//	conncap.go      the bound on the sessions one client connection registers
//
// # Invariants
//
//   - Safety is Raft's: at most one leader per term; a replica persists
//     its term and vote before granting a vote and a log entry before
//     acknowledging it; the leader counts itself toward a majority only
//     with its durable copy; an entry commits only when a majority holds it
//     durably and it is of the leader's current term (a new leader appends
//     a no-op to commit earlier terms' entries). An operation is answered
//     only after it is committed and applied.
//   - applied <= commit <= lastIndex; see log.go for the log's own.
//   - Every operation entry carries its timestamp; the leader assigns them
//     strictly increasing (at least its wall clock, above every timestamp
//     in its log) and applying never reads a clock. Insert and upsert
//     entries carry each event's S2 cell, computed once by the leader
//     (by the leader process's IO, for a frame it prepared). Applying is
//     therefore the same on every replica.
//   - The replicated state is the state machine, the session table and the
//     last applied timestamp; a snapshot holds exactly that, so dedupe and
//     ordering survive a leader change. A session keeps its last request's
//     number, checksum (computed by the leader, carried in the log entry)
//     and reply: a resend of that request gets the reply again, another
//     request under its number 16 REQUEST_MISMATCH.
//   - Client frames reach the leader (followers forward them); the leader
//     holds them until its term's no-op is applied, so that nothing is
//     answered from a state that lacks earlier terms' writes.
//   - Reads do not enter the log: the leader answers them once a heartbeat
//     round confirms it still leads and the commit index they arrived at is
//     applied (reads.go).
//   - Queues are bounded: beyond MaxPendingEntries unapplied entries a new
//     write is refused with the retryable 212 CLUSTER_BUSY.
package replica
