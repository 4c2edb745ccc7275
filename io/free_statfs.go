//go:build linux || darwin || freebsd

package io

import "syscall"

// freeBytes is what the file system holding dir has free for this
// process; 0 when it cannot tell.
func freeBytes(dir string) uint64 {
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) != nil {
		return 0
	}
	return uint64(st.Bavail) * uint64(st.Bsize) // field types differ by system
}
