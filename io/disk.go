package io

import (
	"errors"
	"fmt"
	stdio "io"
	"runtime"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/io/store"
)

type diskOpKind uint8

const (
	opAppend diskOpKind = iota
	opHardState
	opSync
	opSnapshot
	opSnapshotWritten // internal: the snapshot writer finished one
	opRead
	opCall    // call runs on the disk goroutine, in order (a backup's reads: backup.go)
	opDiscard // rebuild.go: discard the log and snapshots, mark the hard state repairing
	opBarrier // to the snapshot writer: close barrier once every snapshot before is written
)

// diskOp is one storage request of the replica, queued for the disk
// goroutine.
type diskOp struct {
	kind        diskOpKind
	entries     []core.LogEntry            // opAppend
	hs          core.HardState             // opHardState
	index, term uint64                     // opSnapshot; opRead: index is the first to read
	encode      func(w stdio.Writer) error // opSnapshot: writes its bytes (it may run again when a write is tried again)
	to          uint64                     // opRead: the last index to read
	maxBytes    int                        // opRead
	merged      int                        // opSync: the earlier Syncs its fsync answers too
	// opSnapshot: the outcome of the history store's checkpoint for the
	// snapshot (historian), which the snapshot's file waits for: a
	// snapshot on disk has its history.
	history chan error
	call    func(d *disk) // opCall
	// gen is the generation of an opSnapshot sent to the snapshot writer
	// and of the opSnapshotWritten that follows it: one written before an
	// opDiscard is not the new log's (rebuild.go).
	gen     uint64
	barrier chan struct{} // opBarrier
}

// errHistoryFailed is the answer to a checkpoint asked of a historian
// whose store had failed already: the historian has reported its failure to
// the loop, which stops the server or rebuilds (rebuild.go), so the
// snapshot is not written, and the disk does not fail for it.
var errHistoryFailed = errors.New("the history store failed before")

// awaitHistory waits for the history checkpoint of op, a snapshot; an
// error fails the snapshot. It waits even while the server stops: the
// historian, closed only once the disk goroutine has exited, answers every
// checkpoint queued before (a snapshot asked for just before a Close is
// written, as before history moved to disk).
func (d *disk) awaitHistory(op *diskOp) error {
	if op.history == nil {
		return nil
	}
	err := <-op.history
	op.history = nil
	if err != nil {
		return fmt.Errorf("the history of the snapshot at index %d: %w", op.index, err)
	}
	return nil
}

// syncFollows reports whether ops holds a Sync with only appends and hard
// states before it, which one fsync after them all makes durable together
// with whatever was queued before.
func syncFollows(ops []diskOp) bool {
	for i := range ops {
		switch ops[i].kind {
		case opSync:
			return true
		case opAppend, opHardState:
		default:
			return false
		}
	}
	return false
}

// writeBytes is the encode of an opSnapshot whose bytes are in memory.
func writeBytes(data []byte) func(w stdio.Writer) error {
	return func(w stdio.Writer) error {
		_, err := w.Write(data)
		return err
	}
}

// completion is the disk goroutine's answer to the loop: Synced(index,
// syncs), SnapshotSaved(index), LogRead(index, entries), or a failure
// that stops the server.
type completion struct {
	snapshot  bool // SnapshotSaved
	read      bool // LogRead; else Synced
	discarded bool // an opDiscard is done (rebuild.go)
	index     uint64
	syncs     int // Synced: how many Syncs one fsync answered
	entries   []core.LogEntry
	err       error
}

