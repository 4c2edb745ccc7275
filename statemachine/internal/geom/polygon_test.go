package geom

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/geoevent/geoevent/core"
)

// square returns the square ring with corners (lat0, lon0), (lat1, lon1)
// in degrees, counter-clockwise.
func square(lat0, lon0, lat1, lon1 float64) []core.Coordinate {
	return []core.Coordinate{ll(lat0, lon0), ll(lat0, lon1), ll(lat1, lon1), ll(lat1, lon0)}
}

func TestPolygonErrors(t *testing.T) {
	outer := square(0, 0, 10, 10)
	big := regular(0, 0, 0.1, 1001)
	cases := []struct {
		name  string
		outer []core.Coordinate
		holes [][]core.Coordinate
		code  core.Code
	}{
		{"bowtie", []core.Coordinate{ll(0, 0), ll(1, 1), ll(1, 0), ll(0, 1)}, nil, 103},
		{"bowtie closed", []core.Coordinate{ll(0, 0), ll(1, 1), ll(1, 0), ll(0, 1), ll(0, 0)}, nil, 103},
		{"figure eight", []core.Coordinate{ll(0, 0), ll(0, 2), ll(2, 0), ll(2, 2)}, nil, 103},
		{"self-crossing spike", []core.Coordinate{ll(0, 0), ll(0, 4), ll(4, 4), ll(4, 2), ll(-1, 2), ll(-1, 1), ll(4, 1), ll(4, 0)}, nil, 103},
		{"duplicate vertex", []core.Coordinate{ll(0, 0), ll(0, 1), ll(1, 1), ll(0, 1), ll(1, 0)}, nil, 103},
		{"consecutive duplicate", []core.Coordinate{ll(0, 0), ll(0, 1), ll(0, 1), ll(1, 1)}, nil, 103},
		{"non-adjacent duplicate", []core.Coordinate{ll(0, 0), ll(0, 2), ll(1, 1), ll(2, 2), ll(2, 0), ll(1, 1)}, nil, 103},
		{"pole twice", []core.Coordinate{ll(80, 0), ll(90, 0), ll(80, 90), ll(90, 45)}, nil, 103},
		{"antimeridian twice", []core.Coordinate{ll(1, 179), ll(0, 180), ll(1, -179), ll(0, -180)}, nil, 103},
		{"closing vertex spelled differently", []core.Coordinate{ll(0, 180), ll(1, 179), ll(1, -179), ll(0, -180)}, nil, 0},
		{"two vertices", []core.Coordinate{ll(0, 0), ll(1, 1)}, nil, 103},
		{"two vertices closed", []core.Coordinate{ll(0, 0), ll(1, 1), ll(0, 0)}, nil, 103},
		{"no vertices", nil, nil, 103},
		{"1001 vertices", big, nil, 102},
		{"1002 vertices", append(slices.Clone(big), ll(5, 5)), nil, 102},
		{"101 holes", outer, slices.Repeat([][]core.Coordinate{square(1, 1, 2, 2)}, 101), 102},
		{"hole of 1001 vertices", regular(0, 0, 0.5, 100), [][]core.Coordinate{big}, 102},
		{"lat out of range", []core.Coordinate{ll(0, 0), {LatNano: 90_000_000_001, LonNano: 0}, ll(1, 1)}, nil, 100},
		{"lon out of range", []core.Coordinate{ll(0, 0), ll(1, 0), {LatNano: 0, LonNano: -180_000_000_001}}, nil, 100},
		{"hole vertex out of range", outer, [][]core.Coordinate{{ll(1, 1), ll(1, 2), {LatNano: math.MinInt64, LonNano: 0}}}, 100},
		{"hole outside outer", outer, [][]core.Coordinate{square(20, 20, 21, 21)}, 103},
		{"hole far away", outer, [][]core.Coordinate{square(-50, 100, -49, 101)}, 103},
		{"hole containing outer", square(1, 1, 2, 2), [][]core.Coordinate{outer}, 103},
		{"hole equal to outer", outer, [][]core.Coordinate{outer}, 103},
		{"hole crossing outer", outer, [][]core.Coordinate{square(5, 5, 11, 6)}, 103},
		{"hole touching outer edge", outer, [][]core.Coordinate{{ll(0, 5), ll(1, 6), ll(1, 4)}}, 103},
		{"hole sharing outer vertex", outer, [][]core.Coordinate{{ll(0, 0), ll(1, 2), ll(2, 1)}}, 103},
		{"overlapping holes", outer, [][]core.Coordinate{square(1, 1, 3, 3), square(2, 2, 4, 4)}, 103},
		{"touching holes", outer, [][]core.Coordinate{square(1, 1, 3, 3), square(3, 1, 4, 3)}, 103},
		{"holes sharing a vertex", outer, [][]core.Coordinate{square(1, 1, 3, 3), square(3, 3, 4, 4)}, 103},
		{"hole inside hole", outer, [][]core.Coordinate{square(1, 1, 5, 5), square(2, 2, 3, 3)}, 103},
		{"hole around hole", outer, [][]core.Coordinate{square(2, 2, 3, 3), square(1, 1, 5, 5)}, 103},
		{"equal holes", outer, [][]core.Coordinate{square(1, 1, 3, 3), square(1, 1, 3, 3)}, 103},
		{"self-crossing hole", outer, [][]core.Coordinate{{ll(1, 1), ll(2, 2), ll(2, 1), ll(1, 2)}}, 103},
		{"collinear on equator", []core.Coordinate{ll(0, 0), ll(0, 1), ll(0, 2)}, nil, 103},
		{"collinear on meridian", []core.Coordinate{ll(0, 0), ll(1, 0), ll(3, 0), ll(2, 0)}, nil, 103},
		{"spike back along an edge", []core.Coordinate{ll(0, 0), ll(0, 2), ll(0, 1), ll(1, 1)}, nil, 103},
		{"equator as a ring", []core.Coordinate{ll(0, 0), ll(0, 90), ll(0, 180), ll(0, -90)}, nil, 103},
		{"great circle ring", []core.Coordinate{ll(0, 0), ll(45, 90), ll(0, 180), ll(-45, -90)}, nil, 103},
		{"antipodal edge", []core.Coordinate{ll(0, 0), ll(0, 180), ll(10, 90)}, nil, 103},
		{"antipodal edge via poles", []core.Coordinate{ll(90, 0), ll(-90, 0), ll(0, 90)}, nil, 103},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPolygon(tc.outer, tc.holes)
			if tc.code == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if p != nil {
				t.Fatalf("accepted")
			}
			wantCode(t, err, tc.code)
			t.Log(err)
		})
	}
}

