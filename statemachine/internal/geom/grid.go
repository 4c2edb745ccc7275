package geom

import (
	"math"

	"github.com/golang/geo/r3"
)

// A faceGrid is a block of w x h cells of one level of one cube face, each
// judged against a query region: outside (no point of the cell is in the
// region), inside (every point is), or boundary (either may hold). It turns
// into scan ranges that mark whole cells inside, so that an index scan
// needs no per-key test for most keys, and that leave out the cells outside.
//
// Invariants:
//   - Cell (x, y) of the grid (0 <= x < w, 0 <= y < h) is the cell of the
//     face at the grid's level with coordinates (i0+x, j0+y); cls[y*w+x] is
//     its class. Cells of the face beyond the block are outside.
//   - A cell's points are the points whose leaf cell lies in it: in the
//     face's (u,v) plane, the rectangle [ug[x], ug[x+1]] x [vg[y], vg[y+1]].
//   - An inside or outside class is certain: it holds for every point of the
//     rectangle padded by gridTol, which is far more than the error of any
//     computation here or of the exact tests the classes stand in for.
//   - sat is the summed-area table of the classes: sat[y*(w+1)+x] holds,
//     over the cells (x', y') with x' < x and y' < y, the count of cells not
//     outside in its high 16 bits and the count of boundary cells in its low
//     16 bits (w*h < 2^16).
//
// In the (u,v) plane of a face (the gnomonic projection about the face's
// center), great-circle arcs are straight segments, so a polygon's
// judgements are planar.
type faceGrid struct {
	face, level int
	i0, j0      int // the cell coordinates (at level) of cell (0, 0)
	w, h        int
	ug, vg      []float64 // cell edges: ug[x] = stToUV((i0+x)/2^level), vg likewise
	cls         []uint8
	sat         []uint32
}

// Classes of grid cells.
const (
	gridOutside = iota
	gridInside
	gridBoundary
)

const (
	// gridTol pads cells in the (u,v) plane, where coordinates are at most
	// 1 in magnitude: about 6 micrometres on the ground, far more than the
	// error of projecting (about 1e-15) and far less than any grid cell.
	gridTol = 1e-12
	// gridMaxSide bounds the cells of a grid along each side.
	gridMaxSide = 64
)

// newFaceGrid prepares a grid (classes unset, all outside) on face f over
// the (s,t) box [s0, s1] x [t0, t1] (within (0, 1)), at the finest level at
// which the box spans at most maxSide cells a side, but not finer than
// maxLevel. ok is false when the box is not within the face. ug, vg and cls
// are taken from the fronts of edgeBuf (w+h+2 long) and clsBuf (w*h long)
// when they are long enough, else allocated.
func newFaceGrid(f int, s0, s1, t0, t1 float64, maxSide int, edgeBuf []float64, clsBuf []uint8) (g faceGrid, ok bool) {
	if !(s0 > 0 && s1 < 1 && t0 > 0 && t1 < 1 && s0 <= s1 && t0 <= t1) {
		return faceGrid{}, false
	}
	span := max(s1-s0, t1-t0)
	level := maxLevel
	if span > 0 {
		// 2^level * span <= maxSide - 1 keeps the box within maxSide cells.
		level = min(maxLevel, max(0, int(math.Floor(math.Log2(float64(maxSide-1)/span)))))
	}
	for ; level > 0; level-- {
		n := float64(int(1) << level)
		if int(s1*n)-int(s0*n) < maxSide && int(t1*n)-int(t0*n) < maxSide {
			break
		}
	}
	n := float64(int(1) << level)
	g = faceGrid{face: f, level: level, i0: int(s0 * n), j0: int(t0 * n)}
	g.w = int(s1*n) - g.i0 + 1
	g.h = int(t1*n) - g.j0 + 1
	if lim := int(1) << level; g.i0+g.w > lim || g.j0+g.h > lim {
		return faceGrid{}, false
	}
	if ne := g.w + 1 + g.h + 1; len(edgeBuf) >= ne {
		g.ug = edgeBuf[:ne:ne]
	} else {
		g.ug = make([]float64, ne)
	}
	g.vg = g.ug[g.w+1:]
	g.ug = g.ug[:g.w+1]
	for x := range g.ug {
		g.ug[x] = stToUV(float64(g.i0+x) / n)
	}
	for y := range g.vg {
		g.vg[y] = stToUV(float64(g.j0+y) / n)
	}
	if nc := g.w * g.h; len(clsBuf) >= nc {
		g.cls = clsBuf[:nc:nc]
		clear(g.cls)
	} else {
		g.cls = make([]uint8, nc)
	}
	return g, true
}

