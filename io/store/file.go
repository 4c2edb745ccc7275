package store

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
)

// noSync makes syncFile and syncDir do nothing. Only tests that simulate
// crashes by editing files themselves set it, to run thousands of recoveries
// quickly; it is never set outside tests.
var noSync bool

// onSync, when set (by tests only), is told of every file and directory
// fsync: "file <path>" or "dir <path>".
var onSync func(what string)

// writeFault, when set (by tests only), is asked before every write to a
// log segment how many of its n bytes to write and with what error to
// fail; a nil error lets the write go ahead whole.
var writeFault atomic.Pointer[func(n int) (int, error)]

// SetWriteFault sets writeFault (nil: none). It is for the tests of the
// packages that use the store, which cannot fill a disk; nothing else may
// call it.
func SetWriteFault(f func(n int) (int, error)) {
	if f == nil {
		writeFault.Store(nil)
		return
	}
	writeFault.Store(&f)
}

// faultyWrite applies writeFault to a write of p through write.
func faultyWrite(p []byte, write func([]byte) (int, error)) (int, error) {
	if f := writeFault.Load(); f != nil {
		if k, err := (*f)(len(p)); err != nil {
			k, _ = write(p[:min(max(k, 0), len(p))])
			return k, err
		}
	}
	return write(p)
}

// fsyncError is a failed fsync. Unlike a failed write, it leaves the file
// in a state nobody knows (the kernel may have dropped the dirty pages), so
// a log never takes one back (see ErrNoSpace).
type fsyncError struct{ err error }

func (e *fsyncError) Error() string { return e.err.Error() }
func (e *fsyncError) Unwrap() error { return e.err }

// syncFile fdatasyncs f (fsync where fdatasync is unavailable).
func syncFile(f *os.File) error {
	if onSync != nil {
		onSync("file " + f.Name())
	}
	if noSync {
		return nil
	}
	if err := fdatasync(f); err != nil {
		return &fsyncError{err}
	}
	return nil
}

// syncDir fsyncs directory dir, making the creation, renaming and removal of
// its entries durable.
func syncDir(dir string) error {
	if onSync != nil {
		onSync("dir " + dir)
	}
	if noSync {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("store: open directory for fsync: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("store: fsync directory %s: %w", dir, &fsyncError{err})
	}
	return nil
}

// WriteFileAtomic replaces dir/name with data: it writes dir/name.tmp,
// fsyncs it, renames it over dir/name and fsyncs dir. After a crash dir/name
// holds either the old or the new contents, whole.
func WriteFileAtomic(dir, name string, data []byte) (err error) {
	path := filepath.Join(dir, name)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("store: create %s: %w", tmp, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("store: write %s: %w", tmp, err)
	}
	if err = syncFile(f); err != nil {
		return fmt.Errorf("store: fsync %s: %w", tmp, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("store: close %s: %w", tmp, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("store: rename %s: %w", tmp, err)
	}
	return syncDir(dir)
}

// SyncDir fsyncs directory dir, making the creation, renaming and removal
// of its entries durable.
func SyncDir(dir string) error { return syncDir(dir) }
