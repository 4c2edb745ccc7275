package io

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	stdio "io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/geoevent/geoevent/io/store"
)

// A backup is a tar stream of a replica's state at one log index (see
// BackupManifest):
//
//	cluster                 the cluster file of the replica backed up
//	snapshot/<name>.snap    its newest snapshot file, as package store wrote it (absent without one)
//	history/<file>          that snapshot's history checkpoint, file by file (absent without one)
//	log/<nnnnnn>            the log's entries after the snapshot, in chunks of about backupChunkBytes:
//	                        per entry index (8 bytes), term (8), data length n (4), data (n), little-endian
//	MANIFEST.json           a BackupManifest: what it holds, with each part's size and SHA-256
//	MANIFEST.sha256         the SHA-256 of MANIFEST.json, hex
//
// The parts come in that order; the manifest, last, names them all, so a
// stream cut anywhere is refused. Restore checks every part against it
// before it lays anything out.
const (
	backupFormat       = 1
	backupManifestName = "MANIFEST.json"
	backupManifestSum  = "MANIFEST.sha256"
	backupChunkBytes   = 4 << 20
	backupPinPrefix    = "backup-pin-"
	backupEntryHeader  = 20
	backupClusterPart  = "cluster"
	backupSnapshotDir  = "snapshot/"
	backupHistoryDir   = "history/"
	backupLogDir       = "log/"
)

// BackupManifest describes a backup: whose state it is and up to which log
// index.
type BackupManifest struct {
	Format       int    `json:"format"`
	Cluster      string `json:"cluster"`
	ReplicaIndex uint32 `json:"replica"`
	ReplicaCount uint32 `json:"replica_count"`
	// SnapshotIndex and SnapshotTerm are the snapshot's (0: none).
	SnapshotIndex uint64 `json:"snapshot_index"`
	SnapshotTerm  uint64 `json:"snapshot_term"`
	// LastIndex is the last log entry the backup holds (SnapshotIndex
	// when it holds none after the snapshot); LastTerm is its term.
	LastIndex uint64 `json:"last_index"`
	LastTerm  uint64 `json:"last_term"`
	// Term and Commit are the hard state a restored replica starts from
	// (with no vote): Commit <= LastIndex.
	Term   uint64 `json:"term"`
	Commit uint64 `json:"commit"`
	// Taken is when the backup began (RFC 3339), for people.
	Taken string       `json:"taken"`
	Parts []BackupPart `json:"parts"`
}

// BackupPart is one file of a backup.
type BackupPart struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// backupSource is what a backup copies: the files of a snapshot and its
// history checkpoint, which nothing changes while the backup reads them,
// and the log's entries after the snapshot, read through read.
type backupSource struct {
	info                ClusterInfo
	snapFile            string // "": no snapshot
	snapIndex, snapTerm uint64
	checkpoint          string // "": none
	last, lastTerm      uint64 // the last entry to copy (snapIndex: none)
	term, commit        uint64 // the hard state to restore
	read                func(from, to uint64, maxBytes int64) ([]store.Entry, error)
	readErrHint         string // said after an error of read
	taken               time.Time
	progress            func(n int64) // bytes written so far; may be nil
	written             int64
}

// backupWriter writes the parts of a backup as tar entries, summing each.
type backupWriter struct {
	tw    *tar.Writer
	parts []BackupPart
	src   *backupSource
	ctx   context.Context
}

func (bw *backupWriter) header(name string, size int64) error {
	if err := bw.ctx.Err(); err != nil {
		return err
	}
	return bw.tw.WriteHeader(&tar.Header{Name: name, Size: size, Mode: 0o644, Typeflag: tar.TypeReg, ModTime: bw.src.taken, Format: tar.FormatPAX})
}

func (bw *backupWriter) addBytes(name string, b []byte) error {
	if err := bw.header(name, int64(len(b))); err != nil {
		return err
	}
	if _, err := bw.tw.Write(b); err != nil {
		return err
	}
	sum := sha256.Sum256(b)
	bw.parts = append(bw.parts, BackupPart{Name: name, Size: int64(len(b)), SHA256: hex.EncodeToString(sum[:])})
	bw.note(int64(len(b)))
	return nil
}

func (bw *backupWriter) note(n int64) {
	bw.src.written += n
	if bw.src.progress != nil {
		bw.src.progress(bw.src.written)
	}
}