func TestPolygonAcceptsLimits(t *testing.T) {
	outer := regular(38, 13, 0.05, core.MaxPolygonVertices)
	var holes [][]core.Coordinate
	for k := 0; k < core.MaxPolygonHoles; k++ {
		lat := 38 + (float64(k/10)-4.5)*0.004
		lon := 13 + (float64(k%10)-4.5)*0.005
		holes = append(holes, regular(lat, lon, 1e-5, 3))
	}
	p, err := NewPolygon(outer, holes)
	if err != nil {
		t.Fatal(err)
	}
	if !p.ContainsPoint(deg(38.02), deg(13.02)) || p.ContainsPoint(deg(38), deg(20)) {
		t.Fatal("wrong containment")
	}
	// The hole centers are outside, points between holes inside.
	for k := 0; k < core.MaxPolygonHoles; k++ {
		lat := 38 + (float64(k/10)-4.5)*0.004
		lon := 13 + (float64(k%10)-4.5)*0.005
		if p.ContainsPoint(deg(lat), deg(lon)) {
			t.Fatalf("hole %d center inside", k)
		}
		if !p.ContainsPoint(deg(lat+0.002), deg(lon+0.0025)) {
			t.Fatalf("between holes %d: outside", k)
		}
	}
	// Closed rings of the maximal size are accepted too.
	closed := append(slices.Clone(outer), outer[0])
	if _, err := NewPolygon(closed, nil); err != nil {
		t.Fatal(err)
	}
}

