package store

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tailCase damages the tail of a copy of a closed log (every entry synced
// and acknowledged) in dir and says what OpenLog must report.
type tailCase struct {
	name   string
	damage func(t *testing.T, dir string) (file string, off int64, lostFrom uint64, lost string)
}

// tailCases damage the last of several segments, or the only one; seg is
// the log's segment size.
func tailCases(n int) []tailCase {
	last := func(t *testing.T, dir string) (path string, first uint64, offs []int64) {
		files := segFiles(t, dir)
		path = files[len(files)-1]
		first, _, _ = parseSegmentName(filepath.Base(path))
		offs = recordOffsets(t, path)
		if len(offs) < 3 {
			t.Fatalf("setup: %d records in the last segment", len(offs))
		}
		return path, first, offs
	}
	truncate := func(t *testing.T, path string, size int64) {
		if err := os.Truncate(path, size); err != nil {
			t.Fatal(err)
		}
	}
	zero := func(t *testing.T, path string, from int64) {
		b := make([]byte, fileSize(t, path)-from)
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt(b, from); err != nil {
			t.Fatal(err)
		}
	}
	through := func(from uint64) string { return "entries " + itoa(from) + " to " + itoa(uint64(n)) }
	return []tailCase{
		{"cut within a record", func(t *testing.T, dir string) (string, int64, uint64, string) {
			path, first, offs := last(t, dir)
			truncate(t, path, offs[1]+RecordHeaderSize+1)
			return path, offs[1], first + 1, through(first + 1)
		}},
		{"cut on a record boundary", func(t *testing.T, dir string) (string, int64, uint64, string) {
			path, first, offs := last(t, dir)
			truncate(t, path, offs[2])
			return path, offs[2], first + 2, through(first + 2)
		}},
		{"cut after the header", func(t *testing.T, dir string) (string, int64, uint64, string) {
			path, first, _ := last(t, dir)
			truncate(t, path, segmentHeaderSize)
			return path, segmentHeaderSize, first, through(first)
		}},
		{"cut to 0 bytes", func(t *testing.T, dir string) (string, int64, uint64, string) {
			path, first, _ := last(t, dir)
			truncate(t, path, 0)
			return path, 0, first, "entries from index " + itoa(first) + " on are lost"
		}},
		{"zeroed tail from a record boundary", func(t *testing.T, dir string) (string, int64, uint64, string) {
			path, first, offs := last(t, dir)
			zero(t, path, offs[1])
			return path, offs[1], first + 1, through(first + 1)
		}},
		{"zeroed tail within a record", func(t *testing.T, dir string) (string, int64, uint64, string) {
			path, first, offs := last(t, dir)
			zero(t, path, offs[1]+5)
			return path, offs[1], first + 1, through(first + 1)
		}},
		{"deleted", func(t *testing.T, dir string) (string, int64, uint64, string) {
			path, first, _ := last(t, dir)
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			return path, 0, first, "entries from index " + itoa(first) + " on are lost"
		}},
	}
}

func itoa(v uint64) string {
	b := []byte{}
	for {
		b = append([]byte{byte('0' + v%10)}, b...)
		if v /= 10; v == 0 {
			return string(b)
		}
	}
}

// TestDamagedTailRefused damages the tail of a log whose every entry was
// synced: cut within a record, on a record boundary, after the header or
// to nothing, zeroed, or deleted, in the last of several segments and in
// the only one. None of it is a torn write: OpenLog refuses with a
// Corruption error naming the file, the byte offset and the indexes lost,
// and changes nothing. With Repair, the log is cut to end before the first
// index lost, and reopens cleanly.
func TestDamagedTailRefused(t *testing.T) {
	fastSync(t)
	for _, layout := range []struct {
		name     string
		n        int
		segBytes int64
	}{{"last of several segments", 38, 400}, {"only segment", 8, 1 << 20}} {
		pristine, es := buildLog(t, layout.n, layout.segBytes)
		if layout.segBytes < 1<<20 && len(segFiles(t, pristine)) < 3 {
			t.Fatalf("setup: %d segments", len(segFiles(t, pristine)))
		}
		for _, tc := range tailCases(layout.n) {
			t.Run(layout.name+"/"+tc.name, func(t *testing.T) {
				dir := copyDir(t, pristine)
				file, off, lostFrom, lost := tc.damage(t, dir)
				before := dirSizes(t, dir)
				_, _, err := OpenLog(dir, LogOptions{SegmentBytes: layout.segBytes})
				wantCorruption(t, err, file, off)
				if !strings.Contains(err.Error(), lost) {
					t.Fatalf("error %q does not say %q", err, lost)
				}
				if now := dirSizes(t, dir); !sameSizes(now, before) {
					t.Fatalf("the refused log was changed: %v, was %v", now, before)
				}

				l, info, calls := openRepair(t, dir, layout.segBytes)
				if len(calls) != 1 {
					t.Fatalf("Repair called %d times", len(calls))
				}
				checkDamage(t, info.Damage, file, off, lostFrom, info.Damage.WholeSegment)
				if d := info.Damage; (d.LostThrough != 0 && d.LostThrough != uint64(layout.n)) || d.Err().Error() != err.Error() {
					t.Fatalf("damage %+v (%v), want the refusal %v", *d, d.Err(), err)
				}
				if info.LastIndex != lostFrom-1 {
					t.Fatalf("info %+v, want the log to end at %d", info, lostFrom-1)
				}
				checkLog(t, l, es[:lostFrom-1])
				repaired := mkEntries(lostFrom, 3, 2, 60)
				mustAppendSync(t, l, repaired)
				l = reopenPlain(t, l, dir, layout.segBytes, append(es[:lostFrom-1:lostFrom-1], repaired...))
				mustClose(t, l)
			})
		}
	}
}

// TestTornWriteAfterTheDurableEnd: records written after the last Sync
// and lost whole, cut or zeroed by a crash are torn writes, dropped
// silently, in a segment the manifest names or one created since (which
// goes whole).
func TestTornWriteAfterTheDurableEnd(t *testing.T) {
	fastSync(t)
	for _, named := range []bool{true, false} {
		pristine, es := buildTorn(t, 10, 1, named) // one record per segment
		files := segFiles(t, pristine)
		path := files[len(files)-1]
		for _, cut := range []int64{0, segmentHeaderSize, segmentHeaderSize + 7, -1} {
			dir := copyDir(t, pristine)
			p := filepath.Join(dir, filepath.Base(path))
			if cut >= 0 {
				if err := os.Truncate(p, cut); err != nil {
					t.Fatal(err)
				}
			}
			if cut == 0 && named {
				// A named segment's header is durable (created .tmp,
				// fsynced, renamed): without it, it is damage.
				_, _, err := OpenLog(dir, LogOptions{SegmentBytes: 1})
				wantCorruption(t, err, p, 0)
				continue
			}
			l, info := mustOpen(t, dir, 1)
			if info.Damage != nil || (!named && info.UnlistedSegments != 1) {
				t.Fatalf("named %v, cut %d: info %+v", named, cut, info)
			}
			want := es[:9]
			if cut < 0 && named {
				want = es // nothing was lost: the record stays
			}
			checkLog(t, l, want)
			mustClose(t, l)
		}
	}
}

// TestDurableEndSlots: the newest slot torn (its checksum fails) leaves the
// older one, which understates the durable end: the log opens whole. Both
// torn is damage to the header.
func TestDurableEndSlots(t *testing.T) {
	fastSync(t)
	pristine, es := buildLog(t, 8, 1<<20)
	path0 := segFiles(t, pristine)[0]
	b, err := os.ReadFile(path0)
	if err != nil {
		t.Fatal(err)
	}
	d, ok := newestSlot(b, 1)
	if !ok || d.next != 9 {
		t.Fatalf("newest slot %+v, %v", d, ok)
	}
	newest, older := slotOffsets[d.seq%2], slotOffsets[(d.seq+1)%2]

	dir := copyDir(t, pristine)
	path := filepath.Join(dir, filepath.Base(path0))
	flipByte(t, path, newest+9, 0x01)
	l, info := mustOpen(t, dir, 1<<20)
	if info.Damage != nil || info.TruncatedBytes != 0 {
		t.Fatalf("info %+v", info)
	}
	checkLog(t, l, es)
	mustClose(t, l)

	// Both slots torn: the header is damaged.
	dir = copyDir(t, pristine)
	path = filepath.Join(dir, filepath.Base(path0))
	flipByte(t, path, newest+9, 0x01)
	flipByte(t, path, older+9, 0x01)
	_, _, err = OpenLog(dir, LogOptions{})
	wantCorruption(t, err, path, slotOffsets[0])
}

// TestOldFormatRefused: a log of the first format (GEOLOG01, no manifest)
// is refused with an error that says so, and left as it was.
func TestOldFormatRefused(t *testing.T) {
	dir := t.TempDir()
	h := make([]byte, segmentFixedSize)
	copy(h, segmentMagicV1)
	h[8] = 1
	seg := append(h, appendRecord(nil, Entry{Index: 1, Term: 1, Data: []byte("old")})...)
	path := filepath.Join(dir, segmentName(1))
	if err := os.WriteFile(path, seg, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := OpenLog(dir, LogOptions{})
	if err == nil || IsCorruption(err) || !strings.Contains(err.Error(), "earlier version") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("OpenLog of an old log: %v", err)
	}
	if got := fileSize(t, path); got != int64(len(seg)) {
		t.Fatalf("the old segment is %d bytes, was %d", got, len(seg))
	}
	if _, err := os.Stat(filepath.Join(dir, manifestName)); !os.IsNotExist(err) {
		t.Fatalf("a manifest was written: %v", err)
	}
}

// TestManifestMissingOrDamaged: segments without a manifest (deleted), or a
// damaged one, are Corruption errors naming it.
func TestManifestMissingOrDamaged(t *testing.T) {
	pristine, _ := buildLog(t, 8, 1<<20)
	dir := copyDir(t, pristine)
	m := filepath.Join(dir, manifestName)
	if err := os.Remove(m); err != nil {
		t.Fatal(err)
	}
	_, _, err := OpenLog(dir, LogOptions{})
	wantCorruption(t, err, m, 0)
	for _, off := range []int64{0, 8, 16, 24} {
		dir := copyDir(t, pristine)
		m := filepath.Join(dir, manifestName)
		flipByte(t, m, off, 0x02)
		_, _, err := OpenLog(dir, LogOptions{})
		wantCorruption(t, err, m, -1)
	}
}

// TestLogDeletedWhole: every segment and the manifest gone while the hard
// state says entries were committed is damage (a new directory has no hard
// state: its log is opened first); a manifest that names no segment (a
// Reset interrupted after it removed them) with none left is an empty log.
func TestLogDeletedWhole(t *testing.T) {
	pristine, _ := buildLog(t, 8, 1<<20)
	if err := SaveHardState(pristine, HardState{Term: 2, Vote: NoVote, Commit: 6}); err != nil {
		t.Fatal(err)
	}
	dir := copyDir(t, pristine)
	for _, name := range append(segFiles(t, dir), filepath.Join(dir, manifestName)) {
		if err := os.Remove(name); err != nil {
			t.Fatal(err)
		}
	}
	_, _, err := OpenLog(dir, LogOptions{})
	wantCorruption(t, err, filepath.Join(dir, manifestName), 0)
	if !strings.Contains(err.Error(), "entries 1 to 6 were committed") {
		t.Fatalf("error %q does not name the entries lost", err)
	}
	l, info, _ := openRepair(t, dir, 1<<20)
	if info.Damage == nil || info.LastIndex != 0 {
		t.Fatalf("info %+v", info)
	}
	mustAppendSync(t, l, mkEntries(1, 2, 3, 60))
	l = reopenPlain(t, l, dir, 1<<20, mkEntries(1, 2, 3, 60))
	mustClose(t, l)

	dir = copyDir(t, pristine)
	for _, name := range segFiles(t, dir) {
		if err := os.Remove(name); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, manifestName), encodeManifest(span{}), 0o644); err != nil {
		t.Fatal(err)
	}
	l, info = mustOpen(t, dir, 1<<20)
	if info.Damage != nil || info.LastIndex != 0 || l.FirstIndex() != 0 {
		t.Fatalf("info %+v", info)
	}
	mustClose(t, l)
}