// addFile copies the file at path as the part name.
func (bw *backupWriter) addFile(name, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := bw.header(name, fi.Size()); err != nil {
		return err
	}
	h := sha256.New()
	buf := make([]byte, 1<<20)
	var n int64
	for n < fi.Size() {
		if err := bw.ctx.Err(); err != nil {
			return err
		}
		k, err := f.Read(buf[:min(int64(len(buf)), fi.Size()-n)])
		if k > 0 {
			h.Write(buf[:k])
			if _, werr := bw.tw.Write(buf[:k]); werr != nil {
				return werr
			}
			n += int64(k)
			bw.note(int64(k))
		}
		if err == stdio.EOF && n < fi.Size() {
			return fmt.Errorf("%s: shorter than its size %d", path, fi.Size())
		} else if err != nil && err != stdio.EOF {
			return err
		}
	}
	bw.parts = append(bw.parts, BackupPart{Name: name, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))})
	return nil
}

// writeBackup writes the backup of src to w and returns its manifest.
func writeBackup(ctx context.Context, w stdio.Writer, src *backupSource) (BackupManifest, error) {
	bw := &backupWriter{tw: tar.NewWriter(w), src: src, ctx: ctx}
	m := BackupManifest{
		Format: backupFormat, Cluster: src.info.Cluster.String(), ReplicaIndex: src.info.ReplicaIndex, ReplicaCount: src.info.ReplicaCount,
		SnapshotIndex: src.snapIndex, SnapshotTerm: src.snapTerm, LastIndex: src.last, LastTerm: src.lastTerm,
		Term: src.term, Commit: src.commit, Taken: src.taken.UTC().Format(time.RFC3339),
	}
	if err := bw.addBytes(backupClusterPart, encodeClusterFile(src.info)); err != nil {
		return m, err
	}
	if src.snapFile != "" {
		if err := bw.addFile(backupSnapshotDir+filepath.Base(src.snapFile), src.snapFile); err != nil {
			return m, fmt.Errorf("copy the snapshot: %w", err)
		}
	}
	if src.checkpoint != "" {
		des, err := os.ReadDir(src.checkpoint)
		if err != nil {
			return m, fmt.Errorf("list the history checkpoint: %w", err)
		}
		for _, de := range des { // ReadDir sorts by name
			if !de.Type().IsRegular() {
				return m, fmt.Errorf("the history checkpoint %s holds %s, not a file", src.checkpoint, de.Name())
			}
			if err := bw.addFile(backupHistoryDir+de.Name(), filepath.Join(src.checkpoint, de.Name())); err != nil {
				return m, fmt.Errorf("copy the history checkpoint: %w", err)
			}
		}
	}
	var chunk []byte
	for from, n := src.snapIndex+1, 1; from <= src.last; n++ {
		es, err := src.read(from, src.last, backupChunkBytes)
		if err == nil && (len(es) == 0 || es[0].Index != from) {
			err = fmt.Errorf("the log answered no entry at %d", from)
		}
		if err != nil {
			return m, fmt.Errorf("read the log from index %d: %w%s", from, err, src.readErrHint)
		}
		chunk = chunk[:0]
		for _, e := range es {
			chunk = binary.LittleEndian.AppendUint64(chunk, e.Index)
			chunk = binary.LittleEndian.AppendUint64(chunk, e.Term)
			chunk = binary.LittleEndian.AppendUint32(chunk, uint32(len(e.Data)))
			chunk = append(chunk, e.Data...)
		}
		if err := bw.addBytes(fmt.Sprintf("%s%06d", backupLogDir, n), chunk); err != nil {
			return m, err
		}
		from = es[len(es)-1].Index + 1
	}
	m.Parts = bw.parts
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return m, err
	}
	mb = append(mb, '\n')
	sum := sha256.Sum256(mb)
	if err := bw.addBytes(backupManifestName, mb); err != nil {
		return m, err
	}
	if err := bw.addBytes(backupManifestSum, []byte(hex.EncodeToString(sum[:])+"\n")); err != nil {
		return m, err
	}
	m.Parts = bw.parts
	return m, bw.tw.Close()
}