// col returns the grid column holding u, clamped to the grid.
func (g *faceGrid) col(u float64) int {
	return min(max(int(uvToST(u)*float64(int(1)<<g.level))-g.i0, 0), g.w-1)
}

// row returns the grid row holding v, clamped to the grid.
func (g *faceGrid) row(v float64) int {
	return min(max(int(uvToST(v)*float64(int(1)<<g.level))-g.j0, 0), g.h-1)
}

// summarize fills sat from cls, taking it from the front of satBuf when
// that is long enough ((w+1)*(h+1)).
func (g *faceGrid) summarize(satBuf []uint32) {
	w1 := g.w + 1
	if ns := w1 * (g.h + 1); len(satBuf) >= ns {
		g.sat = satBuf[:ns:ns]
		// Row 0 and column 0 hold the empty sums (satBuf may hold an
		// earlier grid's); the loop below writes the rest.
		clear(g.sat[:w1])
		for y := 1; y <= g.h; y++ {
			g.sat[y*w1] = 0
		}
	} else {
		g.sat = make([]uint32, ns)
	}
	for y := 0; y < g.h; y++ {
		var rowSum uint32
		for x := 0; x < g.w; x++ {
			switch g.cls[y*g.w+x] {
			case gridInside:
				rowSum += 1 << 16
			case gridBoundary:
				rowSum += 1<<16 | 1
			}
			g.sat[(y+1)*w1+x+1] = g.sat[y*w1+x+1] + rowSum
		}
	}
}

// count returns the packed counts (see sat) over cells x0 <= x < x1,
// y0 <= y < y1.
func (g *faceGrid) count(x0, y0, x1, y1 int) uint32 {
	w1 := g.w + 1
	return g.sat[y1*w1+x1] - g.sat[y0*w1+x1] - g.sat[y1*w1+x0] + g.sat[y0*w1+x0]
}

