//go:build amd64 || arm64

package prefetch

import "unsafe"

// Line starts loading the cache line that holds p into every level of the
// cache. p need not be valid: a prefetch never faults.
//
//go:noescape
func Line(p unsafe.Pointer)
