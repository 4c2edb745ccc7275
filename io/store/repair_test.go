package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// openRepair opens dir with LogOptions.Repair set; the callback records the
// damage it was told about and checks that nothing was changed yet (the
// directory still holds exactly the files in before, with their sizes).
func openRepair(t *testing.T, dir string, segBytes int64) (*Log, RecoveryInfo, []Damage) {
	t.Helper()
	before := dirSizes(t, dir)
	var calls []Damage
	l, info, err := OpenLog(dir, LogOptions{SegmentBytes: segBytes, Repair: func(d Damage) error {
		if now := dirSizes(t, dir); !sameSizes(now, before) {
			t.Errorf("the log was changed before Repair was called: %v, was %v", now, before)
		}
		calls = append(calls, d)
		return nil
	}})
	if err != nil {
		t.Fatalf("OpenLog with Repair: %v", err)
	}
	if len(calls) > 1 {
		t.Fatalf("Repair called %d times", len(calls))
	}
	if (len(calls) == 1) != (info.Damage != nil) || (info.Damage != nil && *info.Damage != calls[0]) {
		t.Fatalf("RecoveryInfo.Damage %+v, Repair was told %+v", info.Damage, calls)
	}
	return l, info, calls
}

func dirSizes(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]int64{}
	for _, de := range des {
		m[de.Name()] = fileSize(t, filepath.Join(dir, de.Name()))
	}
	return m
}

func sameSizes(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// checkDamage asserts the damage reported names file, offset and index, and
// that its error is the Corruption error OpenLog gives without Repair.
func checkDamage(t *testing.T, d *Damage, file string, off int64, index uint64, whole bool) {
	t.Helper()
	if d == nil {
		t.Fatalf("no damage reported, want %s at byte %d (index %d)", file, off, index)
	}
	if d.File != file || (off >= 0 && d.Offset != off) || d.Index != index || d.WholeSegment != whole || d.Reason == "" {
		t.Fatalf("damage %+v, want %s at byte %d, index %d, whole segment %v", *d, file, off, index, whole)
	}
	wantCorruption(t, d.Err(), file, d.Offset)
}

// reopenPlain closes l, reopens dir without Repair (the cut left no damage),
// checks it holds want and returns it.
func reopenPlain(t *testing.T, l *Log, dir string, segBytes int64, want []Entry) *Log {
	t.Helper()
	mustClose(t, l)
	l, info := mustOpen(t, dir, segBytes)
	if info.TruncatedBytes != 0 || info.Damage != nil {
		t.Fatalf("reopen after the cut: %+v", info)
	}
	checkLog(t, l, want)
	return l
}

// TestRepairCutsBeforeADamagedMiddleRecord flips every byte of a record with
// valid records after it, with Repair set: Repair is told the file, the
// offset and the index before anything changes, the log then ends just
// before the damaged record (the file truncated there), appends continue
// from there, and the result reopens cleanly without Repair.
func TestRepairCutsBeforeADamagedMiddleRecord(t *testing.T) {
	fastSync(t)
	pristine, es := buildLog(t, 6, 1<<20)
	path0 := segFiles(t, pristine)[0]
	offs := recordOffsets(t, path0)
	start, end := offs[2], offs[3]
	for off := start; off < end; off++ {
		for _, x := range []byte{0x01, 0xff} {
			dir := copyDir(t, pristine)
			path := filepath.Join(dir, filepath.Base(path0))
			flipByte(t, path, off, x)
			l, info, _ := openRepair(t, dir, 1<<20)
			checkDamage(t, info.Damage, path, start, 3, false)
			if info.LastIndex != 2 || info.FirstIndex != 1 || info.DroppedSegments != 0 || info.TruncatedBytes != 0 {
				t.Fatalf("flip at %d: info %+v", off, info)
			}
			checkLog(t, l, es[:2])
			if got := fileSize(t, path); got != start {
				t.Fatalf("flip at %d: file is %d bytes after the cut, want %d", off, got, start)
			}
			repaired := mkEntries(3, 4, 2, 60)
			mustAppendSync(t, l, repaired)
			l = reopenPlain(t, l, dir, 1<<20, append(es[:2:2], repaired...))
			mustClose(t, l)
		}
	}
}

// TestRepairMultiSegment damages records in a log of many segments: in a
// middle segment (the later segments go, newest first), at the first record
// of a segment, and at the very first record of the log (the log is left
// empty, as after Reset, and the next append starts where it was).
func TestRepairMultiSegment(t *testing.T) {
	const seg = 200
	pristine, es := buildLog(t, 30, seg)
	files := segFiles(t, pristine)
	if len(files) < 4 {
		t.Fatalf("setup: %d segments", len(files))
	}
	for _, tc := range []struct {
		name   string
		file   int // segment
		record int // record within it
	}{
		{"middle of a middle segment", 1, 1},
		{"first record of a middle segment", 2, 0},
		{"last record of a non-last segment", 1, -1},
		{"first record of the log", 0, 0},
		{"middle of the last segment", len(files) - 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, pristine)
			path := filepath.Join(dir, filepath.Base(files[tc.file]))
			offs := recordOffsets(t, path)
			k := tc.record
			if k < 0 {
				k = len(offs) + k
			}
			segFirst, _, _ := parseSegmentName(filepath.Base(path))
			index := segFirst + uint64(k)
			if tc.file == len(files)-1 && k == len(offs)-1 {
				t.Fatal("setup: that would be a torn tail")
			}
			flipByte(t, path, offs[k]+RecordHeaderSize-1, 0x20) // the term's top byte: a checksum mismatch
			l, info, _ := openRepair(t, dir, seg)
			checkDamage(t, info.Damage, path, offs[k], index, false)
			if info.LastIndex != index-1 || info.DroppedSegments != len(files)-1-tc.file {
				t.Fatalf("info %+v, want the log to end at %d and %d segments dropped", info, index-1, len(files)-1-tc.file)
			}
			if got := segFiles(t, dir); len(got) != tc.file+1 || got[tc.file] != path {
				t.Fatalf("segments after the cut: %v", got)
			}
			checkLog(t, l, es[:index-1])
			if l.LastIndex() != index-1 {
				t.Fatalf("LastIndex %d, want %d", l.LastIndex(), index-1)
			}
			repaired := mkEntries(index, 5, 3, 60)
			mustAppendSync(t, l, repaired)
			l = reopenPlain(t, l, dir, seg, append(es[:index-1:index-1], repaired...))
			mustClose(t, l)
		})
	}
}

