package io

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/io/history"
	"github.com/geoevent/geoevent/replica"
)

// historian owns the replica's history store (package history; see
// core/history.go): one goroutine applies its requests in queue order,
// as disk does the log's. The store lives in DIR/history; each snapshot
// has the store's checkpoint beside it, DIR/snapshot-N.history, taken in
// queue order when the snapshot was asked for (core.IO.WriteSnapshot),
// before the snapshot's file is written: a snapshot on disk has its
// history. Pebble's own write-ahead log is off: after a crash the store
// holds exactly the entries up to the index it recorded with its last
// flushed batch. Recovery keeps it when the log above the snapshot can be
// replayed onto it, and restores the snapshot's checkpoint otherwise
// (recoverHistory, history.Recover).
//
// Reads are served from a view taken in queue order, so each sees exactly
// the writes queued before it. They run on the historian's goroutine: a
// read waits for the writes queued before it, which it must see anyway.
type historian struct {
	dir   string // the data directory
	store *history.Store
	log   *zap.Logger

	queue opQueue[histOp]

	// The writes queued and not yet applied, and the loop's wait for them
	// to fall to maxQueuedWrites (push): a store slower than the log
	// slows the loop down instead of queuing without bound. The leader's
	// admission (admission.go) refuses clients' new writes long before
	// that, so that the wait is the last resort. A store that
	// makes no progress for stallAfter (a full disk stalls pebble's
	// flushes) is stalled: writes queue without waiting until it moves
	// again, so that the loop, and the reads it serves, go on. Answers to
	// the loop (done) never wait for it, or a loop waiting here would
	// wait for ever.
	mu sync.Mutex
	// queued changes under mu; it is atomic for the readers that do not
	// take mu: the loop's admission of client writes (admission.go) and
	// the metrics.
	queued     atomic.Int64
	closed     bool
	stalled    bool
	progress   chan struct{} // capacity 1: "the historian finished a request"
	stallAfter time.Duration
	done       *answerQueue // to the loop

	diskBytes   atomic.Uint64 // the store's files, refreshed at most once a second (a metric)
	diskBytesAt time.Time     // when diskBytes was refreshed
	exited      chan struct{} // closed when run has returned and the store is closed
	failed      bool

	out *outStream // the history stream for followers (histstream.go)
	in  *inStream  // a leader's history stream being written

	// beforeWrite, when set (tests only, before Run), runs on the
	// historian's goroutine before each batch of writes: a slow store.
	beforeWrite func()
}

type histOpKind uint8

const (
	histWrite histOpKind = iota
	histRead
	histCheckpoint // a snapshot's: result gets its outcome
	histInstall    // a leader's snapshot: the store becomes its stream, then a checkpoint
	histStreamOpen // EncodeSnapshot's: opened gets the new stream's size
	histStreamRead
	histStreamDrop
	histStreamWrite
	histDiscard // rebuild.go: once after says the log is discarded, the store becomes empty
)

type histOp struct {
	kind   histOpKind
	index  uint64
	writes []core.HistoryWrite
	token  uint64
	reads  []core.HistoryRead
	result chan error
	// The history stream's (histstream.go): where and how much to read or
	// write, and streamDone, which makes the loop's answer to a read or
	// write (run on the loop).
	offset     uint64
	maxBytes   int
	data       []byte
	opened     chan streamOpened
	streamDone func(data []byte, ok bool) func()
	// histDiscard: the outcome of the disk's opDiscard, which it waits
	// for unless the disk goroutine has exited.
	after      <-chan error
	diskExited <-chan struct{}
}

// histCompletion is an answer to ReadHistory, or a failure of the store
// that stops the server.
type histCompletion struct {
	token     uint64
	answers   []core.HistoryAnswer
	err       error
	discarded bool   // a histDiscard is done (rebuild.go)
	stream    func() // the answer to a history stream's read or write, for the loop to run
}

const liveHistoryDir = "history"

// checkpointDir is the name of the history checkpoint of the snapshot at
// index.
func checkpointDir(index uint64) string { return fmt.Sprintf("snapshot-%020d.history", index) }

