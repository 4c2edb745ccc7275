//go:build !(linux && (amd64 || arm64 || riscv64))

package store

import "os"

// dropCached does nothing here; see cache_fadvise.go.
func dropCached(f *os.File, off, n int64) {}
