package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestRoundTripAcrossSegments(t *testing.T) {
	dir := t.TempDir()
	l, info := mustOpen(t, dir, 300)
	if info != (RecoveryInfo{}) || l.FirstIndex() != 0 || l.LastIndex() != 0 {
		t.Fatalf("new log: info %+v, first %d, last %d", info, l.FirstIndex(), l.LastIndex())
	}
	var want []Entry
	for term := uint64(1); term <= 4; term++ {
		es := mkEntries(uint64(len(want))+1, 15, term, 90)
		mustAppendSync(t, l, es)
		want = append(want, es...)
	}
	checkLog(t, l, want)
	mustClose(t, l)
	if n := len(segFiles(t, dir)); n < 5 {
		t.Fatalf("%d segments, want several with SegmentBytes 300", n)
	}

	l, info = mustOpen(t, dir, 300)
	defer l.Close()
	if info.FirstIndex != 1 || info.LastIndex != 60 || info.TruncatedBytes != 0 || info.TruncatedFile != "" {
		t.Fatalf("reopen info %+v", info)
	}
	checkLog(t, l, want)
	// Every sub-range, which crosses segment boundaries.
	for from := uint64(1); from <= 61; from += 3 {
		for to := from; to <= 61; to += 7 {
			got, err := l.Entries(from, to)
			if err != nil {
				t.Fatalf("Entries(%d, %d): %v", from, to, err)
			}
			if err := sameEntries(got, want[from-1:to-1]); err != nil {
				t.Fatalf("Entries(%d, %d): %v", from, to, err)
			}
		}
	}
	if _, err := l.Entries(1, 62); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("Entries past the end: %v", err)
	}
	if _, err := l.Term(61); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("Term past the end: %v", err)
	}
	if term, err := l.Term(0); term != 0 || err != nil {
		t.Fatalf("Term(0) = %d, %v", term, err)
	}
	// Appending continues in the last segment after a reopen.
	es := mkEntries(61, 10, 5, 90)
	mustAppendSync(t, l, es)
	want = append(want, es...)
	checkLog(t, l, want)
}

// EntriesUpTo stops after the entry whose record reaches maxBytes,
// across segments, and otherwise is Entries.
func TestEntriesUpTo(t *testing.T) {
	l, _ := mustOpen(t, t.TempDir(), 300)
	defer l.Close()
	want := mkEntries(1, 60, 1, 90)
	mustAppendSync(t, l, want)
	for from := uint64(1); from <= 60; from += 5 {
		for _, maxBytes := range []int64{1, 24, 100, 250, 1000, 1 << 20} {
			// The expected end, by the records' sizes.
			end, n := from, int64(0)
			for end <= 60 && n < maxBytes {
				n += RecordHeaderSize + int64(len(want[end-1].Data))
				end++
			}
			got, err := l.EntriesUpTo(from, 61, maxBytes)
			if err != nil {
				t.Fatalf("EntriesUpTo(%d, 61, %d): %v", from, maxBytes, err)
			}
			if err := sameEntries(got, want[from-1:end-1]); err != nil {
				t.Fatalf("EntriesUpTo(%d, 61, %d): %v", from, maxBytes, err)
			}
		}
	}
	if _, err := l.EntriesUpTo(1, 62, 10); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("EntriesUpTo past the end: %v", err)
	}
}

func TestUnsyncedEntriesReadable(t *testing.T) {
	l, _ := mustOpen(t, t.TempDir(), 1<<20)
	defer l.Close()
	es := mkEntries(1, 20, 1, 50)
	if err := l.Append(es); err != nil {
		t.Fatal(err)
	}
	checkLog(t, l, es)
}

func TestLargeEntries(t *testing.T) {
	dir := t.TempDir()
	l, _ := mustOpen(t, dir, 2<<20)
	var want []Entry
	for i := uint64(1); i <= 5; i++ {
		e := Entry{Index: i, Term: 1, Data: dataFor(i, 1_280_000+int(i))}
		mustAppendSync(t, l, []Entry{e})
		want = append(want, e)
	}
	small := Entry{Index: 6, Term: 1, Data: dataFor(6, 10)}
	big := Entry{Index: 7, Term: 1, Data: dataFor(7, MaxDataBytes)}
	mustAppendSync(t, l, []Entry{small, big})
	want = append(want, small, big)
	checkLog(t, l, want)
	mustClose(t, l)
	l, _ = mustOpen(t, dir, 2<<20)
	defer l.Close()
	checkLog(t, l, want)
}

