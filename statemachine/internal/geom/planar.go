package geom

import (
	"math"

	"github.com/golang/geo/r3"
	"github.com/golang/geo/s2"

	"github.com/geoevent/geoevent/core"
)

// The gnomonic projection about a center c maps the open hemisphere around c
// onto the tangent plane, and every great-circle arc in it onto a straight
// segment. A polygon whose outer ring lies within 80 degrees of c is
// therefore a plain planar polygon there (its inside, the smaller side of
// the outer ring, is the bounded side), and point-in-ring is the even-odd
// rule over the ring's edges. The rule counts the edges that a ray from the
// point crosses, with the half-open rule at vertices; it is exact for the
// projected float vertices, so only points within about 1e-15 of an edge
// can differ from the exact spherical answer, and every answer is
// deterministic.

const (
	// planeTol pads boxes in the plane (whose coordinates are at most
	// tan 80° < 6) when the covering judges cells: far more than the error
	// of projecting (about 1e-15), far less than any cell.
	planeTol = 1e-11
	// cellMinCos: a cell with a vertex further than this from the center
	// (cos < 0.05) is not projected; the covering keeps and splits it.
	cellMinCos = 0.05
	// maxBandEntries bounds the size of a ring's band index.
	maxBandEntries = 200_000
	// Covering limits.
	coverMaxCells  = 64
	coverMaxLevels = 10
)

// seg is one edge in the plane, with the inverse slope k = dx/dy, its y
// range, and m = sqrt(1+k²): a point at horizontal distance h from the
// edge's line is h/m from it.
type seg struct {
	ax, ay, bx, by, k float64
	y0, y1, m         float64
}

// ringIndex is one ring in the plane: its bounding box and its edges,
// bucketed into bands by the range they span across the bands. The bands
// run along x, or along y when swap is set (for rings whose edges span
// less of x than of y); the ring's coordinates (x0..y1, segs) are then
// swapped too, so that its bands are always horizontal in its own
// coordinates.
type ringIndex struct {
	swap           bool
	x0, x1, y0, y1 float64 // bounding box, in the ring's coordinates
	py0, py1       float64 // y range in the plane
	segs           []seg
	bandScale      float64 // bands per unit of y
	nBands         int
	bandStart      []int32 // band b holds bandEdges[bandStart[b]:bandStart[b+1]]
	bandEdges      []int32
}

// planarIndex is a polygon in the gnomonic projection: an index per ring,
// and bands over the outer ring's y range listing the holes whose bounding
// boxes reach them.
type planarIndex struct {
	c, e1, e2 r3.Vector // center and tangent axes of the projection
	minCos    float64   // points with p·c below this are outside
	rings     []ringIndex

	// For PolygonFilter (see classify): squared cosines of the angles
	// beyond which a leaf is surely cut off and within which it is surely
	// projected, and the slack of its image in the plane.
	cosOut2, cosIn2, slackPlane float64
	holeBands                   ringBands
}

// ringBands lists, per band of y, the holes whose y ranges reach it.
type ringBands struct {
	y0, scale float64
	n         int
	start     []int32
	holes     []int32
}

