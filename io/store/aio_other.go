//go:build linux && !(amd64 || arm64 || riscv64 || loong64 || ppc64le)

package store

import "errors"

// errNoAIO: this package has no iocb for this architecture (its layout is
// that of a little-endian 64-bit machine).
var errNoAIO = errors.New("no AIO request layout for this architecture")

// aioFdatasync is not written for this architecture: fdatasync makes the
// plain call.
func aioFdatasync(fd uintptr) (started bool, err error) { return false, errNoAIO }
