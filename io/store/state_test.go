package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestHardState(t *testing.T) {
	dir := t.TempDir()
	if _, ok, err := LoadHardState(dir); ok || err != nil {
		t.Fatalf("empty dir: ok %v, err %v", ok, err)
	}
	for _, hs := range []HardState{
		{Term: 1, Vote: NoVote, Commit: 0},
		{Term: 7, Vote: 2, Commit: 1234},
		{Term: 1<<64 - 1, Vote: 0, Commit: 1<<64 - 1},
		{Term: 3, Vote: 1, Commit: 9, Repairing: true},
	} {
		if err := SaveHardState(dir, hs); err != nil {
			t.Fatal(err)
		}
		got, ok, err := LoadHardState(dir)
		if !ok || err != nil || got != hs {
			t.Fatalf("load: %+v, %v, %v; want %+v", got, ok, err, hs)
		}
	}
	// A leftover temp file from a crash mid-save is ignored and overwritten.
	tmp := filepath.Join(dir, hardStateName+".tmp")
	if err := os.WriteFile(tmp, []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := LoadHardState(dir); !ok || err != nil || got.Term != 3 {
		t.Fatalf("with leftover tmp: %+v, %v, %v", got, ok, err)
	}
	if err := SaveHardState(dir, HardState{Term: 9, Vote: 1, Commit: 5}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("temp file left after save: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("%d files in dir, want 1", len(entries))
	}
}

// TestHardStateV1 reads the first version of the file (no flags).
func TestHardStateV1(t *testing.T) {
	dir := t.TempDir()
	b := make([]byte, hardStateV1Len)
	copy(b, hardStateV1)
	binary.LittleEndian.PutUint64(b[8:], 5)
	binary.LittleEndian.PutUint64(b[16:], 4)
	binary.LittleEndian.PutUint32(b[24:], 2)
	binary.LittleEndian.PutUint32(b[28:], crc32.Checksum(b[:28], castagnoli))
	if err := os.WriteFile(filepath.Join(dir, hardStateName), b, 0o644); err != nil {
		t.Fatal(err)
	}
	got, ok, err := LoadHardState(dir)
	if want := (HardState{Term: 5, Commit: 4, Vote: 2}); !ok || err != nil || got != want {
		t.Fatalf("v1 file: %+v %v %v, want %+v", got, ok, err, want)
	}
}

func TestHardStateDamaged(t *testing.T) {
	dir := t.TempDir()
	if err := SaveHardState(dir, HardState{Term: 3, Vote: 1, Commit: 10}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, hardStateName)
	good, _ := os.ReadFile(path)
	for off := int64(0); off < hardStateSize; off++ {
		flipByte(t, path, off, 0x20)
		_, _, err := LoadHardState(dir)
		wantCorruption(t, err, path, -1)
		flipByte(t, path, off, 0x20)
	}
	for _, n := range []int{0, 5, hardStateSize - 1} {
		os.WriteFile(path, good[:n], 0o644)
		_, _, err := LoadHardState(dir)
		wantCorruption(t, err, path, int64(n))
	}
	os.WriteFile(path, append(good, 0), 0o644)
	_, _, err := LoadHardState(dir)
	wantCorruption(t, err, path, hardStateSize)
}

func saveBody(t *testing.T, dir string, index, term uint64, body []byte) {
	t.Helper()
	size, err := SaveSnapshot(dir, index, term, func(w io.Writer) error {
		// Write in pieces of several sizes to go through the buffer.
		for p := 0; p < len(body); {
			n := min(len(body)-p, 1+p%3000)
			if _, err := w.Write(body[p : p+n]); err != nil {
				return err
			}
			p += n
		}
		return nil
	})
	if err != nil || size != int64(len(body)) {
		t.Fatalf("SaveSnapshot(%d): %d bytes of %d, %v", index, size, len(body), err)
	}
}

func readBody(t *testing.T, s LoadedSnapshot) []byte {
	t.Helper()
	defer s.Body.Close()
	b, err := io.ReadAll(s.Body)
	if err != nil {
		t.Fatalf("reading snapshot body: %v", err)
	}
	return b
}

func snapFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "snapshot-*"))
	for i := range m {
		m[i] = filepath.Base(m[i])
	}
	return m
}

func TestSnapshotSaveLoad(t *testing.T) {
	dir := t.TempDir()
	if s, ok, err := LoadLatestSnapshot(dir); ok || err != nil || s.Body != nil || len(s.Damaged) != 0 {
		t.Fatalf("empty dir: %+v %v %v", s, ok, err)
	}
	bodies := map[uint64][]byte{}
	for i, index := range []uint64{10, 20, 30, 40} {
		body := dataFor(index, 1000*i+3*int(index))
		bodies[index] = body
		saveBody(t, dir, index, index/10, body)
		s, ok, err := LoadLatestSnapshot(dir)
		if !ok || err != nil || s.Index != index || s.Term != index/10 || s.Size != int64(len(body)) || len(s.Damaged) != 0 {
			t.Fatalf("load after saving %d: %+v %v %v", index, s.SnapshotInfo, ok, err)
		}
		if got := readBody(t, s); !bytes.Equal(got, body) {
			t.Fatalf("snapshot %d: body differs", index)
		}
	}
	// The newest and the one before it are kept.
	want := []string{snapshotName(30, 3), snapshotName(40, 4)}
	if got := snapFiles(t, dir); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("snapshot files %v, want %v", got, want)
	}
	// An empty body.
	saveBody(t, dir, 50, 5, nil)
	s, ok, err := LoadLatestSnapshot(dir)
	if !ok || err != nil || s.Index != 50 || len(readBody(t, s)) != 0 {
		t.Fatalf("empty body: %+v %v %v", s.SnapshotInfo, ok, err)
	}
}