// appendScanRanges appends the grid's cells that are not outside as scan
// ranges, in leaf cell id order, merging neighbours alike in Inside: the
// face's quadtree is walked in Hilbert order from the (at most four) cells
// that hold the grid at the level where it spans at most two of them a
// side, skipping subtrees with no such cell and taking a subtree whose
// cells are all inside as one range. It summarizes the grid first (see
// summarize; satBuf as there).
func (g *faceGrid) appendScanRanges(dst []ScanRange, satBuf []uint32) []ScanRange {
	g.summarize(satBuf)
	d0 := 0
	for 1<<d0 < max(g.w, g.h) {
		d0++
	}
	l0 := max(g.level-d0, 0)
	d0 = g.level - l0
	// The start cells, in id order.
	var starts [4]walkNode
	n := 0
	for i := g.i0 >> d0; i <= (g.i0+g.w-1)>>d0; i++ {
		for j := g.j0 >> d0; j <= (g.j0+g.h-1)>>d0; j++ {
			id := uint64(cellIDFromFaceIJLevel(g.face, i, j, l0))
			nd := walkNode{id: id, level: int8(l0), i: int32(i), j: int32(j), o: int8(orientationOf(id, l0))}
			k := n
			for ; k > 0 && starts[k-1].id > id; k-- {
				starts[k] = starts[k-1]
			}
			starts[k] = nd
			n++
		}
	}
	// Depth-first, children pushed in reverse Hilbert order.
	var stack [4 * (maxLevel + 2)]walkNode
	sp := 0
	for k := n - 1; k >= 0; k-- {
		stack[sp] = starts[k]
		sp++
	}
	w1 := g.w + 1
	for sp > 0 {
		sp--
		nd := stack[sp]
		d := g.level - int(nd.level)
		i, j := int(nd.i), int(nd.j)
		x0, x1 := max(i<<d-g.i0, 0), min((i+1)<<d-g.i0, g.w)
		y0, y1 := max(j<<d-g.j0, 0), min((j+1)<<d-g.j0, g.h)
		if x0 >= x1 || y0 >= y1 {
			continue
		}
		c := g.sat[y1*w1+x1] - g.sat[y0*w1+x1] - g.sat[y1*w1+x0] + g.sat[y0*w1+x0]
		if c>>16 == 0 {
			continue // every cell is outside
		}
		lsb := uint64(1) << (2 * (maxLevel - int(nd.level)))
		side := 1 << d
		if d == 0 || (c&0xffff == 0 && x1-x0 == side && y1-y0 == side && int(c>>16) == side*side) {
			dst = appendScanRange(dst, ScanRange{CellRange{nd.id - lsb + 1, nd.id + lsb - 1}, c&0xffff == 0})
			continue
		}
		q := lsb >> 2
		o := int(nd.o)
		if d == 1 {
			// The children are grid cells: take them in order at once.
			for k := 0; k < 4; k++ {
				ij := int(hilbertPosToIJ[o][k])
				x, y := 2*i+ij>>1-g.i0, 2*j+ij&1-g.j0
				if x < 0 || x >= g.w || y < 0 || y >= g.h {
					continue
				}
				if cls := g.cls[y*g.w+x]; cls != gridOutside {
					id := nd.id - lsb + q*uint64(2*k+1)
					dst = appendScanRange(dst, ScanRange{CellRange{id - q + 1, id + q - 1}, cls == gridInside})
				}
			}
			continue
		}
		for k := 3; k >= 0; k-- {
			ij := int(hilbertPosToIJ[o][k])
			stack[sp] = walkNode{
				id:    nd.id - lsb + q*uint64(2*k+1),
				level: nd.level + 1,
				i:     int32(2*i + ij>>1),
				j:     int32(2*j + ij&1),
				o:     int8(o ^ int(hilbertPosToOrient[k])),
			}
			sp++
		}
	}
	return dst
}

// walkNode is a cell of appendScanRanges' walk: its id, level, (i,j)
// coordinates at that level and Hilbert orientation.
type walkNode struct {
	id    uint64
	i, j  int32
	level int8
	o     int8
}

// orientationOf returns the Hilbert curve orientation of the cell id at
// the given level, as package s2 tracks it while encoding.
func orientationOf(id uint64, level int) int {
	o := int(id>>61) & swapMask
	for l := 1; l <= level; l++ {
		o ^= int(hilbertPosToOrient[id>>(61-2*uint(l))&3])
	}
	return o
}

// Hilbert curve tables of package s2: the (i,j) bits (i<<1 | j) of the
// child at each position, by orientation, and the change of orientation.
var (
	hilbertPosToIJ     = [4][4]uint8{{0, 1, 3, 2}, {0, 2, 3, 1}, {3, 2, 0, 1}, {3, 1, 0, 2}}
	hilbertPosToOrient = [4]uint8{swapMask, 0, 0, invertMask | swapMask}
)

// appendScanRange appends r to the sorted ranges dst, whose last range
// ends before r starts, merging it into that range when they are adjacent
// and alike in Inside.
func appendScanRange(dst []ScanRange, r ScanRange) []ScanRange {
	if n := len(dst); n > 0 && dst[n-1].Inside == r.Inside && r.Min-dst[n-1].Max <= 2 {
		dst[n-1].Max = r.Max
		return dst
	}
	return append(dst, r)
}

// faceUV returns the (u,v) coordinates of p (not necessarily unit) on face
// f, as in package s2; they are meaningful when p's component along the
// face's axis is positive.
func faceUV(f int, p r3.Vector) (u, v float64) {
	switch f {
	case 0:
		return p.Y / p.X, p.Z / p.X
	case 1:
		return -p.X / p.Y, p.Z / p.Y
	case 2:
		return -p.X / p.Z, -p.Y / p.Z
	case 3:
		return p.Z / p.X, p.Y / p.X
	case 4:
		return p.Z / p.Y, -p.X / p.Y
	}
	return -p.Y / p.Z, -p.X / p.Z
}

