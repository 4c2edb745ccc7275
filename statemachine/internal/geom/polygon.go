package geom

import (
	"fmt"
	"math"
	"slices"

	"github.com/golang/geo/r3"
	"github.com/golang/geo/s2"

	"github.com/geoevent/geoevent/core"
)

// Tolerances of polygon validation, in radians on the unit sphere. Every
// computation they guard has an error below 1e-15.
const (
	// touchTol: two edges of the polygon (of one ring or of two rings, other
	// than the two edges that meet at a vertex) closer than this touch, and
	// a ring's consecutive vertices closer than this coincide. It is about
	// 6 micrometres, below the spacing of nanodegrees (0.1 mm at the
	// equator).
	touchTol = 1e-12
	// foldTol: two consecutive edges meeting at an angle below this fold
	// back onto each other.
	foldTol = 1e-9
	// antipodalTol: an edge whose end points are this close to antipodal
	// has no well-defined geodesic.
	antipodalTol = 1e-8
	// hemisphereTol: a ring whose turning angle is below this (its two sides
	// differ in area by less than twice this, in steradians) encloses a
	// hemisphere, and which side is inside is ambiguous.
	hemisphereTol = 1e-9
	// boxPad pads the bounding boxes of edges; boxes that do not meet
	// belong to edges more than touchTol apart.
	boxPad = 2e-12
	// maxBoxTests bounds the work of the crossing sweeps: a polygon whose
	// edges are so long and dense that the sweeps need more box tests is
	// rejected as too complex. Valid polygons of 101 rings of 1000 vertices
	// usually need well under a million.
	maxBoxTests = 20_000_000
	// planarMinCos: a polygon whose outer ring lies within 80 degrees of
	// some center is indexed in the gnomonic projection about that center.
	planarMinCos = 0.17364817766693033 // cos(80°)
	// smallPolygonEdges: NewPolygon keeps the vertices and edges of
	// polygons of up to this many edges (after dropping closing vertices)
	// on the stack.
	smallPolygonEdges = 32
	// bruteForceMaxEdges: polygons of up to this many edges are checked
	// for crossings pair by pair first (noEdgesMeet), when the bound on box
	// tests is at least bruteForceMinTests, more than the sweeps can make
	// on so few edges: a sweep of m edges makes fewer than m² tests; the
	// ring sweeps hold 64 edges in all, and the at most 210 sweeps of pairs
	// of rings (21 rings at most) at most 64 each, plus a test per pair of
	// rings and per edge of each: under 211·64² + 210 + 210·64 < 2^20.
	bruteForceMaxEdges = 64
	bruteForceMinTests = 1 << 20
)

// Polygon is a validated query polygon with holes: the part of the sphere
// inside its outer ring and outside all its holes. Its methods are safe for
// concurrent use, except Scan and ScanRanges: their results live in the
// polygon's memory and hold until its next Scan (see PolygonBuilder).
type Polygon struct {
	capCenter r3.Vector // a cap that contains the polygon: its center
	capAngle  float64   // and radius (radians)

	// The polygon in the gnomonic projection about capCenter, when its
	// outer ring lies within 80 degrees of that center (nearly always).
	planar *planarIndex

	// The polygon in the (u,v) plane of its cube face, when it lies
	// within one (with planar only).
	face *faceRings

	// Otherwise, oriented S2 loops (interior on the left).
	outer *s2.Loop
	holes []*s2.Loop

	// The memory the polygon lives in (with planar only), which its Scan
	// uses too.
	mem *polygonMemory

	// keepScan: the polygon keeps its Scan's ranges and filter (its
	// builder keeps it for another Build), and scanned says it has them.
	keepScan, scanned bool
	scanRanges        []ScanRange
	scanFilter        PolygonFilter
}

// edge3 is one edge of one ring on the unit sphere.
type edge3 struct {
	a, b   r3.Vector
	n      r3.Vector  // unit normal of the edge's great circle, along a×b
	lo, hi [3]float64 // bounding box, set by checkCrossings (see bound)
	ring   int32      // 0 = outer ring, h+1 = hole h
	i      int32      // the edge runs from vertex i to vertex i+1 of its ring
	last   bool       // the ring's closing edge (from its last vertex to vertex 0)
}