// init makes pl (the zero value) the planar index of the rings about c:
// it projects them, indexes their edges, and checks that every hole lies
// inside the outer ring and outside the other holes. minCos is the
// smallest p·c over the outer ring's vertices. The edges, the rings and
// the band arrays of all rings are taken from mem.
func (pl *planarIndex) init(c r3.Vector, minCos float64, pts []r3.Vector, start []int, mem *polygonMemory) error {
	e1 := s2.Ortho(s2.Point{Vector: c}).Vector
	pl.c, pl.e1, pl.e2, pl.minCos = c, e1, c.Cross(e1), minCos-1e-12
	nRings := len(start) - 1
	segs := take(&mem.segs, len(pts))
	pl.rings = take(&mem.rings, nRings)
	slabSize := 0
	for r := 0; r < nRings; r++ {
		ri := &pl.rings[r]
		ri.segs = segs[start[r]:start[r+1]:start[r+1]]
		n := len(ri.segs)
		for i := 0; i < n; i++ {
			x, y, ok := pl.project(pts[start[r]+i])
			if !ok {
				// Further from c than the outer ring's every vertex, hence
				// outside the outer ring (which lies in that cap).
				return core.Errorf(core.InvalidPolygon, "%s is not inside the outer ring (vertex %d is outside it)", ringName(r), i)
			}
			ri.segs[i].ax, ri.segs[i].ay = x, y
			ri.segs[(i+n-1)%n].bx, ri.segs[(i+n-1)%n].by = x, y
			if i == 0 {
				ri.x0, ri.x1, ri.y0, ri.y1 = x, x, y, y
			}
			ri.x0, ri.x1 = min(ri.x0, x), max(ri.x1, x)
			ri.y0, ri.y1 = min(ri.y0, y), max(ri.y1, y)
		}
		ri.py0, ri.py1 = ri.y0, ri.y1
		var sumDX, sumDY float64
		for i := range ri.segs {
			s := &ri.segs[i]
			sumDX += math.Abs(s.bx - s.ax)
			sumDY += math.Abs(s.by - s.ay)
		}
		// Bands work best across the axis the edges span least of, relative
		// to the ring's extent.
		if sumDX*(ri.y1-ri.y0) < sumDY*(ri.x1-ri.x0) {
			ri.swap = true
			ri.x0, ri.x1, ri.y0, ri.y1 = ri.y0, ri.y1, ri.x0, ri.x1
			for i := range ri.segs {
				s := &ri.segs[i]
				s.ax, s.ay, s.bx, s.by = s.ay, s.ax, s.by, s.bx
			}
		}
		for i := range ri.segs {
			s := &ri.segs[i]
			if s.by != s.ay {
				s.k = (s.bx - s.ax) / (s.by - s.ay)
			}
			s.y0, s.y1 = min(s.ay, s.by), max(s.ay, s.by)
			s.m = math.Sqrt(1 + s.k*s.k)
		}
		slabSize += ri.planBands()
	}

	// Bands of holes over the outer ring's y range.
	outer := &pl.rings[0]
	hb := &pl.holeBands
	hb.n = min(max(2*(nRings-1), 1), 1024)
	hb.y0 = outer.py0
	if h := outer.py1 - outer.py0; h > 0 {
		hb.scale = float64(hb.n) / h
	}
	holeEntries := 0
	for r := 1; r < nRings; r++ {
		holeEntries += bandOf(pl.rings[r].py1, hb.y0, hb.scale, hb.n) - bandOf(pl.rings[r].py0, hb.y0, hb.scale, hb.n) + 1
	}
	slab := take(&mem.slab, slabSize+hb.n+2+holeEntries)
	for r := 0; r < nRings; r++ {
		slab = pl.rings[r].fillBands(slab)
	}
	// As in fillBands: counts shifted by two, prefix sums shifted by one.
	hb.start, slab = slab[:hb.n+2:hb.n+2], slab[hb.n+2:]
	for r := 1; r < nRings; r++ {
		for b, b1 := bandOf(pl.rings[r].py0, hb.y0, hb.scale, hb.n), bandOf(pl.rings[r].py1, hb.y0, hb.scale, hb.n); b <= b1; b++ {
			hb.start[b+2]++
		}
	}
	for b := 2; b < len(hb.start); b++ {
		hb.start[b] += hb.start[b-1]
	}
	hb.holes = slab[:hb.start[hb.n+1]]
	for r := 1; r < nRings; r++ {
		for b, b1 := bandOf(pl.rings[r].py0, hb.y0, hb.scale, hb.n), bandOf(pl.rings[r].py1, hb.y0, hb.scale, hb.n); b <= b1; b++ {
			hb.holes[hb.start[b+1]] = int32(r)
			hb.start[b+1]++
		}
	}
	hb.start = hb.start[:hb.n+1]

	// Nesting: the first vertex of each hole must be inside the outer ring
	// and outside every other hole.
	var work int // (not counted: the plan's cost is counted by its edges)
	for r := 1; r < nRings; r++ {
		x, y := pl.rings[r].segs[0].ax, pl.rings[r].segs[0].ay
		if pl.rings[r].swap {
			x, y = y, x
		}
		if !outer.contains(x, y, &work) {
			return core.Errorf(core.InvalidPolygon, "%s is not inside the outer ring", ringName(r))
		}
		b := bandOf(y, hb.y0, hb.scale, hb.n)
		for _, j := range hb.holes[hb.start[b]:hb.start[b+1]] {
			if int(j) != r && pl.rings[j].contains(x, y, &work) {
				return core.Errorf(core.InvalidPolygon, "%s lies inside %s", ringName(r), ringName(int(j)))
			}
		}
	}
	pl.prepareFilter()
	return nil
}