func TestAppendValidation(t *testing.T) {
	l, _ := mustOpen(t, t.TempDir(), 1<<20)
	defer l.Close()
	mustAppendSync(t, l, mkEntries(1, 3, 2, 10))
	bad := [][]Entry{
		{{Index: 5, Term: 2}},                                     // gap
		{{Index: 3, Term: 2}},                                     // overlap
		{{Index: 4, Term: 1}},                                     // term goes back
		{{Index: 4, Term: 2}, {Index: 6, Term: 2}},                // gap inside the batch
		{{Index: 4, Term: 3}, {Index: 5, Term: 2}},                // term goes back inside the batch
		{{Index: 4, Term: 2, Data: make([]byte, MaxDataBytes+1)}}, // too large
	}
	for i, es := range bad {
		if err := l.Append(es); err == nil {
			t.Fatalf("case %d: Append accepted %v", i, es)
		}
	}
	checkLog(t, l, mkEntries(1, 3, 2, 10))
	// Index 0 on an empty log.
	l2, _ := mustOpen(t, t.TempDir(), 1<<20)
	defer l2.Close()
	if err := l2.Append([]Entry{{Index: 0, Term: 1}}); err == nil {
		t.Fatal("Append accepted index 0")
	}
}

func TestEmptyLogStartsAnywhere(t *testing.T) {
	dir := t.TempDir()
	l, _ := mustOpen(t, dir, 1<<20)
	es := mkEntries(50, 5, 3, 10)
	mustAppendSync(t, l, es)
	checkLog(t, l, es)
	if _, err := l.Entries(49, 50); !errors.Is(err, ErrCompacted) {
		t.Fatalf("Entries before the start: %v", err)
	}
	if _, err := l.Term(49); !errors.Is(err, ErrCompacted) {
		t.Fatalf("Term before the start: %v", err)
	}
	mustClose(t, l)
	l, _ = mustOpen(t, dir, 1<<20)
	defer l.Close()
	checkLog(t, l, es)
}

func TestLeftoverTempSegmentRemoved(t *testing.T) {
	dir := t.TempDir()
	l, _ := mustOpen(t, dir, 1<<20)
	mustAppendSync(t, l, mkEntries(1, 3, 1, 10))
	mustClose(t, l)
	tmp := filepath.Join(dir, segmentName(4)+".tmp")
	if err := os.WriteFile(tmp, []byte("GEOLOG01 half"), 0o644); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "unrelated.txt")
	if err := os.WriteFile(other, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, _ = mustOpen(t, dir, 1<<20)
	defer l.Close()
	checkLog(t, l, mkEntries(1, 3, 1, 10))
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("leftover temp segment still there: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("unrelated file touched: %v", err)
	}
}

func TestTruncateAfterThenAppendOverwrites(t *testing.T) {
	dir := t.TempDir()
	l, _ := mustOpen(t, dir, 200)
	old := mkEntries(1, 40, 1, 40)
	mustAppendSync(t, l, old)
	segsBefore := len(segFiles(t, dir))

	if err := l.TruncateAfter(17); err != nil {
		t.Fatal(err)
	}
	checkLog(t, l, old[:17])
	if n := len(segFiles(t, dir)); n >= segsBefore {
		t.Fatalf("%d segments after truncation, had %d", n, segsBefore)
	}
	newer := mkEntries(18, 10, 2, 25)
	for i := range newer {
		newer[i].Data = append(newer[i].Data, 'N')
	}
	mustAppendSync(t, l, newer)
	want := append(append([]Entry{}, old[:17]...), newer...)
	checkLog(t, l, want)
	mustClose(t, l)

	l, _ = mustOpen(t, dir, 200)
	checkLog(t, l, want)
	// No-op truncations.
	if err := l.TruncateAfter(27); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateAfter(100); err != nil {
		t.Fatal(err)
	}
	checkLog(t, l, want)
	// Truncate at a segment boundary: keep exactly the first segment.
	offs := l.segs[0]
	keep := offs.end() - 1
	if err := l.TruncateAfter(keep); err != nil {
		t.Fatal(err)
	}
	checkLog(t, l, want[:keep])
	if n := len(segFiles(t, dir)); n != 1 {
		t.Fatalf("%d segments, want 1", n)
	}
	if term, _ := l.Term(keep); term != 1 {
		t.Fatalf("Term(%d) = %d", keep, term)
	}
	// Truncate away everything: the log restarts at 1.
	if err := l.TruncateAfter(0); err != nil {
		t.Fatal(err)
	}
	if l.FirstIndex() != 0 || l.LastIndex() != 0 {
		t.Fatalf("after TruncateAfter(0): first %d last %d", l.FirstIndex(), l.LastIndex())
	}
	again := mkEntries(1, 5, 7, 20)
	mustAppendSync(t, l, again)
	mustClose(t, l)
	l, _ = mustOpen(t, dir, 200)
	defer l.Close()
	checkLog(t, l, again)
}