// NewPolygon validates and prepares a polygon given by its outer ring and
// its holes, each a list of vertices in nanodegrees. A ring may be given open
// or closed (its last vertex equal to its first, which is then dropped);
// vertex counts and indices in messages are those after dropping it.
//
// Each ring may wind either way: it is read as enclosing the smaller of the
// two sides it splits the sphere into, so a polygon is always smaller than
// a hemisphere. Edges are geodesics (great-circle arcs), as in S2. Two
// spellings of one place are one vertex: every longitude at a pole, and
// longitudes -180 and +180 degrees.
//
// Errors are *core.Error values whose message names the ring ("outer ring"
// or "hole k", k from 0) and the vertex or edge (edge i runs from vertex i
// to vertex i+1):
//
//   - 102 POLYGON_TOO_COMPLEX: more than 100 holes, more than 1000 vertices
//     in a ring, or edges so long and dense that checking them for crossings
//     would take too long.
//   - 100 INVALID_COORDINATES: a vertex outside latitude ±90e9 or longitude
//     ±180e9 nanodegrees.
//   - 103 INVALID_POLYGON: a ring with fewer than 3 vertices; two vertices of
//     a ring at one place; an edge between antipodal points; a ring that
//     folds back on itself, crosses itself or touches itself; a ring that
//     encloses exactly a hemisphere (or all of whose vertices lie on one
//     great circle); a hole that crosses or touches the outer ring or
//     another hole, lies outside the outer ring, or lies inside another
//     hole. Touching means coming within about 6 micrometres (1e-12
//     radians); rings closer than that are rejected.
func NewPolygon(outer []core.Coordinate, holes [][]core.Coordinate) (*Polygon, error) {
	return newPolygon(outer, holes, maxBoxTests)
}

// newPolygon is NewPolygon with a bound on the box tests of the crossing
// sweeps.
func newPolygon(outer []core.Coordinate, holes [][]core.Coordinate, maxTests int) (*Polygon, error) {
	return buildPolygon(outer, holes, maxTests, new(polygonMemory))
}

// buildPolygon is newPolygon in the memory mem, which the polygon keeps
// for its Scan.
func buildPolygon(outer []core.Coordinate, holes [][]core.Coordinate, maxTests int, mem *polygonMemory) (*Polygon, error) {
	if len(holes) > core.MaxPolygonHoles {
		return nil, core.Errorf(core.PolygonTooComplex, "polygon has %d holes, at most %d are allowed", len(holes), core.MaxPolygonHoles)
	}
	nRings := 1 + len(holes)
	ringAt := func(r int) []core.Coordinate {
		if r == 0 {
			return outer
		}
		return holes[r-1]
	}
	total := 0
	for r := 0; r < nRings; r++ {
		if n := len(ringAt(r)); n > core.MaxPolygonVertices+1 {
			return nil, core.Errorf(core.PolygonTooComplex, "%s has more than %d vertices (%d given)", ringName(r), core.MaxPolygonVertices, n)
		}
		total += len(ringAt(r))
	}
	for r := 0; r < nRings; r++ {
		for i, v := range ringAt(r) {
			if !core.ValidCoordinate(v.LatNano, v.LonNano) {
				return nil, core.Errorf(core.InvalidCoordinates, "%s vertex %d (lat_nano %d, lon_nano %d) is outside latitude ±90 / longitude ±180 degrees", ringName(r), i, v.LatNano, v.LonNano)
			}
		}
	}

	// Convert, drop closing vertices, count. Small polygons (nearly all)
	// work in buffers on the stack: pts, start and edges do not outlive
	// this call (prepare copies what it keeps).
	var ptsBuf [smallPolygonEdges]r3.Vector
	var startBuf [core.MaxPolygonHoles + 2]int
	pts := ptsBuf[:0]
	if total > len(ptsBuf) {
		pts = make([]r3.Vector, 0, total)
	}
	start := startBuf[:nRings+1]
	for r := 0; r < nRings; r++ {
		start[r] = len(pts)
		for _, v := range ringAt(r) {
			pts = append(pts, pointFromNano(v.LatNano, v.LonNano))
		}
		if n := len(pts) - start[r]; n >= 2 && pts[start[r]] == pts[len(pts)-1] {
			pts = pts[:len(pts)-1]
		}
		n := len(pts) - start[r]
		if n > core.MaxPolygonVertices {
			return nil, core.Errorf(core.PolygonTooComplex, "%s has %d vertices, at most %d are allowed", ringName(r), n, core.MaxPolygonVertices)
		}
		if n < core.MinPolygonVertices {
			return nil, core.Errorf(core.InvalidPolygon, "%s has %d distinct vertices, at least %d are needed", ringName(r), n, core.MinPolygonVertices)
		}
	}
	start[nRings] = len(pts)

	// Edges, and the checks of each ring on its own.
	var edgeBuf [smallPolygonEdges]edge3
	var edges []edge3
	if len(pts) <= len(edgeBuf) {
		edges = edgeBuf[:len(pts)]
	} else {
		edges = make([]edge3, len(pts))
	}
	for r := 0; r < nRings; r++ {
		ring := pts[start[r]:start[r+1]]
		n := len(ring)
		for i := range ring {
			a, b := ring[i], ring[(i+1)%n]
			d := b.Sub(a)
			if d.Norm2() < touchTol*touchTol {
				if a == b {
					return nil, core.Errorf(core.InvalidPolygon, "%s vertices %d and %d are the same point (duplicate vertex)", ringName(r), i, (i+1)%n)
				}
				return nil, core.Errorf(core.InvalidPolygon, "%s vertices %d and %d nearly coincide", ringName(r), i, (i+1)%n)
			}
			s := a.Add(b)
			if s.Norm2() < antipodalTol*antipodalTol {
				return nil, core.Errorf(core.InvalidPolygon, "%s edge %d joins antipodal vertices %d and %d (the edge is undefined)", ringName(r), i, i, (i+1)%n)
			}
			e := &edges[start[r]+i]
			e.a, e.b = a, b
			// (a+b)×(b-a) = 2 a×b, computed without cancellation.
			e.n = s.Cross(d).Normalize()
			e.ring, e.i, e.last = int32(r), int32(i), i == n-1
		}
		re := edges[start[r]:start[r+1]]
		for i := range ring {
			prev, next := &re[(i+n-1)%n], &re[i]
			t1 := prev.n.Cross(ring[i])
			t2 := next.n.Cross(ring[i])
			if t1.Add(t2).Norm2() < foldTol*foldTol {
				return nil, core.Errorf(core.InvalidPolygon, "%s folds back on itself at vertex %d (edges %d and %d overlap)", ringName(r), i, (i+n-1)%n, i)
			}
		}
	}

	// Small polygons are first checked pair by pair, which is cheaper than
	// the sweeps; only when some pair meets (an invalid polygon, or one the
	// sweeps might still accept) do the sweeps decide, and name the pair.
	// They could not reach maxTests on so few edges when it is at least
	// bruteForceMinTests, so the answer is always the sweeps'.
	if len(edges) > bruteForceMaxEdges || maxTests < bruteForceMinTests || !noEdgesMeet(edges, start) {
		if err := checkCrossings(edges, start, maxTests); err != nil {
			return nil, err
		}
	}

	return prepare(pts, start, mem)
}