// maxPolygon is the largest input: 101 rings of 1000 vertices.
func maxPolygon() ([]core.Coordinate, [][]core.Coordinate) {
	outer := regular(38, 13, 0.1, core.MaxPolygonVertices)
	var holes [][]core.Coordinate
	for k := 0; k < core.MaxPolygonHoles; k++ {
		lat := 38 + (float64(k/10)-4.5)*0.01
		lon := 13 + (float64(k%10)-4.5)*0.0125
		holes = append(holes, regular(lat, lon, 0.00005, core.MaxPolygonVertices))
	}
	return outer, holes
}

func TestPolygonWorstCaseTime(t *testing.T) {
	outer, holes := maxPolygon()
	start := time.Now()
	p, err := NewPolygon(outer, holes)
	el := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("NewPolygon of 101 rings x 1000 vertices: %v", el)
	if el > 2*time.Second {
		t.Fatalf("NewPolygon took %v", el)
	}
	rs := p.Ranges()
	checkRanges(t, rs)
	ref := newRef(outer, holes)
	for k := 0; k < 2000; k++ {
		lat := deg(38) + int64(k*7919%2001-1000)*deg(0.0001)
		lon := deg(13) + int64(k*104729%2001-1000)*deg(0.00013)
		got := p.ContainsPoint(lat, lon)
		if got != ref.contains(lat, lon) {
			t.Fatalf("(%d, %d): got %v", lat, lon, got)
		}
		if got && !inRanges(rs, LeafCell(lat, lon)) {
			t.Fatalf("(%d, %d) not in ranges", lat, lon)
		}
	}
}

func TestPolygonClosedEqualsOpen(t *testing.T) {
	outer := square(0, 0, 10, 10)
	hole := regular(5, 5, 0.03, 7)
	open, err := NewPolygon(outer, [][]core.Coordinate{hole})
	if err != nil {
		t.Fatal(err)
	}
	closed, err := NewPolygon(append(slices.Clone(outer), outer[0]), [][]core.Coordinate{append(slices.Clone(hole), hole[0])})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(open.Ranges(), closed.Ranges()) {
		t.Fatal("ranges differ")
	}
	for lat := -1.0; lat <= 11; lat += 0.25 {
		for lon := -1.0; lon <= 11; lon += 0.25 {
			if open.ContainsPoint(deg(lat), deg(lon)) != closed.ContainsPoint(deg(lat), deg(lon)) {
				t.Fatalf("(%v, %v) differs", lat, lon)
			}
		}
	}
}

func TestPolygonAntimeridian(t *testing.T) {
	outer := []core.Coordinate{ll(-10, 170), ll(-10, -170), ll(10, -170), ll(10, 170)}
	hole := []core.Coordinate{ll(-1, 179), ll(1, 179), ll(1, -179), ll(-1, -179)}
	for _, ring := range [][]core.Coordinate{outer, reversed(outer)} {
		p, err := NewPolygon(ring, [][]core.Coordinate{hole})
		if err != nil {
			t.Fatal(err)
		}
		rs := p.Ranges()
		checkRanges(t, rs)
		inside := [][2]float64{{0, 175}, {0, -175}, {5, 180}, {-5, -180}, {9, 171}, {-9, -171}}
		outside := [][2]float64{{0, 0}, {0, 165}, {0, -165}, {11, 180}, {0, 180}, {0.5, -179.5}, {-0.5, 179.5}}
		for _, q := range inside {
			if !p.ContainsPoint(deg(q[0]), deg(q[1])) {
				t.Fatalf("%v outside", q)
			}
			if !inRanges(rs, LeafCell(deg(q[0]), deg(q[1]))) {
				t.Fatalf("%v not in ranges", q)
			}
		}
		for _, q := range outside {
			if p.ContainsPoint(deg(q[0]), deg(q[1])) {
				t.Fatalf("%v inside", q)
			}
		}
	}
}

