package core

import "io"

// The IO and Clock interfaces are everything a replica does to the world.
// A replica is a pure reaction to inputs (a message, a tick, a storage
// completion); it calls these to act and learns the outcome only from a
// later input. Production (package io) plugs real sockets, files and clocks
// in; the simulator (package sim) plugs simulated ones in and replays a seed
// exactly. Every method returns at once and never fails: failures come back
// as inputs (or, for a dead connection, as silence).

// ConnID names one client connection, chosen by the IO layer. A reply sent
// to a connection that has closed is dropped.
type ConnID uint64

// LogEntry is one record of the replicated log. Data is the replica's own
// encoding (see package replica); storage treats it as opaque bytes.
type LogEntry struct {
	Index uint64
	Term  uint64
	Data  []byte
}

// HardState is what must be durable before a replica answers: its current
// term, its vote in that term (NoVote for none) and the commit index it
// knows.
//
// Repairing is set by storage when it found a damaged record in the log on
// recovery and cut the log before it: the replica may have acknowledged
// entries it no longer holds, so it must not vote or campaign until a
// leader has given them back (package replica clears it then). Storage
// persists it before it cuts the log.
type HardState struct {
	Term      uint64
	Vote      uint32
	Commit    uint64
	Repairing bool
}

// NoVote is HardState.Vote when the replica has voted for nobody.
const NoVote = ^uint32(0)

