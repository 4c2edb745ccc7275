package geom

import (
	"testing"

	"pgregory.net/rapid"
)

// A cap's ScanRanges, a finer covering than its Ranges, lie within them,
// and none is marked Inside. (TestCapScanRanges checks that they hold every
// point of the cap.)
func TestCapScanRangesWithinRanges(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lat, lon := drawCenter(t)
		cp := NewCap(lat, lon, drawRadius(t))
		rs, srs := cp.Ranges(), cp.ScanRanges()
		for i, sr := range srs {
			if sr.Inside {
				t.Fatalf("scan range %d is marked Inside", i)
			}
			within := false
			for _, r := range rs {
				if r.Min <= sr.Min && sr.Max <= r.Max {
					within = true
					break
				}
			}
			if !within {
				t.Fatalf("scan range %d [%x, %x] is not within the ranges %x", i, sr.Min, sr.Max, rs)
			}
		}
	})
}
