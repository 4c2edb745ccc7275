package store

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// buildLog writes entries 1..n (term 1) with the given segment size, syncs
// and closes, and returns the directory and the entries.
func buildLog(t *testing.T, n int, segBytes int64) (string, []Entry) {
	t.Helper()
	dir := t.TempDir()
	l, _ := mustOpen(t, dir, segBytes)
	es := mkEntries(1, n, 1, 60)
	mustAppendSync(t, l, es)
	mustClose(t, l)
	return dir, es
}

// buildTorn writes entries 1..n-1 (term 1) with the given segment size and
// syncs them, then writes entry n and crashes before syncing it: a torn
// write is any cut of entry n's record. With named, the manifest names
// the segment entry n went to (as a compaction's manifest write after it
// was created would), which a segment created since the last Sync is not.
func buildTorn(t *testing.T, n int, segBytes int64, named bool) (string, []Entry) {
	t.Helper()
	dir := t.TempDir()
	l, _ := mustOpen(t, dir, segBytes)
	es := mkEntries(1, n, 1, 60)
	mustAppendSync(t, l, es[:n-1])
	if err := l.Append(es[n-1:]); err != nil {
		t.Fatal(err)
	}
	if err := l.flush(); err != nil {
		t.Fatal(err)
	}
	if named {
		if err := l.saveManifest(l.span()); err != nil {
			t.Fatal(err)
		}
	}
	l.closeFiles() // a crash
	l.closed = true
	return dir, es
}

// TestTornTailEveryCut cuts the last record, written after the last Sync,
// at every byte of its length, in a one-segment log and where the torn
// record is the only one of the last segment: reopening yields exactly the
// entries before it, reports the cut and accepts appends that survive the
// next reopen.
func TestTornTailEveryCut(t *testing.T) {
	fastSync(t)
	for _, tc := range []struct {
		name     string
		segBytes int64
	}{{"one segment", 1 << 20}, {"alone in the last segment", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			pristine, es := buildTorn(t, 8, tc.segBytes, true)
			files := segFiles(t, pristine)
			last := files[len(files)-1]
			offs := recordOffsets(t, last)
			start := offs[len(offs)-1]
			size := start + int64(RecordHeaderSize+len(es[7].Data)) // then the runway
			if tc.segBytes < 1<<20 && (len(files) < 2 || len(offs) != 1) {
				t.Fatalf("setup: %d segments, %d records in the last", len(files), len(offs))
			}
			for cut := start; cut < size; cut++ {
				dir := copyDir(t, pristine)
				path := filepath.Join(dir, filepath.Base(last))
				if err := os.Truncate(path, cut); err != nil {
					t.Fatal(err)
				}
				l, info := mustOpen(t, dir, tc.segBytes)
				if info.LastIndex != 7 || info.TruncatedBytes != cut-start || (cut > start && info.TruncatedFile != path) {
					t.Fatalf("cut at %d: info %+v", cut, info)
				}
				checkLog(t, l, es[:7])
				if got := fileSize(t, path); got != start {
					t.Fatalf("cut at %d: file is %d bytes after recovery, want %d", cut, got, start)
				}
				e := Entry{Index: 8, Term: 2, Data: []byte("after the tear")}
				mustAppendSync(t, l, []Entry{e})
				mustClose(t, l)
				l, info = mustOpen(t, dir, tc.segBytes)
				if info.TruncatedBytes != 0 {
					t.Fatalf("second recovery truncated %d bytes", info.TruncatedBytes)
				}
				checkLog(t, l, append(es[:7:7], e))
				mustClose(t, l)
			}
		})
	}
}

