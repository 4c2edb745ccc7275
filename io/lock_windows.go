//go:build windows

package io

import (
	"errors"
	"os"
	"syscall"
)

// errorSharingViolation is ERROR_SHARING_VIOLATION: another handle's
// sharing mode refuses this open.
const errorSharingViolation syscall.Errno = 32

// lockFile opens (creating it if needed) the lock file at path for writing
// while sharing it for reading only: a second open for writing, by any
// process, fails with a sharing violation (errLockHeld) until this handle
// is closed; readers can still read the holder's pid.
func lockFile(path string) (*os.File, error) {
	p, err := syscall.UTF16PtrFromString(path)
	if err != nil {
		return nil, err
	}
	h, err := syscall.CreateFile(p, syscall.GENERIC_READ|syscall.GENERIC_WRITE, syscall.FILE_SHARE_READ, nil,
		syscall.OPEN_ALWAYS, syscall.FILE_ATTRIBUTE_NORMAL, 0)
	if err != nil {
		if errors.Is(err, errorSharingViolation) {
			return nil, errLockHeld
		}
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(h), path), nil
}