// faceRings is a polygon that lies within one cube face, in the face's
// (u,v) plane, where its edges are straight segments: every edge of every
// ring (holes lie inside the outer ring and outside each other, so the
// even-odd rule over all of them is the polygon's inside).
type faceRings struct {
	face           int
	segs           []uvSeg
	u0, u1, v0, v1 float64 // bounding box of the vertices
}

// uvSeg is an edge in a face's (u,v) plane.
type uvSeg struct{ au, av, bu, bv float64 }

// init makes fr (the zero value) the polygon's rings on the face of its
// first vertex, their edges taken from mem; it is false when some vertex
// lies on another face or within gridTol-ish of a face edge (pts are unit
// vectors; start as in newPolygon).
func (fr *faceRings) init(pts []r3.Vector, start []int, mem *polygonMemory) bool {
	f := faceOf(pts[0])
	for _, p := range pts[1:] {
		if faceOf(p) != f {
			return false
		}
	}
	fr.face, fr.segs = f, take(&mem.uvSegs, len(pts))
	fr.u0, fr.v0 = math.Inf(1), math.Inf(1)
	fr.u1, fr.v1 = math.Inf(-1), math.Inf(-1)
	for r := 0; r+1 < len(start); r++ {
		ring := pts[start[r]:start[r+1]]
		n := len(ring)
		for i, p := range ring {
			u, v := faceUV(f, p)
			if !(math.Abs(u) < 1-1e-9 && math.Abs(v) < 1-1e-9) {
				return false
			}
			fr.segs[start[r]+i].au, fr.segs[start[r]+i].av = u, v
			prev := start[r] + (i+n-1)%n
			fr.segs[prev].bu, fr.segs[prev].bv = u, v
			fr.u0, fr.u1 = min(fr.u0, u), max(fr.u1, u)
			fr.v0, fr.v1 = min(fr.v0, v), max(fr.v1, v)
		}
	}
	return true
}

// faceOf is the cube face of p (its largest component), as faceST gives it.
func faceOf(p r3.Vector) int {
	ax, ay, az := math.Abs(p.X), math.Abs(p.Y), math.Abs(p.Z)
	switch {
	case ax > ay && ax > az:
		if p.X >= 0 {
			return 0
		}
		return 3
	case ay > az:
		if p.Y >= 0 {
			return 1
		}
		return 4
	default:
		if p.Z >= 0 {
			return 2
		}
		return 5
	}
}

// polyGridSide is the grid size of polygon queries: the polygon's box
// spans at most this many cells a side. Keys in boundary cells are judged
// against the cell's few edges (polyGrid.classify), cheaply enough that a
// coarser grid, cheaper to build and walk into ranges, pays: on the
// 20-vertex benchmark polygon 16 beats 32 and 24 and ties with 12 and 20.
//
// Polygons of many edges get finer grids (polyGridSideFor), up to
// polyGridMaxSide: a key in a cell crossed by more than two edges is
// judged against each of them, and a 16 x 16 grid over 100 holes of
// 1,000 vertices leaves about a thousand edges in a cell (10 µs a key).
const (
	polyGridSide    = 16
	polyGridMaxSide = 64
)

// polyGridSideFor is the grid size for a polygon of the given number of
// edges: doubled from polyGridSide while the grid has fewer than a sixth
// as many cells as there are edges (up to 1,536 edges: 16; up to 6,144:
// 32; more: 64).
func polyGridSideFor(edges int) int {
	side := polyGridSide
	for side < polyGridMaxSide && side*side*6 < edges {
		side *= 2
	}
	return side
}

// gridScanRanges covers the polygon by a grid of its face (see faceGrid
// and polyGrid), built in gm. A cell that no edge comes within gridTol of
// lies wholly inside or wholly outside: the side of its center, which the
// even-odd rule along the row through the centers gives. Edges are
// segments in the plane; each marks the cells of each row its part in that
// row (padded) meets as boundary.
func (fr *faceRings) gridScanRanges(gm *gridMemory) (rs []ScanRange, pg *polyGrid, ok bool) {
	pg, ok = newPolyGrid(fr, gm)
	if !ok {
		return nil, nil, false
	}
	return pg.g.appendScanRanges(pg.buf.ranges[:0], pg.buf.sat[:]), pg, true
}