// TestTornTailGarbage appends garbage of many kinds after the last record:
// recovery drops it and keeps every entry (zeros too, as a runway).
func TestTornTailGarbage(t *testing.T) {
	fastSync(t)
	pristine, es := buildLog(t, 6, 1<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	huge := make([]byte, 40)
	binary.LittleEndian.PutUint32(huge, 0xffffffff)
	// A record header for index 7 whose data never arrived.
	hdrOnly := appendRecord(nil, Entry{Index: 7, Term: 1, Data: make([]byte, 100)})[:RecordHeaderSize]
	// A complete record for index 7 with one data byte wrong.
	badSum := appendRecord(nil, Entry{Index: 7, Term: 1, Data: []byte("abcdef")})
	badSum[len(badSum)-1] ^= 1
	garbages := [][]byte{{0}, make([]byte, 23), make([]byte, 24), make([]byte, 4096), huge, hdrOnly, badSum}
	for n := 1; n < 300; n += 17 {
		g := make([]byte, n)
		for i := range g {
			g[i] = byte(rng.Uint32())
		}
		garbages = append(garbages, g)
	}
	for i, g := range garbages {
		dir := copyDir(t, pristine)
		path := segFiles(t, dir)[0]
		size := fileSize(t, path)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(g); err != nil {
			t.Fatal(err)
		}
		f.Close()
		l, info := mustOpen(t, dir, 1<<20)
		if allZero(g) {
			// Zeros after the last record are a runway: the clean end.
			if info.TruncatedBytes != 0 {
				t.Fatalf("zeros %d: info %+v", i, info)
			}
		} else if info.TruncatedBytes != int64(len(g)) || info.TruncatedFile != path {
			t.Fatalf("garbage %d: info %+v", i, info)
		}
		if fileSize(t, path) != size {
			t.Fatalf("garbage %d: not truncated", i)
		}
		checkLog(t, l, es)
		mustAppendSync(t, l, mkEntries(7, 2, 1, 60))
		checkLog(t, l, append(es[:6:6], mkEntries(7, 2, 1, 60)...))
		mustClose(t, l)
	}
}

// TestTornLastRecordChecksum: a last record written after the last Sync
// with a bad checksum and nothing after it is a torn write: it is dropped.
func TestTornLastRecordChecksum(t *testing.T) {
	fastSync(t)
	pristine, es := buildTorn(t, 6, 1<<20, false)
	path0 := segFiles(t, pristine)[0]
	offs := recordOffsets(t, path0)
	start, size := offs[len(offs)-1], fileSize(t, path0)
	for off := start; off < start+int64(RecordHeaderSize+len(es[5].Data)); off++ {
		dir := copyDir(t, pristine)
		path := filepath.Join(dir, filepath.Base(path0))
		flipByte(t, path, off, 0x40)
		l, info := mustOpen(t, dir, 1<<20)
		if info.TruncatedBytes != size-start { // the record and the runway after it
			t.Fatalf("flip at %d: info %+v", off, info)
		}
		checkLog(t, l, es[:5])
		mustClose(t, l)
	}
}

// TestCorruptMiddleRecord flips every byte of a record that has valid
// records after it: OpenLog must refuse, naming the file and the record's
// offset.
func TestCorruptMiddleRecord(t *testing.T) {
	fastSync(t)
	pristine, _ := buildLog(t, 6, 1<<20)
	path0 := segFiles(t, pristine)[0]
	offs := recordOffsets(t, path0)
	start, end := offs[2], offs[3]
	for off := start; off < end; off++ {
		for _, x := range []byte{0x01, 0xff} {
			dir := copyDir(t, pristine)
			path := filepath.Join(dir, filepath.Base(path0))
			flipByte(t, path, off, x)
			_, _, err := OpenLog(dir, LogOptions{})
			wantCorruption(t, err, path, start)
			if fileSize(t, path) != fileSize(t, path0) {
				t.Fatalf("flip at %d: a corrupt log was modified", off)
			}
		}
	}
}

// TestCorruptHugeLength: a record declaring 4 GiB of data is corruption
// (and no 4 GiB allocation), the last one too once synced; written after
// the last Sync, the last one is a torn write.
func TestCorruptHugeLength(t *testing.T) {
	synced, _ := buildLog(t, 6, 1<<20)
	torn, es := buildTorn(t, 6, 1<<20, false)
	path0 := segFiles(t, synced)[0]
	offs := recordOffsets(t, path0)
	for _, k := range []int{1, 5, -5} {
		pristine := synced
		if k < 0 {
			k, pristine = -k, torn
		}
		dir := copyDir(t, pristine)
		path := filepath.Join(dir, filepath.Base(path0))
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte{0xff, 0xff, 0xff, 0xff}, offs[k]); err != nil {
			t.Fatal(err)
		}
		f.Close()
		l, _, err := OpenLog(dir, LogOptions{})
		if pristine == torn {
			if err != nil {
				t.Fatal(err)
			}
			checkLog(t, l, es[:5])
			l.Close()
			continue
		}
		wantCorruption(t, err, path, offs[k])
	}
}

