//go:build !linux

package hugepages

// Advise is a Linux matter (hugepages_linux.go); elsewhere it does
// nothing.
func Advise() {}
