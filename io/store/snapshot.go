package store

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// A snapshot file "snapshot-<index, 20 digits>-<term, 20 digits>.snap":
//
//	offset size field
//	     0    8 magic "GEOSNPF1"
//	     8    8 index: the last log index the snapshot covers (>= 1; equals the file name's)
//	    16    8 term of that entry (equals the file name's)
//	    24    8 body length n
//	    32    4 reserved, zero
//	    36    4 CRC-32C of bytes 0..35
//	    40    n body (opaque here: the state machine's encoding)
//	  40+n    4 CRC-32C of the body
//
// The file is exactly 44+n bytes. It is written as "<name>.tmp", fsynced,
// renamed and the directory fsynced; then older snapshots are deleted except
// the newest one before it, which stays as a fallback. Leftover .tmp files are
// ignored by LoadLatestSnapshot and removed by SaveSnapshot.
const (
	snapshotMagic      = "GEOSNPF1"
	snapshotHeaderSize = 40
	snapshotTrailer    = 4
)

func snapshotName(index, term uint64) string {
	return fmt.Sprintf("snapshot-%020d-%020d.snap", index, term)
}

func parseSnapshotName(name string) (index, term uint64, ok bool) {
	rest, ok := strings.CutPrefix(name, "snapshot-")
	if !ok {
		return 0, 0, false
	}
	rest, ok = strings.CutSuffix(rest, ".snap")
	if !ok || len(rest) != 41 || rest[20] != '-' {
		return 0, 0, false
	}
	index, err1 := strconv.ParseUint(rest[:20], 10, 64)
	term, err2 := strconv.ParseUint(rest[21:], 10, 64)
	if err1 != nil || err2 != nil || index == 0 {
		return 0, 0, false
	}
	return index, term, true
}

// SnapshotInfo describes a snapshot file.
type SnapshotInfo struct {
	Index, Term uint64
	Size        int64  // body length in bytes
	File        string // path of the file
}

// listSnapshots returns the snapshot files in dir, newest (highest index,
// then term) first.
func listSnapshots(dir string) ([]SnapshotInfo, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("store: read snapshot directory: %w", err)
	}
	var out []SnapshotInfo
	for _, de := range des {
		if index, term, ok := parseSnapshotName(de.Name()); ok && de.Type().IsRegular() {
			out = append(out, SnapshotInfo{Index: index, Term: term, File: filepath.Join(dir, de.Name())})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Index != out[j].Index {
			return out[i].Index > out[j].Index
		}
		return out[i].Term > out[j].Term
	})
	return out, nil
}

type crcWriter struct {
	w   io.Writer
	crc uint32
	n   int64
}

func (c *crcWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.crc = crc32.Update(c.crc, castagnoli, p[:n])
	c.n += int64(n)
	return n, err
}

