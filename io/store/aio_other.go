//go:build linux && !(amd64 || arm64 || riscv64 || loong64 || ppc64le)

package store

// aioFdatasync is not written for this architecture (iocb's layout is
// that of a little-endian 64-bit machine): fdatasync makes the plain call.
func aioFdatasync(fd uintptr) error { return errAIOUnavailable }