// project maps a unit vector into the plane; ok is false for points further
// from the center than the polygon's cap.
func (pl *planarIndex) project(p r3.Vector) (x, y float64, ok bool) {
	w := p.Dot(pl.c)
	if !(w >= pl.minCos) {
		return 0, 0, false
	}
	return p.Dot(pl.e1) / w, p.Dot(pl.e2) / w, true
}

// contains reports whether the unit vector v is inside the outer ring and
// inside no hole, each judged by the even-odd rule over its own edges.
func (pl *planarIndex) contains(v r3.Vector, work *int) bool {
	x, y, ok := pl.project(v)
	return ok && pl.containsXYWork(x, y, work)
}

// containsXY is contains for the point (x, y) of the plane.
func (pl *planarIndex) containsXY(x, y float64) bool {
	var work int
	return pl.containsXYWork(x, y, &work)
}

// containsXYWork is containsXY that adds to *work the edges it reads.
func (pl *planarIndex) containsXYWork(x, y float64, work *int) bool {
	if !pl.rings[0].contains(x, y, work) {
		return false
	}
	hb := &pl.holeBands
	b := bandOf(y, hb.y0, hb.scale, hb.n)
	for _, j := range hb.holes[hb.start[b]:hb.start[b+1]] {
		if pl.rings[j].contains(x, y, work) {
			return false
		}
	}
	return true
}

// contains is the even-odd rule over the ring's edges at the point (x, y)
// of the plane. It adds to *work the edges it reads.
func (ri *ringIndex) contains(x, y float64, work *int) bool {
	if ri.swap {
		x, y = y, x
	}
	return ri.containsRing(x, y, work)
}

// containsRing is the even-odd rule over the ring's edges at the point
// (x, y) in the ring's coordinates, for points in its bounding box, and
// false elsewhere: the count of edges that a ray from the point towards +x
// crosses. It adds to *work the edges it reads.
func (ri *ringIndex) containsRing(x, y float64, work *int) bool {
	if x < ri.x0 || x > ri.x1 || y < ri.y0 || y > ri.y1 {
		return false
	}
	b := bandOf(y, ri.y0, ri.bandScale, ri.nBands)
	in := false
	*work += int(ri.bandStart[b+1] - ri.bandStart[b])
	for _, ei := range ri.bandEdges[ri.bandStart[b]:ri.bandStart[b+1]] {
		if ri.segs[ei].crosses(x, y) {
			in = !in
		}
	}
	return in
}

// crosses reports whether the ray from (x, y) towards +x crosses the
// segment, by the half-open rule of the even-odd test.
func (s *seg) crosses(x, y float64) bool {
	if (s.ay > y) == (s.by > y) {
		return false
	}
	return x < s.ax+float64((y-s.ay)*s.k)
}

