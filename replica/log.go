package replica

import (
	"io"
	"sort"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/statemachine"
)

// The log as the replica holds it in memory, and its way to storage.
//
// Invariants:
//
//   - base <= applied <= commit <= lastIndex, and durable <= lastIndex.
//     The entry at base (the last one a snapshot covers, or 0) is gone but
//     its term is baseTerm.
//   - base <= dropped <= applied. The entries base+1 .. dropped keep their
//     index and term but not their Data, which storage holds: an applied
//     entry gives it up once no replica will ask for it from memory
//     (dropData), so that a batch's megabyte is garbage once applied
//     rather than at the next snapshot. Every later entry has its Data
//     (never empty). A leader that must send a dropped entry reads it back
//     (readback.go).
//   - base+shed <= dropped. log holds the entries base+shed+1 .. lastIndex.
//     The shed entries base+1 .. base+shed, dropped ones, keep only their
//     terms, in shedTerms as runs (one per term, oldest first): between
//     two snapshots a replica may apply millions of entries, and a slice
//     of them all would grow by copying, and be scanned by the collector,
//     for nothing but their terms.
//   - On the leader commit <= durable: it counts itself toward a majority
//     only with its durable copy. On a follower commit <= verified.
//   - verified (follower) is the highest index up to which the log is known
//     to equal the current leader's: entries up to commit always are; an
//     append from the leader extends it. A follower acknowledges
//     min(durable, verified), never an entry it merely has.
//   - Entries go to storage as they are appended, each flush with a Sync
//     of its own, however many Syncs are in flight: storage answers them
//     in order, and may make one fsync serve every Sync queued behind the
//     one in flight (group commit is storage's: package io does it).
//     syncs holds the Syncs in flight, oldest first, each with what it
//     covers (upTo); a truncation lowers upTo, so a Sync that completes
//     after its entries were replaced never makes the replacements look
//     durable. queued is empty between inputs: it only gathers the entries
//     of one input for one AppendLog.
//   - Messages that must not leave before the hard state is durable (a
//     granted vote, a candidate's vote requests) wait in afterHS until the
//     next flush, then with the Sync it issues, and leave when it
//     completes.
type raftLog struct {
	base, baseTerm uint64
	log            []core.LogEntry
	shed           uint64
	shedTerms      []termRun
	lastIndex      uint64
	durable        uint64
	commit         uint64
	applied        uint64
	appliedTerm    uint64
	verified       uint64
	dropped        uint64

	queued  []core.LogEntry
	syncs   []syncInFlight // oldest first
	hsDirty bool
	afterHS []outMsg // wait for the next Sync

	sinceSnapshot uint64    // entries applied since the last snapshot
	bytesSince    uint64    // their bytes
	lastSnapBytes uint64    // size of the last snapshot
	snapRecords   uint64    // the state's RecordBytes at the last snapshot
	encoding      *encoding // the snapshot being encoded, if any
}

// termRun says that the shed entries from first up to the next run's
// first (or to the last shed entry) have term.
type termRun struct{ first, term uint64 }

// syncInFlight is a Sync storage has not answered yet: the last index it
// covers and the messages to send once it completes.
type syncInFlight struct {
	upTo uint64
	msgs []outMsg
}

// lowerSyncs makes every Sync in flight cover no entry beyond index.
func (l *raftLog) lowerSyncs(index uint64) {
	for i := range l.syncs {
		l.syncs[i].upTo = min(l.syncs[i].upTo, index)
	}
}

// outMsg is a message to send later.
type outMsg struct {
	to  uint32
	msg message
}

// resetLog empties the log, which now starts after index (of term).
func (l *raftLog) resetLog(index, term uint64) {
	l.base, l.baseTerm = index, term
	l.log, l.shed, l.shedTerms = nil, 0, nil
	l.lastIndex, l.applied, l.commit, l.durable, l.verified, l.dropped = index, index, index, index, index, index
	l.appliedTerm = term
}

// termAt is the term of the entry at index, or 0 when the log does not
// hold it (compacted or beyond the end).
func (l *raftLog) termAt(index uint64) uint64 {
	switch {
	case index == l.base:
		return l.baseTerm
	case index < l.base || index > l.lastIndex:
		return 0
	case index < l.first():
		return l.shedTerm(index)
	}
	return l.log[index-l.first()].Term
}

// first is the index of log[0].
func (l *raftLog) first() uint64 { return l.base + l.shed + 1 }

// shedTerm is the term of the shed entry at index.
func (l *raftLog) shedTerm(index uint64) uint64 {
	i := sort.Search(len(l.shedTerms), func(i int) bool { return l.shedTerms[i].first > index })
	return l.shedTerms[i-1].term
}