// IO is how a replica acts.
type IO interface {
	// SendClient queues one frame for a client connection. It never
	// blocks: a slow or dead connection loses frames, and its client
	// retries. The frame is queued as it is: the caller must not modify it
	// afterwards.
	SendClient(conn ConnID, frame []byte)
	// SendReply is SendClient for a frame that the caller keeps no
	// reference to: once it is written, IO may hand its memory out again
	// from ReplyBuffer. (A reply cached for a retry goes by SendClient.)
	SendReply(conn ConnID, frame []byte)
	// ReplyBuffer returns an empty buffer to encode a frame for SendReply
	// into: the memory of a frame written before when IO has one, else
	// nil (append allocates). Query replies run to tens of kilobytes, and
	// fresh memory for each costs the loop its allocation and clearing and
	// the process a collection every few hundred megabytes.
	ReplyBuffer() []byte
	// SendPeer queues one frame (a replica-to-replica message, type
	// 64..127, whose header's client id is the sender's replica index) for
	// replica `to`, given as one or more pieces that are its bytes back to
	// back (an append sends its entries' data from the log, uncopied). It
	// never blocks and may lose, delay, duplicate or reorder frames: the
	// protocol (Raft) tolerates all of that. The pieces are not modified
	// afterwards and may be kept without copying; the slice holding them
	// may be.
	SendPeer(to uint32, frame ...[]byte)

	// AppendLog queues entries to be written after those appended before.
	// When Index is not the next index, storage first discards every entry
	// from Index on. Nothing is durable until a Synced input says so.
	AppendLog(entries []LogEntry)
	// SaveHardState queues the hard state; it is durable with the next
	// Synced input.
	SaveHardState(hs HardState)
	// Sync asks storage to make everything queued durable. It is answered
	// by a Synced input carrying the last log index made durable. It may
	// be called while earlier Syncs are in flight: they are answered in the
	// order asked, and storage may answer several with one fsync (group
	// commit) made after everything queued before the last of them, and
	// with one Synced input that says how many it answers.
	Sync()

	// ReadLog reads back, from storage, entries from index from to index
	// to, in order, stopping after the entry that brings their size to
	// maxBytes or more (so at least one; storage may count its records'
	// headers in that size). It sees every AppendLog made
	// before it, synced or not. It is answered by one LogRead input
	// carrying from and the entries read: a contiguous run starting at
	// from, or nothing when storage no longer holds the entry at from (a
	// snapshot let it discard it) or could not read it intact. The
	// entries are the caller's to keep.
	ReadLog(from, to uint64, maxBytes int)

	// SaveSnapshot durably writes a snapshot of the state after applying
	// index (whose entry has the given term) and then may discard log
	// entries up to and including index; later entries are kept. When the
	// log ends before index, or holds index with a different term (a
	// follower installing the leader's snapshot), the log is emptied and
	// the next AppendLog starts at index+1. It is
	// answered by a SnapshotSaved input. data is not modified afterwards
	// and may be kept without copying.
	//
	// The replica calls it only to install a leader's snapshot: data is
	// its state, and the history is the stream written for index
	// (WriteSnapshotStream), every byte of it written: storage makes that
	// the history store's content, in queue order (the writes and reads
	// queued before see the store as it was), and the history saved with
	// the snapshot.
	SaveSnapshot(index, term uint64, data []byte)

	// WriteSnapshot saves, as SaveSnapshot(index, term, data) does, the
	// bytes encode writes, and with them the history store as it is at
	// the call, in queue order (every write of the entries up to index was
	// queued before, none after): a checkpoint of it, durable with the
	// snapshot. A snapshot is durable only when both are; recovery restores
	// the history saved with the snapshot it restores, and replays the log
	// above it. WriteSnapshot does so without holding the bytes in memory: it runs encode
	// away from the replica (it reads a frozen copy of the state, never
	// the replica's own), writing into storage. It is answered by a
	// SnapshotSaved input carrying index once the snapshot is durable.
	// encode may run more than once (storage may start the file over); an
	// error it returns is storage's failure. The replica asks only once it
	// has appended (AppendLog) the entry at index, so the snapshot never
	// replaces the log. A replica that restarts before the
	// answer never gets it, and storage may or may not hold the snapshot.
	WriteSnapshot(index, term uint64, encode func(w io.Writer) error)

	// EncodeSnapshot runs encode away from the replica (it reads a frozen
	// copy of the state, never the replica's own) and takes the history
	// store as it is at the call, in queue order, as a history stream (a
	// checkpoint's files, read from disk as asked: ReadSnapshotStream). It
	// answers with a SnapshotEncoded input carrying index, the bytes
	// encode returned and the stream's size: a snapshot for a follower,
	// which writes the stream (WriteSnapshotStream) and installs both
	// (SaveSnapshot). IO holds one stream: the next EncodeSnapshot's
	// replaces it, and DropSnapshotStream drops it. A replica that
	// restarts before the answer never gets it.
	EncodeSnapshot(index uint64, encode func() []byte)

	// ReadSnapshotStream reads the history stream of the snapshot at index
	// (EncodeSnapshot) from offset on, at most max bytes, and answers with
	// a SnapshotStreamRead input carrying index, offset and the bytes
	// (none when IO no longer holds that stream or could not read it).
	ReadSnapshotStream(index, offset uint64, max int)

	// DropSnapshotStream releases the history stream of the snapshot at
	// index, if IO holds it: no follower needs it any longer.
	DropSnapshotStream(index uint64)

	// WriteSnapshotStream writes a chunk of the history stream of a
	// leader's snapshot at index, at offset; a chunk at offset 0 starts
	// the stream over (what was written of another is discarded). Chunks
	// come in order, each at the end of the one before. It answers with a
	// SnapshotStreamWritten input carrying index, offset and whether the
	// chunk was taken: not when it does not follow the bytes written, or
	// when the stream fails its checks (a damaged header or file), after
	// which the stream must start over. Nothing of it is durable or
	// visible until SaveSnapshot installs it.
	WriteSnapshotStream(index, offset uint64, data []byte)

	// WriteHistory queues writes to the history store (core/history.go),
	// those that applying the log entry at index made, to be applied in
	// order after those queued before. They are durable only once a
	// snapshot at or after index is (WriteSnapshot); until then the log
	// holds them. The writes are not modified afterwards and may be kept
	// without copying.
	WriteHistory(index uint64, writes []HistoryWrite)

	// PublishApplied hands over what applying the log entry at index did
	// to entities' events (see AppliedWrites), for readers outside the
	// replica (the position stream). It changes nothing the replica
	// relies on; applied is valid only during the call: IO copies what it
	// keeps.
	PublishApplied(index uint64, applied []HistoryWrite)

	// ReadHistory queues reads of the history store, answered by one
	// HistoryRead input carrying token and one answer a read, in order. The
	// answers see exactly the writes queued before the call, however late
	// they arrive (a snapshot of the store taken in queue order). A
	// replica that restarts before the answer never gets it. The reads
	// are not modified afterwards and may be kept without copying.
	ReadHistory(token uint64, reads []HistoryRead)

	// DecodeSnapshot runs decode away from the replica (it builds a state
	// from the bytes of a snapshot, touching nothing of the replica's) and
	// answers with a SnapshotDecoded input carrying index. A replica that
	// restarts before the answer never gets it.
	DecodeSnapshot(index uint64, decode func())
}

// Clock is time as a replica reads it.
type Clock interface {
	// MonotonicNS is nanoseconds since an arbitrary start; it never goes
	// back. Timeouts are measured with it.
	MonotonicNS() uint64
	// RealtimeNS is the wall clock, nanoseconds since the Unix epoch. It
	// may jump; the leader uses it only as a floor for event timestamps.
	RealtimeNS() uint64
}

// Rand is a seeded source of randomness (election jitter, eviction ties).
// The simulator seeds it from the run's seed.
type Rand interface {
	Uint64() uint64
}

// AppliedWrites is what applying the log entry at Index did to entities'
// events (IO.PublishApplied): a HistoryPut of every event it put (the
// latest included, which the history store never gets), a
// HistoryDeleteEntity of every entity it removed. Package io keeps a copy,
// while someone listens, for the position stream (GET /feed/positions).
type AppliedWrites struct {
	Index  uint64
	Writes []HistoryWrite
}