func TestPolygonPoles(t *testing.T) {
	// A cap around the north pole, with a hole at the pole.
	outer := regular(90, 0, 0.1, 12)
	hole := regular(90, 0, 0.01, 5)
	p, err := NewPolygon(outer, [][]core.Coordinate{hole})
	if err != nil {
		t.Fatal(err)
	}
	if p.ContainsPoint(deg(90), 0) || p.ContainsPoint(deg(90), deg(-180)) {
		t.Fatal("pole is in the hole")
	}
	for lon := -180.0; lon <= 180; lon += 7.5 {
		if !p.ContainsPoint(deg(87), deg(lon)) {
			t.Fatalf("(87, %v) outside", lon)
		}
		if !inRanges(p.Ranges(), LeafCell(deg(87), deg(lon))) {
			t.Fatalf("(87, %v) not in ranges", lon)
		}
		if p.ContainsPoint(deg(83), deg(lon)) {
			t.Fatalf("(83, %v) inside", lon)
		}
	}
	// A triangle with a vertex at the south pole.
	tri := []core.Coordinate{ll(-90, 0), ll(-80, 0), ll(-80, 90)}
	p, err = NewPolygon(tri, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !p.ContainsPoint(deg(-85), deg(45)) || p.ContainsPoint(deg(-85), deg(-45)) {
		t.Fatal("wrong containment near the south pole")
	}
}

// A thin ring around most of the equator: smaller than a hemisphere, but
// too wide for the gnomonic projection.
func TestPolygonWide(t *testing.T) {
	var ring []core.Coordinate
	for lon := -150.0; lon <= 150; lon += 10 {
		ring = append(ring, ll(1, lon))
	}
	for lon := 150.0; lon >= -150; lon -= 10 {
		ring = append(ring, ll(-1, lon))
	}
	hole := square(-0.5, 0, 0.5, 1)
	for _, r := range [][]core.Coordinate{ring, reversed(ring)} {
		p, err := NewPolygon(r, [][]core.Coordinate{hole})
		if err != nil {
			t.Fatal(err)
		}
		if p.planar != nil {
			t.Fatal("planar")
		}
		rs := p.Ranges()
		checkRanges(t, rs)
		for lon := -179.0; lon <= 180; lon += 3 {
			want := lon >= -150 && lon <= 150 && !(lon >= 0 && lon <= 1)
			if p.ContainsPoint(0, deg(lon)) != want {
				t.Fatalf("(0, %v): want %v", lon, want)
			}
			if want && !inRanges(rs, LeafCell(0, deg(lon))) {
				t.Fatalf("(0, %v) not in ranges", lon)
			}
		}
	}
	// A hole outside it, and a hole the size of the whole hemisphere.
	if _, err := NewPolygon(ring, [][]core.Coordinate{square(5, 5, 6, 6)}); err == nil {
		t.Fatal("hole outside accepted")
	}
}

// A polygon larger than a hemisphere as drawn is read as its complement.
func TestPolygonSmallerSide(t *testing.T) {
	// A ring along latitude 10: the smaller side is the northern cap.
	var ring []core.Coordinate
	for lon := -180.0; lon < 180; lon += 15 {
		ring = append(ring, ll(10, lon))
	}
	for _, r := range [][]core.Coordinate{ring, reversed(ring)} {
		p, err := NewPolygon(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !p.ContainsPoint(deg(45), deg(33)) || p.ContainsPoint(deg(-45), deg(33)) || p.ContainsPoint(0, 0) {
			t.Fatal("wrong side")
		}
	}
}

// drawRing draws a star-shaped ring (simple by construction) about a center:
// n vertices at increasing bearings, at distances in [rMin, rMax] radians.
func drawRing(t *rapid.T, name string, latNano, lonNano int64, rMin, rMax float64, n int) []core.Coordinate {
	angles := make([]float64, n)
	for i := range angles {
		angles[i] = (float64(i) + rapid.Float64Range(0.05, 0.95).Draw(t, fmt.Sprintf("%s angle %d", name, i))) * 2 * math.Pi / float64(n)
	}
	ring := make([]core.Coordinate, 0, n)
	for i, a := range angles {
		r := rapid.Float64Range(rMin, rMax).Draw(t, fmt.Sprintf("%s r %d", name, i))
		lat, lon := destination(latNano, lonNano, r, a)
		v := core.Coordinate{LatNano: lat, LonNano: lon}
		if len(ring) > 0 && pointFromNano(v.LatNano, v.LonNano) == pointFromNano(ring[len(ring)-1].LatNano, ring[len(ring)-1].LonNano) {
			continue
		}
		ring = append(ring, v)
	}
	if rapid.Bool().Draw(t, name+" reversed") {
		slices.Reverse(ring)
	}
	return ring
}

// drawPolygon draws a valid polygon: a star-shaped outer ring and star-shaped
// holes on a grid inside its inner radius.
func drawPolygon(t *rapid.T) (outer []core.Coordinate, holes [][]core.Coordinate, latNano, lonNano int64, rMax float64) {
	latNano, lonNano = drawCenter(t)
	rMax = math.Pow(10, rapid.Float64Range(-8, math.Log10(1.5)).Draw(t, "log size")) // 6 cm .. 86 degrees
	rMin := rMax * rapid.Float64Range(0.3, 0.9).Draw(t, "inner")
	nh := rapid.IntRange(0, 5).Draw(t, "holes")
	n := rapid.IntRange(3, 40).Draw(t, "n")
	if nh > 0 {
		// Bearings less than 0.2π apart keep the outer ring's edges at least
		// 0.8 rMin from the center (in the gnomonic plane), clear of holes.
		n = max(n, 10)
	}
	outer = drawRing(t, "outer", latNano, lonNano, rMin, rMax, n)
	for h := 0; h < nh; h++ {
		// Hole h sits at bearing 2πh/nh, half-way out, small enough not to
		// reach its neighbours or the outer ring.
		d := rMin * 0.5
		if nh == 1 {
			d = 0
		}
		hr := rMin * 0.2
		hLat, hLon := destination(latNano, lonNano, d, 2*math.Pi*float64(h)/float64(nh))
		holes = append(holes, drawRing(t, fmt.Sprintf("hole %d", h), hLat, hLon, hr*0.3, hr, rapid.IntRange(3, 12).Draw(t, "hn")))
	}
	return outer, holes, latNano, lonNano, rMax
}

// Valid polygons are accepted; ContainsPoint agrees with S2's own loops
// except within 1e-13 radians of an edge; every contained point is in
// Ranges; reversing any ring or closing it changes nothing.
func TestPolygonProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		outer, holes, lat, lon, rMax := drawPolygon(t)
		p, err := NewPolygon(outer, holes)
		if err != nil {
			// Nanodegree rounding can make tiny drawn rings degenerate.
			if rMax < 1e-6 {
				t.Skip(err)
			}
			t.Fatalf("valid polygon rejected: %v", err)
		}
		ref := newRef(outer, holes)
		rs := p.Ranges()
		checkRanges(t, rs)
		revHoles := make([][]core.Coordinate, len(holes))
		for i, h := range holes {
			revHoles[i] = append(reversed(h), h[len(h)-1])
		}
		q, err := NewPolygon(reversed(outer), revHoles)
		if err != nil {
			// Rounding can also make a tiny ring's first and last vertices
			// one point: read as closed in one direction, a duplicate once
			// reversed and closed again.
			if rMax < 1e-6 {
				t.Skip(err)
			}
			t.Fatalf("reversed polygon rejected: %v", err)
		}
		for k := 0; k < 100; k++ {
			var pLat, pLon int64
			if k%4 == 0 {
				pLat = rapid.Int64Range(-maxLatNano, maxLatNano).Draw(t, "pLat")
				pLon = rapid.Int64Range(-maxLonNano, maxLonNano).Draw(t, "pLon")
			} else {
				pLat, pLon = destination(lat, lon, rMax*rapid.Float64Range(0, 1.1).Draw(t, "pr"), rapid.Float64Range(-math.Pi, math.Pi).Draw(t, "pb"))
			}
			got := p.ContainsPoint(pLat, pLon)
			if got != p.ContainsPoint(pLat, pLon) {
				t.Fatal("not deterministic")
			}
			if want := ref.contains(pLat, pLon); got != want && ref.boundaryDistance(pLat, pLon) > 1e-13 {
				t.Fatalf("ContainsPoint(%d, %d) = %v, reference %v (planar %v)", pLat, pLon, got, want, p.planar != nil)
			}
			if got2 := q.ContainsPoint(pLat, pLon); got2 != got && ref.boundaryDistance(pLat, pLon) > 1e-13 {
				t.Fatalf("reversed polygon: ContainsPoint(%d, %d) = %v, want %v", pLat, pLon, got2, got)
			}
			if got && !inRanges(rs, LeafCell(pLat, pLon)) {
				t.Fatalf("(%d, %d) inside but not in ranges", pLat, pLon)
			}
		}
	})
}

