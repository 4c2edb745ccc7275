//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package io

import (
	"errors"
	"os"
	"syscall"
)

// lockFile opens (creating it if needed) the lock file at path and takes
// an exclusive flock on it without waiting; errLockHeld when another open
// file description holds it. flock locks belong to the open file
// description: a second open of the file in the same process is refused
// too, and the lock goes when the descriptor is closed or the process
// exits.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errLockHeld
		}
		return nil, &os.PathError{Op: "flock", Path: path, Err: err}
	}
	return f, nil
}
