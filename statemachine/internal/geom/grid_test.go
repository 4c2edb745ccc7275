package geom

import (
	"math"
	"testing"

	"pgregory.net/rapid"

	"github.com/geoevent/geoevent/core"
)

// scanRangeOf returns the scan range holding leaf, if any.
func scanRangeOf(rs []ScanRange, leaf uint64) (ScanRange, bool) {
	for _, r := range rs {
		if r.Min <= leaf && leaf <= r.Max {
			return r, true
		}
	}
	return ScanRange{}, false
}

// checkScanRanges checks that scan ranges are sorted, disjoint, made of
// valid leaf ids, and that neighbours alike in Inside are not adjacent.
func checkScanRanges(t tb, rs []ScanRange) {
	t.Helper()
	for i, r := range rs {
		if r.Min > r.Max || r.Min%2 == 0 || r.Max%2 == 0 {
			t.Fatalf("range %d [%x, %x] is malformed", i, r.Min, r.Max)
		}
		if i > 0 && r.Min <= rs[i-1].Max {
			t.Fatalf("ranges %d and %d overlap or are unsorted", i-1, i)
		}
	}
}

// Every point within the radius has its leaf in a scan range, and every
// point whose leaf lies in an Inside range is within the radius.
func TestCapScanRanges(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lat, lon := drawCenter(t)
		radius := drawRadius(t)
		cp := NewCap(lat, lon, radius)
		rs := cp.ScanRanges()
		checkScanRanges(t, rs)
		theta := float64(radius) / earthRadiusMM
		for k := 0; k < 100; k++ {
			f := rapid.Float64Range(0, 1.2).Draw(t, "f")
			if rapid.Bool().Draw(t, "rim") {
				f = 1 + rapid.Float64Range(-1e-3, 1e-3).Draw(t, "rimf")
			}
			pLat, pLon := destination(lat, lon, theta*f, rapid.Float64Range(-math.Pi, math.Pi).Draw(t, "beta"))
			_, ok := cp.Contains(pLat, pLon)
			r, in := scanRangeOf(rs, LeafCell(pLat, pLon))
			if ok && !in {
				t.Fatalf("(%d, %d) is within radius %d but in no range", pLat, pLon, radius)
			}
			if in && r.Inside && !ok {
				t.Fatalf("(%d, %d) at %d mm, radius %d, is in an Inside range", pLat, pLon, DistanceMM(lat, lon, pLat, pLon), radius)
			}
		}
	})
}

// Polygon scan ranges hold every point inside, and Inside ranges only
// points inside.
func TestPolygonScanRanges(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		outer, holes, lat, lon, rMax := drawPolygon(t)
		p, err := NewPolygon(outer, holes)
		if err != nil {
			t.Skip(err)
		}
		rs := p.ScanRanges()
		checkScanRanges(t, rs)
		for k := 0; k < 200; k++ {
			pLat, pLon := destination(lat, lon, rMax*rapid.Float64Range(0, 1.1).Draw(t, "pr"), rapid.Float64Range(-math.Pi, math.Pi).Draw(t, "pb"))
			in := p.ContainsPoint(pLat, pLon)
			r, ok := scanRangeOf(rs, LeafCell(pLat, pLon))
			if in && !ok {
				t.Fatalf("(%d, %d) is inside but in no range", pLat, pLon)
			}
			if ok && r.Inside && !in {
				t.Fatalf("(%d, %d) is outside but in an Inside range", pLat, pLon)
			}
		}
	})
}

func BenchmarkPolygon20ScanRanges(b *testing.B) {
	outer, holes := polygon20()
	p, err := NewPolygon(outer, holes)
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for b.Loop() {
		n += len(p.ScanRanges())
	}
	b.ReportMetric(float64(n)/float64(b.N), "ranges")
}

var _ = core.Coordinate{}
