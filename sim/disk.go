package sim

import (
	"slices"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/replica"
)

// disk is the simulated storage of one replica: the storage half of
// core.IO. See the package documentation for its fault model.
//
// Durable state survives a crash. Writes queue in pending, in the order the
// replica issued them; a Sync covers what is pending when it is called and
// completes some ticks later, making that durable, and is then answered
// with Synced. Syncs that complete at the same tick are answered together,
// with one Synced, as production storage's group commit answers the Syncs
// one fsync served (unless a snapshot is being written, which a Sync asked
// after it must not overtake). A crash keeps a random prefix of the
// pending log writes (a torn tail) and, independently, a random prefix of
// the pending hard-state saves (the hard state is its own atomically
// replaced file), and nothing else.
//
// Snapshots are written in the order of the other writes, as production
// storage does: a SaveSnapshot completes after a random latency, a Sync
// asked after it completes no earlier, and a crash keeps a log entry
// written after a snapshot only where the log stays contiguous (a
// follower that installs a leader's snapshot beyond its log appends after
// it; those entries survive only with the snapshot).
//
// While its replica is down, a synced record of the log may be damaged
// (damageLog). Recovery then does what production storage does with damage
// that is not a torn tail: it durably sets the hard state's Repairing flag
// (term, vote and commit as they are) and cuts the log just before the
// damaged record, dropping it and every later entry; the replica starts on
// what is left and repairs it from its peers.
type disk struct {
	n *node

	// Durable.
	hard core.HardState
	snap *snapshotFile
	log  []core.LogEntry // durable entries after the snapshot, contiguous

	// Volatile.
	pending    []diskOp
	volLast    uint64 // last log index, pending appends included
	syncs      []pendingSync
	snaps      []*snapshotFile // SaveSnapshot calls not yet completed
	lastSyncAt int64
	// answeredEarly counts the Syncs answered together with an earlier one
	// whose own completion events are still to come: those events do
	// nothing.
	answeredEarly int

	durableCommit   uint64 // the largest durable HardState.Commit
	reportedDurable uint64 // the largest index answered with Synced

	// damaged is the index of a log record damaged while the replica is
	// down (0: none); recovered cuts the log before it.
	damaged uint64
	// histDamaged: the tables of the durable snapshot's history checkpoint
	// were damaged while the replica was down; recovered finds it and
	// rebuilds.
	histDamaged bool

	// hist is the history store: a crash keeps what its filesystem synced,
	// and recovery restores the checkpoint saved with the snapshot
	// (recovered).
	hist *histStore
}

type diskOp struct {
	hard    *core.HardState
	entries []core.LogEntry // an append; its first index may rewind the log
	snap    *snapshotFile   // a SaveSnapshot, in order with the rest
}

type pendingSync struct {
	ops int   // pending[:ops] become durable
	at  int64 // when it completes
}

type snapshotFile struct {
	index, term uint64
	data        []byte
	hist        string // the history store's checkpoint saved with it
	at          int64
	survives    bool // decided by a crash
}

func newDisk(n *node) *disk { return &disk{n: n, hist: newHistStore(n)} }

func (d *disk) lastDurable() uint64 {
	if len(d.log) > 0 {
		return d.log[len(d.log)-1].Index
	}
	if d.snap != nil {
		return d.snap.index
	}
	return 0
}

func (d *disk) appendLog(entries []core.LogEntry) {
	if len(entries) == 0 {
		return
	}
	w := d.n.w
	first := entries[0].Index
	for i := range entries {
		if entries[i].Index != first+uint64(i) {
			w.fail("disk: replica %d appended non-contiguous entries (%d after %d)", d.n.idx, entries[i].Index, entries[i-1].Index)
			return
		}
	}
	switch {
	case first == 0:
		w.fail("disk: replica %d appended log index 0", d.n.idx)
		return
	case first > d.volLast+1:
		w.fail("disk: replica %d appended index %d after %d, leaving a gap", d.n.idx, first, d.volLast)
		return
	case first <= d.durableCommit:
		w.fail("disk: replica %d overwrote log index %d, at or below its durable commit index %d", d.n.idx, first, d.durableCommit)
		return
	}
	cp := make([]core.LogEntry, len(entries))
	for i, e := range entries {
		cp[i] = core.LogEntry{Index: e.Index, Term: e.Term, Data: slices.Clone(e.Data)}
	}
	d.pending = append(d.pending, diskOp{entries: cp})
	d.volLast = cp[len(cp)-1].Index
	w.tracef("disk %d append %d..%d", d.n.idx, first, d.volLast)
}

