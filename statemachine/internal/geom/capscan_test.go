package geom

import (
	"testing"

	"pgregory.net/rapid"
)

// A cap's ScanRanges are its Ranges, none marked Inside.
func TestCapScanRangesAreRanges(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lat, lon := drawCenter(t)
		cp := NewCap(lat, lon, drawRadius(t))
		rs, srs := cp.Ranges(), cp.ScanRanges()
		if len(rs) != len(srs) {
			t.Fatalf("%d ranges, %d scan ranges", len(rs), len(srs))
		}
		for i := range rs {
			if srs[i].CellRange != rs[i] || srs[i].Inside {
				t.Fatalf("scan range %d is %+v, range %+v", i, srs[i], rs[i])
			}
		}
	})
}
