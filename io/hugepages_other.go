//go:build !linux

package io

// AdviseHugePages is a Linux matter (hugepages_linux.go); elsewhere it does
// nothing.
func AdviseHugePages() {}