// Polygon ranges are few (at most one per cell of the covering) and sized
// to the polygon.
func TestPolygonRangesSize(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		outer, holes, _, _, rMax := drawPolygon(t)
		p, err := NewPolygon(outer, holes)
		if err != nil {
			t.Skip(err)
		}
		rs := p.Ranges()
		if len(rs) > coverMaxCells {
			t.Fatalf("%d ranges", len(rs))
		}
		var leaves float64
		for _, r := range rs {
			leaves += float64((r.Max-r.Min)/2 + 1)
		}
		leafArea := 4 * math.Pi / (6 * math.Pow(4, 30))
		capArea := 4 * math.Pi * math.Pow(math.Sin(rMax/2), 2)
		if ratio := leaves * leafArea / capArea; ratio > 40 && rMax < 1 {
			t.Fatalf("ranges cover %.1f times the polygon's cap", ratio)
		}
	})
}

// polygon20 is the benchmark polygon: 20 vertices, one hole, about 5 km
// across, near Palermo.
func polygon20() ([]core.Coordinate, [][]core.Coordinate) {
	outer := regular(38.11, 13.36, 2500/EarthRadiusM, 20)
	hole := regular(38.11, 13.36, 500/EarthRadiusM, 6)
	return outer, [][]core.Coordinate{hole}
}

