//go:build !linux

package store

import "os"

// fdatasync falls back to a full fsync (on Darwin, os.File.Sync issues
// F_FULLFSYNC).
func fdatasync(f *os.File) error { return f.Sync() }
