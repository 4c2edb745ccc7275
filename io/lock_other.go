//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly || windows)

package io

import "os"

// lockFile opens (creating it if needed) the lock file at path. This
// platform has no lock here: a second process is not refused.
func lockFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
}