// ringName names ring r in messages: the outer ring or hole r-1.
func ringName(r int) string {
	if r == 0 {
		return "outer ring"
	}
	return fmt.Sprintf("hole %d", r-1)
}

// bound sets the edge's bounding box, padded by boxPad. A point of the arc
// is q/|q| for q on the chord ab, and 1 <= 1/|q| <= 2/|a+b|.
func (e *edge3) bound() {
	k := 2 / e.a.Add(e.b).Norm()
	av := [3]float64{e.a.X, e.a.Y, e.a.Z}
	bv := [3]float64{e.b.X, e.b.Y, e.b.Z}
	for ax := 0; ax < 3; ax++ {
		lo, hi := min(av[ax], bv[ax]), max(av[ax], bv[ax])
		if lo < 0 {
			lo *= k
		}
		if hi > 0 {
			hi *= k
		}
		e.lo[ax] = max(lo, -1) - boxPad
		e.hi[ax] = min(hi, 1) + boxPad
	}
}

// adjacent reports whether e and f are consecutive edges of one ring.
func adjacent(e, f *edge3) bool {
	if e.ring != f.ring {
		return false
	}
	switch {
	case e.i+1 == f.i || f.i+1 == e.i:
		return true
	case e.last && f.i == 0, f.last && e.i == 0:
		return true
	}
	return false
}

