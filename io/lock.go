package io

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// LockFileName is the lock file in a data directory. A process that uses
// the directory (Format, Open) holds an exclusive lock on it for as long as
// it does, and writes its pid into it. The file stays when the lock is
// released: removing it would let two processes lock two different files
// of the same name (one opened the old file before it was removed, the
// other created a new one).
const LockFileName = "LOCK"

// ErrLocked is returned (wrapped, in a *LockedError) when another process
// holds a data directory's lock.
var ErrLocked = errors.New("data directory is in use by another process")

// LockedError says which process holds a data directory's lock.
type LockedError struct {
	Dir  string
	PID  int    // 0: unknown (the holder has not written it yet, or the file was unreadable)
	Path string // the lock file
}

func (e *LockedError) Error() string {
	pid := "pid unknown"
	if e.PID > 0 {
		pid = "pid " + strconv.Itoa(e.PID)
	}
	return fmt.Sprintf("data directory %s is in use by another process (%s; lock file %s)", e.Dir, pid, e.Path)
}

func (e *LockedError) Unwrap() error { return ErrLocked }

// DirLock is an exclusive lock on a data directory, held until Close (or
// until the process exits: the operating system releases it then, however
// the process ended). Two DirLocks on one directory cannot coexist, even in
// one process.
type DirLock struct {
	dir string
	f   *os.File
}

// LockDir takes the exclusive lock of dir, which must exist, without
// waiting: when another holder has it, the error is a *LockedError naming
// the holder's pid. On Linux and the BSDs (darwin included) the lock is
// flock(2)'s; on Windows the lock file is opened without write sharing;
// elsewhere there is no lock.
func LockDir(dir string) (*DirLock, error) {
	path := filepath.Join(dir, LockFileName)
	f, err := lockFile(path)
	if errors.Is(err, errLockHeld) {
		return nil, &LockedError{Dir: dir, PID: lockHolder(path), Path: path}
	}
	if err != nil {
		return nil, fmt.Errorf("lock the data directory %s: %w", dir, err)
	}
	// The holder's pid, for the message of whoever is refused. Not
	// synced: it is only meaningful while this process lives.
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt(pid, 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("write the pid into %s: %w", path, err)
	}
	return &DirLock{dir: dir, f: f}, nil
}

// Dir is the locked directory.
func (l *DirLock) Dir() string { return l.dir }

// Close releases the lock. It is safe to call more than once.
func (l *DirLock) Close() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the only descriptor releases the lock
	l.f = nil
	return err
}

// lockHolder reads the pid in the lock file at path; 0 when it holds none
// (its holder may not have written it yet).
func lockHolder(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// errLockHeld is lockFile's error when another holder has the lock.
var errLockHeld = errors.New("lock held")

// Open recovers the replica whose data directory is dir and listens on its
// address; call Run to serve. It first takes dir's lock (LockDir): a
// directory another process uses is refused with a *LockedError. The
// server holds the lock until Close. It reads the cluster file, opens the
// log (truncating a torn tail, which it logs; other damage is repaired
// from the peers in a cluster of several replicas, see recoverStorage, and
// is a Corruption error naming the file and the byte offset in a cluster
// of one), loads the hard state, the newest valid snapshot and the log
// entries after it, and builds the replica.
func Open(dir string, opts Options) (*Server, error) {
	// A directory never formatted is named as such, and gets no lock file.
	if _, err := ReadClusterFile(dir); err != nil {
		return nil, err
	}
	l, err := LockDir(dir)
	if err != nil {
		return nil, err
	}
	s, err := openLocked(dir, l, opts)
	if err != nil {
		l.Close()
	}
	return s, err
}

// OpenLocked is Open for a caller that holds the data directory's lock
// (FormatAndLock, LockDir): the server takes the lock over and releases
// it on Close. When it fails, the lock is still the caller's.
func OpenLocked(l *DirLock, opts Options) (*Server, error) {
	return openLocked(l.dir, l, opts)
}