// TestRepairCompactedLogLeftEmpty: the damaged record is the first of a log
// whose earlier segments were compacted away; the cut leaves an empty log
// that still ends where the damaged record's predecessor was, across a
// reopen, so that appends and a snapshot leave no gap.
func TestRepairCompactedLogLeftEmpty(t *testing.T) {
	const seg = 200
	dir, _ := buildLog(t, 30, seg)
	l, _ := mustOpen(t, dir, seg)
	files := segFiles(t, dir)
	first, _, _ := parseSegmentName(filepath.Base(files[2]))
	if err := l.CompactBefore(first); err != nil {
		t.Fatal(err)
	}
	mustClose(t, l)
	files = segFiles(t, dir)
	flipByte(t, files[0], segmentHeaderSize+RecordHeaderSize, 0x01) // the first record's data (mkEntries gives it some)
	l, info, _ := openRepair(t, dir, seg)
	checkDamage(t, info.Damage, files[0], segmentHeaderSize, first, false)
	if l.FirstIndex() != 0 || l.LastIndex() != first-1 {
		t.Fatalf("log %d..%d after the cut, want empty ending at %d", l.FirstIndex(), l.LastIndex(), first-1)
	}
	mustClose(t, l)
	l, _ = mustOpen(t, dir, seg)
	if l.FirstIndex() != 0 || l.LastIndex() != first-1 {
		t.Fatalf("log %d..%d after reopening, want empty ending at %d", l.FirstIndex(), l.LastIndex(), first-1)
	}
	e := Entry{Index: first, Term: 4, Data: []byte("given back by the leader")}
	mustAppendSync(t, l, []Entry{e})
	l = reopenPlain(t, l, dir, seg, []Entry{e})
	mustClose(t, l)
}