// checkCrossings finds two edges that cross or touch, other than
// consecutive edges of one ring (whose meeting NewPolygon has judged). Each
// ring is swept on its own; then each pair of rings whose bounding boxes
// meet is swept over the edges in the boxes' overlap. It sets the edges'
// bounding boxes first.
func checkCrossings(edges []edge3, start []int, maxTests int) error {
	for i := range edges {
		edges[i].bound()
	}
	nRings := len(start) - 1
	boxes := make([]box3, nRings)
	for r := 0; r < nRings; r++ {
		b := &boxes[r]
		b.lo, b.hi = edges[start[r]].lo, edges[start[r]].hi
		for i := start[r] + 1; i < start[r+1]; i++ {
			b.add(&edges[i])
		}
	}
	maxRing := 0
	for r := 0; r < nRings; r++ {
		maxRing = max(maxRing, start[r+1]-start[r])
	}
	sw := sweeper{
		edges: edges,
		start: start,
		limit: maxTests,
		list:  make([]int32, 0, 2*maxRing),
	}
	// The sweeps' scratch, passed through them (not kept in sw, so that
	// edges and start do not escape).
	keys := make([]uint64, 0, 2*maxRing)
	active := make([]activeEdge, 0, 32)
	var err error
	for r := 0; r < nRings; r++ {
		sw.list = sw.list[:0]
		for i := start[r]; i < start[r+1]; i++ {
			sw.list = append(sw.list, int32(i))
		}
		if keys, active, err = sw.sweep(false, keys, active); err != nil {
			return err
		}
	}
	for r := 0; r < nRings; r++ {
		for q := r + 1; q < nRings; q++ {
			ov, ok := boxes[r].intersect(&boxes[q])
			sw.tests++
			if !ok {
				continue
			}
			sw.list = sw.list[:0]
			for _, g := range [2]int{r, q} {
				n := len(sw.list)
				for i := start[g]; i < start[g+1]; i++ {
					if ov.meets(&edges[i]) {
						sw.list = append(sw.list, int32(i))
					}
				}
				sw.tests += start[g+1] - start[g]
				if len(sw.list) == n {
					sw.list = sw.list[:0] // no edge of ring g in the overlap
					break
				}
			}
			if keys, active, err = sw.sweep(true, keys, active); err != nil {
				return err
			}
		}
	}
	return nil
}

// noEdgesMeet reports whether no two edges meet (edgePair is pairApart),
// other than consecutive edges of one ring: every such pair is judged, a
// superset of the pairs that checkCrossings' sweeps judge. edgePair's
// answer does not depend on the order of its arguments (its tests are
// symmetric in the two edges, and so is s2.CrossingSign), so when this is
// true checkCrossings finds nothing either. At most bruteForceMaxEdges
// edges.
//
// For each edge e it first takes the side of e's great circle of every
// vertex it is paired with (edges[v].a is vertex v), as edgePair's first
// test does: an edge whose two ends lie on one side, further than
// touchTol, is apart from e without more ado.
func noEdgesMeet(edges []edge3, start []int) bool {
	var side [bruteForceMaxEdges]int8 // of vertex v: 1 above, -1 below, 0 near
	if len(edges) > len(side) {
		return false
	}
	nRings := len(start) - 1
	for r := 0; r < nRings; r++ {
		s0, s1 := start[r], start[r+1]
		for x := s0; x < s1; x++ {
			e := &edges[x]
			// Edge x meets edges x-1 and x+1 (the ring's last edge meets its
			// first) at their common vertices: NewPolygon has judged those
			// pairs. It is paired with edges x+2 up to the ring's last (but
			// one, for its first edge) and with every edge of later rings.
			end := s1
			if x == s0 {
				end = s1 - 1
			}
			for v := min(x+2, s1); v < len(edges); v++ {
				side[v] = sideOf(e.n.Dot(edges[v].a))
			}
			side[s0] = sideOf(e.n.Dot(edges[s0].a))
			for y := x + 2; y < end; y++ {
				b := y + 1
				if b == s1 {
					b = s0
				}
				if (side[y] != side[b] || side[y] == 0) && edgePair(e, &edges[y]) != pairApart {
					return false
				}
			}
			for q := r + 1; q < nRings; q++ {
				q0, q1 := start[q], start[q+1]
				for y := q0; y < q1; y++ {
					b := y + 1
					if b == q1 {
						b = q0
					}
					if (side[y] != side[b] || side[y] == 0) && edgePair(e, &edges[y]) != pairApart {
						return false
					}
				}
			}
		}
	}
	return true
}

// sideOf is the side of a great circle of a point whose signed sine of
// distance from it is s: 1 or -1 beyond touchTol, else 0.
func sideOf(s float64) int8 {
	switch {
	case s > touchTol:
		return 1
	case s < -touchTol:
		return -1
	}
	return 0
}

// box3 is an axis-aligned box in three dimensions.
type box3 struct{ lo, hi [3]float64 }

func (b *box3) add(e *edge3) {
	for ax := 0; ax < 3; ax++ {
		b.lo[ax] = min(b.lo[ax], e.lo[ax])
		b.hi[ax] = max(b.hi[ax], e.hi[ax])
	}
}

