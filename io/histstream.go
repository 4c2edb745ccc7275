package io

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"

	"github.com/geoevent/geoevent/io/history"
)

// History streams (core.IO's EncodeSnapshot, ReadSnapshotStream,
// WriteSnapshotStream): a leader sends a follower that needs a snapshot
// the history store as the files of a checkpoint, taken in queue order
// into DIR/stream.history and read from disk a chunk at a time as the
// replica asks (history.Stream); the follower writes them, a chunk at a
// time, into DIR/staging.history (history.Receiver, which checks every
// file's checksum), and installing the snapshot makes that directory the
// store. Neither side holds more than a chunk of it in memory. The
// historian does all of it, in queue order, off the loop; both sides log
// their progress every streamLogEvery.

const (
	streamDir  = "stream.history"
	stagingDir = "staging.history"
)

// streamLogEvery is how often a stream's progress is logged.
const streamLogEvery = 5 * time.Second

// outStream is the leader's stream: the checkpoint of the snapshot at
// index, read as asked.
type outStream struct {
	index  uint64
	s      *history.Stream
	start  time.Time
	logged time.Time
	sent   int64 // the furthest byte read
	ended  bool  // its end was read (and logged) once
}

// inStream is a follower's stream being written.
type inStream struct {
	index  uint64
	r      *history.Receiver
	start  time.Time
	logged time.Time
}

// streamOpened is the historian's answer to histStreamOpen.
type streamOpened struct {
	size int64
	err  error
}

// removeStreamDirs removes the streams a process left: neither is a
// snapshot's, and a restarted replica starts its transfers over.
func removeStreamDirs(dir string) error {
	return errors.Join(os.RemoveAll(filepath.Join(dir, streamDir)), os.RemoveAll(filepath.Join(dir, stagingDir)))
}

// openStream checkpoints the store, as it is now, as the stream of the
// snapshot at index, replacing the one before.
func (h *historian) openStream(index uint64) (int64, error) {
	start := time.Now()
	h.dropStream(h.out.indexOr0())
	dst := filepath.Join(h.dir, streamDir)
	if err := os.RemoveAll(dst); err != nil {
		return 0, err
	}
	if _, err := h.store.Checkpoint(dst); err != nil {
		return 0, fmt.Errorf("checkpoint the history store for a follower's snapshot at index %d: %w", index, err)
	}
	st, err := history.OpenStream(vfs.Default, dst)
	if err != nil {
		return 0, fmt.Errorf("open the history stream of the snapshot at index %d: %w", index, err)
	}
	h.out = &outStream{index: index, s: st, start: time.Now(), logged: time.Now()}
	h.log.Info("history stream ready for a follower", zap.Uint64("index", index), zap.Int64("bytes", st.Size()),
		zap.Duration("took", time.Since(start).Round(time.Millisecond)))
	return st.Size(), nil
}

func (o *outStream) indexOr0() uint64 {
	if o == nil {
		return 0
	}
	return o.index
}

// readStream reads a chunk of the stream of the snapshot at index: nil
// when that is not the stream held, or it cannot be read.
func (h *historian) readStream(index, offset uint64, maxBytes int) []byte {
	o := h.out
	if o == nil || o.index != index || offset >= uint64(o.s.Size()) {
		return nil
	}
	b, err := o.s.ReadChunk(int64(offset), maxBytes)
	if err != nil {
		h.log.Warn("cannot read the history stream; the follower waits for a new snapshot", zap.Uint64("index", index), zap.Error(err))
		h.dropStream(index)
		return nil
	}
	o.sent = max(o.sent, int64(offset)+int64(len(b)))
	if now := time.Now(); now.Sub(o.logged) >= streamLogEvery || (o.sent == o.s.Size() && !o.ended) {
		o.logged, o.ended = now, o.sent == o.s.Size()
		h.log.Info("sending the history stream", progress(index, o.sent, o.s.Size(), o.start, now)...)
	}
	return b
}

// dropStream removes the stream of the snapshot at index, if it is the one
// held.
func (h *historian) dropStream(index uint64) {
	if h.out == nil || h.out.index != index {
		return
	}
	h.out = nil
	if err := os.RemoveAll(filepath.Join(h.dir, streamDir)); err != nil {
		h.log.Warn("removing a history stream", zap.Error(err))
	}
}

// writeStream writes a chunk of the stream of a leader's snapshot at index
// and reports whether it was taken.
func (h *historian) writeStream(index, offset uint64, data []byte) bool {
	if offset == 0 {
		h.closeStaging()
		r, err := history.NewReceiver(vfs.Default, filepath.Join(h.dir, stagingDir))
		if err != nil {
			h.log.Warn("cannot stage a leader's history stream", zap.Error(err))
			return false
		}
		h.in = &inStream{index: index, r: r, start: time.Now(), logged: time.Now()}
		h.log.Info("receiving the history stream of a leader's snapshot", zap.Uint64("index", index))
	}
	in := h.in
	if in == nil || in.index != index {
		return false
	}
	if err := in.r.Write(int64(offset), data); err != nil {
		if !errors.Is(err, history.ErrStreamOffset) {
			h.log.Warn("a leader's history stream is refused; it starts over", zap.Uint64("index", index), zap.Error(err))
			h.closeStaging()
		}
		return false
	}
	if now := time.Now(); now.Sub(in.logged) >= streamLogEvery || in.r.Complete() {
		in.logged = now
		h.log.Info("receiving the history stream", progress(index, in.r.Next(), in.r.Size(), in.start, now)...)
	}
	return true
}

func (h *historian) closeStaging() {
	if h.in == nil {
		return
	}
	if err := h.in.r.Close(); err != nil {
		h.log.Warn("closing a history stream's file", zap.Error(err))
	}
	h.in = nil
}

// installStream makes the store the stream written for the leader's
// snapshot at index, and checkpoints it for that snapshot.
func (h *historian) installStream(index uint64) error {
	start := time.Now()
	in := h.in
	if in == nil || in.index != index || !in.r.Complete() {
		return fmt.Errorf("the leader's snapshot at index %d is installed without its whole history stream", index)
	}
	h.closeStaging()
	if err := h.store.Close(); err != nil {
		h.log.Warn("closing the history store replaced by a leader's", zap.Error(err))
	}
	live, staging := filepath.Join(h.dir, liveHistoryDir), filepath.Join(h.dir, stagingDir)
	if err := history.Restore(vfs.Default, staging, live); err != nil {
		return fmt.Errorf("install the history of the leader's snapshot at index %d: %w", index, err)
	}
	st, err := history.Open(vfs.Default, live, history.Options{})
	if err != nil {
		return fmt.Errorf("open the history of the leader's snapshot at index %d: %w", index, err)
	}
	h.store = st
	if err := os.RemoveAll(staging); err != nil {
		h.log.Warn("removing a history stream's staging", zap.Error(err))
	}
	h.log.Info("installed the history of the leader's snapshot", zap.Uint64("index", index), zap.Int64("bytes", in.r.Size()),
		zap.Duration("took", time.Since(start).Round(time.Millisecond)))
	return h.checkpoint(index)
}

// progress is a stream's progress as log fields: its snapshot's index,
// bytes done of all, and the rate since its start.
func progress(index uint64, done, all int64, start, now time.Time) []zap.Field {
	rate := 0.0
	if d := now.Sub(start).Seconds(); d > 0 {
		rate = float64(done) / d / (1 << 20)
	}
	return []zap.Field{zap.Uint64("index", index), zap.Int64("bytes", done), zap.Int64("of", all), zap.String("rate", fmt.Sprintf("%.1f MiB/s", rate))}
}
