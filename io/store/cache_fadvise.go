//go:build linux && (amd64 || arm64 || riscv64)

package store

import (
	"os"
	"syscall"
)

// fadvDontNeed is POSIX_FADV_DONTNEED on these architectures.
const fadvDontNeed = 4

// dropCached asks the kernel to drop f's pages in [off, off+n) (n = 0: to
// the end of the file) from the page cache (posix_fadvise
// POSIX_FADV_DONTNEED). Clean pages go at once; dirty ones are only queued
// for writeback, so callers drop what they have just fsynced. It is advice:
// a failure changes nothing that matters, so it is ignored. The 64-bit
// fadvise64 system call takes (fd, offset, len, advice) on these
// architectures; elsewhere dropCached does nothing (cache_other.go).
func dropCached(f *os.File, off, n int64) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_, _, _ = syscall.Syscall6(syscall.SYS_FADVISE64, fd, uintptr(off), uintptr(n), fadvDontNeed, 0, 0)
	})
}