func (b *box3) intersect(o *box3) (box3, bool) {
	var r box3
	for ax := 0; ax < 3; ax++ {
		r.lo[ax] = max(b.lo[ax], o.lo[ax])
		r.hi[ax] = min(b.hi[ax], o.hi[ax])
		if r.lo[ax] > r.hi[ax] {
			return r, false
		}
	}
	return r, true
}

func (b *box3) meets(e *edge3) bool {
	for ax := 0; ax < 3; ax++ {
		if e.hi[ax] < b.lo[ax] || e.lo[ax] > b.hi[ax] {
			return false
		}
	}
	return true
}

// sweeper runs sweeps over lists of edges, counting box tests against a
// limit.
type sweeper struct {
	edges []edge3
	start []int
	limit int
	list  []int32 // the edges of the next sweep
	tests int
}

// activeEdge is an edge in the sweep's active list: its end along the
// sweep axis and its extent along the other two.
type activeEdge struct {
	hi, lo1, hi1, lo2, hi2 float64
	idx                    int32
}

// sweepIdxBits is the room for a list position in a sort key.
const sweepIdxBits = 17

// sweep tests the pairs of edges of sw.list whose boxes meet (only pairs
// from different rings when cross is set). It sorts the edges by where
// their boxes begin along the axis where the boxes overlap least (the sum
// of their extents over the spread of all of them); the sort key is that
// coordinate rounded down (its low bits hold the edge's position in the
// list), and the sweep compares with the rounded value.
//
// keys and active are scratch space, returned for the next sweep.
func (sw *sweeper) sweep(cross bool, keys []uint64, active []activeEdge) ([]uint64, []activeEdge, error) {
	if len(sw.list) < 2 {
		return keys, active, nil
	}
	var lo, hi, sum [3]float64
	for k, i := range sw.list {
		e := &sw.edges[i]
		for ax := 0; ax < 3; ax++ {
			if k == 0 || e.lo[ax] < lo[ax] {
				lo[ax] = e.lo[ax]
			}
			if k == 0 || e.hi[ax] > hi[ax] {
				hi[ax] = e.hi[ax]
			}
			sum[ax] += e.hi[ax] - e.lo[ax]
		}
	}
	axis := 0
	for ax := 1; ax < 3; ax++ {
		// sum[ax]/spread[ax] < sum[axis]/spread[axis], without dividing.
		if sum[ax]*(hi[axis]-lo[axis]) < sum[axis]*(hi[ax]-lo[ax]) {
			axis = ax
		}
	}
	o1, o2 := (axis+1)%3, (axis+2)%3

	const idxMask = 1<<sweepIdxBits - 1
	keys = keys[:0]
	for k, i := range sw.list {
		keys = append(keys, orderKey(sw.edges[i].lo[axis])&^idxMask|uint64(k))
	}
	slices.Sort(keys)

	active = active[:0]
	for _, key := range keys {
		ei := sw.list[key&idxMask]
		e := &sw.edges[ei]
		begin := keyFloat(key &^ idxMask) // <= e.lo[axis], and nondecreasing
		keep := active[:0]
		for _, a := range active {
			if a.hi < begin {
				continue // a ends before e begins, and before every later edge
			}
			keep = append(keep, a)
			if a.hi1 < e.lo[o1] || e.hi[o1] < a.lo1 || a.hi2 < e.lo[o2] || e.hi[o2] < a.lo2 {
				continue
			}
			f := &sw.edges[a.idx]
			if (cross && f.ring == e.ring) || adjacent(e, f) {
				continue
			}
			if kind := edgePair(f, e); kind != pairApart {
				return keys, active, pairError(f, e, kind, sw.start)
			}
		}
		sw.tests += len(active)
		active = append(keep, activeEdge{e.hi[axis], e.lo[o1], e.hi[o1], e.lo[o2], e.hi[o2], ei})
		if sw.tests > sw.limit {
			return keys, active, core.Errorf(core.PolygonTooComplex, "polygon edges are too long and dense to check for crossings (%d edges)", len(sw.edges))
		}
	}
	return keys, active, nil
}

// orderKey maps floats to integers of the same order.
func orderKey(f float64) uint64 {
	b := math.Float64bits(f)
	if b>>63 != 0 {
		return ^b
	}
	return b | 1<<63
}

// keyFloat inverts orderKey.
func keyFloat(k uint64) float64 {
	if k>>63 != 0 {
		return math.Float64frombits(k &^ (1 << 63))
	}
	return math.Float64frombits(^k)
}