// BackupDir writes a backup of the data directory dir, which no replica
// serves, to w: its newest valid snapshot, that snapshot's history
// checkpoint and the whole log after it, with the hard state as it is. It
// holds dir's lock meanwhile (a *LockedError when a process holds it).
// Opening the log is a recovery: a torn tail is cut, as a start would.
// progress, when not nil, is called with the bytes written so far.
func BackupDir(ctx context.Context, dir string, w stdio.Writer, progress func(int64)) (BackupManifest, error) {
	// The cluster file first: a directory that is not a data directory
	// gets no lock file.
	info, err := ReadClusterFile(dir)
	if err != nil {
		return BackupManifest{}, err
	}
	lock, err := LockDir(dir)
	if err != nil {
		return BackupManifest{}, err
	}
	defer lock.Close()
	log, _, err := store.OpenLog(dir, store.LogOptions{})
	if err != nil {
		return BackupManifest{}, fmt.Errorf("open the log: %w", err)
	}
	defer log.Close()
	hs, _, err := store.LoadHardState(dir)
	if err != nil {
		return BackupManifest{}, err
	}
	src := &backupSource{info: info, term: hs.Term, taken: time.Now(), progress: progress}
	src.read = func(from, to uint64, maxBytes int64) ([]store.Entry, error) {
		return log.EntriesUpTo(from, to+1, maxBytes)
	}
	snap, ok, err := store.LoadLatestSnapshot(dir)
	if err != nil {
		return BackupManifest{}, err
	}
	if ok {
		snap.Body.Close()
		src.snapFile, src.snapIndex, src.snapTerm = snap.File, snap.Index, snap.Term
		src.checkpoint = filepath.Join(dir, checkpointDir(snap.Index))
		if _, err := os.Stat(src.checkpoint); err != nil {
			return BackupManifest{}, fmt.Errorf("the snapshot at index %d has no history checkpoint: %w", snap.Index, err)
		}
	}
	src.last, src.lastTerm = src.snapIndex, src.snapTerm
	if li := log.LastIndex(); li > src.snapIndex {
		if src.lastTerm, err = log.Term(li); err != nil {
			return BackupManifest{}, err
		}
		src.last = li
	}
	src.commit = min(max(hs.Commit, src.snapIndex), src.last)
	src.term = max(src.term, src.lastTerm)
	return writeBackup(ctx, w, src)
}

// backupBusy makes backups of a Server one at a time: the pinned files of
// one are in one directory that the next clears.
type backupBusy struct{ sync.Mutex }