// TestCorruptNonLastSegment: damage at the end of a segment that is not the
// last is corruption, even where it would be a torn tail in the last one.
func TestCorruptNonLastSegment(t *testing.T) {
	pristine, _ := buildLog(t, 20, 200)
	files := segFiles(t, pristine)
	if len(files) < 3 {
		t.Fatalf("setup: %d segments", len(files))
	}
	victim := files[len(files)-2]
	offs := recordOffsets(t, victim)
	lastRec := offs[len(offs)-1]

	dir := copyDir(t, pristine)
	path := filepath.Join(dir, filepath.Base(victim))
	flipByte(t, path, fileSize(t, path)-1, 0x10)
	_, _, err := OpenLog(dir, LogOptions{SegmentBytes: 200})
	wantCorruption(t, err, path, lastRec)

	dir = copyDir(t, pristine)
	path = filepath.Join(dir, filepath.Base(victim))
	if err := os.Truncate(path, fileSize(t, path)-3); err != nil {
		t.Fatal(err)
	}
	_, _, err = OpenLog(dir, LogOptions{SegmentBytes: 200})
	wantCorruption(t, err, path, lastRec)

	// A bad record in the first segment.
	dir = copyDir(t, pristine)
	path = filepath.Join(dir, filepath.Base(files[0]))
	first := recordOffsets(t, files[0])[0]
	flipByte(t, path, first+RecordHeaderSize, 0x01)
	_, _, err = OpenLog(dir, LogOptions{SegmentBytes: 200})
	wantCorruption(t, err, path, first)
}

// TestCorruptSegmentHeader flips every header byte of the first and the
// last segment.
func TestCorruptSegmentHeader(t *testing.T) {
	pristine, _ := buildLog(t, 20, 200)
	files := segFiles(t, pristine)
	offsets := []int64{segmentFixedSize, slotOffsets[0] - 1, slotOffsets[0] + slotSize, 2000, segmentHeaderSize - 1} // padding
	for off := int64(0); off < segmentFixedSize; off++ {
		offsets = append(offsets, off)
	}
	for _, victim := range []string{files[0], files[len(files)-1]} {
		for _, off := range offsets {
			dir := copyDir(t, pristine)
			path := filepath.Join(dir, filepath.Base(victim))
			flipByte(t, path, off, 0x04)
			_, _, err := OpenLog(dir, LogOptions{SegmentBytes: 200})
			wantCorruption(t, err, path, -1)
		}
		// A header cut short.
		dir := copyDir(t, pristine)
		path := filepath.Join(dir, filepath.Base(victim))
		if err := os.Truncate(path, 10); err != nil {
			t.Fatal(err)
		}
		_, _, err := OpenLog(dir, LogOptions{SegmentBytes: 200})
		wantCorruption(t, err, path, 10)
	}
}

// TestMissingMiddleSegment: an index gap between segments is corruption.
func TestMissingMiddleSegment(t *testing.T) {
	pristine, _ := buildLog(t, 20, 200)
	files := segFiles(t, pristine)
	if len(files) < 3 {
		t.Fatalf("setup: %d segments", len(files))
	}
	dir := copyDir(t, pristine)
	if err := os.Remove(filepath.Join(dir, filepath.Base(files[1]))); err != nil {
		t.Fatal(err)
	}
	_, _, err := OpenLog(dir, LogOptions{SegmentBytes: 200})
	wantCorruption(t, err, filepath.Join(dir, filepath.Base(files[2])), 8)
}