// Relations of two edges.
const (
	pairApart = iota
	pairCross
	pairTouch
)

// edgePair judges two edges that are not consecutive edges of one ring:
// they cross (their interiors meet in one point), touch (come within
// touchTol of each other otherwise), or are apart.
func edgePair(e, f *edge3) int {
	// Signed sines of the distances of f's end points from e's great circle,
	// and of e's end points from f's.
	sc, sd := e.n.Dot(f.a), e.n.Dot(f.b)
	if (sc > touchTol && sd > touchTol) || (sc < -touchTol && sd < -touchTol) {
		return pairApart // f lies wholly on one side of e's circle, far from it
	}
	sa, sb := f.n.Dot(e.a), f.n.Dot(e.b)
	if (sa > touchTol && sb > touchTol) || (sa < -touchTol && sb < -touchTol) {
		return pairApart
	}
	far := func(s float64) bool { return s > touchTol || s < -touchTol }
	if far(sc) && far(sd) && far(sa) && far(sb) {
		// Each edge straddles the other's circle, no end point near it. The
		// edges cross when the triangles ACB, BDA, CBD and DAC (e = AB,
		// f = CD) wind the same way, as in s2.CrossingSign.
		if (sd > 0) == (sa > 0) {
			return pairCross
		}
		return pairApart
	}
	// Some end point lies near the other edge's circle.
	if (!far(sc) && nearArc(f.a, e)) || (!far(sd) && nearArc(f.b, e)) ||
		(!far(sa) && nearArc(e.a, f)) || (!far(sb) && nearArc(e.b, f)) {
		return pairTouch
	}
	if s2.CrossingSign(s2.Point{Vector: e.a}, s2.Point{Vector: e.b}, s2.Point{Vector: f.a}, s2.Point{Vector: f.b}) != s2.DoNotCross {
		return pairCross
	}
	return pairApart
}

// nearArc reports whether x, which lies within touchTol of e's great
// circle, lies within touchTol of the edge itself.
func nearArc(x r3.Vector, e *edge3) bool {
	if x.Dot(e.n.Cross(e.a)) >= 0 && x.Dot(e.b.Cross(e.n)) >= 0 {
		return true // x lies beside the arc, not beyond an end
	}
	return x.Sub(e.a).Norm2() < touchTol*touchTol || x.Sub(e.b).Norm2() < touchTol*touchTol
}

// pairError describes the crossing or touching of edges e and f.
func pairError(e, f *edge3, kind int, start []int) error {
	if f.ring < e.ring || (f.ring == e.ring && f.i < e.i) {
		e, f = f, e
	}
	verb := "cross"
	if kind == pairTouch {
		verb = "touch"
	}
	re, rf := int(e.ring), int(f.ring)
	if re == rf {
		for _, p := range [2]r3.Vector{e.a, e.b} {
			for _, q := range [2]r3.Vector{f.a, f.b} {
				if p == q {
					n := start[re+1] - start[re]
					vi, vj := int(e.i), int(f.i)
					if p == e.b {
						vi = (vi + 1) % n
					}
					if q == f.b {
						vj = (vj + 1) % n
					}
					return core.Errorf(core.InvalidPolygon, "%s vertices %d and %d are the same point (duplicate vertex)", ringName(re), vi, vj)
				}
			}
		}
		return core.Errorf(core.InvalidPolygon, "%s is self-intersecting: its edges %d and %d %s", ringName(re), e.i, f.i, verb)
	}
	if re == 0 {
		return core.Errorf(core.InvalidPolygon, "%s is not strictly inside the outer ring: its edge %d and outer ring edge %d %s", ringName(rf), f.i, e.i, verb)
	}
	return core.Errorf(core.InvalidPolygon, "%s and %s %s: edges %d and %d", ringName(re), ringName(rf), verb, e.i, f.i)
}

