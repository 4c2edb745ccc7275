package geom

import (
	"fmt"
	"math"
	"testing"

	"pgregory.net/rapid"

	"github.com/geoevent/geoevent/core"
)

// refPlanarContains is the even-odd rule in floating point with a
// different formulation (the crossing's longitude), for points that are
// not within tol of any edge.
func refPlanarContains(rings [][]core.Coordinate, lat, lon int64) (in, near bool) {
	const tol = 1e3 // nanodegrees
	for _, ring := range rings {
		n := len(ring)
		for i := range n {
			a, b := ring[i], ring[(i+1)%n]
			ax, ay, bx, by := float64(a.LonNano), float64(a.LatNano), float64(b.LonNano), float64(b.LatNano)
			px, py := float64(lon), float64(lat)
			// Distance from the point to the segment.
			dx, dy := bx-ax, by-ay
			t := math.Max(0, math.Min(1, ((px-ax)*dx+(py-ay)*dy)/(dx*dx+dy*dy)))
			if math.Hypot(ax+t*dx-px, ay+t*dy-py) < tol {
				near = true
			}
			if (ay > py) != (by > py) {
				x := ax + (py-ay)*(bx-ax)/(by-ay)
				if px < x {
					in = !in
				}
			}
		}
	}
	return in, near
}

// TestPlanarPolygonModel: on random polygons (star-shaped rings around a
// center, one hole), ContainsWork agrees with the float reference away
// from the edges, and every inside point's leaf is in the covering and
// passes the prefilter.
func TestPlanarPolygonModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		clat := rapid.Int64Range(-80e9, 80e9).Draw(t, "lat")
		clon := rapid.Int64Range(-170e9, 170e9).Draw(t, "lon")
		size := rapid.SampledFrom([]int64{10_000, 10_000_000, 5_000_000_000}).Draw(t, "size")
		star := func(label string, scale int64, n int) []core.Coordinate {
			ring := make([]core.Coordinate, n)
			for i := range ring {
				a := 2 * math.Pi * float64(i) / float64(n)
				r := float64(scale) * rapid.Float64Range(0.3, 1).Draw(t, fmt.Sprint(label, i))
				ring[i] = core.Coordinate{LatNano: clat + int64(r*math.Sin(a)), LonNano: clon + int64(r*math.Cos(a))}
			}
			return ring
		}
		outer := star("outer", size, rapid.IntRange(3, 40).Draw(t, "n"))
		var holes [][]core.Coordinate
		if rapid.Bool().Draw(t, "hole") {
			holes = [][]core.Coordinate{star("hole", size/5, rapid.IntRange(3, 8).Draw(t, "hn"))}
		}
		p, err := NewPlanarPolygon(outer, holes)
		if err != nil {
			t.Skip(err) // a degenerate draw
		}
		rs := cellRanges(p.Box().AppendScanRanges(nil))
		f := p.Box().Filter()
		for k := range 20 {
			lat := clat + rapid.Int64Range(-size, size).Draw(t, fmt.Sprint("plat", k))
			lon := clon + rapid.Int64Range(-size, size).Draw(t, fmt.Sprint("plon", k))
			in, work := p.ContainsWork(lat, lon)
			if work < 1 || work > p.Edges()+1 {
				t.Fatalf("work %d for %d edges", work, p.Edges())
			}
			want, near := refPlanarContains(append([][]core.Coordinate{outer}, holes...), lat, lon)
			if !near && in != want {
				t.Fatalf("(%d, %d): %v, want %v", lat, lon, in, want)
			}
			if in {
				leaf := LeafCell(lat, lon)
				var may [1]bool
				if f.MayContainLeaves([]uint64{leaf}, may[:]); !may[0] || !inRanges(rs, leaf) {
					t.Fatalf("(%d, %d) is inside, its leaf not scanned", lat, lon)
				}
			}
		}
	})
}

func TestPlanarPolygonEdges(t *testing.T) {
	// A box along the 52nd parallel over 11 degrees of longitude: its
	// northern edge is the parallel itself, where a geodesic edge bulges
	// about 14 km north.
	box := []core.Coordinate{{LatNano: deg(50), LonNano: deg(0)}, {LatNano: deg(50), LonNano: deg(11)}, {LatNano: deg(52), LonNano: deg(11)}, {LatNano: deg(52), LonNano: deg(0)}}
	p, err := NewPlanarPolygon(box, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewPolygon(box, nil)
	if err != nil {
		t.Fatal(err)
	}
	north := deg(52.1) // 11 km north of the parallel, at the middle
	if in, _ := p.ContainsWork(north, deg(5.5)); in {
		t.Error("planar: a point north of the parallel is inside")
	}
	if !g.ContainsPoint(north, deg(5.5)) {
		t.Error("geodesic: the edge should bulge past 52.1 at the middle")
	}
	for _, c := range []struct {
		lat, lon int64
		want     bool
	}{
		{deg(51), deg(0), true},          // on the west edge
		{deg(50), deg(5), true},          // on the south edge
		{deg(51), deg(11), false},        // on the east edge
		{deg(52), deg(5), false},         // on the north edge
		{deg(52) - 1, deg(11) - 1, true}, // a nanodegree inside the corner
	} {
		if in, _ := p.ContainsWork(c.lat, c.lon); in != c.want {
			t.Errorf("(%d, %d): %v, want %v", c.lat, c.lon, in, c.want)
		}
	}
	// Errors.
	_, err = NewPlanarPolygon([]core.Coordinate{{LatNano: 0, LonNano: 0}, {LatNano: 0, LonNano: 1}, {LatNano: 0, LonNano: 2}}, nil)
	wantCode(t, err, core.InvalidPolygon.Code)
	_, err = NewPlanarPolygon([]core.Coordinate{{LatNano: 0, LonNano: 0}, {LatNano: 0, LonNano: 1}}, nil)
	wantCode(t, err, core.InvalidPolygon.Code)
	_, err = NewPlanarPolygon([]core.Coordinate{{LatNano: 0, LonNano: 0}, {LatNano: 0, LonNano: 1}, {LatNano: 0, LonNano: 1}, {LatNano: 1, LonNano: 1}}, nil)
	wantCode(t, err, core.InvalidPolygon.Code)
	_, err = NewPlanarPolygon([]core.Coordinate{{LatNano: 0, LonNano: 0}, {LatNano: 0, LonNano: 1}, {LatNano: 91e9, LonNano: 1}}, nil)
	wantCode(t, err, core.InvalidCoordinates.Code)
	_, err = NewPlanarPolygon(box, make([][]core.Coordinate, 101))
	wantCode(t, err, core.PolygonTooComplex.Code)
	_, err = NewPlanarPolygon(make([]core.Coordinate, 1002), nil)
	wantCode(t, err, core.PolygonTooComplex.Code)
}

func TestCross(t *testing.T) {
	const big = 360_000_000_000
	for _, c := range []struct {
		x1, y1, x2, y2 int64
		want           int
	}{
		{1, 0, 0, 1, 1}, {0, 1, 1, 0, -1}, {2, 4, 1, 2, 0},
		{big, big / 2, big - 1, big / 2, 1}, {-big, big, big, -big, 0}, {-big, big, big, -big + 1, -1},
	} {
		if got := cross(c.x1, c.y1, c.x2, c.y2); got != c.want {
			t.Errorf("cross(%d, %d, %d, %d) = %d, want %d", c.x1, c.y1, c.x2, c.y2, got, c.want)
		}
	}
}