// Backup writes a backup of the running replica's state to w (see
// BackupManifest): its newest snapshot, that snapshot's history checkpoint
// and the log after it up to the commit index the replica knew when the
// backup began, so it holds every write acknowledged before then. It is
// consistent: the loop reads the commit index and queues the disk
// goroutine's part in order after every write before it; the disk
// goroutine pins the snapshot's file and checkpoint (hard links in
// DIR/backup-pin-*, which snapshots taken meanwhile do not remove) and
// reads the log in chunks in order with its other work, between appends
// and fsyncs. The entries after the snapshot stay in the log until the
// second snapshot after it, so a backup that takes longer than two
// snapshots fails (try again). progress, when not nil, is called with the
// bytes written so far. One backup runs at a time.
func (s *Server) Backup(ctx context.Context, w stdio.Writer, progress func(int64)) (BackupManifest, error) {
	if !s.backups.TryLock() {
		return BackupManifest{}, errors.New("a backup of this replica is running already: try again once it has finished")
	}
	defer s.backups.Unlock()
	type pinned struct {
		src *backupSource
		err error
	}
	got := make(chan pinned, 1)
	start := func() {
		st := s.r.Status()
		s.disk.push(diskOp{kind: opCall, call: func(d *disk) {
			src, err := d.pinBackup(st.Commit, st.Term)
			got <- pinned{src, err}
		}})
	}
	select {
	case s.besideDone <- start:
	case <-s.loopDone:
		return BackupManifest{}, ErrServerClosed
	case <-ctx.Done():
		return BackupManifest{}, ctx.Err()
	}
	var p pinned
	select {
	case p = <-got:
	case <-s.disk.exited:
		return BackupManifest{}, ErrServerClosed
	case <-ctx.Done():
		// The pin, made or to be made, is cleared by the next backup.
		return BackupManifest{}, ctx.Err()
	}
	if p.err != nil {
		return BackupManifest{}, p.err
	}
	src := p.src
	defer func() {
		if src.snapFile != "" {
			os.RemoveAll(filepath.Dir(src.snapFile))
		}
	}()
	src.info, src.taken, src.progress = s.info, time.Now(), progress
	src.readErrHint = " (a backup that takes longer than two snapshots of the replica loses the log it copies: try again)"
	src.read = func(from, to uint64, maxBytes int64) ([]store.Entry, error) {
		type read struct {
			es  []store.Entry
			err error
		}
		got := make(chan read, 1)
		s.disk.push(diskOp{kind: opCall, call: func(d *disk) {
			es, err := d.log.EntriesUpTo(from, to+1, maxBytes)
			got <- read{es, err}
		}})
		select {
		case r := <-got:
			return r.es, r.err
		case <-s.disk.exited:
			return nil, ErrServerClosed
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return writeBackup(ctx, w, src)
}

// pinBackup runs on the disk goroutine: it links the newest snapshot's
// file and its history checkpoint into a new pin directory (clearing those
// of earlier backups) and sets the log's part: up to commit, or the log's
// end if that is before it. The snapshot writer never removes the newest
// snapshot the disk goroutine knows (it keeps one before the one it
// writes), and only this goroutine removes checkpoints: both stay until
// the links are made.
func (d *disk) pinBackup(commit, term uint64) (*backupSource, error) {
	src := &backupSource{snapIndex: d.lastSnap, term: term}
	if err := removePins(d.dir); err != nil {
		return nil, err
	}
	if d.lastSnap > 0 {
		snapFile, snapTerm, err := findSnapshot(d.dir, d.lastSnap)
		if err != nil {
			return nil, err
		}
		pin, err := os.MkdirTemp(d.dir, backupPinPrefix)
		if err != nil {
			return nil, fmt.Errorf("make the backup's pin directory: %w", err)
		}
		src.snapTerm = snapTerm
		src.snapFile = filepath.Join(pin, filepath.Base(snapFile))
		if err := linkOrCopy(snapFile, src.snapFile); err != nil {
			os.RemoveAll(pin)
			return nil, err
		}
		cp := filepath.Join(d.dir, checkpointDir(d.lastSnap))
		src.checkpoint = filepath.Join(pin, "history")
		if err := os.Mkdir(src.checkpoint, 0o755); err != nil {
			os.RemoveAll(pin)
			return nil, err
		}
		des, err := os.ReadDir(cp)
		if err != nil {
			os.RemoveAll(pin)
			return nil, fmt.Errorf("the snapshot at index %d has no history checkpoint: %w", d.lastSnap, err)
		}
		for _, de := range des {
			if err := linkOrCopy(filepath.Join(cp, de.Name()), filepath.Join(src.checkpoint, de.Name())); err != nil {
				os.RemoveAll(pin)
				return nil, err
			}
		}
	}
	src.last, src.lastTerm = src.snapIndex, src.snapTerm
	if last := min(commit, d.log.LastIndex()); last > src.snapIndex {
		t, err := d.log.Term(last)
		if err != nil {
			removePins(d.dir)
			return nil, fmt.Errorf("read the log's term at %d: %w", last, err)
		}
		src.last, src.lastTerm = last, t
	}
	src.commit = src.last
	src.term = max(src.term, src.lastTerm)
	return src, nil
}

// removePins removes the pin directories of earlier backups.
func removePins(dir string) error {
	des, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, de := range des {
		if strings.HasPrefix(de.Name(), backupPinPrefix) {
			if err := os.RemoveAll(filepath.Join(dir, de.Name())); err != nil {
				return fmt.Errorf("remove an earlier backup's pinned files: %w", err)
			}
		}
	}
	return nil
}

// findSnapshot finds the file of the snapshot at index in dir (of the
// highest term, should there be two).
func findSnapshot(dir string, index uint64) (path string, term uint64, err error) {
	matches, err := filepath.Glob(filepath.Join(dir, fmt.Sprintf("snapshot-%020d-*.snap", index)))
	if err != nil {
		return "", 0, err
	}
	sort.Strings(matches) // the term has 20 digits: the name's order is the term's
	for i := len(matches) - 1; i >= 0; i-- {
		idx, t, ok := parseSnapshotFileName(filepath.Base(matches[i]))
		if ok && idx == index {
			return matches[i], t, nil
		}
	}
	return "", 0, fmt.Errorf("no snapshot file at index %d in %s", index, dir)
}

// parseSnapshotFileName parses package store's snapshot file name,
// "snapshot-<index, 20 digits>-<term, 20 digits>.snap".
func parseSnapshotFileName(name string) (index, term uint64, ok bool) {
	var rest string
	if rest, ok = strings.CutPrefix(name, "snapshot-"); !ok {
		return 0, 0, false
	}
	if rest, ok = strings.CutSuffix(rest, ".snap"); !ok || len(rest) != 41 || rest[20] != '-' {
		return 0, 0, false
	}
	if _, err := fmt.Sscanf(rest, "%020d-%020d", &index, &term); err != nil || index == 0 {
		return 0, 0, false
	}
	for _, c := range rest[:20] + rest[21:] {
		if c < '0' || c > '9' {
			return 0, 0, false
		}
	}
	return index, term, true
}

// linkOrCopy makes dst a hard link to src, or a copy where the file system
// has no links, and on Windows, where a file open under one name cannot
// be deleted under another: the snapshot writer must be free to remove an
// old snapshot while a backup reads it.
func linkOrCopy(src, dst string) error {
	if runtime.GOOS != "windows" {
		if err := os.Link(src, dst); err == nil {
			return nil
		}
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("pin %s for the backup: %w", src, err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("pin %s for the backup: %w", src, err)
	}
	if _, err := stdio.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("pin %s for the backup: %w", src, err)
	}
	return out.Close()
}
