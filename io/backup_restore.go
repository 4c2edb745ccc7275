package io

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	stdio "io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/geoevent/geoevent/io/store"
)

// RestoreOptions says whose data directory a restore makes.
type RestoreOptions struct {
	// Replica, when set, makes the directory that replica's of the
	// backup's cluster instead of the one backed up (every replica holds
	// the same replicated state).
	Replica *uint32
	// WholeCluster says that every replica of the cluster is restored
	// from backups (the cluster's old members are gone): the restored
	// replica votes and campaigns as any other. Without it a replica of a
	// cluster of several starts repairing (core.HardState.Repairing): it
	// neither votes nor campaigns until a leader of a later term has
	// brought it up to date, so that joining a running cluster with an
	// older state cannot undo what that cluster committed. A cluster of
	// one has nobody to wait for: the flag changes nothing there.
	WholeCluster bool
	// Progress, when not nil, is called with the bytes read so far.
	Progress func(n int64)
}

// ErrBadBackup is wrapped by the errors of RestoreBackup for a backup that
// is damaged, cut short or not a backup.
var ErrBadBackup = errors.New("not a whole GeoEvent backup")

// RestoreBackup makes dir, which must not exist or be empty, a data
// directory that `replica start` (or dev) recovers the backup's state
// from: the cluster file, the snapshot and its history checkpoint, a log
// holding the entries after the snapshot, and the hard state (no vote; see
// RestoreOptions). It reads the whole backup into a temporary directory
// beside dir and checks every part against the manifest before it lays
// anything out; on any error it removes the temporary directory and dir
// is as it was. The last step renames the temporary directory to dir.
func RestoreBackup(r stdio.Reader, dir string, opts RestoreOptions) (m BackupManifest, err error) {
	dir = filepath.Clean(dir)
	if des, err := os.ReadDir(dir); err == nil && len(des) > 0 {
		return m, fmt.Errorf("%s is not empty: restore into a new or empty directory", dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return m, err
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return m, err
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".restoring-")
	if err != nil {
		return m, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	m, staged, err := readBackup(r, tmp, opts.Progress)
	if err != nil {
		return m, err
	}
	if err := layOut(tmp, m, staged, opts); err != nil {
		return m, err
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return m, fmt.Errorf("%s: %w", dir, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return m, err
	}
	return m, store.SyncDir(parent)
}

// stagedBackup is where readBackup put the parts.
type stagedBackup struct {
	snapshot string   // the snapshot file's name in tmp ("": none)
	logParts []string // the log's chunk files, in order
}

const (
	stageHistory = ".restore-history"
	stageLog     = ".restore-log"
)

func bad(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadBackup, fmt.Sprintf(format, args...))
}

// readBackup reads the tar stream r into tmp, every part checked against
// the manifest at its end.
func readBackup(r stdio.Reader, tmp string, progress func(int64)) (m BackupManifest, st stagedBackup, err error) {
	cr := &countingReader{r: r, progress: progress}
	tr := tar.NewReader(cr)
	sums := map[string]BackupPart{}
	var order []string
	var manifest []byte
	for {
		h, err := tr.Next()
		if err == stdio.EOF {
			break
		}
		if err != nil {
			return m, st, bad("reading the archive after %d bytes: %v (the file is damaged or cut short)", cr.n, err)
		}
		if h.Typeflag != tar.TypeReg {
			return m, st, bad("%q is not a file", h.Name)
		}
		if _, dup := sums[h.Name]; dup || h.Name == backupManifestName && manifest != nil {
			return m, st, bad("%q appears twice", h.Name)
		}
		if manifest != nil && h.Name != backupManifestSum {
			return m, st, bad("%q follows the manifest", h.Name)
		}
		var dst string
		switch name := h.Name; {
		case name == backupManifestName:
			if manifest, err = readSmall(tr, h.Size, 16<<20); err != nil {
				return m, st, bad("the manifest: %v", err)
			}
			continue
		case name == backupManifestSum:
			if manifest == nil {
				return m, st, bad("the manifest's checksum comes before the manifest")
			}
			b, err := readSmall(tr, h.Size, 100)
			if err != nil {
				return m, st, bad("the manifest's checksum: %v", err)
			}
			sum := sha256.Sum256(manifest)
			if strings.TrimSpace(string(b)) != hex.EncodeToString(sum[:]) {
				return m, st, bad("the manifest does not match its checksum: it is damaged")
			}
			if err := json.Unmarshal(manifest, &m); err != nil {
				return m, st, bad("the manifest: %v", err)
			}
			if err := checkParts(m, sums, order); err != nil {
				return m, st, err
			}
			if _, err := tr.Next(); err != stdio.EOF {
				return m, st, bad("data follows the manifest")
			}
			return m, st, nil
		case name == backupClusterPart:
			dst = filepath.Join(tmp, ".restore-cluster")
		case strings.HasPrefix(name, backupSnapshotDir):
			base := strings.TrimPrefix(name, backupSnapshotDir)
			if _, _, ok := parseSnapshotFileName(base); !ok || st.snapshot != "" {
				return m, st, bad("unexpected snapshot part %q", name)
			}
			st.snapshot, dst = base, filepath.Join(tmp, base)
		case strings.HasPrefix(name, backupHistoryDir):
			base := strings.TrimPrefix(name, backupHistoryDir)
			if !safeBase(base) {
				return m, st, bad("unexpected history part %q", name)
			}
			if err := mkdirStage(tmp, stageHistory); err != nil {
				return m, st, err
			}
			dst = filepath.Join(tmp, stageHistory, base)
		case strings.HasPrefix(name, backupLogDir):
			base := strings.TrimPrefix(name, backupLogDir)
			if n, err := strconv.Atoi(base); err != nil || n != len(st.logParts)+1 || len(base) != 6 {
				return m, st, bad("unexpected log part %q", name)
			}
			if err := mkdirStage(tmp, stageLog); err != nil {
				return m, st, err
			}
			dst = filepath.Join(tmp, stageLog, base)
			st.logParts = append(st.logParts, dst)
		default:
			return m, st, bad("unexpected part %q", name)
		}
		if tmp == "" {
			dst = "" // verifying only
		}
		p, err := copyPart(tr, dst, h.Name)
		if err != nil {
			return m, st, err
		}
		sums[h.Name] = p
		order = append(order, h.Name)
	}
	if manifest == nil {
		return m, st, bad("it ends after %d bytes without its manifest: it was cut short", cr.n)
	}
	return m, st, bad("it ends without the manifest's checksum: it was cut short")
}

// checkParts checks that the parts read are the manifest's, in its order,
// with its sizes and sums, and that the manifest is one this version
// restores.
func checkParts(m BackupManifest, sums map[string]BackupPart, order []string) error {
	if m.Format != backupFormat {
		return bad("format %d; this version restores format %d", m.Format, backupFormat)
	}
	if len(m.Parts) != len(order) {
		return bad("the manifest names %d parts, the archive holds %d", len(m.Parts), len(order))
	}
	for i, p := range m.Parts {
		got := sums[p.Name]
		if order[i] != p.Name {
			return bad("part %d is %q, the manifest says %q", i, order[i], p.Name)
		}
		if got.Size != p.Size || got.SHA256 != p.SHA256 {
			return bad("part %q does not match its checksum in the manifest: it is damaged", p.Name)
		}
	}
	if m.Commit > m.LastIndex || m.LastIndex < m.SnapshotIndex || m.Term < m.LastTerm {
		return bad("the manifest's indexes disagree (snapshot %d, last %d, commit %d)", m.SnapshotIndex, m.LastIndex, m.Commit)
	}
	return nil
}

// layOut turns what readBackup staged in tmp into a data directory.
func layOut(tmp string, m BackupManifest, st stagedBackup, opts RestoreOptions) error {
	b, err := os.ReadFile(filepath.Join(tmp, ".restore-cluster"))
	if err != nil {
		return bad("it has no cluster file")
	}
	info, err := decodeClusterFile("the backup's cluster file", b)
	if err != nil {
		return bad("%v", err)
	}
	if info.Cluster.String() != m.Cluster || info.ReplicaCount != m.ReplicaCount || info.ReplicaIndex != m.ReplicaIndex {
		return bad("the cluster file and the manifest disagree")
	}
	if opts.Replica != nil {
		info.ReplicaIndex = *opts.Replica
		if err := info.Validate(); err != nil {
			return err
		}
	}
	if err := os.Remove(filepath.Join(tmp, ".restore-cluster")); err != nil {
		return err
	}
	if err := store.WriteFileAtomic(tmp, ClusterFileName, encodeClusterFile(info)); err != nil {
		return err
	}
	if m.SnapshotIndex > 0 {
		idx, term, ok := parseSnapshotFileName(st.snapshot)
		if !ok || idx != m.SnapshotIndex || term != m.SnapshotTerm {
			return bad("the snapshot file %q is not the manifest's (index %d, term %d)", st.snapshot, m.SnapshotIndex, m.SnapshotTerm)
		}
		cp := filepath.Join(tmp, checkpointDir(m.SnapshotIndex))
		if err := os.Rename(filepath.Join(tmp, stageHistory), cp); err != nil {
			return bad("the snapshot at index %d has no history checkpoint", m.SnapshotIndex)
		}
		if err := store.SyncDir(cp); err != nil {
			return err
		}
	} else if st.snapshot != "" {
		return bad("the manifest names no snapshot but the archive holds one")
	}
	if err := restoreLog(tmp, m, st.logParts); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(tmp, stageLog)); err != nil {
		return err
	}
	hs := store.HardState{Term: m.Term, Vote: store.NoVote, Commit: m.Commit}
	hs.Repairing = info.ReplicaCount > 1 && !opts.WholeCluster
	if err := store.SaveHardState(tmp, hs); err != nil {
		return err
	}
	return store.SyncDir(tmp)
}

// restoreLog writes a log in tmp holding the entries of the log parts:
// those after the snapshot, up to the manifest's LastIndex.
func restoreLog(tmp string, m BackupManifest, parts []string) error {
	log, _, err := store.OpenLog(tmp, store.LogOptions{})
	if err != nil {
		return err
	}
	if m.SnapshotIndex > 0 {
		if err := log.Reset(m.SnapshotIndex + 1); err != nil {
			log.Close()
			return err
		}
	}
	next, lastTerm := m.SnapshotIndex+1, m.SnapshotTerm
	for _, p := range parts {
		b, err := os.ReadFile(p)
		if err != nil {
			log.Close()
			return err
		}
		var es []store.Entry
		for len(b) > 0 {
			if len(b) < backupEntryHeader {
				log.Close()
				return bad("log part %s ends inside an entry", filepath.Base(p))
			}
			e := store.Entry{Index: binary.LittleEndian.Uint64(b), Term: binary.LittleEndian.Uint64(b[8:])}
			n := uint64(binary.LittleEndian.Uint32(b[16:]))
			if uint64(len(b)-backupEntryHeader) < n || e.Index != next || e.Term < lastTerm || n > store.MaxDataBytes {
				log.Close()
				return bad("log part %s: entry %d is not the one expected (index %d)", filepath.Base(p), e.Index, next)
			}
			e.Data = b[backupEntryHeader : backupEntryHeader+n]
			b = b[backupEntryHeader+n:]
			es = append(es, e)
			next, lastTerm = next+1, e.Term
		}
		if err := log.Append(es); err != nil {
			log.Close()
			return err
		}
	}
	if next != m.LastIndex+1 || lastTerm != m.LastTerm {
		log.Close()
		return bad("the log ends at index %d, the manifest says %d", next-1, m.LastIndex)
	}
	if err := log.Sync(); err != nil {
		log.Close()
		return err
	}
	return log.Close()
}

// mkdirStage makes the staging directory name in tmp ("": none is made).
func mkdirStage(tmp, name string) error {
	if tmp == "" {
		return nil
	}
	return os.MkdirAll(filepath.Join(tmp, name), 0o755)
}

// VerifyBackup reads the backup r to its end and checks every part
// against its manifest, which it returns; it writes nothing. Its errors
// are RestoreBackup's.
func VerifyBackup(r stdio.Reader) (BackupManifest, error) {
	m, _, err := readBackup(r, "", nil)
	if err != nil {
		return m, err
	}
	// The archive's end blocks.
	_, err = stdio.Copy(stdio.Discard, r)
	return m, err
}

// copyPart copies a part to the new file dst, synced, summing it; with dst
// "" it only sums it.
func copyPart(r stdio.Reader, dst, name string) (BackupPart, error) {
	if dst == "" {
		h := sha256.New()
		n, err := stdio.Copy(h, r)
		if err != nil {
			return BackupPart{}, bad("%q: %v", name, err)
		}
		return BackupPart{Name: name, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
	}
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return BackupPart{}, err
	}
	h := sha256.New()
	n, err := stdio.Copy(stdio.MultiWriter(f, h), r)
	if err != nil {
		f.Close()
		if errors.Is(err, stdio.ErrUnexpectedEOF) {
			return BackupPart{}, bad("%q is cut short", name)
		}
		return BackupPart{}, fmt.Errorf("write %s: %w", dst, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return BackupPart{}, err
	}
	if err := f.Close(); err != nil {
		return BackupPart{}, err
	}
	return BackupPart{Name: name, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

func readSmall(r stdio.Reader, size, limit int64) ([]byte, error) {
	if size > limit {
		return nil, fmt.Errorf("%d bytes, more than %d", size, limit)
	}
	var b bytes.Buffer
	if _, err := stdio.Copy(&b, r); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// safeBase reports whether name is a plain file name: no separator, not
// "." or "..", nothing hidden.
func safeBase(name string) bool {
	return name != "" && !strings.ContainsAny(name, `/\:`) && !strings.HasPrefix(name, ".") && filepath.Base(name) == name
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r        stdio.Reader
	n        int64
	progress func(int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.progress != nil && n > 0 {
		c.progress(c.n)
	}
	return n, err
}
