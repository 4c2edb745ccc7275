//go:build !linux

package store

import (
	"errors"
	"os"
)

// fdatasync falls back to a full fsync (on Darwin, os.File.Sync issues
// F_FULLFSYNC).
func fdatasync(f *os.File) error { return f.Sync() }

var errPlainSyncsOnly = errors.New("asynchronous fdatasync is written for Linux only")

// PlainSyncs returns why storage's fsyncs make the plain call, which holds
// a Go processor for as long as the disk takes: off Linux, always.
func PlainSyncs() error { return errPlainSyncsOnly }
