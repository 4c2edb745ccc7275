package geom

import (
	"testing"

	"pgregory.net/rapid"
)

// refBoxContains is the box's definition read off the degrees, for the
// property test: a point is in the box when its latitude is between the
// parallels and its longitude on the arc east from minLon to maxLon.
func refBoxContains(minLat, minLon, maxLat, maxLon, lat, lon int64) bool {
	if lat < minLat || lat > maxLat {
		return false
	}
	if lat == maxLatNano || lat == -maxLatNano {
		return true
	}
	const full = 360_000_000_000
	east := func(from, to int64) int64 { return ((to-from)%full + full) % full }
	span := east(minLon, maxLon)
	if minLon == -maxLonNano0 && maxLon == maxLonNano0 {
		return true
	}
	return east(minLon, lon) <= span
}

// drawBoxPoint draws a point near the box's edges and corners, on them, or
// anywhere.
func drawBoxPoint(t *rapid.T, minLat, minLon, maxLat, maxLon int64) (int64, int64) {
	lat := rapid.SampledFrom([]int64{minLat, maxLat}).Draw(t, "lat edge") + rapid.Int64Range(-50, 50).Draw(t, "dlat")
	lon := rapid.SampledFrom([]int64{minLon, maxLon}).Draw(t, "lon edge") + rapid.Int64Range(-50, 50).Draw(t, "dlon")
	switch rapid.IntRange(0, 3).Draw(t, "where") {
	case 0:
		lat = rapid.Int64Range(-maxLatNano, maxLatNano).Draw(t, "lat")
	case 1:
		lon = rapid.Int64Range(-maxLonNano0, maxLonNano0).Draw(t, "lon")
	case 2:
		lat = rapid.Int64Range(min(minLat, maxLat), max(minLat, maxLat)).Draw(t, "lat in")
	}
	return min(max(lat, -maxLatNano), maxLatNano), min(max(lon, -maxLonNano0), maxLonNano0)
}

func drawBox(t *rapid.T) (minLat, minLon, maxLat, maxLon int64) {
	size := rapid.SampledFrom([]int64{0, 1, 1_000_000, 20_000_000, 1_000_000_000, 30_000_000_000, 200_000_000_000}).Draw(t, "size")
	minLat = rapid.Int64Range(-maxLatNano, maxLatNano).Draw(t, "min_lat")
	maxLat = min(minLat+rapid.Int64Range(0, size).Draw(t, "lat span"), maxLatNano)
	minLon = rapid.Int64Range(-maxLonNano0, maxLonNano0).Draw(t, "min_lon")
	maxLon = minLon + rapid.Int64Range(0, 2*size).Draw(t, "lon span")
	if maxLon > maxLonNano0 {
		maxLon -= 2 * maxLonNano0 // across the antimeridian
	}
	if rapid.IntRange(0, 9).Draw(t, "special") == 0 {
		minLon, maxLon = -maxLonNano0, maxLonNano0
	}
	return
}

// TestBoxProperties: Contains agrees with the definition, and every point
// the box contains has its leaf cell in the covering and passed by the
// prefilter.
func TestBoxProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		minLat, minLon, maxLat, maxLon := drawBox(t)
		b := NewBox(minLat, minLon, maxLat, maxLon)
		rs := cellRanges(b.AppendScanRanges(nil))
		f := b.Filter()
		for range 8 {
			lat, lon := drawBoxPoint(t, minLat, minLon, maxLat, maxLon)
			in := b.Contains(lat, lon)
			if want := refBoxContains(minLat, minLon, maxLat, maxLon, lat, lon); in != want {
				t.Fatalf("Contains(%d, %d) = %v, want %v", lat, lon, in, want)
			}
			if !in {
				continue
			}
			leaf := LeafCell(lat, lon)
			if !inRanges(rs, leaf) {
				t.Fatalf("(%d, %d) is in the box, its leaf not in the covering", lat, lon)
			}
			var may [1]bool
			f.MayContainLeaves([]uint64{leaf}, may[:])
			if !may[0] {
				t.Fatalf("(%d, %d) is in the box, the prefilter rules its leaf out", lat, lon)
			}
		}
	})
}

// TestBoxPrefilterPrunes: the prefilter rules out leaves well away from
// the box (it is worth its cost).
func TestBoxPrefilterPrunes(t *testing.T) {
	b := NewBox(deg(52), deg(13), deg(52.01), deg(13.02))
	f := b.Filter()
	var may [4]bool
	leaves := []uint64{LeafCell(deg(52.02), deg(13.01)), LeafCell(deg(51.99), deg(13.01)), LeafCell(deg(52.005), deg(13.03)), LeafCell(deg(52.005), deg(12.99))}
	f.MayContainLeaves(leaves, may[:])
	if may != [4]bool{} {
		t.Fatalf("leaves outside the box judged %v", may)
	}
	f.MayContainLeaves([]uint64{LeafCell(deg(52.005), deg(13.01))}, may[:1])
	if !may[0] {
		t.Fatal("a leaf inside the box ruled out")
	}
}

// TestBoxEdgeCases: boxes on the antimeridian, at the poles, and
// degenerate ones hold the points they should, and their coverings hold
// those points' leaves.
func TestBoxEdgeCases(t *testing.T) {
	const a = maxLonNano0
	for _, c := range []struct {
		minLat, minLon, maxLat, maxLon int64
		lat, lon                       int64
		want                           bool
	}{
		{0, a, 0, -a, 0, a, true}, // the antimeridian itself, named from either side
		{0, a, 0, -a, 0, -a, true},
		{0, -a, 0, -a, 0, a, true},
		{0, a, 0, -a, 0, 0, false},
		{deg(-1), deg(179), deg(1), deg(-179), 0, deg(-179.5), true}, // across the antimeridian
		{deg(-1), deg(179), deg(1), deg(-179), 0, 0, false},
		{deg(89), deg(10), deg(90), deg(20), deg(90), deg(-100), true}, // the pole is on every meridian
		{deg(89), deg(10), deg(90), deg(20), deg(89.5), deg(-100), false},
		{deg(-90), -a, deg(-89), a, deg(-89.5), 5, true},
		{5, 6, 5, 6, 5, 6, true}, // a point
		{5, 6, 5, 6, 5, 7, false},
		{-deg(90), -a, deg(90), a, deg(-12), deg(77), true}, // the globe
	} {
		b := NewBox(c.minLat, c.minLon, c.maxLat, c.maxLon)
		if got := b.Contains(c.lat, c.lon); got != c.want {
			t.Errorf("%+v: Contains = %v", c, got)
		}
		if !c.want {
			continue
		}
		if !inRanges(cellRanges(b.AppendScanRanges(nil)), LeafCell(c.lat, c.lon)) {
			t.Errorf("%+v: the point's leaf is not in the covering", c)
		}
		f := b.Filter()
		var may [1]bool
		if f.MayContainLeaves([]uint64{LeafCell(c.lat, c.lon)}, may[:]); !may[0] {
			t.Errorf("%+v: the prefilter rules the point's leaf out", c)
		}
	}
}