// disk runs the storage requests of one replica, in order, on one goroutine
// (package store's Log is not safe for concurrent use) — except the
// writing of a snapshot file, which can take seconds for a large state and
// must not hold up the log's fsyncs (every acknowledgement waits for one):
// a second goroutine, the snapshot writer, writes the file, then hands the
// log goroutine an opSnapshotWritten, which compacts the log and reports
// SnapshotSaved. A snapshot that replaces the log (a follower installing
// the leader's) is written in line instead: the log must be reset after
// the file is durable and before the next append.
//
// Running out of space does not stop a lone replica: a write that fails
// for want of space (the log takes back what it could not make durable,
// see store.ErrNoSpace; a snapshot or hard state file is removed
// half-written) is tried again, the log's entries since its last Sync
// first, every now and then until it succeeds or the server stops.
// Meanwhile the replica sees a disk that does not answer: it acknowledges
// no write (registering a client session is one) and serves reads. A
// replica of a cluster of several gives up, and the server stops, after
// spaceWaitLeading when it leads (the others elect another and go on,
// where a leader that waited would hold in memory every entry they commit)
// and after spaceWaitFollowing when it follows (it falls behind, and a
// follower left waiting coincided with repeated elections in a test on a
// 2-core machine, for reasons not found). A failed fsync always stops the
// server.
type disk struct {
	dir    string
	log    *store.Log
	logger *zap.Logger

	// inCluster: the replica has peers, and waits for space a while only:
	// waitLeading when it leads, waitFollowing else. leading says whether
	// it leads (the loop keeps it up to date; connections' readers read
	// it too, to prepare a leader's batches: see Server.prepare).
	inCluster                  bool
	waitLeading, waitFollowing time.Duration
	leading                    atomic.Bool

	// unsynced holds the entries appended since the log's last Sync, which
	// the log may have to take back when it runs out of space: they are
	// appended again before anything else once there is space.
	unsynced []core.LogEntry

	queue opQueue[diskOp]

	done    chan completion // to the loop
	stopped chan struct{}   // closed when the loop has exited: completions are dropped
	exited  chan struct{}   // closed when run has returned and the log is closed

	pendingHS *core.HardState // queued by SaveHardState, written at the next Sync
	savedHS   core.HardState
	haveSaved bool
	lastSnap  uint64 // index of the newest snapshot on disk (0: none)
	closeErr  error  // the log's Close, once exited

	plainSyncs    error        // syncsArePlain's answer when last logged
	syncsArePlain func() error // store.PlainSyncs; a test's stand-in

	snaps       chan diskOp   // to the snapshot writer
	snapsExited chan struct{} // closed when the snapshot writer has returned

	m         *diskMetrics // nil: none recorded
	sinceSync int          // entries appended since the last fsync
	gen       uint64       // opDiscards done (see diskOp.gen)
}

func newDisk(dir string, log *store.Log, lastSnap uint64, stopped chan struct{}, logger *zap.Logger) *disk {
	return &disk{
		dir: dir, log: log, lastSnap: lastSnap, stopped: stopped, logger: logger,
		waitLeading: spaceWaitLeading, waitFollowing: spaceWaitFollowing,
		queue:  newOpQueue[diskOp](),
		done:   make(chan completion, 16),
		exited: make(chan struct{}),
		snaps:  make(chan diskOp, 4),

		snapsExited:   make(chan struct{}),
		syncsArePlain: store.PlainSyncs,
	}
}

// writeSnapshots is the snapshot writer (see disk).
func (d *disk) writeSnapshots() {
	defer close(d.snapsExited)
	for op := range d.snaps {
		if op.kind == opBarrier {
			close(op.barrier)
			continue
		}
		start := time.Now()
		var size int64
		if err := d.awaitHistory(&op); err != nil {
			if !errors.Is(err, errHistoryFailed) {
				d.report(completion{err: err})
			}
			continue
		}
		err := d.untilSpace("writing a snapshot", func() (err error) {
			size, err = store.SaveSnapshot(d.dir, op.index, op.term, op.encode)
			return err
		})
		if err != nil {
			d.report(completion{err: err})
			continue
		}
		// Encoded (for a WriteSnapshot), written and fsynced: the replica
		// keeps its state frozen for a WriteSnapshot until now.
		took := time.Since(start)
		d.m.snapshotWritten(took, size)
		d.logger.Info("snapshot written", zap.Uint64("index", op.index), zap.Int64("bytes", size),
			zap.Duration("took", took.Round(time.Millisecond)))
		d.push(diskOp{kind: opSnapshotWritten, index: op.index, gen: op.gen})
	}
}

// push queues op. It never blocks; after close it drops op.
func (d *disk) push(op diskOp) { d.queue.push(op) }

// close makes run finish the requests queued so far, close the log and
// return.
func (d *disk) close() { d.queue.close() }

func (d *disk) report(c completion) {
	select {
	case d.done <- c:
	case <-d.stopped:
	}
}

func (d *disk) run() {
	defer close(d.exited)
	go d.writeSnapshots()
	defer func() { close(d.snaps); <-d.snapsExited }()
	var batch []diskOp
	failed := false
	for {
		var done bool
		if batch, done = d.queue.take(batch); done {
			break
		}
		merged := 0 // Syncs of this batch answered by a later one's fsync
		for i := range batch {
			if !failed && batch[i].kind == opSync {
				if syncFollows(batch[i+1:]) {
					// Group commit: one fsync, the last one's, answers
					// every Sync the replica queued while the one before
					// was in flight.
					merged++
					continue
				}
				batch[i].merged, merged = merged, 0
			}
			if !failed {
				op := &batch[i]
				first := true
				err := d.untilSpace("writing the log", func() error {
					if !first && len(d.unsynced) > 0 {
						// The log took back what it had not synced.
						if err := d.append(d.unsynced); err != nil {
							return err
						}
						if op.kind == opAppend {
							return nil // its entries were among them
						}
					}
					first = false
					return d.do(op)
				})
				if err != nil {
					// After a failed write (not for want of space) or
					// fsync the files' state is unknown: do nothing more;
					// the loop stops the server.
					failed = true
					d.report(completion{err: err})
				}
			}
			batch[i] = diskOp{} // drop references to entry data
		}
	}
	d.closeErr = d.log.Close()
}