// TestSegmentNameMismatch: a segment renamed (an overlap or a foreign file)
// disagrees with its header.
func TestSegmentNameMismatch(t *testing.T) {
	pristine, _ := buildLog(t, 20, 200)
	files := segFiles(t, pristine)
	dir := copyDir(t, pristine)
	lastName := filepath.Base(files[len(files)-1])
	first, _, _ := parseSegmentName(lastName)
	newPath := filepath.Join(dir, segmentName(first+1000))
	if err := os.Rename(filepath.Join(dir, lastName), newPath); err != nil {
		t.Fatal(err)
	}
	// The manifest names the last segment, which is missing; the renamed
	// one it does not name.
	_, _, err := OpenLog(dir, LogOptions{SegmentBytes: 200})
	wantCorruption(t, err, filepath.Join(dir, lastName), 0)
	if _, err := os.Stat(newPath); err != nil {
		t.Fatalf("the refused open removed a segment: %v", err)
	}

	// Renamed within the span the manifest names: the header disagrees.
	dir = copyDir(t, pristine)
	midName := filepath.Base(files[1])
	mid, _, _ := parseSegmentName(midName)
	newPath = filepath.Join(dir, segmentName(mid+1))
	if err := os.Rename(filepath.Join(dir, midName), newPath); err != nil {
		t.Fatal(err)
	}
	_, _, err = OpenLog(dir, LogOptions{SegmentBytes: 200})
	wantCorruption(t, err, newPath, 8)

	dir = copyDir(t, pristine)
	bad := filepath.Join(dir, "log-12.seg")
	if err := os.WriteFile(bad, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = OpenLog(dir, LogOptions{SegmentBytes: 200})
	wantCorruption(t, err, bad, 0)
}

// TestReadDetectsLaterCorruption: a record damaged after OpenLog verified it
// is reported by Entries, not returned.
func TestReadDetectsLaterCorruption(t *testing.T) {
	dir := t.TempDir()
	l, _ := mustOpen(t, dir, 1<<20)
	defer l.Close()
	mustAppendSync(t, l, mkEntries(1, 5, 1, 60))
	path := segFiles(t, dir)[0]
	offs := recordOffsets(t, path)
	flipByte(t, path, offs[2]+RecordHeaderSize, 0x01)
	_, err := l.Entries(1, 6)
	wantCorruption(t, err, path, offs[2])
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// TestRunway: small synced writes leave a runway of zeros after the active
// segment's records, which later small writes fill; a full segment keeps
// none, nor does a closed log; reopening after a crash takes the runway as
// the end, reports nothing truncated and continues the log where it ended;
// TruncateAfter leaves no cut record behind the runway.
func TestRunway(t *testing.T) {
	fastSync(t)
	dir := t.TempDir()
	const segBytes = 8 << 20
	l, _ := mustOpen(t, dir, segBytes)
	var es []Entry
	for i := 0; i < 40; i++ {
		e := mkEntries(uint64(len(es)+1), 3, 1, 3000)
		mustAppendSync(t, l, e)
		es = append(es, e...)
	}
	s := l.segs[len(l.segs)-1]
	path := s.path
	if size := fileSize(t, path); size <= s.size || size > s.size+runwayBytes {
		t.Fatalf("file of %d bytes for records ending at %d: no runway", size, s.size)
	}
	checkLog(t, l, es)
	// A crash with everything synced: the runway is still there.
	l.closeFiles()
	l.closed = true

	l, info := mustOpen(t, dir, segBytes)
	if info.TruncatedBytes != 0 || info.LastIndex != uint64(len(es)) {
		t.Fatalf("reopen: %+v", info)
	}
	if size := fileSize(t, path); size != l.segs[0].size {
		t.Fatalf("file of %d bytes after reopening, records end at %d", size, l.segs[0].size)
	}
	checkLog(t, l, es)

	// Cut back, then write again: the runway returns, and only what was
	// kept and written after is read back.
	mustAppendSync(t, l, mkEntries(uint64(len(es)+1), 5, 1, 3000))
	if err := l.TruncateAfter(uint64(len(es) - 10)); err != nil {
		t.Fatal(err)
	}
	es = es[:len(es)-10]
	e := mkEntries(uint64(len(es)+1), 2, 2, 100)
	mustAppendSync(t, l, e)
	es = append(es, e...)
	checkLog(t, l, es)
	mustClose(t, l)
	if size := fileSize(t, path); size != l.segs[0].size {
		t.Fatalf("file of %d bytes after Close, records end at %d", size, l.segs[0].size)
	}
	l, info = mustOpen(t, dir, segBytes)
	if info.TruncatedBytes != 0 {
		t.Fatalf("reopen after truncation: %+v", info)
	}
	checkLog(t, l, es)
	mustClose(t, l)

	// Segments of 64 KiB: every full one ends at its last record.
	dir = t.TempDir()
	l, _ = mustOpen(t, dir, 64<<10)
	es = nil
	for i := 0; i < 100; i++ {
		e := mkEntries(uint64(len(es)+1), 2, 1, 2000)
		mustAppendSync(t, l, e)
		es = append(es, e...)
	}
	if len(l.segs) < 3 {
		t.Fatalf("%d segments", len(l.segs))
	}
	for _, s := range l.segs[:len(l.segs)-1] {
		if size := fileSize(t, s.path); size != s.size {
			t.Fatalf("full segment %s: file of %d bytes, records end at %d", s.path, size, s.size)
		}
	}
	checkLog(t, l, es)
	mustClose(t, l)
}

// TestRunwayLeftOnAFullSegment: a crash between cutting a full segment's
// runway and making the cut durable could leave zeros after its last record
// with a newer segment beside it. Those zeros are its clean end; zeros
// followed by anything else are damage.
func TestRunwayLeftOnAFullSegment(t *testing.T) {
	fastSync(t)
	pristine, es := buildLog(t, 6, 1) // one record per segment
	for _, tail := range [][]byte{make([]byte, 5000), append(make([]byte, 100), 1)} {
		dir := copyDir(t, pristine)
		path := segFiles(t, dir)[2]
		size := fileSize(t, path)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(tail); err != nil {
			t.Fatal(err)
		}
		f.Close()
		l, _, err := OpenLog(dir, LogOptions{SegmentBytes: 1})
		if !allZero(tail) {
			wantCorruption(t, err, path, size)
			continue
		}
		if err != nil {
			t.Fatalf("zeros after a full segment's last record: %v", err)
		}
		checkLog(t, l, es)
		mustClose(t, l)
	}
}
