package io

import (
	"errors"
	"fmt"
	stdio "io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/io/store"
	"github.com/geoevent/geoevent/replica"
)

// testDisk runs a disk goroutine over a log in dir, as the server does.
type testDisk struct {
	t       *testing.T
	d       *disk
	stopped chan struct{}
}

func startDisk(t *testing.T, dir string, lastSnap uint64) *testDisk {
	t.Helper()
	td := newTestDisk(t, dir, lastSnap)
	go td.d.run()
	return td
}

// newTestDisk is startDisk without the start: the caller runs td.d.run.
func newTestDisk(t *testing.T, dir string, lastSnap uint64) *testDisk {
	t.Helper()
	log, _, err := store.OpenLog(dir, store.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	td := &testDisk{t: t, stopped: make(chan struct{})}
	td.d = newDisk(dir, log, lastSnap, td.stopped, zap.NewNop())
	t.Cleanup(td.close)
	return td
}

func (td *testDisk) close() {
	select {
	case <-td.d.exited:
		return
	default:
	}
	td.d.close()
	<-td.d.exited
	close(td.stopped)
	if err := td.d.closeErr; err != nil {
		td.t.Errorf("close the log: %v", err)
	}
}

// await returns the next completion.
func (td *testDisk) await() completion {
	td.t.Helper()
	select {
	case c := <-td.d.done:
		return c
	case <-time.After(10 * time.Second):
		td.t.Fatal("no completion")
		return completion{}
	}
}

// sync asks for a Sync and checks that it reports last.
func (td *testDisk) sync(last uint64) {
	td.t.Helper()
	td.d.push(diskOp{kind: opSync})
	if c := td.await(); c.err != nil || c.snapshot || c.index != last {
		td.t.Fatalf("sync: got %+v, want Synced(%d)", c, last)
	}
}

func (td *testDisk) append(from, to, term uint64) {
	td.d.push(diskOp{kind: opAppend, entries: entries(from, to, term)})
}

func (td *testDisk) snapshot(index, term uint64, data string) {
	td.t.Helper()
	td.d.push(diskOp{kind: opSnapshot, index: index, term: term, encode: writeBytes([]byte(data))})
	if c := td.await(); c.err != nil || !c.snapshot || c.index != index {
		td.t.Fatalf("snapshot: got %+v, want SnapshotSaved(%d)", c, index)
	}
}

// entries makes entries [from, to] of term, each holding its index.
func entries(from, to, term uint64) []core.LogEntry {
	var es []core.LogEntry
	for i := from; i <= to; i++ {
		es = append(es, core.LogEntry{Index: i, Term: term, Data: []byte(fmt.Sprint("entry ", i))})
	}
	return es
}

// recoverDir runs the server's recovery on dir and returns what it gives
// the replica and the log's last index after it; the log is closed.
func recoverDir(t *testing.T, dir string) (replica.Recovered, uint64) {
	t.Helper()
	log, rec, err := recoverStorage(dir, 0, 1, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	return rec, log.LastIndex()
}

func checkRecovered(t *testing.T, rec replica.Recovered, snapIndex, snapTerm uint64, snap string, first, last uint64) {
	t.Helper()
	if rec.SnapshotIndex != snapIndex || rec.SnapshotTerm != snapTerm || string(rec.Snapshot) != snap {
		t.Fatalf("snapshot %d/%d %q, want %d/%d %q", rec.SnapshotIndex, rec.SnapshotTerm, rec.Snapshot, snapIndex, snapTerm, snap)
	}
	var got []uint64
	for _, e := range rec.Entries {
		got = append(got, e.Index)
		if string(e.Data) != fmt.Sprint("entry ", e.Index) {
			t.Fatalf("entry %d holds %q", e.Index, e.Data)
		}
	}
	var want []uint64
	for i := first; i <= last && first != 0; i++ {
		want = append(want, i)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("entries %v, want %v", got, want)
	}
}

// read asks for the entries from..to (at most maxBytes of records) and
// returns the indexes of the answer.
func (td *testDisk) read(from, to uint64, maxBytes int) []uint64 {
	td.t.Helper()
	td.d.push(diskOp{kind: opRead, index: from, to: to, maxBytes: maxBytes})
	c := td.await()
	if c.err != nil || !c.read || c.index != from {
		td.t.Fatalf("read: got %+v, want LogRead(%d, ...)", c, from)
	}
	var got []uint64
	for _, e := range c.entries {
		if string(e.Data) != fmt.Sprint("entry ", e.Index) || e.Term != 1 {
			td.t.Fatalf("entry %d of term %d holds %q", e.Index, e.Term, e.Data)
		}
		got = append(got, e.Index)
	}
	return got
}

// Group commit: the Syncs queued while the disk goroutine was busy (here:
// before it started) are answered by one fsync, after every append and
// hard state queued with them, in one completion that counts them; a
// request of another kind between them separates the groups. What they
// covered is durable.
func TestDiskOneFsyncAnswersTheSyncsQueuedTogether(t *testing.T) {
	dir := t.TempDir()
	td := newTestDisk(t, dir, 0)
	for i := uint64(1); i <= 3; i++ {
		td.append(i, i, 1)
		td.d.push(diskOp{kind: opSync})
	}
	td.d.push(diskOp{kind: opHardState, hs: core.HardState{Term: 1, Vote: 0, Commit: 3}})
	td.d.push(diskOp{kind: opSync})
	td.d.push(diskOp{kind: opRead, index: 1, to: 4, maxBytes: 1 << 20})
	td.d.push(diskOp{kind: opSync})
	td.append(4, 4, 1)
	td.d.push(diskOp{kind: opSync})
	go td.d.run()
	for _, want := range []completion{{index: 3, syncs: 4}, {read: true, index: 1}, {index: 4, syncs: 2}} {
		c := td.await()
		if c.err != nil || c.read != want.read || c.snapshot || c.index != want.index || c.syncs != want.syncs {
			t.Fatalf("got %+v, want %+v", c, want)
		}
	}
	td.close()
	rec, last := recoverDir(t, dir)
	if last != 4 || rec.HardState.Commit != 3 || rec.HardState.Term != 1 {
		t.Fatalf("recovered up to %d with hard state %+v", last, rec.HardState)
	}
}

// Reading the log back sees appends not yet synced, stops at maxBytes,
// and answers nothing for entries the log no longer holds.
func TestDiskReadsTheLogBack(t *testing.T) {
	dir := t.TempDir()
	td := startDisk(t, dir, 0)
	td.append(1, 10, 1)
	td.sync(10)
	td.append(11, 12, 1)
	if got := fmt.Sprint(td.read(9, 12, 1<<20)); got != "[9 10 11 12]" {
		t.Fatalf("read 9..12: %s", got)
	}
	// Records of "entry N" (7 or 8 bytes) and 24 bytes of header.
	if got := fmt.Sprint(td.read(2, 12, 40)); got != "[2 3]" {
		t.Fatalf("read 2..12 up to 40 bytes: %s", got)
	}
	if got := td.read(13, 14, 1<<20); len(got) != 0 {
		t.Fatalf("read beyond the end: %v", got)
	}
	td.sync(12)
	td.snapshot(20, 2, "a leader's state at 20") // beyond the log: it is emptied
	if got := td.read(5, 12, 1<<20); len(got) != 0 {
		t.Fatalf("read from a discarded index: %v", got)
	}
}

// A follower installing a snapshot beyond its log's end: the log is
// emptied, the next append starts after the snapshot, and recovery gives
// the snapshot and the entries after it.
func TestDiskSnapshotBeyondTheLog(t *testing.T) {
	dir := t.TempDir()
	td := startDisk(t, dir, 0)
	td.append(1, 5, 1)
	td.sync(5)
	td.snapshot(10, 2, "state at 10")
	td.sync(10) // the log now ends at the snapshot
	td.append(11, 12, 2)
	td.sync(12)
	td.close()
	rec, last := recoverDir(t, dir)
	checkRecovered(t, rec, 10, 2, "state at 10", 11, 12)
	if last != 12 {
		t.Fatalf("last index %d", last)
	}
}

// A snapshot at an index the log holds with another term: the entries after
// it belong to another history and go too.
func TestDiskSnapshotOverConflictingEntries(t *testing.T) {
	dir := t.TempDir()
	td := startDisk(t, dir, 0)
	td.append(1, 5, 1)
	td.snapshot(3, 2, "state at 3")
	td.sync(3)
	td.append(4, 4, 2)
	td.sync(4)
	td.close()
	rec, _ := recoverDir(t, dir)
	checkRecovered(t, rec, 3, 2, "state at 3", 4, 4)
}

// A snapshot within the log, of the log's own history (a leader's): the
// entries after it stay.
func TestDiskSnapshotWithinTheLog(t *testing.T) {
	dir := t.TempDir()
	td := startDisk(t, dir, 0)
	td.append(1, 5, 1)
	td.snapshot(3, 1, "state at 3")
	td.sync(5)
	td.close()
	rec, _ := recoverDir(t, dir)
	checkRecovered(t, rec, 3, 1, "state at 3", 4, 5)
}

// WriteSnapshot's bytes are encoded as the snapshot writer writes them,
// and an encoding that fails fails storage (the server stops).
func TestDiskWritesAnEncodedSnapshot(t *testing.T) {
	dir := t.TempDir()
	td := startDisk(t, dir, 0)
	td.append(1, 5, 1)
	td.sync(5)
	td.d.push(diskOp{kind: opSnapshot, index: 3, term: 1, encode: func(w stdio.Writer) error {
		for _, piece := range []string{"state ", "at 3"} {
			if _, err := w.Write([]byte(piece)); err != nil {
				return err
			}
		}
		return nil
	}})
	if c := td.await(); c.err != nil || !c.snapshot || c.index != 3 {
		t.Fatalf("got %+v, want SnapshotSaved(3)", c)
	}
	td.d.push(diskOp{kind: opSnapshot, index: 5, term: 1, encode: func(w stdio.Writer) error {
		w.Write([]byte("half a state"))
		return errors.New("the state would not encode")
	}})
	if c := td.await(); c.err == nil || !strings.Contains(c.err.Error(), "would not encode") {
		t.Fatalf("got %+v, want the encoding's error", c)
	}
	td.close()
	rec, _ := recoverDir(t, dir)
	checkRecovered(t, rec, 3, 1, "state at 3", 4, 5)
}

// An append beyond the log's end restarts the log when the newest snapshot
// covers the gap, and fails the disk (stopping the server) otherwise.
func TestDiskAppendAfterAGap(t *testing.T) {
	dir := t.TempDir()
	td := startDisk(t, dir, 0)
	td.append(1, 5, 1)
	td.sync(5)
	td.close()
	if _, err := store.SaveSnapshot(dir, 10, 2, func(w stdio.Writer) error { _, err := w.Write([]byte("s")); return err }); err != nil {
		t.Fatal(err)
	}
	td = startDisk(t, dir, 10) // as if the log had not been emptied
	td.append(11, 12, 2)
	td.sync(12)
	td.close()
	rec, _ := recoverDir(t, dir)
	checkRecovered(t, rec, 10, 2, "s", 11, 12)

	dir = t.TempDir()
	td = startDisk(t, dir, 0)
	td.append(1, 5, 1)
	td.append(8, 9, 1)
	td.d.push(diskOp{kind: opSync})
	if c := td.await(); c.err == nil || !strings.Contains(c.err.Error(), "gap") {
		t.Fatalf("got %+v, want a failure", c)
	}
}

// Recovery after a crash that interrupted the emptying of the log: the
// snapshot lies beyond what is left, so the log is emptied again and
// appends follow the snapshot.
func TestRecoverySnapshotBeyondTheLog(t *testing.T) {
	dir := t.TempDir()
	log, _, err := store.OpenLog(dir, store.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var es []store.Entry
	for _, e := range entries(1, 5, 1) {
		es = append(es, store.Entry{Index: e.Index, Term: e.Term, Data: e.Data})
	}
	if err := log.Append(es); err != nil {
		t.Fatal(err)
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := store.SaveSnapshot(dir, 10, 2, func(w stdio.Writer) error { _, err := w.Write([]byte("s")); return err }); err != nil {
		t.Fatal(err)
	}
	log, rec, err := recoverStorage(dir, 0, 1, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	checkRecovered(t, rec, 10, 2, "s", 0, 0)
	if log.LastIndex() != 10 || log.FirstIndex() != 0 {
		t.Fatalf("log %d..%d after recovery", log.FirstIndex(), log.LastIndex())
	}
	if err := log.Append([]store.Entry{{Index: 11, Term: 2, Data: []byte("entry 11")}}); err != nil {
		t.Fatal(err)
	}
	log.Close()
	rec, _ = recoverDir(t, dir)
	checkRecovered(t, rec, 10, 2, "s", 11, 11)
}

// A log emptied after a snapshot newer than the newest valid one (that one
// is damaged) has lost entries: recovery refuses it.
func TestRecoveryRefusesAnEmptiedLogWithoutItsSnapshot(t *testing.T) {
	dir := t.TempDir()
	td := startDisk(t, dir, 0)
	td.append(1, 5, 1)
	td.snapshot(3, 1, "state at 3")
	td.snapshot(20, 2, "state at 20")
	td.sync(20)
	td.close()
	snaps, _ := filepath.Glob(filepath.Join(dir, "snapshot-*20-*.snap"))
	if len(snaps) != 1 {
		t.Fatalf("snapshots %v", snaps)
	}
	b, _ := os.ReadFile(snaps[0])
	b[len(b)-5] ^= 0xff
	os.WriteFile(snaps[0], b, 0o644)
	_, _, err := recoverStorage(dir, 0, 1, zap.NewNop())
	if !store.IsCorruption(err) || !strings.Contains(err.Error(), "entries 4..20 are missing") {
		t.Fatalf("recovery: %v", err)
	}
}

// copyDataDir copies the data directory dir (its files, and its history
// store's directories) into a new one.
func copyDataDir(t *testing.T, dir string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "data")
	if err := os.CopyFS(dst, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// A whole server over a data directory whose log was emptied after its
// newest snapshot (as installing a snapshot beyond the log does, Reset):
// it serves what the snapshot holds, and what it appends afterwards
// survives a restart. Its segments deleted by hand instead, the log's
// manifest names one that is missing: a cluster of one refuses to start.
func TestServerRecoversFromASnapshotBeyondTheLog(t *testing.T) {
	dir := formatDir(t)
	opts := Options{}
	opts.Replica.SnapshotEvery = 5
	s := serve(t, dir, opts)
	c := dial(t, s.Addr())
	c.register(testCluster)
	for i := range 12 {
		c.insert(event(i))
	}
	s.stop(t)
	snap, ok, err := store.LoadLatestSnapshot(dir)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	snap.Body.Close()
	deleted := copyDataDir(t, dir)
	segs, _ := filepath.Glob(filepath.Join(deleted, "log-*.seg"))
	for _, seg := range segs {
		os.Remove(seg)
	}
	if _, err := Open(deleted, Options{Addresses: []string{"127.0.0.1:0"}}); !store.IsCorruption(err) || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("Open with every segment deleted: %v", err)
	}
	log, _, err := store.OpenLog(dir, store.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := log.Reset(1); err != nil {
		t.Fatal(err)
	}
	log.Close()

	s = serve(t, dir, opts)
	c = dial(t, s.Addr())
	c.register(testCluster)
	c.insert(event(100))
	c.checkLatest(100)
	s.stop(t)
	s = serve(t, dir, opts)
	c = dial(t, s.Addr())
	c.register(testCluster)
	c.checkLatest(100)
	if got := c.latest(0); !got.Found {
		t.Fatalf("entity 0, in the snapshot at %d, is gone", snap.Index)
	}
	s.stop(t)
}

// A disk that runs out of space waits for it: the log takes back what it
// could not write, nothing is reported meanwhile, and once there is space
// again the same entries (a new leader's replacing some) are appended and
// synced.
func TestDiskWaitsForSpace(t *testing.T) {
	dir := t.TempDir()
	td := startDisk(t, dir, 0)
	td.append(1, 3, 1)
	td.sync(3)
	var full atomic.Bool
	var tries atomic.Int64
	full.Store(true)
	store.SetWriteFault(func(n int) (int, error) {
		if full.Load() {
			tries.Add(1)
			return n / 2, syscall.ENOSPC // a part lands, as a real short write's would
		}
		return n, nil
	})
	t.Cleanup(func() { store.SetWriteFault(nil) })
	td.append(4, 6, 1)
	td.append(5, 7, 2) // a new leader's entries replace 5 and 6
	td.d.push(diskOp{kind: opSync})
	select {
	case c := <-td.d.done:
		t.Fatalf("a completion while the disk is full: %+v", c)
	case <-time.After(300 * time.Millisecond):
	}
	if n := tries.Load(); n < 2 {
		t.Fatalf("%d writes tried while the disk was full; want it tried again", n)
	}
	full.Store(false)
	if c := td.await(); c.err != nil || c.snapshot || c.index != 7 {
		t.Fatalf("once there is space: got %+v, want Synced(7)", c)
	}
	td.close()
	rec, _ := recoverDir(t, dir)
	checkRecovered(t, rec, 0, 0, "", 1, 7)
	for _, e := range rec.Entries {
		if want := uint64(1 + e.Index/5); e.Term != want {
			t.Fatalf("entry %d has term %d, want %d", e.Index, e.Term, want)
		}
	}
}

// A replica of a cluster of several gives up waiting for space, the
// server then stopping and the others going on without it: after
// spaceWaitLeading when it leads, after spaceWaitFollowing when it follows.
func TestDiskInAClusterGivesUpWaitingForSpace(t *testing.T) {
	for _, leading := range []bool{true, false} {
		td := startDisk(t, t.TempDir(), 0)
		td.d.inCluster = true
		td.d.waitLeading, td.d.waitFollowing = 100*time.Millisecond, 300*time.Millisecond
		td.d.leading.Store(leading)
		store.SetWriteFault(func(int) (int, error) { return 0, syscall.ENOSPC })
		t.Cleanup(func() { store.SetWriteFault(nil) })
		td.append(1, 3, 1)
		began := time.Now()
		td.d.push(diskOp{kind: opSync})
		c := td.await()
		limit := td.d.waitFollowing
		if leading {
			limit = td.d.waitLeading
		}
		if !errors.Is(c.err, syscall.ENOSPC) || !strings.Contains(c.err.Error(), fmt.Sprintf("no space for %v", limit)) {
			t.Fatalf("leading %v: got %+v, want a failure for want of space", leading, c)
		}
		if waited := time.Since(began); waited < limit || waited > limit+3*spaceRetryMax {
			t.Fatalf("leading %v: gave up after %v, want about %v", leading, waited, limit)
		}
		td.close()
	}
}

// TestDiskAsksHowFsyncsWaitAfterEachSync: the disk's loop asks storage,
// after each Sync, whether its fsyncs made the plain call, and logs when
// that changes (TestDiskLogsWhenFsyncsChangeHowTheyWait says how).
func TestDiskAsksHowFsyncsWaitAfterEachSync(t *testing.T) {
	td := newTestDisk(t, t.TempDir(), 0)
	obs, logs := observer.New(zap.InfoLevel)
	td.d.logger = zap.New(obs)
	short := errors.New("asynchronous fdatasync unavailable: io_setup: resource temporarily unavailable")
	var answers atomic.Int32 // syncs made so far, as the disk's loop sees them
	td.d.syncsArePlain = func() error {
		if answers.Add(1) == 2 {
			return short // the second Sync made the plain call
		}
		return nil
	}
	go td.d.run()
	for i := uint64(1); i <= 3; i++ {
		td.append(i, i, 1)
		td.sync(i)
	}
	if n := answers.Load(); n != 3 {
		t.Fatalf("asked %d times after 3 syncs", n)
	}
	got := logs.AllUntimed()
	if len(got) != 2 || got[0].ContextMap()["error"] != short.Error() || !strings.Contains(got[1].Message, "again") {
		t.Fatalf("logged %v, want the plain call and the return to AIO", got)
	}
}

// TestDiskLogsWhenFsyncsChangeHowTheyWait: the disk logs once when
// storage's fsyncs go to the plain call, at warning level on one processor
// (where the server stops during each), not again for the same reason,
// and once when they go back to AIO.
func TestDiskLogsWhenFsyncsChangeHowTheyWait(t *testing.T) {
	for _, procs := range []int{1, 2} {
		func() {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			obs, logs := observer.New(zap.InfoLevel)
			d := &disk{logger: zap.New(obs)}
			short := errors.New("asynchronous fdatasync unavailable: io_setup: resource temporarily unavailable")
			for _, why := range []error{nil, short, short, short, nil, nil} {
				d.notePlainSyncs(why)
			}
			got := logs.AllUntimed()
			if len(got) != 2 {
				t.Fatalf("%d processors: %d log lines, want 2: %v", procs, len(got), got)
			}
			want := zap.InfoLevel
			if procs == 1 {
				want = zap.WarnLevel
			}
			if got[0].Level != want || got[0].ContextMap()["error"] != short.Error() {
				t.Errorf("%d processors: %v %q %v, want level %v with the reason", procs, got[0].Level, got[0].Message, got[0].ContextMap(), want)
			}
			if got[1].Level != zap.InfoLevel || !strings.Contains(got[1].Message, "again") {
				t.Errorf("%d processors: then %v %q, want the return to AIO", procs, got[1].Level, got[1].Message)
			}
		}()
	}
}