// planBands chooses the ring's horizontal bands: about one band per two
// edges, fewer if long edges would make the index too large. It returns
// the length of the band arrays (see fillBands).
func (ri *ringIndex) planBands() int {
	nb := min(max(len(ri.segs)/2, 1), 1024)
	entries := 0
	for {
		ri.nBands = nb
		ri.bandScale = 0
		if h := ri.y1 - ri.y0; h > 0 {
			ri.bandScale = float64(nb) / h
		}
		entries = 0
		for i := range ri.segs {
			s := &ri.segs[i]
			entries += ri.band(max(s.ay, s.by)) - ri.band(min(s.ay, s.by)) + 1
		}
		if entries <= maxBandEntries || nb == 1 {
			break
		}
		nb /= 2
	}
	return ri.nBands + 2 + entries
}

// fillBands buckets the segments into the bands planBands chose, taking
// bandStart and bandEdges from the front of slab (zeros, at least
// planBands long); it returns the rest of slab.
func (ri *ringIndex) fillBands(slab []int32) []int32 {
	// Counts shifted by two, prefix sums shifted by one: then filling
	// advances bandStart[b+1] from the start of band b to its end.
	n := ri.nBands + 2
	ri.bandStart, slab = slab[:n:n], slab[n:]
	for i := range ri.segs {
		s := &ri.segs[i]
		for b, b1 := ri.band(min(s.ay, s.by)), ri.band(max(s.ay, s.by)); b <= b1; b++ {
			ri.bandStart[b+2]++
		}
	}
	for b := 2; b < len(ri.bandStart); b++ {
		ri.bandStart[b] += ri.bandStart[b-1]
	}
	m := int(ri.bandStart[ri.nBands+1])
	ri.bandEdges, slab = slab[:m:m], slab[m:]
	for i := range ri.segs {
		s := &ri.segs[i]
		for b, b1 := ri.band(min(s.ay, s.by)), ri.band(max(s.ay, s.by)); b <= b1; b++ {
			ri.bandEdges[ri.bandStart[b+1]] = int32(i)
			ri.bandStart[b+1]++
		}
	}
	ri.bandStart = ri.bandStart[:ri.nBands+1]
	return slab
}

func (ri *ringIndex) band(y float64) int { return bandOf(y, ri.y0, ri.bandScale, ri.nBands) }

// bandOf is the band of y among n bands from y0, scale bands per unit,
// clamped to [0, n). It is monotone in y, so a segment spanning y is always
// in y's band.
func bandOf(y, y0, scale float64, n int) int {
	f := (y - y0) * scale
	switch {
	case !(f >= 0):
		return 0
	case f >= float64(n):
		return n - 1
	}
	return int(f)
}

// Relations of a cell to the outer ring.
const (
	cellOutside = iota
	cellInside
	cellBoundary // the ring may cross the cell, or the cell is not projected
)

// faceCell is a cell as its face, level and (i,j) coordinates at that
// level.
type faceCell struct {
	face, level, i, j int
}

// faceCellOf decodes a cell id.
func faceCellOf(id s2.CellID) faceCell {
	c := s2.CellFromCellID(id)
	uv := c.BoundUV()
	n := float64(int(1) << c.Level())
	return faceCell{
		face:  c.Face(),
		level: c.Level(),
		i:     int(math.Round(uvToST(uv.X.Lo) * n)),
		j:     int(math.Round(uvToST(uv.Y.Lo) * n)),
	}
}

func (fc faceCell) id() s2.CellID { return cellIDFromFaceIJLevel(fc.face, fc.i, fc.j, fc.level) }

// corner is the image of a cell's corner in the plane; ok is false for a
// corner too far from the center to project (cellMinCos).
type corner struct {
	x, y float64
	ok   bool
}

// projectCorner projects the point (u, v) of a face.
func (pl *planarIndex) projectCorner(face int, u, v float64) corner {
	p := faceUVToXYZ(face, u, v) // not unit; the projection does not care
	w := p.Dot(pl.c)
	if !(w > 0 && w*w >= cellMinCos*cellMinCos*p.Norm2()) {
		return corner{}
	}
	r := 1 / w
	return corner{p.Dot(pl.e1) * r, p.Dot(pl.e2) * r, true}
}

