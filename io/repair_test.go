package io

import (
	"bytes"
	stdio "io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/io/store"
)

// damagedLog writes entries 1..10 of term 2 and the hard state (term 3,
// vote 1, commit 8) through the disk goroutine, then flips a byte inside
// the data of entry 4, which has valid records after it. It returns the
// segment and the damaged record's offset.
func damagedLog(t *testing.T, dir string) (seg string, off int64) {
	t.Helper()
	writeTen(t, dir)
	seg = filepath.Join(dir, "log-00000000000000000001.seg")
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	off = store.SegmentHeaderSize
	for i := 1; i < 4; i++ {
		_, n, err := store.DecodeRecord(b[off:])
		if err != nil {
			t.Fatal(err)
		}
		off += int64(n)
	}
	b[off+store.RecordHeaderSize+2] ^= 0x10 // entry 4's data
	if err := os.WriteFile(seg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return seg, off
}

// writeTen writes entries 1..10 of term 2 and the hard state (term 3, vote
// 1, commit 8) through the disk goroutine.
func writeTen(t *testing.T, dir string) {
	t.Helper()
	td := startDisk(t, dir, 0)
	td.append(1, 10, 2)
	td.d.push(diskOp{kind: opHardState, hs: core.HardState{Term: 3, Vote: 1, Commit: 8}})
	td.sync(10)
	td.close()
}

func loadHardState(t *testing.T, dir string) store.HardState {
	t.Helper()
	hs, ok, err := store.LoadHardState(dir)
	if err != nil || !ok {
		t.Fatalf("hard state: %v %v", ok, err)
	}
	return hs
}

// In a cluster of three, recovery repairs a log with a damaged middle
// record: it durably sets Repairing (term, vote and commit kept), cuts the
// log just before the record, logs it, and hands the replica the flag and
// the entries before the damage; appends continue from there.
func TestRecoveryCutsADamagedRecordAndSetsRepairing(t *testing.T) {
	dir := t.TempDir()
	seg, off := damagedLog(t, dir)

	obs, logs := observer.New(zap.InfoLevel)
	log, rec, err := recoverStorage(dir, 0, 3, zap.New(obs))
	if err != nil {
		t.Fatalf("recovery: %v", err)
	}
	want := core.HardState{Term: 3, Vote: 1, Commit: 8, Repairing: true}
	if rec.HardState != want {
		t.Fatalf("recovered hard state %+v, want %+v", rec.HardState, want)
	}
	if hs := loadHardState(t, dir); hs != store.HardState(want) {
		t.Fatalf("hard state on disk %+v, want %+v", hs, want)
	}
	checkRecovered(t, rec, 0, 0, "", 1, 3)
	if log.LastIndex() != 3 {
		t.Fatalf("log ends at %d, want 3", log.LastIndex())
	}
	if size, err := os.Stat(seg); err != nil || size.Size() != off {
		t.Fatalf("segment after the cut: %v, %v; want %d bytes", size, err, off)
	}
	warn := logs.FilterMessageSnippet("damaged record").All()
	if len(warn) != 1 || warn[0].Level != zap.WarnLevel {
		t.Fatalf("no warning about the repair in %v", logs.All())
	}
	fields := warn[0].ContextMap()
	if fields["file"] != seg || fields["offset"] != off || fields["log_last"] != uint64(3) || fields["damaged_index"] != uint64(4) {
		t.Fatalf("warning fields %v, want file %s, offset %d, log_last 3", fields, seg, off)
	}

	// The leader gives the entries back; the replica clears the flag.
	if err := log.Append([]store.Entry{{Index: 4, Term: 5, Data: []byte("entry 4")}}); err != nil {
		t.Fatal(err)
	}
	log.Close()
	if err := store.SaveHardState(dir, store.HardState{Term: 5, Vote: store.NoVote, Commit: 4}); err != nil {
		t.Fatal(err)
	}
	obs, logs = observer.New(zap.InfoLevel)
	log, rec, err = recoverStorage(dir, 0, 3, zap.New(obs))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	checkRecovered(t, rec, 0, 0, "", 1, 4)
	if rec.HardState.Repairing || logs.FilterMessageSnippet("damaged record").Len() != 0 {
		t.Fatalf("second recovery: %+v, %v", rec.HardState, logs.All())
	}
}

// truncatedLog writes entries 1..10 as damagedLog does, then cuts the
// segment inside entry 4's record (cut), or deletes it. It returns
// the segment and the offset the damage is reported at.
func truncatedLog(t *testing.T, dir string, cut bool) (seg string, off int64) {
	t.Helper()
	seg, off = damagedLog(t, dir) // entry 4's record starts at off
	if !cut {
		if err := os.Remove(seg); err != nil {
			t.Fatal(err)
		}
		return seg, 0
	}
	if err := os.Truncate(seg, off+store.RecordHeaderSize+1); err != nil {
		t.Fatal(err)
	}
	return seg, off
}

// The log's tail was cut inside a record, or its only segment deleted,
// after every entry had been synced: that is damage, not a torn write. A
// replica of three repairs it as it does a damaged record (Repairing set,
// the log cut, a warning naming the file, the offset and where the log now
// ends); a replica of one refuses to start with a Corruption error naming
// the file, the offset and the entries lost, and changes nothing.
func TestRecoveryOfADamagedTail(t *testing.T) {
	for _, tc := range []struct {
		name string
		cut  bool
		last uint64 // where the repaired log ends
		lost string
	}{{"cut", true, 3, "entries 4 to 10 were synced"}, {"deleted", false, 0, "entries from index 1 on are lost"}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			seg, off := truncatedLog(t, dir, tc.cut)
			_, _, err := recoverStorage(dir, 0, 1, zap.NewNop())
			if !store.IsCorruption(err) || !strings.Contains(err.Error(), seg) || !strings.Contains(err.Error(), " at byte "+strconv.FormatInt(off, 10)+":") ||
				!strings.Contains(err.Error(), tc.lost) {
				t.Fatalf("recovery of one: %v, want Corruption naming %s at byte %d and %q", err, seg, off, tc.lost)
			}
			if hs := loadHardState(t, dir); hs.Repairing {
				t.Fatalf("hard state %+v: a cluster of one cannot repair", hs)
			}
			t.Log(err)

			obs, logs := observer.New(zap.InfoLevel)
			log, rec, err := recoverStorage(dir, 0, 3, zap.New(obs))
			if err != nil {
				t.Fatalf("recovery of three: %v", err)
			}
			defer log.Close()
			if want := (core.HardState{Term: 3, Vote: 1, Commit: 8, Repairing: true}); rec.HardState != want {
				t.Fatalf("recovered hard state %+v, want %+v", rec.HardState, want)
			}
			if log.LastIndex() != tc.last || logs.FilterMessageSnippet("torn write").Len() != 0 {
				t.Fatalf("log ends at %d, want %d; logs %v", log.LastIndex(), tc.last, logs.All())
			}
			warn := logs.FilterMessageSnippet("damaged record").All()
			if len(warn) != 1 {
				t.Fatalf("no warning about the repair in %v", logs.All())
			}
			if f := warn[0].ContextMap(); f["file"] != seg || f["offset"] != off || f["log_last"] != tc.last || f["damaged_index"] != tc.last+1 {
				t.Fatalf("warning fields %v", f)
			}
		})
	}
}

