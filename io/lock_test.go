package io

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// lockingPlatform: the platforms whose lock refuses a second holder.
func lockingPlatform() bool {
	switch runtime.GOOS {
	case "linux", "darwin", "freebsd", "netbsd", "openbsd", "dragonfly", "windows":
		return true
	}
	return false
}

func TestLockDirIsExclusiveAndNamesTheHolder(t *testing.T) {
	if !lockingPlatform() {
		t.Skip("no directory lock on " + runtime.GOOS)
	}
	dir := t.TempDir()
	l, err := LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, LockFileName))
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Fatalf("lock file holds %q (%v), want this process's pid %d", b, err, os.Getpid())
	}
	// A second lock, even in this process (another open of the file), is
	// refused at once, naming the directory and the holder.
	_, err = LockDir(dir)
	var le *LockedError
	if !errors.As(err, &le) || !errors.Is(err, ErrLocked) {
		t.Fatalf("second LockDir: %v, want a *LockedError", err)
	}
	if le.PID != os.Getpid() || le.Dir != dir {
		t.Fatalf("LockedError %+v, want pid %d and dir %s", le, os.Getpid(), dir)
	}
	if msg := err.Error(); !strings.Contains(msg, dir) || !strings.Contains(msg, "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("message %q does not name the directory and the pid", msg)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	l2, err := LockDir(dir)
	if err != nil {
		t.Fatalf("LockDir after Close: %v", err)
	}
	l2.Close()
}

// Format and Open take the lock: a directory being served can be neither
// formatted nor opened again, and a closed server releases it. The lock
// file does not make a directory "not empty" for Format.
func TestFormatAndOpenHoldTheLock(t *testing.T) {
	if !lockingPlatform() {
		t.Skip("no directory lock on " + runtime.GOOS)
	}
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A lock file left by an earlier process is no obstacle to Format.
	l, err := LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	info := ClusterInfo{Cluster: testCluster, ReplicaIndex: 0, ReplicaCount: 1}
	if err := Format(dir, info); !errors.Is(err, ErrLocked) {
		t.Fatalf("Format of a locked directory: %v, want ErrLocked", err)
	}
	l.Close()
	if err := Format(dir, info); err != nil {
		t.Fatalf("Format of a directory holding only the lock file: %v", err)
	}
	if err := Format(dir, info); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("second Format: %v, want ErrNotEmpty", err)
	}

	r := serve(t, dir, Options{})
	if _, err := Open(dir, Options{Addresses: []string{"127.0.0.1:0"}}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r2 := serve(t, dir, Options{}) // the lock was released
	if err := r2.Close(); err != nil {
		t.Fatal(err)
	}

	// FormatAndLock hands the lock on to OpenLocked with no gap.
	dir2 := filepath.Join(t.TempDir(), "new")
	l, err = FormatAndLock(dir2, info)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LockDir(dir2); !errors.Is(err, ErrLocked) {
		t.Fatalf("LockDir while FormatAndLock's lock is held: %v", err)
	}
	s, err := OpenLocked(l, Options{Addresses: []string{"127.0.0.1:0"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LockDir(dir2); !errors.Is(err, ErrLocked) {
		t.Fatalf("LockDir while the server holds the lock: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = LockDir(dir2)
	if err != nil {
		t.Fatalf("LockDir after Close: %v", err)
	}
	l.Close()

	// A directory with files of its own gets no lock file from Format.
	dir3 := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir3, "notes"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Format(dir3, info); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("Format of a directory with a file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir3, LockFileName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Format left a lock file in a directory it refused: %v", err)
	}
	// Nor does Open in a directory never formatted.
	if _, err := Open(dir3, Options{Addresses: []string{"127.0.0.1:0"}}); err == nil {
		t.Fatal("Open of a directory never formatted succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir3, LockFileName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open left a lock file in a directory never formatted: %v", err)
	}
}