func (d *disk) saveHardState(hs core.HardState) {
	d.pending = append(d.pending, diskOp{hard: &hs})
	d.n.w.tracef("disk %d hardstate term=%d vote=%d commit=%d repairing=%v", d.n.idx, hs.Term, hs.Vote, hs.Commit, hs.Repairing)
}

func (d *disk) sync() {
	w := d.n.w
	at := max(w.now+w.rng.Int64N(w.cfg.syncMax-w.cfg.syncMin+1)+w.cfg.syncMin, d.lastSyncAt)
	if k := len(d.snaps); k > 0 {
		at = max(at, d.snaps[k-1].at) // after the snapshots asked before it
	}
	d.lastSyncAt = at
	d.syncs = append(d.syncs, pendingSync{ops: len(d.pending), at: at})
	w.schedule(at, &event{kind: evSynced, node: d.n, epoch: d.n.epoch})
	w.tracef("disk %d sync of %d writes, done at %d", d.n.idx, len(d.pending), at)
}

// saveSnapshot saves a snapshot and, with it, hist: the checkpoint of the
// history store as it was when the snapshot was asked for.
func (d *disk) saveSnapshot(index, term uint64, data []byte, hist string) {
	w := d.n.w
	at := w.now + 1 + w.rng.Int64N(w.cfg.snapMax)
	if k := len(d.snaps); k > 0 {
		at = max(at, d.snaps[k-1].at)
	}
	f := &snapshotFile{index: index, term: term, data: data, hist: hist, at: at}
	d.snaps = append(d.snaps, f)
	d.pending = append(d.pending, diskOp{snap: f})
	if index > d.volLast {
		// A follower installing its leader's snapshot: the log starts
		// again after it.
		d.volLast = index
	}
	w.schedule(at, &event{kind: evSnapshotSaved, node: d.n, epoch: d.n.epoch})
	w.tracef("disk %d snapshot at index %d term %d (%d bytes), done at %d", d.n.idx, index, term, len(data), at)
}

// readLog returns copies of the entries from index from to index to that
// the disk holds, the durable log with the pending appends written over
// it, stopping after the entry that brings their data to maxBytes; none
// when it does not hold the entry at from.
func (d *disk) readLog(from, to uint64, maxBytes int) []core.LogEntry {
	view := slices.Clone(d.log)
	for _, op := range d.pending {
		if len(op.entries) == 0 {
			continue
		}
		first := op.entries[0].Index
		k := len(view)
		for k > 0 && view[k-1].Index >= first {
			k--
		}
		if k > 0 && view[k-1].Index != first-1 {
			k = 0 // after a gap a snapshot covers: the log starts again
		}
		view = append(view[:k], op.entries...)
	}
	var out []core.LogEntry
	size := 0
	for _, e := range view {
		if e.Index < from || e.Index > to {
			continue
		}
		if e.Index != from+uint64(len(out)) || size >= maxBytes {
			break
		}
		out = append(out, core.LogEntry{Index: e.Index, Term: e.Term, Data: slices.Clone(e.Data)})
		size += len(e.Data)
	}
	return out
}

// completeSync makes the oldest Sync's writes durable and returns the last
// durable log index.
func (d *disk) completeSync() (index uint64, syncs int) {
	syncs = 1
	for syncs < len(d.syncs) && d.syncs[syncs].at <= d.n.w.now && len(d.snaps) == 0 {
		syncs++
	}
	d.answeredEarly += syncs - 1
	s := d.syncs[syncs-1]
	d.syncs = d.syncs[syncs:]
	for _, op := range d.pending[:s.ops] {
		if !d.persist(op, len(op.entries)) {
			d.n.w.fail("disk: replica %d log would have a gap after entry %d", d.n.idx, d.lastDurable())
		}
	}
	d.pending = d.pending[s.ops:]
	for i := range d.syncs {
		d.syncs[i].ops -= s.ops
	}
	idx := d.lastDurable()
	d.reportedDurable = max(d.reportedDurable, idx)
	return idx, syncs
}

