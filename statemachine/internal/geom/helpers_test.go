package geom

import (
	"pgregory.net/rapid"

	"errors"
	"math"
	"slices"

	"github.com/golang/geo/r3"
	"github.com/golang/geo/s2"

	"github.com/geoevent/geoevent/core"
)

// deg converts degrees to nanodegrees.
func deg(d float64) int64 { return int64(math.Round(d * 1e9)) }

// ll builds a coordinate from degrees.
func ll(latDeg, lonDeg float64) core.Coordinate {
	return core.Coordinate{LatNano: deg(latDeg), LonNano: deg(lonDeg)}
}

// wrapLonNano brings a longitude into [-180e9, 180e9].
func wrapLonNano(lon int64) int64 {
	const full = 360_000_000_000
	for lon > maxLonNano {
		lon -= full
	}
	for lon < -maxLonNano {
		lon += full
	}
	return lon
}

// destination returns the point at angular distance theta (radians) and
// bearing beta (radians, clockwise from north) from (lat, lon) in
// nanodegrees, in nanodegrees.
func destination(latNano, lonNano int64, theta, beta float64) (int64, int64) {
	if latNano == maxLatNano || latNano == -maxLatNano {
		// At a pole, bearings are measured from the meridian of lonNano.
		sign := float64(latNano / maxLatNano)
		p2 := sign * (math.Pi/2 - theta)
		l2 := float64(lonNano)*nanoToRad + math.Pi/2 + sign*(math.Pi/2-beta)
		lat := max(-maxLatNano, min(maxLatNano, int64(math.Round(p2/nanoToRad))))
		return lat, wrapLonNano(int64(math.Round(l2 / nanoToRad)))
	}
	// With vectors, which stay precise near the poles.
	p1, l1 := float64(latNano)*nanoToRad, float64(lonNano)*nanoToRad
	c := r3.Vector{X: math.Cos(p1) * math.Cos(l1), Y: math.Cos(p1) * math.Sin(l1), Z: math.Sin(p1)}
	east := r3.Vector{X: -math.Sin(l1), Y: math.Cos(l1), Z: 0}
	north := c.Cross(east)
	d := c.Mul(math.Cos(theta)).Add(north.Mul(math.Sin(theta) * math.Cos(beta))).Add(east.Mul(math.Sin(theta) * math.Sin(beta)))
	lat := int64(math.Round(math.Atan2(d.Z, math.Hypot(d.X, d.Y)) / nanoToRad))
	lat = max(-maxLatNano, min(maxLatNano, lat))
	lon := int64(math.Round(math.Atan2(d.Y, d.X) / nanoToRad))
	return lat, wrapLonNano(lon)
}

// tb is what checks need of *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

// inRanges reports whether leaf lies in one of the ranges.
func inRanges(rs []CellRange, leaf uint64) bool {
	i, found := slices.BinarySearchFunc(rs, leaf, func(r CellRange, x uint64) int {
		switch {
		case r.Max < x:
			return -1
		case r.Min > x:
			return 1
		}
		return 0
	})
	_ = i
	return found
}

// checkRanges fails unless rs are sorted, disjoint, non-adjacent ranges of
// valid leaf ids.
func checkRanges(t tb, rs []CellRange) {
	t.Helper()
	if len(rs) == 0 {
		t.Fatalf("no ranges")
	}
	for i, r := range rs {
		if r.Min > r.Max || r.Min&1 == 0 || r.Max&1 == 0 || r.Min < firstLeaf || r.Max > lastLeaf {
			t.Fatalf("bad range %d: %x..%x", i, r.Min, r.Max)
		}
		if i > 0 && r.Min <= rs[i-1].Max+2 {
			t.Fatalf("ranges %d and %d overlap or touch: %x..%x, %x..%x", i-1, i, rs[i-1].Min, rs[i-1].Max, r.Min, r.Max)
		}
	}
}

// wantCode fails unless err is a *core.Error with the code.
func wantCode(t tb, err error, code core.Code) {
	t.Helper()
	var e *core.Error
	if !errors.As(err, &e) {
		t.Fatalf("got error %v, want code %d", err, code)
	}
	if e.Code != code {
		t.Fatalf("got %v, want code %d", err, code)
	}
}