// Waiting for space: the first retry after spaceRetryMin, then twice as
// long each time up to spaceRetryMax; a warning at the first failure and
// then every spaceWarnEvery. A replica of a cluster of several waits
// spaceWaitLeading or spaceWaitFollowing at most (see disk).
const (
	spaceRetryMin      = 20 * time.Millisecond
	spaceRetryMax      = time.Second
	spaceWarnEvery     = 30 * time.Second
	spaceWaitLeading   = 2 * time.Second
	spaceWaitFollowing = 10 * time.Second
)

// spaceWaitLimit is how long a write waits for space before it fails; 0:
// for ever.
func (d *disk) spaceWaitLimit() time.Duration {
	switch {
	case !d.inCluster:
		return 0
	case d.leading.Load():
		return d.waitLeading
	}
	return d.waitFollowing
}

// untilSpace runs write until it does not fail for want of space, waiting
// between tries; it gives up with the last error once the server stops,
// or once it has waited spaceWaitLimit.
func (d *disk) untilSpace(what string, write func() error) error {
	err := write()
	if !store.NoSpace(err) {
		return err
	}
	began, warned := time.Now(), time.Time{}
	for wait := spaceRetryMin; store.NoSpace(err); wait = min(2*wait, spaceRetryMax) {
		if time.Since(warned) >= spaceWarnEvery {
			d.logger.Warn("no space left on the data directory's device: writes, and the registering of new client sessions, wait for space; registered sessions go on reading",
				zap.String("doing", what), zap.String("dir", d.dir), zap.Uint64("free_bytes", freeBytes(d.dir)),
				zap.Duration("waited", time.Since(began).Round(time.Millisecond)), zap.Error(err))
			warned = time.Now()
		}
		if limit := d.spaceWaitLimit(); limit > 0 && time.Since(began) >= limit {
			return fmt.Errorf("no space for %v (the other replicas go on without this one): %w", limit, err)
		}
		select {
		case <-time.After(wait):
		case <-d.stopped:
			return err
		}
		err = write()
	}
	if err == nil {
		d.logger.Info("space again: writes go on", zap.String("doing", what), zap.Duration("waited", time.Since(began).Round(time.Millisecond)))
	}
	return err
}

// forgetUnsynced empties unsynced once the log holds none of it unsynced,
// dropping its references to entry data.
func (d *disk) forgetUnsynced() {
	clear(d.unsynced)
	d.unsynced = d.unsynced[:0]
}