// persist makes op durable; for an append only its first n entries. It
// reports false, and stops, where an entry would leave a gap in the log.
func (d *disk) persist(op diskOp, n int) bool {
	switch {
	case op.hard != nil:
		d.hard = *op.hard
		d.durableCommit = max(d.durableCommit, op.hard.Commit)
		return true
	case op.snap != nil:
		d.installSnapshot(op.snap)
		return true
	}
	for _, e := range op.entries[:n] {
		base := uint64(0)
		if d.snap != nil {
			base = d.snap.index
		}
		if e.Index <= base {
			continue // covered by the snapshot already
		}
		if e.Index > d.lastDurable()+1 {
			return false
		}
		// Writing entry e rewinds the log to e.Index first. Entries the
		// replica overwrote are no longer owed to it.
		k := len(d.log)
		for k > 0 && d.log[k-1].Index >= e.Index {
			k--
		}
		d.log = d.log[:k]
		d.reportedDurable = min(d.reportedDurable, e.Index-1)
		d.log = append(d.log, e)
	}
	return true
}

// completeSnapshot makes the oldest pending snapshot durable and compacts
// the log; it returns the snapshot's index.
func (d *disk) completeSnapshot() uint64 {
	f := d.snaps[0]
	d.snaps = d.snaps[1:]
	d.installSnapshot(f)
	for i, op := range d.pending {
		if op.snap == f {
			// Durable now; the writes queued before it stay pending.
			d.pending[i].snap = nil
			break
		}
	}
	return f.index
}

func (d *disk) installSnapshot(f *snapshotFile) {
	if d.snap != nil && f.index <= d.snap.index {
		d.hist.remove(f.hist)
		return
	}
	if d.snap != nil {
		d.hist.remove(d.snap.hist)
	}
	d.snap = f
	n := 0
	for n < len(d.log) && d.log[n].Index <= f.index {
		n++
	}
	d.log = slices.Clone(d.log[n:])
}

// crash loses what a crash loses (see the type's documentation).
func (d *disk) crash() {
	w := d.n.w
	// The log's pending appends: a random prefix of the entries survives.
	total := 0
	for _, op := range d.pending {
		total += len(op.entries)
	}
	keep := w.tornPrefix(total)
	// The hard state file: a random prefix of its pending versions.
	hards := 0
	for _, op := range d.pending {
		if op.hard != nil {
			hards++
		}
	}
	keptHard := w.tornPrefix(hards)
	keepHard := keptHard
	// Each pending snapshot file was or was not written (atomic replace).
	for _, f := range d.snaps {
		f.survives = w.rng.IntN(2) == 0
	}
	d.hist.crash()
	kept := 0
	for _, op := range d.pending {
		switch {
		case op.hard != nil:
			if keepHard > 0 {
				d.persist(op, 0)
				keepHard--
			}
		case op.snap != nil:
			if op.snap.survives {
				d.persist(op, 0)
			}
		case keep > 0:
			n := min(keep, len(op.entries))
			if d.persist(op, n) {
				keep -= n
				kept += n
			} else {
				// A gap: the snapshot before these entries was lost,
				// and they were written after it.
				keep = 0
			}
		}
	}
	for _, f := range d.snaps {
		if !f.survives {
			d.hist.remove(f.hist) // its snapshot was never written
		}
	}
	if d.lastDurable() < d.reportedDurable && !w.opts.BugForgetSyncedOnCrash {
		w.fail("disk: replica %d lost synced entries on a crash: durable through %d, Synced said %d", d.n.idx, d.lastDurable(), d.reportedDurable)
	}
	lost := 0
	if w.opts.BugForgetSyncedOnCrash && len(d.log) > 0 {
		lost = min(len(d.log), 1+w.rng.IntN(3))
		d.log = d.log[:len(d.log)-lost]
	}
	w.tracef("disk %d crash: %d of %d pending entries and %d of %d hard states survive; %d synced entries forgotten (bug)",
		d.n.idx, kept, total, keptHard, hards, lost)
	d.pending, d.syncs, d.snaps, d.answeredEarly = nil, nil, nil, 0
	d.volLast = d.lastDurable()
	d.reportedDurable = d.lastDurable()
	d.lastSyncAt = 0
}

