package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/geoevent/geoevent/core"
)

// dataFor is deterministic data of n bytes for entry index.
func dataFor(index uint64, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(index*31 + uint64(i)*7)
	}
	return b
}

// mkEntries makes n entries from index first, all in term, with data sizes
// cycling through 0..maxSize-1.
func mkEntries(first uint64, n int, term uint64, maxSize int) []Entry {
	out := make([]Entry, n)
	for i := range out {
		idx := first + uint64(i)
		out[i] = Entry{Index: idx, Term: term, Data: dataFor(idx, int(idx*13)%maxSize)}
	}
	return out
}

func mustOpen(t testing.TB, dir string, segBytes int64) (*Log, RecoveryInfo) {
	t.Helper()
	l, info, err := OpenLog(dir, LogOptions{SegmentBytes: segBytes})
	if err != nil {
		t.Fatalf("OpenLog: %v", err)
	}
	return l, info
}

func mustAppendSync(t testing.TB, l *Log, es []Entry) {
	t.Helper()
	if err := l.Append(es); err != nil {
		t.Fatalf("Append: %v", err)
	}
	if err := l.Sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
}

func mustClose(t testing.TB, l *Log) {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// checkLog asserts the log holds exactly want (contiguous), reading them all
// and every term.
func checkLog(t testing.TB, l *Log, want []Entry) {
	t.Helper()
	if len(want) == 0 {
		if l.FirstIndex() != 0 {
			t.Fatalf("FirstIndex = %d, want 0 (empty)", l.FirstIndex())
		}
		return
	}
	first, last := want[0].Index, want[len(want)-1].Index
	if l.FirstIndex() != first || l.LastIndex() != last {
		t.Fatalf("log spans [%d, %d], want [%d, %d]", l.FirstIndex(), l.LastIndex(), first, last)
	}
	got, err := l.Entries(first, last+1)
	if err != nil {
		t.Fatalf("Entries(%d, %d): %v", first, last+1, err)
	}
	if err := sameEntries(got, want); err != nil {
		t.Fatal(err)
	}
	for _, e := range want {
		term, err := l.Term(e.Index)
		if err != nil || term != e.Term {
			t.Fatalf("Term(%d) = %d, %v; want %d", e.Index, term, err, e.Term)
		}
	}
}

func sameEntries(got, want []Entry) error {
	if len(got) != len(want) {
		return fmt.Errorf("got %d entries, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Index != w.Index || g.Term != w.Term || !bytes.Equal(g.Data, w.Data) {
			return fmt.Errorf("entry %d: got (index %d, term %d, %d bytes), want (index %d, term %d, %d bytes)",
				i, g.Index, g.Term, len(g.Data), w.Index, w.Term, len(w.Data))
		}
	}
	return nil
}

// segFiles lists the segment files in dir, in index order.
func segFiles(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "log-*.seg"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(m)
	return m
}

// wantCorruption asserts err is a Corruption error naming file and, when off
// >= 0, that byte offset.
func wantCorruption(t testing.TB, err error, file string, off int64) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want Corruption in %s at byte %d", file, off)
	}
	var ce *core.Error
	if !errors.As(err, &ce) || ce.Code != core.Corruption.Code || !IsCorruption(err) {
		t.Fatalf("error %v is not a Corruption error", err)
	}
	if !strings.Contains(err.Error(), file) {
		t.Fatalf("error %q does not name file %s", err, file)
	}
	if off >= 0 && !strings.Contains(err.Error(), fmt.Sprintf(" at byte %d:", off)) {
		t.Fatalf("error %q does not name byte offset %d", err, off)
	}
}

// flipByte xors the byte at off in file path with x.
func flipByte(t testing.TB, path string, off int64, x byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= x
	if _, err := f.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
}

// copyDir copies the regular files of src into a new temporary directory.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	des, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		b, err := os.ReadFile(filepath.Join(src, de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, de.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// recordOffsets returns the byte offsets of the records in the segment file.
func recordOffsets(t testing.TB, path string) []int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	for p := segmentHeaderSize; p < len(b) && !allZero(b[p:]); { // zeros: the runway
		_, n, err := DecodeRecord(b[p:])
		if err != nil {
			t.Fatalf("%s at %d: %v", path, p, err)
		}
		offs = append(offs, int64(p))
		p += n
	}
	return offs
}

// fastSync skips fsyncs for the rest of the test: for tests that simulate
// crashes by editing files and run thousands of recoveries.
func fastSync(t testing.TB) {
	noSync = true
	t.Cleanup(func() { noSync = false })
}

// recordSyncs collects the fsyncs issued until the returned function is
// called, which returns them.
func recordSyncs(t testing.TB) func() []string {
	var got []string
	onSync = func(what string) { got = append(got, what) }
	t.Cleanup(func() { onSync = nil })
	return func() []string {
		out := got
		got = nil
		return out
	}
}