// meetsBox reports whether the segment may meet the box (conservatively).
func (s *seg) meetsBox(x0, x1, y0, y1 float64) bool {
	if max(s.ax, s.bx) < x0 || min(s.ax, s.bx) > x1 || max(s.ay, s.by) < y0 || min(s.ay, s.by) > y1 {
		return false
	}
	// Which side of the segment's line each corner of the box lies on.
	dx, dy := s.bx-s.ax, s.by-s.ay
	side := func(x, y float64) float64 { return dx*(y-s.ay) - dy*(x-s.ax) }
	f0, f1, f2, f3 := side(x0, y0), side(x0, y1), side(x1, y0), side(x1, y1)
	if (f0 > 0 && f1 > 0 && f2 > 0 && f3 > 0) || (f0 < 0 && f1 < 0 && f2 < 0 && f3 < 0) {
		return false
	}
	return true
}

// scanRanges returns the leaf-cell-id ranges of cells whose union contains
// the polygon: the cells of its bounding cap, refined (see
// Polygon.ScanRanges), each range marked Inside when its cells lie inside
// the polygon.
//
// Each boundary cell keeps the list of the edges (of every ring) that meet
// its padded box; only those can meet its children, so a split tests the
// children against its own short list instead of the whole polygon. A
// child that meets none lies wholly on one side of every ring: the side of
// its center. The covering has at most maxCells cells before merging.
func (pl *planarIndex) scanRanges(center r3.Vector, angle float64, maxCells int) []ScanRange {
	type cand struct {
		fc     faceCell
		rel    int
		alive  bool
		levels int   // levels below the starting cells
		e0, e1 int32 // its edges: cov.arena[e0:e1] (boundary cells)
	}
	cov := pl.coverEdges()
	cands := make([]cand, 0, 2*maxCells)
	alive := 0
	var buf [9]s2.CellID
	for _, id := range appendCapCells(buf[:0], center, angle, 0) {
		fc := faceCellOf(id)
		n := float64(int(1) << fc.level)
		u0, u1 := stToUV(float64(fc.i)/n), stToUV(float64(fc.i+1)/n)
		v0, v1 := stToUV(float64(fc.j)/n), stToUV(float64(fc.j+1)/n)
		q := [4]corner{
			pl.projectCorner(fc.face, u0, v0), pl.projectCorner(fc.face, u1, v0),
			pl.projectCorner(fc.face, u1, v1), pl.projectCorner(fc.face, u0, v1),
		}
		e0 := int32(len(cov.arena))
		rel := cov.relate(pl, q, cov.all)
		if rel != cellOutside {
			cands = append(cands, cand{fc: fc, rel: rel, alive: true, e0: e0, e1: int32(len(cov.arena))})
			alive++
		}
	}
	// Split boundary cells, coarsest first, while the covering stays small.
	// The four children of a cell share their corners: 9 of them.
	var kids [4]cand
	for i := 0; i < len(cands) && alive < maxCells; i++ {
		cd := cands[i]
		if cd.rel != cellBoundary || cd.levels >= coverMaxLevels || cd.fc.level >= maxLevel {
			continue
		}
		level := cd.fc.level + 1
		m := float64(int(1) << level)
		var g [3][3]corner
		for a := 0; a < 3; a++ {
			u := stToUV(float64(2*cd.fc.i+a) / m)
			for b := 0; b < 3; b++ {
				g[a][b] = pl.projectCorner(cd.fc.face, u, stToUV(float64(2*cd.fc.j+b)/m))
			}
		}
		mark := len(cov.arena)
		n := 0
		for k := 0; k < 4; k++ {
			a, b := k>>1, k&1
			e0 := int32(len(cov.arena))
			rel := cov.relate(pl, [4]corner{g[a][b], g[a+1][b], g[a+1][b+1], g[a][b+1]}, cov.arena[cd.e0:cd.e1])
			if rel != cellOutside {
				kids[n] = cand{fc: faceCell{cd.fc.face, level, 2*cd.fc.i + a, 2*cd.fc.j + b}, rel: rel, alive: true, levels: cd.levels + 1, e0: e0, e1: int32(len(cov.arena))}
				n++
			}
		}
		if alive-1+n > maxCells {
			cov.arena = cov.arena[:mark]
			break // the covering is full: stop at the first split that does not fit
		}
		cands[i].alive = false
		cands = append(cands, kids[:n]...)
		alive += n - 1
	}
	out := make([]ScanRange, 0, alive)
	for _, cd := range cands {
		if cd.alive {
			id := cd.fc.id()
			out = append(out, ScanRange{CellRange{uint64(id.RangeMin()), uint64(id.RangeMax())}, cd.rel == cellInside})
		}
	}
	return mergeScanRanges(out)
}

