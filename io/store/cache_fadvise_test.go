//go:build linux && (amd64 || arm64 || riscv64)

package store

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"
)

// resident reports, for each page of the file's first n bytes, whether it
// is in the page cache (mincore over a shared read-only mapping, which
// itself reads nothing in).
func resident(t *testing.T, path string, n int64) []bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := syscall.Mmap(int(f.Fd()), 0, int(n), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(m)
	vec := make([]byte, (n+pageSize-1)/pageSize)
	if _, _, e := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(n), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatalf("mincore: %v", e)
	}
	out := make([]bool, len(vec))
	for i, v := range vec {
		out[i] = v&1 != 0
	}
	return out
}

// TestSyncDropsDurablePages checks that Sync leaves none of the active
// segment's whole durable pages in the page cache (see "The page cache"),
// and that the entries read back whole from the disk.
func TestSyncDropsDurablePages(t *testing.T) {
	dir := t.TempDir()
	// A filesystem whose pages are its data (tmpfs) ignores the advice:
	// then there is nothing to check.
	probe := filepath.Join(dir, "probe")
	if err := os.WriteFile(probe, make([]byte, 16*pageSize), 0o644); err != nil {
		t.Fatal(err)
	}
	pf, err := os.OpenFile(probe, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := pf.Sync(); err != nil {
		t.Fatal(err)
	}
	dropCached(pf, 0, 0)
	pf.Close()
	for _, in := range resident(t, probe, 16*pageSize) {
		if in {
			t.Skip("this filesystem keeps a file's pages in memory whatever the advice")
		}
	}

	l, _ := mustOpen(t, dir, 1<<30)
	defer mustClose(t, l)
	var all []Entry
	// Large writes and small ones (those extend the runway). The folio
	// that holds the last, partly written page may hold up to
	// redropBytes before it, and stays until a later Sync.
	for round, n := range []int{40, 1, 3000, 7, 2000, 1} {
		es := mkEntries(uint64(len(all)+1), n, 1, 3000)
		all = append(all, es...)
		mustAppendSync(t, l, es)
		segs := segFiles(t, dir)
		if len(segs) != 1 {
			t.Fatalf("round %d: %d segments, want 1", round, len(segs))
		}
		gone := (l.syncedSize &^ (pageSize - 1)) - redropBytes
		for p, in := range resident(t, segs[0], l.syncedSize) {
			if in && int64(p+1)*pageSize <= gone && int64(p)*pageSize >= segmentHeaderSize { // the header page stays: its slots are rewritten
				t.Fatalf("round %d: page %d is still cached (%d bytes durable)", round, p, l.syncedSize)
			}
		}
	}
	checkLog(t, l, all)
}