// shedDropped moves the dropped entries out of log, keeping their terms,
// once there are batch of them (Config.ShedBatch).
func (l *raftLog) shedDropped(batch uint64) {
	f := l.first()
	if l.dropped < f || l.dropped-f+1 < batch {
		return
	}
	n := l.dropped - f + 1
	for _, e := range l.log[:n] {
		if k := len(l.shedTerms); k == 0 || l.shedTerms[k-1].term != e.Term {
			l.shedTerms = append(l.shedTerms, termRun{first: e.Index, term: e.Term})
		}
	}
	l.log = l.log[n:] // the next append that outgrows it copies only the rest
	l.shed += n
}

func (l *raftLog) lastTerm() uint64 { return l.termAt(l.lastIndex) }

// entryAt returns the entry at index (base < index <= lastIndex); a shed
// one without its Data, as any dropped one.
func (l *raftLog) entryAt(index uint64) core.LogEntry {
	if index < l.first() {
		return core.LogEntry{Index: index, Term: l.shedTerm(index)}
	}
	return l.log[index-l.first()]
}

// appendLocal adds an entry at lastIndex+1 to the log and to the writes
// queued for storage.
func (l *raftLog) appendLocal(e core.LogEntry) {
	l.log = append(l.log, e)
	l.lastIndex = e.Index
	l.queued = append(l.queued, e)
}

// truncateFrom discards the entries from index on (index > commit).
func (l *raftLog) truncateFrom(index uint64) {
	l.log = l.log[:index-l.first()] // index > commit >= dropped: never a shed entry
	l.lastIndex = index - 1
	l.durable = min(l.durable, index-1)
	l.lowerSyncs(index - 1)
	l.verified = min(l.verified, index-1)
	n := 0
	for n < len(l.queued) && l.queued[n].Index < index {
		n++
	}
	l.queued = l.queued[:n]
}

// compactTo drops the entries up to index (<= applied) from memory.
func (l *raftLog) compactTo(index uint64) {
	if index <= l.base {
		return
	}
	l.baseTerm = l.termAt(index)
	switch f := l.first(); {
	case index >= f:
		l.log = append([]core.LogEntry(nil), l.log[index-f+1:]...)
		l.shed, l.shedTerms = 0, nil
	case index+1 == f: // every shed entry goes
		l.shed, l.shedTerms = 0, nil
	default:
		// Some shed entries stay: keep the runs from the one holding
		// index+1 on, that one starting at index+1.
		l.shed -= index - l.base
		i := sort.Search(len(l.shedTerms), func(i int) bool { return l.shedTerms[i].first > index+1 })
		runs := append([]termRun(nil), l.shedTerms[i-1:]...)
		runs[0].first = index + 1
		l.shedTerms = runs
	}
	l.base = index
	l.dropped = max(l.dropped, index)
}

// saveHardState queues the term, vote and commit for storage.
func (r *Replica) saveHardState() {
	r.io.SaveHardState(core.HardState{Term: r.term, Vote: r.vote, Commit: r.commit, Repairing: r.repairing})
	r.hsDirty = true
}

// sendAfterHardState sends m once the hard state queued now is durable
// (with the next Sync; the caller flushes).
func (r *Replica) sendAfterHardState(to uint32, m message) {
	r.afterHS = append(r.afterHS, outMsg{to, m})
}

// flush hands the queued writes and hard state to storage with a Sync,
// whether or not other Syncs are in flight: storage, not the replica,
// decides how many fsyncs they take (core.IO.Sync).
func (r *Replica) flush() {
	if len(r.queued) == 0 && !r.hsDirty && len(r.afterHS) == 0 {
		return
	}
	if len(r.queued) > 0 {
		r.io.AppendLog(r.queued)
		r.queued = nil
	}
	r.io.Sync()
	r.syncs = append(r.syncs, syncInFlight{upTo: r.lastIndex, msgs: r.afterHS})
	r.hsDirty, r.afterHS = false, nil
}

// Synced is storage's answer to the syncs oldest Syncs in flight (one
// fsync may answer several): the log is durable through index. Answering
// them together applies their entries together, so that warmWrites sees
// the whole group, and a follower acknowledges them with one message.
func (r *Replica) Synced(index uint64, syncs int) {
	n := min(syncs, len(r.syncs))
	if r.failed != nil || n <= 0 {
		return
	}
	var upTo uint64
	for _, s := range r.syncs[:n] {
		upTo = max(upTo, s.upTo)
	}
	r.durable = max(r.durable, min(index, upTo, r.lastIndex))
	for i := range n {
		for _, m := range r.syncs[i].msgs {
			r.sendPeer(m.to, &m.msg)
		}
		r.syncs[i] = syncInFlight{}
	}
	r.syncs = r.syncs[n:]
	if len(r.syncs) == 0 {
		r.syncs = r.syncs[:0:0] // the next flush starts an array afresh
	}
	switch r.role {
	case Leader:
		r.advanceCommit()
	case Follower:
		r.acknowledge()
		r.checkRepaired()
	}
	r.flush()
	r.maybeSnapshot()
}