// coverEdges holds the polygon's edges in plane coordinates (unswapped)
// for scanRanges, and the arena of its cells' edge lists.
type coverEdges struct {
	segs  []seg   // every edge of every ring
	all   []int32 // 0, 1, ..., len(segs)-1
	arena []int32
}

func (pl *planarIndex) coverEdges() *coverEdges {
	n := 0
	for r := range pl.rings {
		n += len(pl.rings[r].segs)
	}
	cov := &coverEdges{segs: make([]seg, 0, n), all: make([]int32, n), arena: make([]int32, 0, 4*n+256)}
	for r := range pl.rings {
		ri := &pl.rings[r]
		for _, sg := range ri.segs {
			if ri.swap {
				sg.ax, sg.ay, sg.bx, sg.by = sg.ay, sg.ax, sg.by, sg.bx
			}
			cov.segs = append(cov.segs, sg)
		}
	}
	for i := range cov.all {
		cov.all[i] = int32(i)
	}
	return cov
}

// relate judges the cell whose corners project to q against the polygon
// (outer ring and holes): outside and inside are certain (up to planeTol),
// boundary is the rest. Cell edges are geodesics too, so the cell is the
// convex quadrilateral q: if no edge of a ring meets its padded bounding
// box, the whole cell is on one side of that ring, the side of its
// center. It tests only the edges listed in from (those that can meet the
// cell), and appends those that meet the box to the arena.
func (cov *coverEdges) relate(pl *planarIndex, q [4]corner, from []int32) int {
	if !(q[0].ok && q[1].ok && q[2].ok && q[3].ok) {
		cov.arena = append(cov.arena, from...)
		return cellBoundary
	}
	bx0 := min(q[0].x, q[1].x, q[2].x, q[3].x) - planeTol
	bx1 := max(q[0].x, q[1].x, q[2].x, q[3].x) + planeTol
	by0 := min(q[0].y, q[1].y, q[2].y, q[3].y) - planeTol
	by1 := max(q[0].y, q[1].y, q[2].y, q[3].y) + planeTol
	n := len(cov.arena)
	for _, ei := range from {
		if cov.segs[ei].meetsBox(bx0, bx1, by0, by1) {
			cov.arena = append(cov.arena, ei)
		}
	}
	if len(cov.arena) > n {
		return cellBoundary
	}
	if pl.containsXY((q[0].x+q[1].x+q[2].x+q[3].x)/4, (q[0].y+q[1].y+q[2].y+q[3].y)/4) {
		return cellInside
	}
	return cellOutside
}

// Relations of a leaf cell to a polygon, as PolygonFilter.ClassifyLeaf
// judges them.
const (
	// LeafOutside: no point whose leaf cell it is lies in the polygon.
	LeafOutside = iota
	// LeafInside: every point whose leaf cell it is lies in the polygon.
	LeafInside
	// LeafUnsure: the leaf lies near the polygon's boundary (or the
	// polygon is too wide for the plane); test the point itself.
	LeafUnsure
)