func (d *disk) do(op *diskOp) error {
	switch op.kind {
	case opAppend:
		// The log may take these back should it run out of space: keep
		// them, as the log holds them (from the first one's index on).
		if len(op.entries) > 0 {
			first := op.entries[0].Index
			k := len(d.unsynced)
			for k > 0 && d.unsynced[k-1].Index >= first {
				k--
			}
			if k > 0 && d.unsynced[k-1].Index != first-1 {
				k = 0 // after a gap (a snapshot covers it): the log restarts at first
			}
			d.unsynced = append(d.unsynced[:k], op.entries...)
			d.sinceSync += len(op.entries)
		}
		return d.append(op.entries)
	case opHardState:
		hs := op.hs
		d.pendingHS = &hs
	case opSync:
		start := time.Now()
		if err := d.log.Sync(); err != nil {
			return err
		}
		d.m.synced(time.Since(start), d.sinceSync)
		d.sinceSync = 0
		d.notePlainSyncs(d.syncsArePlain())
		d.forgetUnsynced()
		if hs := d.pendingHS; hs != nil {
			if !d.haveSaved || *hs != d.savedHS {
				// A conversion, not a copy field by field: it keeps every
				// field (Repairing included) and stops compiling should
				// the two types differ.
				if err := store.SaveHardState(d.dir, store.HardState(*hs)); err != nil {
					return err
				}
				d.savedHS, d.haveSaved = *hs, true
			}
			d.pendingHS = nil
		}
		d.report(completion{index: d.log.LastIndex(), syncs: 1 + op.merged})
	case opSnapshot:
		if !snapshotReplacesLog(d.log, op.index, op.term) {
			op.gen = d.gen
			d.snaps <- *op // written beside the log; opSnapshotWritten follows
			return nil
		}
		if err := d.awaitHistory(op); err != nil {
			if errors.Is(err, errHistoryFailed) {
				return nil
			}
			return err
		}
		_, err := store.SaveSnapshot(d.dir, op.index, op.term, op.encode)
		if err != nil {
			return err
		}
		// A follower installing the leader's snapshot: what the log holds
		// does not lead up to it. Empty the log; the next append starts at
		// index+1. (The fallback snapshot is then of no use: the log after
		// it is gone. It was of another history anyway.)
		d.lastSnap = max(d.lastSnap, op.index)
		if err := d.log.Reset(op.index + 1); err != nil {
			return err
		}
		d.forgetUnsynced()
		d.report(completion{snapshot: true, index: op.index})
	case opRead:
		// Entries that cannot be read back are the replica's to work
		// around (it sends a snapshot instead): the answer is then empty.
		// (Should the log itself have failed, the next Sync reports it.)
		es, err := d.log.EntriesUpTo(op.index, op.to+1, int64(op.maxBytes))
		if err != nil && !errors.Is(err, store.ErrCompacted) && !errors.Is(err, store.ErrOutOfRange) {
			d.logger.Warn("cannot read log entries back; a follower that needs them gets a snapshot", zap.Uint64("from", op.index), zap.Error(err))
		}
		entries := make([]core.LogEntry, len(es))
		for i, e := range es {
			entries[i] = core.LogEntry{Index: e.Index, Term: e.Term, Data: e.Data}
		}
		d.report(completion{read: true, index: op.index, entries: entries})
	case opCall:
		op.call(d)
	case opDiscard:
		return d.discard(op)
	case opSnapshotWritten:
		if op.gen != d.gen {
			return nil // of the log an opDiscard removed, with its file
		}
		if op.index > d.lastSnap {
			// Package store keeps the snapshot before this one as a
			// fallback should this one be damaged; the log after it is
			// kept too, so that falling back loses nothing. Whole
			// segments below it go.
			fallback := d.lastSnap
			d.lastSnap = op.index
			if err := d.log.CompactBefore(fallback + 1); err != nil {
				return err
			}
			// The history checkpoints of the snapshots before the
			// fallback go with them.
			if err := removeCheckpointsBefore(d.dir, fallback); err != nil {
				d.logger.Warn("cannot remove old history checkpoints", zap.Error(err))
			}
		}
		d.report(completion{snapshot: true, index: op.index})
	}
	return nil
}

// snapshotReplacesLog reports whether a snapshot at (index, term) makes
// the whole log useless: the log ends before index, or holds index with
// another term (the entries after it then follow a different history; Raft
// discards them too, dissertation figure 5.3 / InstallSnapshot).
func snapshotReplacesLog(log *store.Log, index, term uint64) bool {
	if log.LastIndex() < index {
		return true
	}
	if index < log.FirstIndex() {
		return false // compacted away: it was ours
	}
	t, err := log.Term(index)
	return err == nil && t != term
}

// append writes entries after the log's end, first discarding every entry
// from the first one's index on (core.IO.AppendLog). Entries that start
// beyond the log's end may only follow a snapshot that covers the gap (a
// follower that installed one): the log then restarts at them.
func (d *disk) append(entries []core.LogEntry) error {
	if len(entries) == 0 {
		return nil
	}
	first := entries[0].Index
	switch last := d.log.LastIndex(); {
	case first >= 1 && first <= last:
		if err := d.log.TruncateAfter(first - 1); err != nil {
			return err
		}
	case first > last+1 && d.log.FirstIndex() != 0:
		if d.lastSnap < first-1 {
			return fmt.Errorf("append at index %d leaves a gap after the log's last index %d that no snapshot covers (the newest is at %d)", first, last, d.lastSnap)
		}
		if err := d.log.Reset(first); err != nil {
			return err
		}
	}
	se := make([]store.Entry, len(entries))
	for i, e := range entries {
		se[i] = store.Entry{Index: e.Index, Term: e.Term, Data: e.Data}
	}
	return d.log.Append(se)
}

// notePlainSyncs logs when storage's fsyncs go from AIO to the plain call
// or back, given store.PlainSyncs. On the plain call each fsync holds a Go
// processor while the disk works: a server on one processor
// (GOMAXPROCS=1) stops meanwhile, which is worth a warning; on more, the
// others go on.
func (d *disk) notePlainSyncs(why error) {
	if why == d.plainSyncs {
		return
	}
	d.plainSyncs = why
	if why == nil {
		d.logger.Info("fsyncs wait by asynchronous IO again, holding no processor")
		return
	}
	procs := runtime.GOMAXPROCS(0)
	log := d.logger.Info
	if procs == 1 {
		log = d.logger.Warn
	}
	log("fsyncs make the plain fdatasync, which holds a processor while the disk works: with one processor, the server stops during each",
		zap.Error(why), zap.Int("processors", procs))
}