// damageLog damages the durable log record at index (an entry after the
// snapshot) of a crashed replica: its next recovery finds it.
func (d *disk) damageLog(index uint64) {
	if d.n.up || len(d.log) == 0 || index < d.log[0].Index || index > d.lastDurable() {
		panic("sim: damaging a log entry the disk does not hold, or of a live replica")
	}
	if d.damaged == 0 || index < d.damaged {
		d.damaged = index
	}
}

// damagedOrRepairing reports whether the disk holds damage that its
// replica's next recovery finds, or a hard state that says it repairs.
func (d *disk) damagedOrRepairing() bool { return d.hard.Repairing || d.damaged != 0 || d.histDamaged }

// rebuildDamagedHistory checks the history store just recovered and, when
// it finds a damaged block, discards the log, the snapshot and the history
// as production does (io/rebuild.go): the Repairing flag first, then the
// rest; the replica starts empty and repairing, and its leader gives
// everything back. It reports whether it did.
func (d *disk) rebuildDamagedHistory() bool {
	w := d.n.w
	err := d.hist.verify()
	if err == nil {
		return false
	}
	d.hard.Repairing = true
	d.hist.remove(d.snap.hist)
	d.snap, d.log = nil, nil
	d.volLast, d.reportedDurable, d.durableCommit = 0, 0, 0
	d.hist.empty()
	w.rebuilds++
	// The trace names no table or key: Pebble's background compactions
	// lay out the tables, so which damaged block is met first differs
	// from run to run, while the trace is part of the run's digest.
	w.tracef("disk %d recovery: history store damaged: hard state marked repairing, log, snapshot and history discarded", d.n.idx)
	return true
}

// recovered is what a restarting replica reads from the disk. A damaged
// record is repaired first, as production storage does (io.recoverStorage):
// the hard state's Repairing flag is made durable, then the log is cut just
// before the record.
func (d *disk) recovered() replica.Recovered {
	if at := d.damaged; at != 0 {
		w := d.n.w
		d.damaged = 0
		if !w.opts.BugDamageWithoutRepairing {
			d.hard.Repairing = true
		}
		k := 0
		for k < len(d.log) && d.log[k].Index < at {
			k++
		}
		cut := len(d.log) - k
		d.log = d.log[:k]
		d.volLast = d.lastDurable()
		d.reportedDurable = min(d.reportedDurable, d.lastDurable())
		// The replica commits only what its log holds (replica.New takes
		// min(HardState.Commit, last index)) and gets the entries cut back
		// from a leader: appending them is no overwrite. The overwrite
		// check (appendLog) guards them again once it has made a commit
		// index that covers them durable.
		d.durableCommit = min(d.durableCommit, d.lastDurable())
		w.tracef("disk %d recovery: log record %d damaged: hard state marked repairing (%v), log cut to end at %d (%d entries dropped)",
			d.n.idx, at, d.hard.Repairing, d.lastDurable(), cut)
	}
	rec := replica.Recovered{HardState: d.hard}
	from := ""
	if d.snap != nil {
		rec.Snapshot, rec.SnapshotIndex, rec.SnapshotTerm = d.snap.data, d.snap.index, d.snap.term
		from = d.snap.hist
	}
	rec.Entries = make([]core.LogEntry, len(d.log))
	for i, e := range d.log {
		rec.Entries[i] = core.LogEntry{Index: e.Index, Term: e.Term, Data: slices.Clone(e.Data)}
	}
	d.hist.recover(from, rec)
	if d.histDamaged {
		d.histDamaged = false
		if d.rebuildDamagedHistory() {
			rec = replica.Recovered{HardState: d.hard}
		}
	}
	return rec
}