// PolygonFilter judges leaf cell ids against a polygon for the keys of one
// index scan, so that most keys are settled without their point: it
// decodes each key's level-22 ancestor (reusing the levels it shares with
// the previous key) and tests that ancestor's center with a margin of the
// ancestor's size. It is not safe for concurrent use.
type PolygonFilter struct {
	pl   *planarIndex
	grid *polyGrid // when set, keys are judged by its cells
	dec  leafDecoder
}

// Filter returns a PolygonFilter for p.
func (p *Polygon) Filter() PolygonFilter { return PolygonFilter{pl: p.planar} }

// ClassifyLeaf returns LeafOutside when ContainsPoint is false for every
// point whose LeafCell is leaf, LeafInside when it is true for every such
// point, and otherwise LeafUnsure. An invalid cell id is LeafOutside.
func (f *PolygonFilter) ClassifyLeaf(leaf uint64) int {
	var class [1]uint8
	f.ClassifyLeaves([]uint64{leaf}, class[:])
	return int(class[0])
}

// ClassifyLeaves sets class[k] to ClassifyLeaf(leaves[k]) for each leaf,
// in order: a run of an index scan's keys in one call. class should be as
// long as leaves; only as many leaves as it holds are judged.
func (f *PolygonFilter) ClassifyLeaves(leaves []uint64, class []uint8) {
	f.ClassifyLeavesWork(leaves, class, 0, math.MaxInt)
}

// ClassifyLeavesWork is ClassifyLeaves that counts its work and stops when
// it reaches budget: each leaf costs leafWork, plus one for each polygon
// edge that judging it reads (an edge of a crowded grid cell, or of a
// ring's band). It judges leaves in order until the work of those judged
// reaches budget (at least one leaf, when there are any), and returns how
// many it judged and their work. The count is of the polygon's plan and
// the leaves' ids alone, so it is the same wherever the same polygon
// judges the same leaves.
func (f *PolygonFilter) ClassifyLeavesWork(leaves []uint64, class []uint8, leafWork, budget int) (n, work int) {
	leaves = leaves[:min(len(leaves), len(class))]
	class = class[:len(leaves)]
	if f.grid != nil {
		return f.grid.classify(leaves, class, &f.dec, leafWork, budget)
	}
	for k, leaf := range leaves {
		work += leafWork
		switch {
		case !s2.CellID(leaf).IsValid():
			class[k] = LeafOutside
		case f.pl == nil:
			class[k] = LeafUnsure
		default:
			class[k] = uint8(f.pl.classify(f.dec.point(leaf), &work))
		}
		if work >= budget {
			return k + 1, work
		}
	}
	return len(leaves), work
}

// classify is ClassifyLeaf for the point p (not unit) within
// prefilterSlack of every point of the leaf.
//
// Let θc be the angle from the center at which the projection cuts off
// (cos θc = minCos). A point q within angle s of p/|p| lies at an angle
// from the center within s of p's angle θ: when θ > θc+s, q is cut off
// (outside); when θ < θc-s, q is projected. In the plane, q then lies
// within s/cos²(θc) of p's image (the gnomonic projection stretches lengths
// by at most 1/cos² of the angle from the center): when no edge of any
// ring lies that close to p's image, no edge separates the two images, and
// the even-odd rule gives q p's answer.
//
// It adds to *work the edges it reads.
func (pl *planarIndex) classify(p r3.Vector, work *int) int {
	w := p.Dot(pl.c) // |p| cos θ
	w2, n2 := w*w, p.Norm2()
	switch {
	case !(w > 0 && w2 >= pl.cosOut2*n2):
		return LeafOutside
	case w2 < pl.cosIn2*n2:
		return LeafUnsure
	}
	r := 1 / w
	x, y := p.Dot(pl.e1)*r, p.Dot(pl.e2)*r
	sp := pl.slackPlane
	in, near := pl.rings[0].classify(x, y, sp, work)
	switch {
	case near:
		return LeafUnsure
	case !in:
		return LeafOutside
	}
	hb := &pl.holeBands
	b0, b1 := bandOf(y-sp, hb.y0, hb.scale, hb.n), bandOf(y+sp, hb.y0, hb.scale, hb.n)
	for _, j := range hb.holes[hb.start[b0]:hb.start[b1+1]] {
		in, near := pl.rings[j].classify(x, y, sp, work)
		switch {
		case near:
			return LeafUnsure
		case in:
			return LeafOutside
		}
	}
	return LeafInside
}