// applyCommitted applies the committed entries not yet applied, up to
// Config.MaxApplyEntries of them or maxApplyBytes of their data (the rest
// wait for ApplyMore: see Backlog), then answers what waited for them,
// then takes a snapshot when one is due.
func (r *Replica) applyCommitted() {
	n, size := 0, 0
	for r.applied < r.commit && n < r.cfg.MaxApplyEntries && size < maxApplyBytes {
		if r.applied >= r.warmedTo {
			r.warmWrites()
		}
		le := r.entryAt(r.applied + 1)
		if r.needsReads(le) {
			break // HistoryRead applies on (history.go)
		}
		if err := r.apply(le); err != nil {
			r.failed = err
			return
		}
		r.takeWrites(le.Index)
		n, size = n+1, size+len(le.Data)
	}
	r.dropData()
	if r.role == Leader {
		if len(r.held) > 0 && r.applied >= r.termStart {
			held := r.held
			r.held = nil
			for _, f := range held {
				r.receiveClient(f.to, f.h, f.payload, f.prepared)
			}
		}
		r.serveReads()
	}
	r.maybeSnapshot()
}

// maxApplyBytes bounds the entries' data one input applies (see
// Config.MaxApplyEntries): 64 MiB is about 50 of the largest batches, a few
// hundred milliseconds of work.
const maxApplyBytes = 64 << 20

// warmAhead is how many committed entries warmWrites looks ahead, and
// warmMaxEvents the most events of a request it warms: a larger request
// overlaps its own events' misses (the state machine prefetches a batch's
// writes itself).
const (
	warmAhead     = 32
	warmMaxEvents = 4
)

// warmWrites has the state machine load what the next committed entries'
// writes will read (statemachine.WarmEntities), when they are small writes:
// a batch's own writes overlap their cache misses, but the single-event
// requests that one fsync commits would each wait for theirs. It reads
// entries, never changes state.
func (r *Replica) warmWrites() {
	ids := r.warmIDs[:0]
	last := min(r.commit, r.applied+warmAhead)
	i := r.applied + 1
	for ; i <= last && len(ids) < warmAhead; i++ {
		le := r.entryAt(i)
		e, err := decodeEntry(le.Data)
		if err != nil || e.kind != kindOperation || (e.op != core.OpInsert && e.op != core.OpUpsert) {
			continue
		}
		recs, n, ok := core.EventRecords(e.payload)
		if !ok || n > warmMaxEvents {
			continue
		}
		for j := 0; j < n; j++ {
			ids = append(ids, core.Uint128FromLE(recs[j*core.RecordSize:])) // a record opens with its entity id
		}
	}
	r.warmedTo = i - 1 // the entries looked at; the next call starts after them
	r.warmIDs = ids
	if len(ids) > 1 {
		r.sm.WarmEntities(ids)
	}
}

// maybeSnapshot begins the periodic snapshot when one is due and none is
// being taken. Storage has then been handed every entry up to the applied
// index (every input that appends flushes before it applies), so the
// snapshot never replaces storage's log (core.IO.WriteSnapshot).
func (r *Replica) maybeSnapshot() {
	if r.snapshotDue() && r.encoding == nil {
		r.writeSnapshot()
	}
}

// encoding is a snapshot being encoded away from the replica: the state
// machine keeps its state as of index (frozen) until SnapshotEncoded, or,
// for one written straight to storage (toStorage), until SnapshotSaved.
type encoding struct {
	index, term uint64
	frozen      *statemachine.Frozen
	toStorage   bool
	size        uint64 // toStorage: the bytes encode wrote (read at SnapshotSaved)
}

// writeSnapshot freezes the state at the applied index and has IO encode
// it straight into storage (IO.WriteSnapshot); the replica goes on
// applying meanwhile. These are the periodic snapshots: encoded into
// memory first, a snapshot held a second copy of the state, in its encoded
// form (fresh memory, the dearest part of ingest in a VM), for nothing but
// the write. See maybeSnapshot for when.
func (r *Replica) writeSnapshot() {
	e := r.freeze()
	e.toStorage = true
	prefix := r.statePrefix()
	r.io.WriteSnapshot(e.index, e.term, func(w io.Writer) error {
		cw := countingWriter{w: w}
		if _, err := cw.Write(prefix); err != nil {
			return err
		}
		err := e.frozen.WriteSnapshot(&cw)
		e.size = cw.n
		return err
	})
}