// In a cluster of one, the same damage stops recovery with the Corruption
// error naming the file and the offset, and changes nothing.
func TestRecoveryOfOneReplicaRefusesADamagedRecord(t *testing.T) {
	dir := t.TempDir()
	seg, off := damagedLog(t, dir)
	before, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = recoverStorage(dir, 0, 1, zap.NewNop())
	if !store.IsCorruption(err) || !strings.Contains(err.Error(), seg) || !strings.Contains(err.Error(), " at byte "+strconv.FormatInt(off, 10)+":") {
		t.Fatalf("recovery: %v, want Corruption naming %s at byte %d", err, seg, off)
	}
	if hs := loadHardState(t, dir); hs.Repairing {
		t.Fatalf("hard state %+v: a cluster of one cannot repair", hs)
	}
	if after, _ := os.ReadFile(seg); !bytes.Equal(before, after) {
		t.Fatal("the segment was changed")
	}
}

// The damaged record lies within the newest snapshot: the cut leaves the
// log before the snapshot, so recovery empties it to follow the snapshot;
// the replica still repairs (the entries after the snapshot are gone too).
func TestRecoveryCutUnderTheSnapshot(t *testing.T) {
	dir := t.TempDir()
	damagedLog(t, dir)
	if _, err := store.SaveSnapshot(dir, 6, 2, func(w stdio.Writer) error { _, err := w.Write([]byte("s")); return err }); err != nil {
		t.Fatal(err)
	}
	log, rec, err := recoverStorage(dir, 0, 3, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	checkRecovered(t, rec, 6, 2, "s", 0, 0)
	if !rec.HardState.Repairing || !loadHardState(t, dir).Repairing {
		t.Fatal("Repairing not set")
	}
	if log.FirstIndex() != 0 || log.LastIndex() != 6 {
		t.Fatalf("log %d..%d, want empty after the snapshot at 6", log.FirstIndex(), log.LastIndex())
	}
	if err := log.Append([]store.Entry{{Index: 7, Term: 4, Data: []byte("entry 7")}}); err != nil {
		t.Fatal(err)
	}
	log.Close()
	rec, _ = recoverDir(t, dir)
	checkRecovered(t, rec, 6, 2, "s", 7, 7)
}

// The damaged record is the log's first: nothing is left and there is no
// snapshot: the replica starts empty, repairing.
func TestRecoveryCutLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	td := startDisk(t, dir, 0)
	td.append(1, 5, 1)
	td.sync(5)
	td.close()
	flipAt(t, filepath.Join(dir, "log-00000000000000000001.seg"), store.SegmentHeaderSize+store.RecordHeaderSize)
	log, rec, err := recoverStorage(dir, 0, 5, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	checkRecovered(t, rec, 0, 0, "", 0, 0)
	if want := (core.HardState{Vote: core.NoVote, Repairing: true}); rec.HardState != want {
		t.Fatalf("hard state %+v, want %+v", rec.HardState, want)
	}
	if log.LastIndex() != 0 {
		t.Fatalf("log ends at %d", log.LastIndex())
	}
	if err := log.Append([]store.Entry{{Index: 1, Term: 2, Data: []byte("entry 1")}}); err != nil {
		t.Fatal(err)
	}
}

func flipAt(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x01
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The disk goroutine saves the hard state as the replica gives it, the
// Repairing flag included, and saves it again when only the flag changes.
func TestDiskSavesRepairing(t *testing.T) {
	dir := t.TempDir()
	td := startDisk(t, dir, 0)
	for _, hs := range []core.HardState{
		{Term: 4, Vote: core.NoVote, Commit: 2, Repairing: true},
		{Term: 4, Vote: core.NoVote, Commit: 2},
		{Term: 5, Vote: 2, Commit: 3, Repairing: true},
	} {
		td.d.push(diskOp{kind: opHardState, hs: hs})
		td.sync(0)
		if got := loadHardState(t, dir); got != store.HardState(hs) {
			t.Fatalf("saved %+v, want %+v", got, hs)
		}
	}
}

// A whole server of a three-replica cluster (its peers down) over a log with
// a damaged record: it opens, logs the repair, and its hard state says
// Repairing; the same directory as a cluster of one is refused.
func TestServerOfThreeOpensOverADamagedLog(t *testing.T) {
	src := formatDir(t)
	s := serve(t, src, Options{})
	c := dial(t, s.Addr())
	c.register(testCluster)
	for i := range 5 {
		c.insert(event(i))
	}
	s.stop(t)
	seg := filepath.Join(src, "log-00000000000000000001.seg")
	flipAt(t, seg, store.SegmentHeaderSize+store.RecordHeaderSize+1) // the first record's data, with valid records after it

	if _, err := Open(src, Options{Addresses: []string{"127.0.0.1:0"}}); !store.IsCorruption(err) || !strings.Contains(err.Error(), seg) {
		t.Fatalf("Open as a cluster of one: %v", err)
	}

	// The same files as replica 0 of 3.
	dir := filepath.Join(t.TempDir(), "data")
	if err := Format(dir, ClusterInfo{Cluster: testCluster, ReplicaIndex: 0, ReplicaCount: 3}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"log-00000000000000000001.seg", "log.manifest", "hardstate"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before := loadHardState(t, dir)
	obs, logs := observer.New(zap.InfoLevel)
	s = serveWith(t, dir, Options{Logger: zap.New(obs), Addresses: []string{"127.0.0.1:0", "127.0.0.1:1", "127.0.0.1:2"}}, nil)
	if logs.FilterMessageSnippet("damaged record").Len() != 1 {
		t.Fatalf("no repair warning in %v", logs.All())
	}
	time.Sleep(200 * time.Millisecond) // let it run a few ticks
	s.stop(t)
	// The flag stays set: no leader gave anything back. (The replica's
	// raised term is saved with its next sync, which a leader's append
	// brings.)
	hs := loadHardState(t, dir)
	if !hs.Repairing || hs.Term < before.Term {
		t.Fatalf("hard state %+v after the repairing start (was %+v)", hs, before)
	}
	t.Logf("hard state before %+v, after %+v", before, hs)
}