// recoverHistory opens the history store of the data directory dir for a
// replica recovering rec in a cluster of replicaCount (history.Recover):
// the store as a crash left it when the replay of the log above the
// snapshot can go on from it, otherwise the recovered snapshot's
// checkpoint, or an empty store without a snapshot (the log then holds
// every entry).
func recoverHistory(dir string, rec replica.Recovered, replicaCount uint32, cacheBytes int64, lg *zap.Logger) (*history.Store, error) {
	start := time.Now()
	r := history.Recovery{SnapshotIndex: rec.SnapshotIndex, Committed: rec.KnownCommitted(replicaCount),
		FirstRead: replica.FirstHistoryRead(rec.Entries)}
	if rec.SnapshotIndex > 0 {
		r.Checkpoint = filepath.Join(dir, checkpointDir(rec.SnapshotIndex))
		if _, err := os.Stat(r.Checkpoint); err != nil {
			return nil, fmt.Errorf("the snapshot at index %d has no history checkpoint (%s): a data directory written before history moved to disk cannot be read; restore it from a replica of this version: %w", rec.SnapshotIndex, r.Checkpoint, err)
		}
	}
	st, kept, err := history.Recover(vfs.Default, filepath.Join(dir, liveHistoryDir), r, history.Options{CacheBytes: cacheBytes})
	if err != nil {
		return nil, fmt.Errorf("open the history store: %w", err)
	}
	took := zap.Duration("took", time.Since(start).Round(time.Millisecond))
	switch {
	case kept:
		lg.Info("opened the history store as it was", zap.Uint64("holds_index", st.Applied()),
			zap.Uint64("snapshot_index", rec.SnapshotIndex), took)
	case rec.SnapshotIndex == 0:
		lg.Info("started an empty history store (no snapshot: the log holds every entry)", zap.Uint64("first_read", r.FirstRead), took)
	default:
		lg.Info("restored the history store from the snapshot's checkpoint", zap.Uint64("index", rec.SnapshotIndex),
			zap.Uint64("first_read", r.FirstRead), took)
	}
	return st, nil
}

func newHistorian(dir string, st *history.Store, lg *zap.Logger) *historian {
	h := &historian{dir: dir, store: st, log: lg, queue: newOpQueue[histOp](),
		done: newAnswerQueue(), exited: make(chan struct{})}
	h.progress, h.stallAfter = make(chan struct{}, 1), 250*time.Millisecond
	return h
}

// maxQueuedWrites bounds the history writes queued and not yet applied
// (about 170 bytes each in memory). Without a bound, a track load that
// the store absorbed more slowly than the loop applied it held 469 MB of
// queued writes 25 s into the load, and the snapshots' checkpoints, which
// wait behind them, came 11-14 s late, so the log grew to 1.5 GB.
const maxQueuedWrites = 200_000

// maxStalledWrites bounds the writes queued while the store is stalled:
// past it a write waits for the store however long it takes (the loop
// then holds). A stall that short of it passes (a pebble write stall
// behind its compactions) costs at most about 170 MB of queue.
const maxStalledWrites = 5 * maxQueuedWrites

// maxBatchWrites bounds the writes of one store batch, so that the
// historian reports progress (finished) at least once a batch of this
// size, tens of milliseconds: taking every queued write as one batch,
// a batch slower than stallAfter made the store look stalled, the queue
// grew while it ran, and the next batch was larger still (3 GB resident
// 60 s into a track load).
const maxBatchWrites = 20_000

// push queues op. A write waits (holding the loop: the bound of memory of
// last resort, behind admission.go's refusals) while more than
// maxQueuedWrites are queued, unless the store is stalled and fewer than
// maxStalledWrites are; nothing else waits. After close it drops op (a
// result or view channel then gets nothing: its waiter gives up when the
// server stops).
func (h *historian) push(op histOp) {
	if n := len(op.writes); n > 0 {
		h.mu.Lock()
		for q := h.queued.Load(); q > maxQueuedWrites && !h.closed && (!h.stalled || q > maxStalledWrites); q = h.queued.Load() {
			h.mu.Unlock()
			select {
			case <-h.progress:
				h.mu.Lock()
			case <-time.After(h.stallAfter):
				h.mu.Lock()
				h.stalled = true
			}
		}
		h.queued.Add(int64(n))
		h.mu.Unlock()
	}
	h.queue.push(op)
}

// finished releases n writes of the queue's bound: the historian has done
// a request (n writes of it, maybe 0), so the store is not stalled.
func (h *historian) finished(n int) {
	h.mu.Lock()
	h.queued.Add(-int64(n))
	h.stalled = false
	h.mu.Unlock()
	select {
	case h.progress <- struct{}{}:
	default:
	}
}

// close makes run finish the requests queued so far, close the store and
// return.
func (h *historian) close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	select {
	case h.progress <- struct{}{}:
	default:
	}
	h.queue.close()
}

func (h *historian) report(c histCompletion) { h.done.push(c) }