// prepare makes the polygon: it chooses its bounding cap and its index,
// and checks that holes lie inside the outer ring and outside each other.
// It keeps nothing of pts and start; a polygon in the gnomonic projection
// lives in mem.
func prepare(pts []r3.Vector, start []int, mem *polygonMemory) (*Polygon, error) {
	outer := pts[start[0]:start[1]]
	// The center of the outer ring's bounding box, and the cap about it.
	lo, hi := outer[0], outer[0]
	for _, v := range outer[1:] {
		lo = r3.Vector{X: min(lo.X, v.X), Y: min(lo.Y, v.Y), Z: min(lo.Z, v.Z)}
		hi = r3.Vector{X: max(hi.X, v.X), Y: max(hi.Y, v.Y), Z: max(hi.Z, v.Z)}
	}
	c := lo.Add(hi).Mul(0.5)
	if c.Norm2() > 1e-12 {
		c = c.Normalize()
		minCos, maxChord2 := 1.0, 0.0
		for _, v := range outer {
			minCos = min(minCos, v.Dot(c))
			maxChord2 = max(maxChord2, v.Sub(c).Norm2())
		}
		if minCos >= planarMinCos {
			st := &mem.planar
			*st = planarPolygon{}
			p := &st.p
			p.mem = mem
			p.capCenter = c
			// The arc from c to the farthest vertex (from the chord, which
			// stays precise for tiny polygons), plus room for rounding.
			p.capAngle = 2*math.Asin(min(math.Sqrt(maxChord2)/2, 1)) + 1e-9
			if err := st.pl.init(c, minCos, pts, start, mem); err != nil {
				return nil, err
			}
			p.planar = &st.pl
			if st.fr.init(pts, start, mem) {
				p.face = &st.fr
			}
			return p, nil
		}
	}
	p := &Polygon{}
	if err := p.prepareLoops(pts, start); err != nil {
		return nil, err
	}
	return p, nil
}

// planarPolygon is a Polygon in the gnomonic projection with its parts,
// kept together in a polygonMemory.
type planarPolygon struct {
	p  Polygon
	pl planarIndex
	fr faceRings
}

// prepareLoops is prepare for polygons too wide for the gnomonic
// projection: each ring becomes an S2 loop around its smaller side.
func (p *Polygon) prepareLoops(pts []r3.Vector, start []int) error {
	nRings := len(start) - 1
	loops := make([]*s2.Loop, nRings)
	for r := 0; r < nRings; r++ {
		ring := pts[start[r]:start[r+1]]
		sp := make([]s2.Point, len(ring))
		for i, v := range ring {
			sp[i] = s2.Point{Vector: v}
		}
		l := s2.LoopFromPoints(sp)
		t := l.TurningAngle()
		if math.Abs(t) <= hemisphereTol {
			return core.Errorf(core.InvalidPolygon, "%s encloses a hemisphere (or lies on one great circle): which side is inside is ambiguous", ringName(r))
		}
		if t < 0 {
			l.Invert()
		}
		loops[r] = l
	}
	p.outer, p.holes = loops[0], loops[1:]
	for h, hl := range p.holes {
		v := hl.Vertex(0)
		if !p.outer.ContainsPoint(v) {
			return core.Errorf(core.InvalidPolygon, "%s is not inside the outer ring", ringName(h+1))
		}
		for j, other := range p.holes {
			if j != h && other.RectBound().ContainsPoint(v) && other.ContainsPoint(v) {
				return core.Errorf(core.InvalidPolygon, "%s lies inside %s", ringName(h+1), ringName(j+1))
			}
		}
	}
	cb := p.outer.CapBound()
	p.capCenter, p.capAngle = cb.Center().Vector, cb.Radius().Radians()
	return nil
}

// ContainsPoint reports whether the point (nanodegrees) lies inside the
// outer ring and outside every hole. Points on (within about 1e-15 radians
// of) a ring may go either way, but the answer for one input is always the
// same.
func (p *Polygon) ContainsPoint(latNano, lonNano int64) bool {
	in, _ := p.ContainsPointWork(latNano, lonNano)
	return in
}

// loopWork is the work ContainsPointWork counts for a test against one S2
// loop (of a polygon too wide for the plane): its edge index finds the
// few edges near the point, and loops of up to 32 vertices are tested
// edge by edge.
const loopWork = 32

// ContainsPointWork is ContainsPoint that also returns the edges it read:
// those of the bands of the rings it tested (see ringIndex), or loopWork
// for each S2 loop it tested. The count is of the polygon's plan and the
// point alone.
func (p *Polygon) ContainsPointWork(latNano, lonNano int64) (in bool, work int) {
	v := pointFromNano(latNano, lonNano)
	if p.planar != nil {
		in = p.planar.contains(v, &work)
		return in, work
	}
	sp := s2.Point{Vector: v}
	work += loopWork
	if !p.outer.ContainsPoint(sp) {
		return false, work
	}
	for _, h := range p.holes {
		if h.RectBound().ContainsPoint(sp) {
			work += loopWork
			if h.ContainsPoint(sp) {
				return false, work
			}
		}
	}
	return true, work
}