func BenchmarkNewPolygon20(b *testing.B) {
	outer, holes := polygon20()
	for b.Loop() {
		if _, err := NewPolygon(outer, holes); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNewPolygon20Ranges(b *testing.B) {
	outer, holes := polygon20()
	n := 0
	for b.Loop() {
		p, err := NewPolygon(outer, holes)
		if err != nil {
			b.Fatal(err)
		}
		n += len(p.Ranges())
	}
	b.ReportMetric(float64(n)/float64(b.N), "ranges")
}

func BenchmarkPolygonContains20(b *testing.B) {
	outer, holes := polygon20()
	p, err := NewPolygon(outer, holes)
	if err != nil {
		b.Fatal(err)
	}
	lat, lon := deg(38.115), deg(13.365)
	for b.Loop() {
		p.ContainsPoint(lat, lon)
	}
}

func BenchmarkNewPolygonMax(b *testing.B) {
	outer, holes := maxPolygon()
	for b.Loop() {
		if _, err := NewPolygon(outer, holes); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPolygonContainsMax(b *testing.B) {
	outer, holes := maxPolygon()
	p, err := NewPolygon(outer, holes)
	if err != nil {
		b.Fatal(err)
	}
	lat, lon := deg(38.0213), deg(13.0311)
	for b.Loop() {
		p.ContainsPoint(lat, lon)
	}
}

// comb is a ring of n vertices (n even, n >= 10) zigzagging between
// longitudes 0 and 1 degree while climbing in latitude, closed around its
// right and bottom sides: long edges, close together.
func comb(n int) []core.Coordinate {
	m := n - 4
	h := 1.0 / float64(m)
	var ring []core.Coordinate
	for k := 0; k < m; k++ {
		ring = append(ring, ll(float64(k)*h, float64(k%2)))
	}
	top := float64(m-1) * h
	return append(ring, ll(top, 1.1), ll(-h, 1.1), ll(-h, -0.1), ll(0, -0.1))
}

// The sweep picks its axis well: a comb of 1000 vertices (whose 996 long
// edges all overlap along the equator) needs few box tests.
func TestPolygonCombSweep(t *testing.T) {
	ring := comb(core.MaxPolygonVertices)
	p, err := newPolygon(ring, nil, 20_000)
	if err != nil {
		t.Fatal(err)
	}
	if !p.ContainsPoint(deg(0.5), deg(1.05)) || p.ContainsPoint(deg(0.5), deg(-0.05)) || p.ContainsPoint(deg(0.5), deg(1.2)) {
		t.Fatal("wrong containment")
	}
	// On longitude 0.5, a quarter of the way up each tooth: the edge there
	// lies at longitude 0.25 (rising teeth) or 0.75 (falling teeth), so the
	// points are alternately inside and outside.
	h := 1.0 / float64(len(ring)-4)
	for k := 100; k < 120; k++ {
		if p.ContainsPoint(deg((float64(k)+0.25)*h), deg(0.5)) != (k%2 == 0) {
			t.Fatalf("tooth %d", k)
		}
	}
}

// A polygon needing more box tests than the bound is too complex.
func TestPolygonTooDense(t *testing.T) {
	outer, holes := polygon20()
	if _, err := newPolygon(outer, holes, 1_000_000); err != nil {
		t.Fatal(err)
	}
	_, err := newPolygon(outer, holes, 5)
	wantCode(t, err, core.PolygonTooComplex.Code)
}

// Combs in both orientations (bands along or across the teeth) agree with
// the reference.
func TestPolygonCombsAgree(t *testing.T) {
	ring := comb(core.MaxPolygonVertices)
	turned := make([]core.Coordinate, len(ring))
	for i, v := range ring {
		turned[i] = core.Coordinate{LatNano: v.LonNano, LonNano: v.LatNano}
	}
	for _, r := range [][]core.Coordinate{ring, turned} {
		p, err := NewPolygon(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		ref := newRef(r, nil)
		rs := p.Ranges()
		for i := 0; i < 3000; i++ {
			lat := deg(-0.2) + int64(i*7919%3001)*deg(0.0005)
			lon := deg(-0.2) + int64(i*104729%3001)*deg(0.00046)
			got := p.ContainsPoint(lat, lon)
			if got != ref.contains(lat, lon) && ref.boundaryDistance(lat, lon) > 1e-13 {
				t.Fatalf("(%d, %d): got %v", lat, lon, got)
			}
			if got && !inRanges(rs, LeafCell(lat, lon)) {
				t.Fatalf("(%d, %d) not in ranges", lat, lon)
			}
		}
	}
}

// PolygonFilter never contradicts ContainsPoint: a leaf it calls outside
// holds no contained point, one it calls inside no point outside; nor do
// scan ranges marked Inside. Points
// are drawn anywhere, about the polygon, and close to its vertices and
// edges; ids are judged in a random order and in sorted order (as a scan
// does), so the decoder's reuse is exercised.
func TestPolygonFilterAgrees(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		outer, holes, lat, lon, rMax := drawPolygon(t)
		p, err := NewPolygon(outer, holes)
		if err != nil {
			t.Skip(err)
		}
		var probes []leafProbe
		rings := append([][]core.Coordinate{outer}, holes...)
		for k := 0; k < 100; k++ {
			switch k % 4 {
			case 0:
				probes = append(probes, probeAt(rapid.Int64Range(-maxLatNano, maxLatNano).Draw(t, "pLat"),
					rapid.Int64Range(-maxLonNano, maxLonNano).Draw(t, "pLon")))
			case 1, 2:
				probes = append(probes, probeAt(destination(lat, lon, rMax*rapid.Float64Range(0, 1.1).Draw(t, "pr"), rapid.Float64Range(-math.Pi, math.Pi).Draw(t, "pb"))))
			case 3: // near a vertex or between two neighbours: 1 cm, 1 m, 10 m
				probes = append(probes, drawNearEdge(t, rings, rapid.Float64Range(0, 1), []int64{100, 10_000, 100_000}))
			}
		}
		check := func(order string) {
			f := p.Filter()
			checkClassifier(t, order, p, probes, f.ClassifyLeaf)
		}
		check("drawn order")
		slices.SortFunc(probes, func(a, b leafProbe) int { return cmp.Compare(a.leaf, b.leaf) })
		check("sorted")

		// Scan ranges are sorted and disjoint, hold every contained point,
		// and those marked Inside hold no other.
		srs := p.ScanRanges()
		for i := 1; i < len(srs); i++ {
			if srs[i].Min <= srs[i-1].Max {
				t.Fatalf("scan ranges %d and %d overlap or are out of order", i-1, i)
			}
		}
		for _, pr := range probes {
			got := p.ContainsPoint(pr.lat, pr.lon)
			in := false
			for _, r := range srs {
				if pr.leaf >= r.Min && pr.leaf <= r.Max {
					in = true
					if r.Inside && !got {
						t.Fatalf("(%d, %d) lies in a range marked Inside but is outside", pr.lat, pr.lon)
					}
				}
			}
			if got && !in {
				t.Fatalf("(%d, %d) is inside but in no scan range", pr.lat, pr.lon)
			}
		}
	})
}

// countUnsure counts the points that classify leaves unsure among n points
// spread evenly over the benchmark polygon's disc (3 km).
func countUnsure(n int, classify func(leaf uint64) int) int {
	unsure := 0
	for k := 0; k < n; k++ {
		lat, lon := destination(deg(38.11), deg(13.36), 3000/EarthRadiusM*math.Sqrt(float64(k)/float64(n)), float64(k))
		if classify(LeafCell(lat, lon)) == LeafUnsure {
			unsure++
		}
	}
	return unsure
}

// On the benchmark polygon the filter settles nearly every point.
func TestPolygonFilterSettles(t *testing.T) {
	outer, holes := polygon20()
	p, err := NewPolygon(outer, holes)
	if err != nil {
		t.Fatal(err)
	}
	f := p.Filter()
	const n = 20_000
	if unsure := countUnsure(n, f.ClassifyLeaf); unsure > n/100 {
		t.Fatalf("%d of %d points unsure", unsure, n)
	}
}

// FineCoverRanges keeps CoverRanges' contract with up to maxCells cells:
// every contained point's leaf cell is in a range, and every point whose
// leaf cell is in an Inside range is contained; the finer covering has
// at least as many ranges and no more points in boundary ranges.
func TestPolygonFineCoverRanges(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		outer, holes, lat, lon, rMax := drawPolygon(t)
		p, err := NewPolygon(outer, holes)
		if err != nil {
			t.Skip(err)
		}
		coarse, fine := p.CoverRanges(), p.FineCoverRanges(256)
		if len(fine) > 256 || len(fine) < len(coarse) {
			t.Fatalf("%d fine ranges, %d coarse", len(fine), len(coarse))
		}
		which := func(rs []ScanRange, leaf uint64) (in, inside bool) {
			for _, r := range rs {
				if leaf >= r.Min && leaf <= r.Max {
					return true, r.Inside
				}
			}
			return false, false
		}
		unsure := [2]int{}
		for k := 0; k < 100; k++ {
			pLat, pLon := destination(lat, lon, rMax*rapid.Float64Range(0, 1.1).Draw(t, "pr"), rapid.Float64Range(-math.Pi, math.Pi).Draw(t, "pb"))
			got, leaf := p.ContainsPoint(pLat, pLon), LeafCell(pLat, pLon)
			for i, rs := range [][]ScanRange{coarse, fine} {
				in, inside := which(rs, leaf)
				if got && !in || inside && !got {
					t.Fatalf("(%d, %d): contained %v, in ranges %v, inside %v (fine %v)", pLat, pLon, got, in, inside, i == 1)
				}
				if in && !inside {
					unsure[i]++
				}
			}
		}
		if unsure[1] > unsure[0] {
			t.Fatalf("%d points need the exact test with the fine covering, %d with the coarse", unsure[1], unsure[0])
		}
	})
}