// TestRepairDamagedSegmentHeader: a damaged header or a missing segment
// rejects a whole segment: it goes with the segments after it. In the first
// segment, the log is left empty at the first index it had.
func TestRepairDamagedSegmentHeader(t *testing.T) {
	const seg = 200
	pristine, es := buildLog(t, 30, seg)
	files := segFiles(t, pristine)
	if len(files) < 4 {
		t.Fatalf("setup: %d segments", len(files))
	}
	for _, victim := range []int{0, 2, len(files) - 1} {
		for _, off := range []int64{0, 8, 16, 20} {
			dir := copyDir(t, pristine)
			path := filepath.Join(dir, filepath.Base(files[victim]))
			flipByte(t, path, off, 0x04)
			segFirst, _, _ := parseSegmentName(filepath.Base(path))
			l, info, _ := openRepair(t, dir, seg)
			checkDamage(t, info.Damage, path, -1, segFirst, true)
			if info.LastIndex != segFirst-1 || info.DroppedSegments != len(files)-victim {
				t.Fatalf("segment %d, byte %d: info %+v", victim, off, info)
			}
			checkLog(t, l, es[:segFirst-1])
			if l.LastIndex() != segFirst-1 {
				t.Fatalf("LastIndex %d, want %d", l.LastIndex(), segFirst-1)
			}
			repaired := mkEntries(segFirst, 3, 2, 60)
			mustAppendSync(t, l, repaired)
			l = reopenPlain(t, l, dir, seg, append(es[:segFirst-1:segFirst-1], repaired...))
			mustClose(t, l)
		}
	}

	// A missing middle segment: the segments after the gap go.
	dir := copyDir(t, pristine)
	if err := os.Remove(filepath.Join(dir, filepath.Base(files[1]))); err != nil {
		t.Fatal(err)
	}
	next, _, _ := parseSegmentName(filepath.Base(files[1]))
	l, info, _ := openRepair(t, dir, seg)
	checkDamage(t, info.Damage, filepath.Join(dir, filepath.Base(files[2])), 8, next, true)
	if info.DroppedSegments != len(files)-2 {
		t.Fatalf("info %+v", info)
	}
	checkLog(t, l, es[:next-1])
	mustClose(t, l)
}

// TestRepairRefused: an error from Repair is OpenLog's, and the log is left
// as it was (the damage is found again next time). Without Repair the error
// is the Corruption error, as before.
func TestRepairRefused(t *testing.T) {
	const seg = 200
	pristine, _ := buildLog(t, 30, seg)
	files := segFiles(t, pristine)
	dir := copyDir(t, pristine)
	path := filepath.Join(dir, filepath.Base(files[1]))
	off := recordOffsets(t, path)[1]
	flipByte(t, path, off+RecordHeaderSize, 0x01)
	before := dirSizes(t, dir)
	refused := errors.New("cannot save the hard state")
	_, _, err := OpenLog(dir, LogOptions{SegmentBytes: seg, Repair: func(Damage) error { return refused }})
	if !errors.Is(err, refused) {
		t.Fatalf("OpenLog: %v, want the Repair error", err)
	}
	if now := dirSizes(t, dir); !sameSizes(now, before) {
		t.Fatalf("the log was changed: %v, was %v", now, before)
	}
	_, _, err = OpenLog(dir, LogOptions{SegmentBytes: seg})
	wantCorruption(t, err, path, off)
}

// TestRepairInterrupted: a crash during the cut, after the later segments
// were removed but before the damaged one was truncated, leaves a prefix of
// the log with the damage in place: the next OpenLog finds it again (or, at
// what is now the tail, drops it as a torn write) and ends at the same
// index.
func TestRepairInterrupted(t *testing.T) {
	const seg = 200
	pristine, es := buildLog(t, 30, seg)
	files := segFiles(t, pristine)
	for _, k := range []int{0, -1} { // a middle record, the segment's last
		dir := copyDir(t, pristine)
		path := filepath.Join(dir, filepath.Base(files[1]))
		offs := recordOffsets(t, path)
		if k < 0 {
			k = len(offs) + k
		}
		segFirst, _, _ := parseSegmentName(filepath.Base(path))
		flipByte(t, path, offs[k]+4, 0x80)
		for _, f := range files[2:] {
			if err := os.Remove(filepath.Join(dir, filepath.Base(f))); err != nil {
				t.Fatal(err)
			}
		}
		l, info, _ := openRepair(t, dir, seg)
		if info.LastIndex != segFirst+uint64(k)-1 {
			t.Fatalf("record %d: info %+v", k, info)
		}
		checkLog(t, l, es[:info.LastIndex])
		mustClose(t, l)
	}
}

// TestRepairDamageMatchesTheError: the damage Repair is told about is the
// one OpenLog reports without Repair.
func TestRepairDamageMatchesTheError(t *testing.T) {
	pristine, _ := buildLog(t, 6, 1<<20)
	path0 := segFiles(t, pristine)[0]
	offs := recordOffsets(t, path0)
	dir := copyDir(t, pristine)
	path := filepath.Join(dir, filepath.Base(path0))
	flipByte(t, path, offs[1]+RecordHeaderSize, 0x01)
	_, _, plain := OpenLog(dir, LogOptions{})
	wantCorruption(t, plain, path, offs[1])
	var got Damage
	if _, _, err := OpenLog(dir, LogOptions{Repair: func(d Damage) error { got = d; return errors.New("no") }}); err == nil {
		t.Fatal("no error")
	}
	if got.Err().Error() != plain.Error() || got.Offset != offs[1] || got.Index != 2 {
		t.Fatalf("damage %+v (%v), want %v", got, got.Err(), plain)
	}
}