// beginSnapshot freezes the state at the applied index and has IO encode
// it into memory, and take the history store as of it as a stream, for
// followers that need a snapshot: they are sent both
// (sendWaitingSnapshots), which storage then saves too. The replica goes
// on applying meanwhile.
func (r *Replica) beginSnapshot() {
	// The state grew by at most about the log applied since the last
	// snapshot: sizing the buffer once saves copying (and zeroing) it at
	// every doubling, which dominated the cost for large states.
	size := r.lastSnapBytes + r.bytesSince + r.bytesSince/8 + 1<<16
	prefix := r.statePrefix()
	frozen := r.freeze().frozen
	r.io.EncodeSnapshot(r.applied, func() []byte {
		return frozen.AppendSnapshot(append(make([]byte, 0, size), prefix...))
	})
}

// freeze starts a snapshot of the state at the applied index.
func (r *Replica) freeze() *encoding {
	r.snapRecords = r.sm.RecordBytes()
	r.encoding = &encoding{index: r.applied, term: r.appliedTerm, frozen: r.sm.Freeze()}
	r.sinceSnapshot, r.bytesSince = 0, 0
	return r.encoding
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n uint64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += uint64(n)
	return n, err
}

// SnapshotEncoded is IO's answer to EncodeSnapshot: the state's bytes of
// the snapshot at index, and the size of the history stream IO holds for
// it (core.IO), for the followers that need it. The log in memory is
// compacted up to it (storage keeps its own until a snapshot it saved
// covers it: the periodic ones).
func (r *Replica) SnapshotEncoded(index uint64, data []byte, streamSize uint64) {
	e := r.encoding
	if r.failed != nil || e == nil || e.index != index || e.toStorage {
		// Not the encoding's answer: the state it froze was replaced by a
		// leader's snapshot.
		if r.failed == nil && (r.snapshot == nil || r.snapshot.index != index) {
			r.io.DropSnapshotStream(index)
		}
		return
	}
	r.sm.Release(e.frozen)
	r.encoding = nil
	r.lastSnapBytes = uint64(len(data))
	r.compactTo(r.keepFrom(e.index))
	r.sendWaitingSnapshots(e.index, e.term, data, streamSize)
}

func (r *Replica) snapshotDue() bool {
	if r.cfg.SnapshotEvery > 0 {
		return r.sinceSnapshot >= r.cfg.SnapshotEvery
	}
	return r.bytesSince >= max(r.cfg.SnapshotMinBytes, snapshotLogRatio*r.snapRecords)
}

// snapshotLogRatio is how many times the state's records the log grows
// between snapshots (Config.SnapshotMinBytes). Encoding and writing a
// snapshot of a large state had cost a sixth of the machine's CPU in a
// 3-replica cluster's ingest when taken at once the state's size, with a
// 64 MiB minimum (most of it the first touch of fresh memory for the
// encoding, since written straight to the file, and the file's page
// cache). Twice the state's size, and 256 MiB at least, measured the same
// as four times in 8-10 s ingest runs (which take one snapshot either
// way), and recovery, which replays the log between snapshots, takes half
// as long. Since older events moved to the history store, a snapshot holds
// the entities' latest events alone and a checkpoint of the store: a fleet
// whose histories grow takes one every 64 MiB of log (SnapshotMinBytes),
// so that a restart replays at most that (a 10,000-entity track load
// replayed 1.57 M events, 157 entries, in 7 s with 256 MiB). Storage keeps the log since the
// snapshot before the newest: up to four times the state's records. The
// log in memory stays small: applied entries give up their Data
// (readback.go).
const snapshotLogRatio = 2

// SnapshotSaved is storage's answer to SaveSnapshot and WriteSnapshot.
func (r *Replica) SnapshotSaved(index uint64) {
	if r.failed != nil {
		return
	}
	if e := r.encoding; e != nil && e.toStorage && e.index == index {
		// A snapshot written straight to storage: the log in memory is
		// compacted up to it. Followers that wait for a snapshot need
		// its bytes: they get one encoded into memory.
		r.sm.Release(e.frozen)
		r.encoding = nil
		r.lastSnapBytes = e.size
		r.compactTo(r.keepFrom(index))
		if r.snapshotWanted() {
			r.beginSnapshot()
		}
		return
	}
	if r.installing == 0 || index != r.installing {
		return
	}
	// The leader's snapshot is installed and durable: acknowledge it.
	r.installing = 0
	if r.role == Follower && r.leader != NoLeader {
		r.sendPeer(r.leader, &message{typ: msgSnapshotReply, term: r.term, index: index, ok: true})
	}
}
