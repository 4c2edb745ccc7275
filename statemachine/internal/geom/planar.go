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
	coverMaxCells  = 16
	coverMaxLevels = 10
)

// seg is one edge in the plane, with the inverse slope k = dx/dy.
type seg struct {
	ax, ay, bx, by, k float64
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
	holeBands ringBands
}

// ringBands lists, per band of y, the holes whose y ranges reach it.
type ringBands struct {
	y0, scale float64
	n         int
	start     []int32
	holes     []int32
}

// newPlanarIndex projects the rings about c, indexes their edges, and checks
// that every hole lies inside the outer ring and outside the other holes.
// minCos is the smallest p·c over the outer ring's vertices.
func newPlanarIndex(c r3.Vector, minCos float64, pts []r3.Vector, start []int) (*planarIndex, error) {
	e1 := s2.Ortho(s2.Point{Vector: c}).Vector
	pl := &planarIndex{c: c, e1: e1, e2: c.Cross(e1), minCos: minCos - 1e-12}
	nRings := len(start) - 1
	segs := make([]seg, len(pts))
	pl.rings = make([]ringIndex, nRings)
	for r := 0; r < nRings; r++ {
		ri := &pl.rings[r]
		ri.segs = segs[start[r]:start[r+1]]
		n := len(ri.segs)
		for i := 0; i < n; i++ {
			x, y, ok := pl.project(pts[start[r]+i])
			if !ok {
				// Further from c than the outer ring's every vertex, hence
				// outside the outer ring (which lies in that cap).
				return nil, core.Errorf(core.InvalidPolygon, "%s is not inside the outer ring (vertex %d is outside it)", ringName(r), i)
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
			if s := &ri.segs[i]; s.by != s.ay {
				s.k = (s.bx - s.ax) / (s.by - s.ay)
			}
		}
		ri.buildBands()
	}

	// Bands of holes over the outer ring's y range.
	outer := &pl.rings[0]
	hb := &pl.holeBands
	hb.n = min(max(2*(nRings-1), 1), 1024)
	hb.y0 = outer.py0
	if h := outer.py1 - outer.py0; h > 0 {
		hb.scale = float64(hb.n) / h
	}
	hb.start = make([]int32, hb.n+2)
	for r := 1; r < nRings; r++ {
		for b := bandOf(pl.rings[r].py0, hb.y0, hb.scale, hb.n); b <= bandOf(pl.rings[r].py1, hb.y0, hb.scale, hb.n); b++ {
			hb.start[b+2]++
		}
	}
	for b := 2; b < len(hb.start); b++ {
		hb.start[b] += hb.start[b-1]
	}
	hb.holes = make([]int32, hb.start[hb.n+1])
	for r := 1; r < nRings; r++ {
		for b := bandOf(pl.rings[r].py0, hb.y0, hb.scale, hb.n); b <= bandOf(pl.rings[r].py1, hb.y0, hb.scale, hb.n); b++ {
			hb.holes[hb.start[b+1]] = int32(r)
			hb.start[b+1]++
		}
	}
	hb.start = hb.start[:hb.n+1]

	// Nesting: the first vertex of each hole must be inside the outer ring
	// and outside every other hole.
	for r := 1; r < nRings; r++ {
		x, y := pl.rings[r].segs[0].ax, pl.rings[r].segs[0].ay
		if pl.rings[r].swap {
			x, y = y, x
		}
		if !outer.contains(x, y) {
			return nil, core.Errorf(core.InvalidPolygon, "%s is not inside the outer ring", ringName(r))
		}
		b := bandOf(y, hb.y0, hb.scale, hb.n)
		for _, j := range hb.holes[hb.start[b]:hb.start[b+1]] {
			if int(j) != r && pl.rings[j].contains(x, y) {
				return nil, core.Errorf(core.InvalidPolygon, "%s lies inside %s", ringName(r), ringName(int(j)))
			}
		}
	}
	return pl, nil
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
func (pl *planarIndex) contains(v r3.Vector) bool {
	x, y, ok := pl.project(v)
	if !ok || !pl.rings[0].contains(x, y) {
		return false
	}
	hb := &pl.holeBands
	b := bandOf(y, hb.y0, hb.scale, hb.n)
	for _, j := range hb.holes[hb.start[b]:hb.start[b+1]] {
		if pl.rings[j].contains(x, y) {
			return false
		}
	}
	return true
}

// contains is the even-odd rule over the ring's edges at the point (x, y)
// of the plane.
func (ri *ringIndex) contains(x, y float64) bool {
	if ri.swap {
		x, y = y, x
	}
	return ri.containsRing(x, y)
}

// containsRing is the even-odd rule over the ring's edges at the point
// (x, y) in the ring's coordinates, for points in its bounding box, and
// false elsewhere: the count of edges that a ray from the point towards +x
// crosses.
func (ri *ringIndex) containsRing(x, y float64) bool {
	if x < ri.x0 || x > ri.x1 || y < ri.y0 || y > ri.y1 {
		return false
	}
	b := bandOf(y, ri.y0, ri.bandScale, ri.nBands)
	in := false
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

// buildBands buckets the segments into horizontal bands of the ring's y
// range: about one band per two edges, fewer if long edges would make the
// index too large.
func (ri *ringIndex) buildBands() {
	nb := min(max(len(ri.segs)/2, 1), 1024)
	for {
		ri.nBands = nb
		ri.bandScale = 0
		if h := ri.y1 - ri.y0; h > 0 {
			ri.bandScale = float64(nb) / h
		}
		entries := 0
		for i := range ri.segs {
			s := &ri.segs[i]
			entries += ri.band(max(s.ay, s.by)) - ri.band(min(s.ay, s.by)) + 1
		}
		if entries <= maxBandEntries || nb == 1 {
			break
		}
		nb /= 2
	}
	// Counts shifted by two, prefix sums shifted by one: then filling
	// advances bandStart[b+1] from the start of band b to its end.
	ri.bandStart = make([]int32, ri.nBands+2)
	for i := range ri.segs {
		s := &ri.segs[i]
		for b := ri.band(min(s.ay, s.by)); b <= ri.band(max(s.ay, s.by)); b++ {
			ri.bandStart[b+2]++
		}
	}
	for b := 2; b < len(ri.bandStart); b++ {
		ri.bandStart[b] += ri.bandStart[b-1]
	}
	ri.bandEdges = make([]int32, ri.bandStart[ri.nBands+1])
	for i := range ri.segs {
		s := &ri.segs[i]
		for b := ri.band(min(s.ay, s.by)); b <= ri.band(max(s.ay, s.by)); b++ {
			ri.bandEdges[ri.bandStart[b+1]] = int32(i)
			ri.bandStart[b+1]++
		}
	}
	ri.bandStart = ri.bandStart[:ri.nBands+1]
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

// relate judges a cell against the outer ring: outside and inside are
// certain (up to planeTol), boundary is the rest.
func (pl *planarIndex) relate(fc faceCell) int {
	n := float64(int(1) << fc.level)
	u0, u1 := stToUV(float64(fc.i)/n), stToUV(float64(fc.i+1)/n)
	v0, v1 := stToUV(float64(fc.j)/n), stToUV(float64(fc.j+1)/n)
	corners := [4][2]float64{{u0, v0}, {u1, v0}, {u1, v1}, {u0, v1}}
	var qx, qy [4]float64
	for k, uv := range corners {
		v := faceUVToXYZ(fc.face, uv[0], uv[1]) // not unit; the projection does not care
		w := v.Dot(pl.c)
		if !(w > 0 && w*w >= cellMinCos*cellMinCos*v.Norm2()) {
			return cellBoundary
		}
		qx[k], qy[k] = v.Dot(pl.e1)/w, v.Dot(pl.e2)/w
	}
	ri := &pl.rings[0]
	if ri.swap {
		qx, qy = qy, qx
	}
	bx0 := min(qx[0], qx[1], qx[2], qx[3]) - planeTol
	bx1 := max(qx[0], qx[1], qx[2], qx[3]) + planeTol
	by0 := min(qy[0], qy[1], qy[2], qy[3]) - planeTol
	by1 := max(qy[0], qy[1], qy[2], qy[3]) + planeTol
	if bx1 < ri.x0 || bx0 > ri.x1 || by1 < ri.y0 || by0 > ri.y1 {
		return cellOutside
	}
	// Cell edges are geodesics too: the cell is the convex quadrilateral q.
	// If no edge of the outer ring meets its padded bounding box, the whole
	// cell is on one side of the ring: the side of its center.
	for b := ri.band(by0); b <= ri.band(by1); b++ {
		for _, ei := range ri.bandEdges[ri.bandStart[b]:ri.bandStart[b+1]] {
			if ri.segs[ei].meetsBox(bx0, bx1, by0, by1) {
				return cellBoundary
			}
		}
	}
	if ri.containsRing((qx[0]+qx[1]+qx[2]+qx[3])/4, (qy[0]+qy[1]+qy[2]+qy[3])/4) {
		return cellInside
	}
	return cellOutside
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

// cover returns cells whose union contains the outer ring's inside: the
// cells of its bounding cap, refined (see Polygon.Ranges).
func (pl *planarIndex) cover(center r3.Vector, angle float64) []s2.CellID {
	type cand struct {
		fc     faceCell
		rel    int
		alive  bool
		levels int // levels below the starting cells
	}
	cands := make([]cand, 0, 4*coverMaxCells)
	alive := 0
	var buf [9]s2.CellID
	for _, id := range appendCapCells(buf[:0], center, angle, 0) {
		fc := faceCellOf(id)
		if rel := pl.relate(fc); rel != cellOutside {
			cands = append(cands, cand{fc: fc, rel: rel, alive: true})
			alive++
		}
	}
	// Split boundary cells, coarsest first, while the covering stays small.
	var kids [4]cand
	for i := 0; i < len(cands) && alive < coverMaxCells; i++ {
		cd := cands[i]
		if cd.rel != cellBoundary || cd.levels >= coverMaxLevels || cd.fc.level >= maxLevel {
			continue
		}
		n := 0
		for k := 0; k < 4; k++ {
			fc := faceCell{cd.fc.face, cd.fc.level + 1, 2*cd.fc.i + k>>1, 2*cd.fc.j + k&1}
			if rel := pl.relate(fc); rel != cellOutside {
				kids[n] = cand{fc: fc, rel: rel, alive: true, levels: cd.levels + 1}
				n++
			}
		}
		if alive-1+n > coverMaxCells {
			break // the covering is full: stop at the first split that does not fit
		}
		cands[i].alive = false
		cands = append(cands, kids[:n]...)
		alive += n - 1
	}
	out := make([]s2.CellID, 0, alive)
	for _, cd := range cands {
		if cd.alive {
			out = append(out, cd.fc.id())
		}
	}
	return out
}