// Edges returns the number of edges of all the polygon's rings: the size
// of its plan (see PolygonBuilder).
func (p *Polygon) Edges() int {
	if p.planar != nil {
		n := 0
		for r := range p.planar.rings {
			n += len(p.planar.rings[r].segs)
		}
		return n
	}
	n := p.outer.NumEdges()
	for _, h := range p.holes {
		n += h.NumEdges()
	}
	return n
}

// Ranges returns sorted, disjoint leaf-cell-id ranges, adjacent ones merged,
// whose union holds the LeafCell of every point ContainsPoint accepts: the
// ranges of the covering (see coverScanRanges), with their Inside marks
// dropped. At most 64.
func (p *Polygon) Ranges() []CellRange {
	return cellRanges(p.coverScanRanges())
}

// CoverRanges is Ranges with the Inside marks kept (neighbours are merged
// only when alike in Inside): every point whose leaf cell lies in an
// Inside range is accepted by ContainsPoint. At most 64.
func (p *Polygon) CoverRanges() []ScanRange {
	return p.coverScanRanges()
}

// FineCoverRanges is CoverRanges by a covering of up to maxCells cells
// (at least 64): boundary cells split further, so that fewer points lie
// in ranges that are not Inside. A polygon too wide for the plane has the
// covering of CoverRanges.
func (p *Polygon) FineCoverRanges(maxCells int) []ScanRange {
	if p.planar == nil {
		return p.coverScanRanges()
	}
	return p.planar.scanRanges(p.capCenter, p.capAngle, max(maxCells, coverMaxCells))
}

// ScanRanges returns sorted, disjoint leaf-cell-id ranges whose union holds
// the LeafCell of every point ContainsPoint accepts, each marked Inside
// when every point whose leaf cell lies in it is accepted. A polygon
// within one cube face is covered by a grid of the face's cells (see
// faceRings.gridScanRanges): fine ranges, most keys in Inside ones; others
// use coverScanRanges.
func (p *Polygon) ScanRanges() []ScanRange {
	rs, _ := p.Scan()
	return rs
}

// Scan returns ScanRanges and a filter for the keys of those ranges: when
// the polygon is covered by a grid of its face, the filter judges a key
// in a boundary cell of the grid by the edges that cross that cell. The
// grid lives in the polygon's memory: the ranges and the filter hold until
// the polygon's next Scan, or the next Build of its builder.
func (p *Polygon) Scan() ([]ScanRange, PolygonFilter) {
	if p.scanned {
		f := p.scanFilter
		f.dec = leafDecoder{}
		return p.scanRanges, f
	}
	rs, f := p.scan()
	if p.keepScan {
		p.scanned, p.scanRanges, p.scanFilter = true, rs, f
	}
	return rs, f
}

// scan is Scan, its ranges and filter made anew.
func (p *Polygon) scan() ([]ScanRange, PolygonFilter) {
	if p.face != nil {
		if p.mem.grid == nil {
			p.mem.grid = new(gridMemory)
		}
		if rs, pg, ok := p.face.gridScanRanges(p.mem.grid); ok {
			f := PolygonFilter{pl: p.planar}
			if pg.g.level <= prefilterLevel {
				// The filter decodes keys to prefilterLevel: its cells lie
				// within one cell of the grid.
				f.grid = pg
			}
			return rs, f
		}
	}
	return p.coverScanRanges(), p.Filter()
}

// coverScanRanges is ScanRanges by an adaptive covering of at most 64
// cells.
//
// The covering starts from the cells of the polygon's bounding cap at the
// level of the cap's size (at most 9 cells), drops those outside the
// polygon, and splits the cells that a ring's boundary crosses, coarsest
// first, while the covering stays within 64 cells and 10 levels of the
// start. Polygons too wide for the gnomonic projection use
// s2.RegionCoverer on the outer ring (16 cells, none marked Inside).
func (p *Polygon) coverScanRanges() []ScanRange {
	if p.planar == nil {
		level := min(s2.MinWidthMetric.MaxLevel(p.capAngle)+8, maxLevel)
		rc := s2.RegionCoverer{MinLevel: 0, MaxLevel: level, LevelMod: 1, MaxCells: 16}
		rs := rangesOf(rc.Covering(p.outer))
		out := make([]ScanRange, len(rs))
		for i, r := range rs {
			out[i] = ScanRange{CellRange: r}
		}
		return out
	}
	return p.planar.scanRanges(p.capCenter, p.capAngle, coverMaxCells)
}