func (h *historian) run() {
	defer close(h.exited)
	var batch []histOp
	var entries []history.Entry
	for {
		var done bool
		if batch, done = h.queue.take(batch); done {
			break
		}
		for i := 0; i < len(batch); {
			if batch[i].kind != histWrite || h.failed {
				h.do(&batch[i])
				h.finished(len(batch[i].writes))
				batch[i] = histOp{}
				i++
				continue
			}
			// A run of writes is one batch of the store, up to
			// maxBatchWrites: one commit, however many entries
			// (single-event writes are an entry each).
			entries = entries[:0]
			n, j := 0, i
			for ; j < len(batch) && batch[j].kind == histWrite && (j == i || n+len(batch[j].writes) <= maxBatchWrites); j++ {
				entries = append(entries, history.Entry{Index: batch[j].index, Writes: batch[j].writes})
				n += len(batch[j].writes)
			}
			if h.beforeWrite != nil {
				h.beforeWrite()
			}
			if err := h.store.ApplyEntries(entries); err != nil {
				h.fail(fmt.Errorf("write the history of log entries %d to %d: %w", batch[i].index, batch[j-1].index, err))
			}
			clear(entries)
			clear(batch[i:j])
			h.finished(n)
			i = j
		}
		// Reading the store's metrics takes its locks: not for every batch
		// of single-event writes.
		if now := time.Now(); !h.failed && now.Sub(h.diskBytesAt) >= time.Second {
			h.diskBytes.Store(h.store.DiskBytes())
			h.diskBytesAt = now
		}
	}
	if err := h.store.Close(); err != nil {
		h.log.Error("closing the history store", zap.Error(err))
	}
}

func (h *historian) fail(err error) {
	if !h.failed {
		h.failed = true
		h.report(histCompletion{err: err})
	}
}

func (h *historian) do(op *histOp) {
	if op.kind == histDiscard {
		h.discard(op) // a failed store too: that is what it replaces
		return
	}
	if h.failed {
		// After a failed write the store's state is unknown: do nothing
		// more; the loop stops the server.
		if op.result != nil {
			op.result <- errHistoryFailed
		}
		if op.opened != nil {
			close(op.opened)
		}
		if op.streamDone != nil {
			h.report(histCompletion{stream: op.streamDone(nil, false)})
		}
		return
	}
	switch op.kind {
	case histWrite:
		if err := h.store.Apply(op.index, op.writes); err != nil {
			h.fail(fmt.Errorf("write the history of log entry %d: %w", op.index, err))
		}
	case histRead:
		v := h.store.View()
		answers := core.AnswerHistoryReads(v, op.reads)
		v.Close()
		h.report(histCompletion{token: op.token, answers: answers})
	case histCheckpoint:
		op.result <- h.checkpoint(op.index)
	case histInstall:
		op.result <- h.installStream(op.index)
	case histStreamOpen:
		size, err := h.openStream(op.index)
		op.opened <- streamOpened{size: size, err: err}
	case histStreamRead:
		b := h.readStream(op.index, op.offset, op.maxBytes)
		h.report(histCompletion{stream: op.streamDone(b, b != nil)})
	case histStreamDrop:
		h.dropStream(op.index)
	case histStreamWrite:
		ok := h.writeStream(op.index, op.offset, op.data)
		h.report(histCompletion{stream: op.streamDone(nil, ok)})
	}
}

// checkpoint saves the store as the checkpoint of the snapshot at index.
func (h *historian) checkpoint(index uint64) error {
	start := time.Now()
	dst := filepath.Join(h.dir, checkpointDir(index))
	if err := os.RemoveAll(dst); err != nil { // one left by a crash before its snapshot was written
		return err
	}
	held, err := h.store.Checkpoint(dst)
	if err != nil {
		return fmt.Errorf("checkpoint the history store for the snapshot at index %d: %w", index, err)
	}
	if err := syncDirPath(h.dir); err != nil {
		return err
	}
	h.log.Info("history checkpointed", zap.Uint64("snapshot_index", index), zap.Uint64("holds_index", held),
		zap.Uint64("store_bytes", h.store.DiskBytes()), zap.Duration("took", time.Since(start).Round(time.Millisecond)))
	return nil
}

// removeCheckpointsBefore removes the history checkpoints of snapshots
// before index (package store has removed those snapshots).
func removeCheckpointsBefore(dir string, index uint64) error {
	names, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range names {
		name := e.Name()
		if !strings.HasPrefix(name, "snapshot-") || !strings.HasSuffix(name, ".history") {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(name, "snapshot-"), ".history"), 10, 64)
		if err != nil || n >= index {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

func syncDirPath(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// answerQueue carries the historian's answers to the loop without ever
// making the historian wait: the loop takes them when ready is signalled.
type answerQueue struct {
	mu      sync.Mutex
	answers []histCompletion
	ready   chan struct{} // capacity 1: "answers changed"
}

func newAnswerQueue() *answerQueue { return &answerQueue{ready: make(chan struct{}, 1)} }

func (q *answerQueue) push(c histCompletion) {
	q.mu.Lock()
	q.answers = append(q.answers, c)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// take returns the answers queued so far, in order, and forgets them.
func (q *answerQueue) take() []histCompletion {
	q.mu.Lock()
	defer q.mu.Unlock()
	a := q.answers
	q.answers = nil
	return a
}