// TruncateAfter of entries that were never synced, within the active segment.
func TestTruncateUnsynced(t *testing.T) {
	dir := t.TempDir()
	l, _ := mustOpen(t, dir, 1<<20)
	es := mkEntries(1, 10, 1, 30)
	mustAppendSync(t, l, es[:4])
	if err := l.Append(es[4:]); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateAfter(6); err != nil {
		t.Fatal(err)
	}
	checkLog(t, l, es[:6])
	mustClose(t, l)
	l, _ = mustOpen(t, dir, 1<<20)
	defer l.Close()
	checkLog(t, l, es[:6])
}

func TestCompactBefore(t *testing.T) {
	dir := t.TempDir()
	l, _ := mustOpen(t, dir, 200)
	es := mkEntries(1, 60, 1, 40)
	mustAppendSync(t, l, es)
	n0 := len(segFiles(t, dir))
	if err := l.CompactBefore(1); err != nil {
		t.Fatal(err)
	}
	checkLog(t, l, es)

	if err := l.CompactBefore(30); err != nil {
		t.Fatal(err)
	}
	first := l.FirstIndex()
	if first > 30 || first < 2 {
		t.Fatalf("FirstIndex %d after CompactBefore(30)", first)
	}
	if n := len(segFiles(t, dir)); n >= n0 {
		t.Fatalf("%d segments after compaction, had %d", n, n0)
	}
	checkLog(t, l, es[first-1:])
	if _, err := l.Entries(first-1, first); !errors.Is(err, ErrCompacted) {
		t.Fatalf("Entries below the first: %v", err)
	}
	if _, err := l.Term(first - 1); !errors.Is(err, ErrCompacted) {
		t.Fatalf("Term below the first: %v", err)
	}
	mustClose(t, l)

	l, info := mustOpen(t, dir, 200)
	if info.FirstIndex != first || info.LastIndex != 60 {
		t.Fatalf("reopen info %+v, want first %d", info, first)
	}
	checkLog(t, l, es[first-1:])
	// Beyond the end: every segment but the last goes.
	if err := l.CompactBefore(1000); err != nil {
		t.Fatal(err)
	}
	if n := len(segFiles(t, dir)); n != 1 {
		t.Fatalf("%d segments, want 1", n)
	}
	first = l.FirstIndex()
	checkLog(t, l, es[first-1:])
	more := mkEntries(61, 5, 2, 40)
	mustAppendSync(t, l, more)
	mustClose(t, l)
	l, _ = mustOpen(t, dir, 200)
	defer l.Close()
	checkLog(t, l, append(es[first-1:], more...))
}

func TestReset(t *testing.T) {
	dir := t.TempDir()
	l, _ := mustOpen(t, dir, 200)
	mustAppendSync(t, l, mkEntries(1, 30, 1, 40))
	if err := l.Reset(100); err != nil {
		t.Fatal(err)
	}
	if l.FirstIndex() != 0 || l.LastIndex() != 99 {
		t.Fatalf("after Reset(100): first %d last %d", l.FirstIndex(), l.LastIndex())
	}
	if n := len(segFiles(t, dir)); n != 1 {
		t.Fatalf("%d segments after Reset, want 1", n)
	}
	if _, err := l.Entries(50, 51); !errors.Is(err, ErrCompacted) {
		t.Fatalf("Entries of a dropped entry: %v", err)
	}
	mustClose(t, l)

	// The reset point survives a restart.
	l, info := mustOpen(t, dir, 200)
	if info.FirstIndex != 0 || info.LastIndex != 99 {
		t.Fatalf("reopen after Reset: %+v", info)
	}
	if err := l.Reset(100); err != nil { // no-op
		t.Fatal(err)
	}
	es := mkEntries(100, 20, 4, 40)
	mustAppendSync(t, l, es)
	checkLog(t, l, es)
	mustClose(t, l)
	l, _ = mustOpen(t, dir, 200)
	checkLog(t, l, es)

	// Reset below the end and an empty log restarted elsewhere by Append.
	if err := l.Reset(5); err != nil {
		t.Fatal(err)
	}
	es = mkEntries(7, 3, 1, 10)
	mustAppendSync(t, l, es)
	checkLog(t, l, es)
	mustClose(t, l)
	l, _ = mustOpen(t, dir, 200)
	defer l.Close()
	checkLog(t, l, es)
	if n := len(segFiles(t, dir)); n != 1 {
		t.Fatalf("%d segments, want 1", n)
	}
}

func TestClosedLog(t *testing.T) {
	l, _ := mustOpen(t, t.TempDir(), 0)
	mustClose(t, l)
	if err := l.Append(mkEntries(1, 1, 1, 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	if err := l.Sync(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sync after Close: %v", err)
	}
	if err := l.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
}