func TestSnapshotDamagedFallsBack(t *testing.T) {
	dir := t.TempDir()
	old, newer := dataFor(1, 5000), dataFor(2, 7000)
	saveBody(t, dir, 100, 2, old)
	saveBody(t, dir, 200, 3, newer)
	newest := filepath.Join(dir, snapshotName(200, 3))
	good, _ := os.ReadFile(newest)

	damage := map[string]func(){
		"body byte":   func() { flipByte(t, newest, snapshotHeaderSize+1234, 1) },
		"header byte": func() { flipByte(t, newest, 9, 1) },
		"trailer":     func() { flipByte(t, newest, int64(len(good))-1, 1) },
		"truncated":   func() { os.Truncate(newest, int64(len(good))-10) },
		"extended":    func() { os.WriteFile(newest, append(bytes.Clone(good), 0), 0o644) },
		"short":       func() { os.Truncate(newest, 7) },
		"renamed": func() {
			os.Rename(newest, filepath.Join(dir, snapshotName(200, 4)))
		},
	}
	for name, f := range damage {
		os.WriteFile(newest, good, 0o644)
		f()
		s, ok, err := LoadLatestSnapshot(dir)
		if !ok || err != nil || s.Index != 100 || s.Term != 2 {
			t.Fatalf("%s: %+v %v %v", name, s.SnapshotInfo, ok, err)
		}
		if len(s.Damaged) != 1 || !IsCorruption(s.Damaged[0]) {
			t.Fatalf("%s: damaged %v", name, s.Damaged)
		}
		if got := readBody(t, s); !bytes.Equal(got, old) {
			t.Fatalf("%s: fallback body differs", name)
		}
		os.Remove(filepath.Join(dir, snapshotName(200, 4)))
	}
	// The fallback damaged too: nothing valid, both reported.
	os.WriteFile(newest, good, 0o644)
	flipByte(t, newest, snapshotHeaderSize, 1)
	flipByte(t, filepath.Join(dir, snapshotName(100, 2)), snapshotHeaderSize, 1)
	s, ok, err := LoadLatestSnapshot(dir)
	if ok || err != nil || s.Body != nil || len(s.Damaged) != 2 {
		t.Fatalf("all damaged: %+v %v %v", s, ok, err)
	}
	wantCorruption(t, s.Damaged[0], newest, snapshotHeaderSize+int64(len(newer)))
}

func TestSnapshotTempFilesAndFailedWrite(t *testing.T) {
	dir := t.TempDir()
	saveBody(t, dir, 5, 1, []byte("five"))
	// A crash mid-save leaves a temp file: ignored by load, removed by the next save.
	stale := filepath.Join(dir, snapshotName(9, 1)+".tmp")
	os.WriteFile(stale, []byte("GEOSNPF1 partial"), 0o644)
	s, ok, err := LoadLatestSnapshot(dir)
	if !ok || err != nil || s.Index != 5 {
		t.Fatalf("with a temp file: %+v %v %v", s.SnapshotInfo, ok, err)
	}
	s.Body.Close()

	// A failing writer leaves nothing behind.
	boom := errors.New("boom")
	_, err = SaveSnapshot(dir, 7, 1, func(w io.Writer) error {
		w.Write([]byte("some"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("failed write: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, snapshotName(7, 1)+".tmp")); !os.IsNotExist(err) {
		t.Fatal("temp file left after a failed write")
	}
	saveBody(t, dir, 8, 1, []byte("eight"))
	if got := snapFiles(t, dir); len(got) != 2 || got[0] != snapshotName(5, 1) || got[1] != snapshotName(8, 1) {
		t.Fatalf("files %v", got)
	}
	if _, err := SaveSnapshot(dir, 0, 1, func(io.Writer) error { return nil }); err == nil {
		t.Fatal("snapshot at index 0 accepted")
	}
}

// TestSnapshotBodyReverified: a body that changes between verification and
// reading yields a Corruption error, not silently different bytes.
func TestSnapshotBodyReverified(t *testing.T) {
	dir := t.TempDir()
	body := dataFor(3, 10000)
	saveBody(t, dir, 3, 1, body)
	s, ok, err := LoadLatestSnapshot(dir)
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	defer s.Body.Close()
	flipByte(t, s.File, snapshotHeaderSize+9000, 1)
	_, err = io.ReadAll(s.Body)
	wantCorruption(t, err, s.File, snapshotHeaderSize+int64(len(body)))
}