// SaveSnapshot durably writes the snapshot covering the log up to index (whose
// entry has term term); write streams its body. It writes a temp file,
// fsyncs it, renames it into place and fsyncs the directory, then deletes
// older snapshots except the newest one before it, and leftover temp files.
// It returns the size of the body write streamed. If write fails, nothing
// changes.
func SaveSnapshot(dir string, index, term uint64, write func(w io.Writer) error) (size int64, err error) {
	if index == 0 {
		return 0, fmt.Errorf("store: snapshot at index 0")
	}
	path := filepath.Join(dir, snapshotName(index, term))
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, fmt.Errorf("store: create snapshot: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	var hdr [snapshotHeaderSize]byte
	if _, err = f.Write(hdr[:]); err != nil {
		return 0, fmt.Errorf("store: write %s: %w", tmp, err)
	}
	cw := &crcWriter{w: f}
	bw := bufio.NewWriterSize(cw, 1<<20)
	if err = write(bw); err != nil {
		return 0, fmt.Errorf("store: write snapshot body: %w", err)
	}
	if err = bw.Flush(); err != nil {
		return 0, fmt.Errorf("store: write %s: %w", tmp, err)
	}
	var trailer [snapshotTrailer]byte
	binary.LittleEndian.PutUint32(trailer[:], cw.crc)
	if _, err = f.Write(trailer[:]); err != nil {
		return 0, fmt.Errorf("store: write %s: %w", tmp, err)
	}
	copy(hdr[:], snapshotMagic)
	binary.LittleEndian.PutUint64(hdr[8:16], index)
	binary.LittleEndian.PutUint64(hdr[16:24], term)
	binary.LittleEndian.PutUint64(hdr[24:32], uint64(cw.n))
	binary.LittleEndian.PutUint32(hdr[36:40], crc32.Checksum(hdr[0:36], castagnoli))
	if _, err = f.WriteAt(hdr[:], 0); err != nil {
		return 0, fmt.Errorf("store: write %s: %w", tmp, err)
	}
	if err = syncFile(f); err != nil {
		return 0, fmt.Errorf("store: fsync %s: %w", tmp, err)
	}
	dropCached(f, 0, 0) // read only at a restart or for a follower that fell behind
	if err = f.Close(); err != nil {
		return 0, fmt.Errorf("store: close %s: %w", tmp, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return 0, fmt.Errorf("store: rename %s: %w", tmp, err)
	}
	if err = syncDir(dir); err != nil {
		return 0, err
	}
	return cw.n, cleanSnapshots(dir, index, term)
}

// cleanSnapshots deletes the snapshots older than the newest one before
// (index, term), and leftover snapshot temp files.
func cleanSnapshots(dir string, index, term uint64) error {
	snaps, err := listSnapshots(dir)
	if err != nil {
		return err
	}
	removed := false
	keptPrev := false
	for _, s := range snaps {
		if s.Index > index || (s.Index == index && s.Term >= term) {
			continue // the new one, or newer: leave it
		}
		if !keptPrev {
			keptPrev = true
			continue
		}
		if err := os.Remove(s.File); err != nil {
			return fmt.Errorf("store: remove old snapshot: %w", err)
		}
		removed = true
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("store: read snapshot directory: %w", err)
	}
	for _, de := range des {
		if name := de.Name(); strings.HasPrefix(name, "snapshot-") && strings.HasSuffix(name, ".snap.tmp") {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return fmt.Errorf("store: remove leftover %s: %w", name, err)
			}
			removed = true
		}
	}
	if removed {
		return syncDir(dir)
	}
	return nil
}

// LoadedSnapshot is the result of LoadLatestSnapshot.
type LoadedSnapshot struct {
	SnapshotInfo
	// Body reads the Size bytes of the body. It computes the checksum again
	// as it reads and returns a Corruption error instead of io.EOF if the
	// body no longer matches. The caller must Close it.
	Body io.ReadCloser
	// Damaged holds, newest first, a Corruption error (naming the file and
	// the byte offset) for each newer snapshot file that failed verification
	// and was passed over. Callers should report them: falling back to an
	// older snapshot needs the log entries after it.
	Damaged []error
}

// LoadLatestSnapshot finds the newest snapshot in dir whose header and
// checksums verify (reading it whole once) and opens its body. ok is false,
// with Body nil, when dir holds no valid snapshot; Damaged then lists the
// invalid ones, if any. err is an I/O error other than corruption.
func LoadLatestSnapshot(dir string) (snap LoadedSnapshot, ok bool, err error) {
	snaps, err := listSnapshots(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return LoadedSnapshot{}, false, nil
	}
	if err != nil {
		return LoadedSnapshot{}, false, err
	}
	for _, s := range snaps {
		size, sum, err := verifySnapshot(s.File, s.Index, s.Term)
		if IsCorruption(err) {
			snap.Damaged = append(snap.Damaged, err)
			continue
		}
		if err != nil {
			return LoadedSnapshot{}, false, err
		}
		f, err := os.Open(s.File)
		if err != nil {
			return LoadedSnapshot{}, false, fmt.Errorf("store: open snapshot: %w", err)
		}
		s.Size = size
		snap.SnapshotInfo = s
		snap.Body = &snapshotBody{f: f, r: io.NewSectionReader(f, snapshotHeaderSize, size), path: s.File, size: size, want: sum}
		return snap, true, nil
	}
	return snap, false, nil
}

// verifySnapshot checks the snapshot file at path and returns its body length
// and body checksum.
func verifySnapshot(path string, index, term uint64) (size int64, sum uint32, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("store: open snapshot: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, 0, fmt.Errorf("store: stat snapshot: %w", err)
	}
	var h [snapshotHeaderSize]byte
	if n, err := io.ReadFull(f, h[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return 0, 0, corruptAt(path, int64(n), "snapshot header is %d bytes, need %d", n, snapshotHeaderSize)
		}
		return 0, 0, fmt.Errorf("store: read snapshot: %w", err)
	}
	n := binary.LittleEndian.Uint64(h[24:32])
	switch {
	case string(h[0:8]) != snapshotMagic:
		return 0, 0, corruptAt(path, 0, "bad snapshot magic %q", h[0:8])
	case binary.LittleEndian.Uint32(h[36:40]) != crc32.Checksum(h[0:36], castagnoli):
		return 0, 0, corruptAt(path, 0, "snapshot header (bytes 0-39) checksum mismatch")
	case binary.LittleEndian.Uint32(h[32:36]) != 0:
		return 0, 0, corruptAt(path, 32, "snapshot header reserved field is not zero")
	case binary.LittleEndian.Uint64(h[8:16]) != index || binary.LittleEndian.Uint64(h[16:24]) != term:
		return 0, 0, corruptAt(path, 8, "snapshot header says index %d term %d, file name says index %d term %d",
			binary.LittleEndian.Uint64(h[8:16]), binary.LittleEndian.Uint64(h[16:24]), index, term)
	case n > uint64(st.Size()) || st.Size() != snapshotHeaderSize+int64(n)+snapshotTrailer:
		return 0, 0, corruptAt(path, 24, "snapshot file is %d bytes, but its header declares a %d-byte body (file size %d+%d+%d)",
			st.Size(), n, snapshotHeaderSize, n, snapshotTrailer)
	}
	size = int64(n)
	c := &crcWriter{w: io.Discard}
	if _, err := io.CopyBuffer(c, io.NewSectionReader(f, snapshotHeaderSize, size), make([]byte, 1<<20)); err != nil {
		return 0, 0, fmt.Errorf("store: read snapshot: %w", err)
	}
	var t [snapshotTrailer]byte
	if _, err := f.ReadAt(t[:], snapshotHeaderSize+size); err != nil {
		return 0, 0, fmt.Errorf("store: read snapshot: %w", err)
	}
	if stored := binary.LittleEndian.Uint32(t[:]); stored != c.crc {
		return 0, 0, corruptAt(path, snapshotHeaderSize+size, "snapshot body checksum mismatch (stored %08x, computed %08x)", stored, c.crc)
	}
	return size, c.crc, nil
}

type snapshotBody struct {
	f    *os.File
	r    *io.SectionReader
	path string
	size int64
	crc  uint32
	want uint32
}

func (b *snapshotBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.crc = crc32.Update(b.crc, castagnoli, p[:n])
	if err == io.EOF && b.crc != b.want {
		return n, corruptAt(b.path, snapshotHeaderSize+b.size, "snapshot body checksum mismatch on second read: the file changed after it was verified")
	}
	return n, err
}

func (b *snapshotBody) Close() error { return b.f.Close() }
