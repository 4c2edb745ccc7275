package prefetch

import (
	"testing"
	"unsafe"
)

// A prefetch never faults, whatever it is given, and changes nothing.
func TestLine(t *testing.T) {
	buf := make([]uint64, 64)
	for i := range buf {
		buf[i] = uint64(i)
	}
	Line(nil)
	for i := range buf {
		Line(unsafe.Pointer(&buf[i]))
	}
	for i, v := range buf {
		if v != uint64(i) {
			t.Fatalf("buf[%d] = %d", i, v)
		}
	}
}