// prepareFilter sets the thresholds of classify.
func (pl *planarIndex) prepareFilter() {
	const s = prefilterSlack
	cut := math.Acos(min(pl.minCos, 1)) // θc; its error (< 1e-12) is far below s
	cosOut := math.Cos(cut+s) - 1e-12
	cosIn := math.Cos(max(cut-s, 0)) + 1e-12
	pl.cosOut2 = cosOut * max(cosOut, 0)
	pl.cosIn2 = cosIn * cosIn
	// Points that pass the cut-off lie within θc of the center, q within
	// θc+s; cos(θc+s) > 0.17 - s as minCos > cos 80°.
	pl.slackPlane = s/(cosOut*cosOut) + planeTol
}

// classify reports whether the point (x, y) of the plane is inside the
// ring by the even-odd rule (as contains) and whether an edge of the ring
// may lie within sp of it; when near is false, every point within sp of
// (x, y) gets the same answer from contains. It adds to *work the edges of
// the bands it reads (all of them, even when it returns early: a bound
// that does not depend on the order of the edges' tests).
func (ri *ringIndex) classify(x, y, sp float64, work *int) (in, near bool) {
	if ri.swap {
		x, y = y, x
	}
	if x < ri.x0-sp || x > ri.x1+sp || y < ri.y0-sp || y > ri.y1+sp {
		return false, false
	}
	b := ri.band(y)
	b0, b1 := ri.band(y-sp), ri.band(y+sp)
	*work += int(ri.bandStart[b1+1] - ri.bandStart[b0])
	for _, ei := range ri.bandEdges[ri.bandStart[b]:ri.bandStart[b+1]] {
		sg := &ri.segs[ei]
		if y < sg.y0-sp || y > sg.y1+sp {
			continue // too far above or below to be near, and not crossed
		}
		if (sg.ay > y) == (sg.by > y) {
			// Not crossed (crosses is false), but y is within sp of an end.
			if sg.near(x, y, sp) {
				return false, true
			}
			continue
		}
		// The ray's line meets the edge at x + h; the edge is |h|/m away.
		h := sg.ax + float64((y-sg.ay)*sg.k) - x
		if math.Abs(h) <= sp*sg.m {
			return false, true
		}
		if h > 0 { // as crosses: x < ax + (y-ay)k
			in = !in
		}
	}
	// Edges within sp of the point but not in its band.
	if b0 < b {
		for _, ei := range ri.bandEdges[ri.bandStart[b0]:ri.bandStart[b]] {
			if ri.segs[ei].near(x, y, sp) {
				return false, true
			}
		}
	}
	if b1 > b {
		for _, ei := range ri.bandEdges[ri.bandStart[b+1]:ri.bandStart[b1+1]] {
			if ri.segs[ei].near(x, y, sp) {
				return false, true
			}
		}
	}
	if x < ri.x0 || x > ri.x1 || y < ri.y0 || y > ri.y1 {
		return false, false // as containsRing: outside the box is outside
	}
	return in, false
}

// near reports whether the segment may come within sp of (x, y): it is
// true for every segment that does (and for some that come a little
// further, beyond an end).
func (s *seg) near(x, y, sp float64) bool {
	if x < min(s.ax, s.bx)-sp || x > max(s.ax, s.bx)+sp || y < min(s.ay, s.by)-sp || y > max(s.ay, s.by)+sp {
		return false
	}
	dx, dy := s.bx-s.ax, s.by-s.ay
	c := dx*(y-s.ay) - dy*(x-s.ax)
	return c*c <= sp*sp*(dx*dx+dy*dy)
}
