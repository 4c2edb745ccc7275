package statemachine

import (
	"syscall"
	"time"
	"unsafe"
)

// threadCPU is the processor time the calling thread has used (the caller
// locks itself to its thread), by CLOCK_THREAD_CPUTIME_ID: a page's cost
// without the time other processes took the processor from it.
func threadCPU() time.Duration {
	var ts syscall.Timespec
	const clockThreadCPUTimeID = 3
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}
