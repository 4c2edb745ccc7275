package io

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/geoevent/geoevent/io/store"

	"github.com/geoevent/geoevent/core"
)

// ClusterFileName is the cluster file in a data directory.
const ClusterFileName = "cluster"

// ClusterInfo is what `replica format` records in a data directory: which
// cluster it belongs to and which replica of it this directory is.
type ClusterInfo struct {
	Cluster      core.Uint128 // non-zero; clients register with it
	ReplicaIndex uint32       // 0 .. ReplicaCount-1
	ReplicaCount uint32       // 1, 3 or 5
}

// ErrNotEmpty is returned (wrapped) by Format for a data directory that
// already holds files.
var ErrNotEmpty = errors.New("data directory is not empty")

// Validate checks the fields: a non-zero cluster id, a supported replica
// count and an index within it.
func (ci ClusterInfo) Validate() error {
	switch {
	case ci.Cluster.IsZero():
		return errors.New("the cluster id must not be zero")
	case ci.ReplicaCount != 1 && ci.ReplicaCount != 3 && ci.ReplicaCount != 5:
		return fmt.Errorf("replica count %d is not supported: it must be 1 (no fault tolerance), 3 (survives one failed replica) or 5 (survives two)", ci.ReplicaCount)
	case ci.ReplicaIndex >= ci.ReplicaCount:
		return fmt.Errorf("replica index %d is out of range for a replica count of %d (0..%d)", ci.ReplicaIndex, ci.ReplicaCount, ci.ReplicaCount-1)
	}
	return nil
}

// The cluster file is text, one "key value" per line, in this order:
//
//	# GeoEvent cluster file, written by `replica format`. Do not edit: it is checksummed.
//	version 1
//	cluster <cluster id, canonical UUID>
//	replica <replica index>
//	replica-count <replica count>
//	crc32c <CRC-32C of every byte before this line, 8 hex digits>
const clusterFileHeader = "# GeoEvent cluster file, written by `replica format`. Do not edit: it is checksummed.\n"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func encodeClusterFile(ci ClusterInfo) []byte {
	var b bytes.Buffer
	b.WriteString(clusterFileHeader)
	fmt.Fprintf(&b, "version 1\ncluster %s\nreplica %d\nreplica-count %d\n", ci.Cluster, ci.ReplicaIndex, ci.ReplicaCount)
	fmt.Fprintf(&b, "crc32c %08x\n", crc32.Checksum(b.Bytes(), castagnoli))
	return b.Bytes()
}

func decodeClusterFile(path string, b []byte) (ClusterInfo, error) {
	bad := func(format string, args ...any) (ClusterInfo, error) {
		return ClusterInfo{}, core.Errorf(core.Corruption, "%s: %s", path, fmt.Sprintf(format, args...))
	}
	i := bytes.LastIndex(b, []byte("crc32c "))
	if i < 0 {
		return bad("no crc32c line: not a GeoEvent cluster file")
	}
	body, sumLine := b[:i], strings.TrimSpace(string(b[i+len("crc32c "):]))
	sum, err := strconv.ParseUint(sumLine, 16, 32)
	if err != nil || len(sumLine) != 8 {
		return bad("bad checksum line %q", sumLine)
	}
	if got := crc32.Checksum(body, castagnoli); uint32(sum) != got {
		return bad("checksum mismatch (stored %08x, computed %08x): the file is damaged or was edited", sum, got)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, " ")
		if !ok {
			return bad("malformed line %q", line)
		}
		fields[k] = v
	}
	if fields["version"] != "1" {
		return bad("unsupported cluster file version %q", fields["version"])
	}
	var ci ClusterInfo
	if ci.Cluster, err = core.ParseUUID(fields["cluster"]); err != nil {
		return bad("cluster: %v", err)
	}
	idx, err := strconv.ParseUint(fields["replica"], 10, 32)
	if err != nil {
		return bad("replica: %q is not a replica index", fields["replica"])
	}
	n, err := strconv.ParseUint(fields["replica-count"], 10, 32)
	if err != nil {
		return bad("replica-count: %q is not a number", fields["replica-count"])
	}
	ci.ReplicaIndex, ci.ReplicaCount = uint32(idx), uint32(n)
	if err := ci.Validate(); err != nil {
		return bad("%v", err)
	}
	return ci, nil
}

// ReadClusterFile reads and verifies dir's cluster file. A directory that
// was never formatted gives an error wrapping fs.ErrNotExist.
func ReadClusterFile(dir string) (ClusterInfo, error) {
	path := filepath.Join(dir, ClusterFileName)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return ClusterInfo{}, fmt.Errorf("%s has no cluster file: format it first (replica format): %w", dir, err)
	}
	if err != nil {
		return ClusterInfo{}, fmt.Errorf("read the cluster file: %w", err)
	}
	return decodeClusterFile(path, b)
}

// Format makes dir the data directory of one replica of a cluster: it
// creates dir if needed, refuses one that holds any file but the lock file
// (ErrNotEmpty), and writes the cluster file durably (temporary file,
// fsync, rename, fsync of dir and of its parent), holding dir's lock
// (LockDir) meanwhile: a directory another process uses is refused with a
// *LockedError.
func Format(dir string, ci ClusterInfo) error {
	l, err := FormatAndLock(dir, ci)
	if err != nil {
		return err
	}
	return l.Close()
}

// FormatAndLock is Format, but it returns dir's lock still held, for a
// caller that serves the directory next (OpenLocked) with no moment at
// which another process could take it.
func FormatAndLock(dir string, ci ClusterInfo) (*DirLock, error) {
	if err := ci.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create the data directory: %w", err)
	}
	// A directory with files of its own and no lock file is refused
	// before the lock file is made, which would be litter there. One with
	// a lock file is locked first: another process may be formatting it.
	if other, hasLock, err := otherFile(dir); err != nil {
		return nil, err
	} else if other != "" && !hasLock {
		return nil, notEmpty(dir, other)
	}
	l, err := LockDir(dir)
	if err != nil {
		return nil, err
	}
	if err := formatLocked(dir, ci); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

func formatLocked(dir string, ci ClusterInfo) error {
	other, _, err := otherFile(dir)
	if err != nil {
		return err
	}
	if other != "" {
		return notEmpty(dir, other)
	}
	if err := store.WriteFileAtomic(dir, ClusterFileName, encodeClusterFile(ci)); err != nil {
		return fmt.Errorf("write the cluster file: %w", err)
	}
	// The data directory itself may be new: make its entry durable too.
	return store.SyncDir(filepath.Dir(filepath.Clean(dir)))
}

// otherFile returns the name of a file in dir other than the lock file
// ("" when there is none), and whether the lock file is there.
func otherFile(dir string) (name string, hasLock bool, err error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return "", false, fmt.Errorf("read the data directory: %w", err)
	}
	for _, de := range des {
		if de.Name() == LockFileName {
			hasLock = true
		} else if name == "" {
			name = de.Name()
		}
	}
	return name, hasLock, nil
}

func notEmpty(dir, holds string) error {
	return fmt.Errorf("refusing to format %s: %w (it holds %s); format only a new or empty directory", dir, ErrNotEmpty, holds)
}