// regular returns an n-gon of angular radius r (radians) about a center in
// degrees, counter-clockwise.
func regular(latDeg, lonDeg, r float64, n int) []core.Coordinate {
	out := make([]core.Coordinate, n)
	cl, cn := deg(latDeg), deg(lonDeg)
	for i := range out {
		lat, lon := destination(cl, cn, r, -2*math.Pi*float64(i)/float64(n))
		out[i] = core.Coordinate{LatNano: lat, LonNano: lon}
	}
	return out
}

// reversed returns a reversed copy of a ring.
func reversed(ring []core.Coordinate) []core.Coordinate {
	out := slices.Clone(ring)
	slices.Reverse(out)
	return out
}

// refPolygon is an independent reference: S2 loops normalized by S2 itself.
type refPolygon struct {
	outer *s2.Loop
	holes []*s2.Loop
}

func newRef(outer []core.Coordinate, holes [][]core.Coordinate) *refPolygon {
	mk := func(ring []core.Coordinate) *s2.Loop {
		pts := make([]s2.Point, 0, len(ring))
		for _, v := range ring {
			pts = append(pts, s2.Point{Vector: pointFromNano(v.LatNano, v.LonNano)})
		}
		if len(pts) > 1 && pts[0] == pts[len(pts)-1] {
			pts = pts[:len(pts)-1]
		}
		l := s2.LoopFromPoints(pts)
		l.Normalize()
		return l
	}
	r := &refPolygon{outer: mk(outer)}
	for _, h := range holes {
		r.holes = append(r.holes, mk(h))
	}
	return r
}

func (r *refPolygon) contains(latNano, lonNano int64) bool {
	p := s2.Point{Vector: pointFromNano(latNano, lonNano)}
	if !r.outer.ContainsPoint(p) {
		return false
	}
	for _, h := range r.holes {
		if h.ContainsPoint(p) {
			return false
		}
	}
	return true
}

// boundaryDistance is the angular distance (radians) from the point to the
// nearest edge of the reference polygon.
func (r *refPolygon) boundaryDistance(latNano, lonNano int64) float64 {
	p := s2.Point{Vector: pointFromNano(latNano, lonNano)}
	best := math.Inf(1)
	for _, l := range append([]*s2.Loop{r.outer}, r.holes...) {
		n := l.NumVertices()
		for i := 0; i < n; i++ {
			d := s2.DistanceFromSegment(p, l.Vertex(i), l.Vertex(i+1)).Radians()
			best = min(best, d)
		}
	}
	return best
}

// leafProbe is a point a polygon test judges, with its leaf cell id.
type leafProbe struct {
	lat, lon int64
	leaf     uint64
}

func probeAt(lat, lon int64) leafProbe { return leafProbe{lat, lon, LeafCell(lat, lon)} }

// drawNearEdge draws a point near an edge of one of rings: at fraction
// along (drawn) of the way from a vertex to the next, moved by up to one
// of offsets nanodegrees on each axis, kept on the globe.
func drawNearEdge(t *rapid.T, rings [][]core.Coordinate, along *rapid.Generator[float64], offsets []int64) leafProbe {
	ring := rapid.SampledFrom(rings).Draw(t, "ring")
	i := rapid.IntRange(0, len(ring)-1).Draw(t, "vertex")
	a, b := ring[i], ring[(i+1)%len(ring)]
	f := along.Draw(t, "along")
	off := rapid.SampledFrom(offsets).Draw(t, "offset")
	lat := a.LatNano + int64(f*float64(b.LatNano-a.LatNano)) + rapid.Int64Range(-off, off).Draw(t, "dlat")
	lon := a.LonNano + int64(f*float64(b.LonNano-a.LonNano)) + rapid.Int64Range(-off, off).Draw(t, "dlon")
	return probeAt(min(max(lat, -maxLatNano), maxLatNano), min(max(lon, -maxLonNano), maxLonNano))
}

// checkClassifier checks that classify never contradicts p.ContainsPoint
// on probes: a leaf judged outside holds no contained point, one judged
// inside no other.
func checkClassifier(t *rapid.T, order string, p *Polygon, probes []leafProbe, classify func(leaf uint64) int) {
	for _, pr := range probes {
		got := p.ContainsPoint(pr.lat, pr.lon)
		switch classify(pr.leaf) {
		case LeafOutside:
			if got {
				t.Fatalf("%s: leaf of (%d, %d) judged outside, but the point is inside", order, pr.lat, pr.lon)
			}
		case LeafInside:
			if !got {
				t.Fatalf("%s: leaf of (%d, %d) judged inside, but the point is outside", order, pr.lat, pr.lon)
			}
		}
	}
}
