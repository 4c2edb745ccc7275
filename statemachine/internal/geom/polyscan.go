package geom

import (
	"math"

	"github.com/golang/geo/s2"
)

// A polyGrid is the scan plan of a polygon that lies within one cube face:
// a faceGrid of its face's (u,v) plane whose cells are classed inside,
// outside or boundary, and, for each boundary cell, the edges that meet it
// and the even-odd parity at its center, so that a key in a boundary cell
// is judged against the one or two edges that cross the cell instead of
// the whole polygon: by the signs of one or two linear functions of the
// key's leaf coordinates (cellLines) in all but crowded cells.
//
// Invariants (on top of faceGrid's):
//   - segs are every edge of every ring in the (u,v) plane, each with its
//     line; the polygon is the even-odd inside of all of them (holes lie
//     inside the outer ring and outside each other).
//   - For a boundary cell c, head[c] starts a list through links of the
//     edges that meet the cell's rectangle padded by gridTol; no other edge
//     comes within gridTol of the cell. head is -1 for the other cells.
//   - ref[c] of a boundary cell is refIn or refOut, the side of the cell's
//     center (uc[x], vc[y]) by the even-odd rule, when every listed edge's
//     line lies more than gridTol from that center; else refUnknown. It
//     has refComplex added when an end of a listed edge lies in the cell
//     (padded): otherwise every listed edge crosses the cell from side to
//     side. Unless ref is refUnknown, each link says which side of its
//     edge's line the cell's center lies on (see gridLink).
//   - judge[c] says how classify judges the keys of cell c: judgeOutside
//     and judgeInside for outside and inside cells, judgeSlow for a
//     boundary cell that cellLines cannot judge (see cellLinesOf), and
//     otherwise the index in lines of the cell's cellLines.
//     lines[judgeOutside] and lines[judgeInside] judge every key outside
//     and inside.
//   - The slices point into buf, or into the gridMemory the grid was
//     built in when they do not fit there: a polygon's Scan reuses them.
type polyGrid struct {
	g        faceGrid
	segs     []gridSeg
	uc, vc   []float64 // cell centers
	duc, dvc []float64 // du/di and dv/dj at the cell centers
	head     []int32
	edges    []int32 // of each cell: the length of its list of edges
	links    []gridLink
	ref      []uint8
	judge    []uint16
	lines    []cellLines
	margin   float64 // of lines: see cellLines
	buf      *polyGridBuf
}

// cellLines judges the keys of a boundary cell that one or two edges cross
// from side to side, or that holds a vertex and only the two edges that
// meet at it, without projecting them into the (u,v) plane: di and dj are
// a key's leaf coordinates (decoded to prefilterLevel) less those of the
// cell's lowest leaf, and, for each edge,
//
//	d = k + a di + b dj
//
// is the signed distance of the key's point p (the center of its
// prefilterLevel cell) from the edge's line (gridSeg.dist), to first order
// about the cell's center. When some |d| is at most polyGrid.margin the key
// is unsure: leafHalfDiagUV + gridTol as in classify, plus a bound on the
// error of the first order. (The (u,v) coordinate of a face coordinate s,
// stToUV, is quadratic on each half of the face with |d²u/ds²| = 8/3, so
// within half a cell's width w of the center, w = 2^-level, it is off by
// at most 4/3 (w/2)², and d, whose coefficients of u and v have squares
// summing to one, by at most √2 times that.) Otherwise no edge comes near
// p's prefilterLevel cell, and the lines' sign bits settle it: bit
// (b1 | b2<<1) of table is 1 when a point with sign bits b1 and b2 is
// inside. A cell with one edge has a second line that is never negative
// nor near (k = 1, a = b = 0); lines[judgeOutside] and lines[judgeInside]
// have two.
type cellLines struct {
	k1, a1, b1 float64
	k2, a2, b2 float64
	table      uint64
}

// Values of polyGrid.judge below the first cellLines of a boundary cell.
const (
	judgeOutside = 0
	judgeInside  = 1
	judgeSlow    = 2
	judgeFirst   = 3
)

// polyGridBuf backs a polyGrid's slices of cells, and its faceGrid's, for
// a grid of up to polyGridMaxSide cells a side, and the polygon's scan
// ranges.
type polyGridBuf struct {
	edges     [2 * (polyGridMaxSide + 1)]float64 // g.ug, g.vg
	centers   [2 * polyGridMaxSide]float64       // uc, vc
	slopes    [2 * polyGridMaxSide]float64       // duc, dvc
	cls       [polyGridMaxSide * polyGridMaxSide]uint8
	ref       [polyGridMaxSide * polyGridMaxSide]uint8
	head      [polyGridMaxSide * polyGridMaxSide]int32
	cellEdges [polyGridMaxSide * polyGridMaxSide]int32
	judge     [polyGridMaxSide * polyGridMaxSide]uint16
	lines     [judgeFirst + polyGridMaxSide*polyGridMaxSide]cellLines
	sat       [(polyGridMaxSide + 1) * (polyGridMaxSide + 1)]uint32
	ranges    [64]ScanRange
}

// Rows of the grid are bit masks (see newPolyGrid).
var _ [64 - polyGridMaxSide]struct{}

// gridSeg is an edge in the (u,v) plane: from (au, av) by (du, dv), of
// length n, and its line a u + b v + c, the signed distance from the line
// (a = dv/n, b = -du/n).
type gridSeg struct {
	au, av, bu, bv float64
	du, dv, n      float64
	a, b, c        float64
}

// gridLink is an entry of a boundary cell's list of edges: the edge (segs
// index), and the next entry (-1 at the end). When ref is set, seg is the
// index complemented (^i, negative) where the cell's center lies on the
// negative side of the edge's line.
type gridLink struct {
	seg, next int32
}

// Values of ref: bit 0 is the center's side; refComplex is set when a
// vertex lies in the cell (padded).
const (
	refOut     = 0
	refIn      = 1
	refComplex = 2
	refUnknown = 4
)

// leafHalfDiagUV bounds half the diagonal, in a face's (u,v) plane, of a
// cell at prefilterLevel: its side in s is 2^-22 and du/ds <= 8/3.
const leafHalfDiagUV = 4.6e-7

// newPolyGrid builds the scan plan of fr in gm (its previous plan is
// overwritten); ok is false when its box does not fit a grid of the face.
func newPolyGrid(fr *faceRings, gm *gridMemory) (pg *polyGrid, ok bool) {
	s0, s1 := uvToST(fr.u0-gridTol), uvToST(fr.u1+gridTol)
	t0, t1 := uvToST(fr.v0-gridTol), uvToST(fr.v1+gridTol)
	if !(s0 > 0 && s1 < 1 && t0 > 0 && t1 < 1 && s0 <= s1 && t0 <= t1) {
		return nil, false // as newFaceGrid, before overwriting gm
	}
	pg = &gm.pg
	*pg = polyGrid{buf: &gm.buf}
	g, ok := newFaceGrid(fr.face, s0, s1, t0, t1, polyGridSideFor(len(fr.segs)), pg.buf.edges[:], pg.buf.cls[:])
	if !ok {
		return nil, false
	}
	pg.g = g
	n := float64(int(1) << g.level)
	// Centers of rows and columns.
	cells := g.w * g.h
	// (A grid spans at most polyGridMaxSide cells a side: it fits buf.)
	cbuf := pg.buf.centers[:g.w+g.h]
	pg.head, pg.ref, pg.judge = pg.buf.head[:cells], pg.buf.ref[:cells], pg.buf.judge[:cells]
	pg.edges = pg.buf.cellEdges[:cells]
	clear(pg.edges)
	pg.uc, pg.vc = cbuf[:g.w:g.w], cbuf[g.w:]
	sbuf := pg.buf.slopes[:g.w+g.h]
	pg.duc, pg.dvc = sbuf[:g.w:g.w], sbuf[g.w:]
	for x := range pg.uc {
		s := (float64(g.i0+x) + 0.5) / n
		pg.uc[x], pg.duc[x] = stToUV(s), stToUVSlope(s)*(1.0/maxSize)
	}
	for y := range pg.vc {
		t := (float64(g.j0+y) + 0.5) / n
		pg.vc[y], pg.dvc[y] = stToUV(t), stToUVSlope(t)*(1.0/maxSize)
	}
	for i := range pg.head {
		pg.head[i] = -1
	}
	pg.segs = take(&gm.segs, len(fr.segs))
	pg.links = gm.links[:0]
	// parity[r]: bit x is set when an odd number of edges cross row r's
	// center line left of cell x's center (by the half-open rule of the
	// even-odd test): the cell's center is inside.
	var parity [polyGridMaxSide]uint64
	for si, sg := range fr.segs {
		du, dv := sg.bu-sg.au, sg.bv-sg.av
		sn := math.Sqrt(du*du + dv*dv)
		k := 1 / sn
		pg.segs[si] = gridSeg{sg.au, sg.av, sg.bu, sg.bv, du, dv, sn, dv * k, -du * k, (sg.av*du - sg.au*dv) * k}
		lo, hi := min(sg.av, sg.bv), max(sg.av, sg.bv)
		r0, r1 := g.row(lo-gridTol), g.row(hi+gridTol)
		var ku float64 // du/dv
		if sg.bv != sg.av {
			ku = du / dv
		}
		for r := r0; r <= r1; r++ {
			// The part of the edge within the row, padded.
			a, b := max(g.vg[r]-gridTol, lo), min(g.vg[r+1]+gridTol, hi)
			var ua, ub float64
			if sg.bv == sg.av || a > b {
				ua, ub = min(sg.au, sg.bu), max(sg.au, sg.bu)
			} else {
				ua, ub = sg.au+(a-sg.av)*ku, sg.au+(b-sg.av)*ku
				ua, ub = min(ua, ub), max(ua, ub)
			}
			c0, c1 := g.col(ua-gridTol), g.col(ub+gridTol)
			row := g.cls[r*g.w : (r+1)*g.w]
			for c := c0; c <= c1; c++ {
				row[c] = gridBoundary
				cell := r*g.w + c
				pg.links = append(pg.links, gridLink{seg: int32(si), next: pg.head[cell]})
				pg.head[cell] = int32(len(pg.links) - 1)
				pg.edges[cell]++
			}
			// The even-odd rule's crossing of the row's center line, by the
			// half-open rule: it flips the cells whose centers lie right of
			// it.
			if (sg.av > pg.vc[r]) != (sg.bv > pg.vc[r]) {
				u := sg.au + (pg.vc[r]-sg.av)*ku
				x := c0
				for x > 0 && pg.uc[x-1] > u {
					x--
				}
				for x < g.w && pg.uc[x] <= u {
					x++
				}
				parity[r] ^= ^uint64(0) << x
			}
		}
	}
	pg.lines = pg.buf.lines[:judgeFirst]
	pg.lines[judgeOutside] = cellLines{k1: 1, k2: 1}
	pg.lines[judgeInside] = cellLines{k1: 1, k2: 1, table: 1}
	w := 1 / n
	pg.margin = leafHalfDiagUV + gridTol + math.Sqrt2*(4.0/3)*(w/2)*(w/2)
	for r := 0; r < g.h; r++ {
		row := g.cls[r*g.w : (r+1)*g.w]
		for x := range row {
			c := r*g.w + x
			in := parity[r]>>x&1 != 0
			switch {
			case row[x] == gridBoundary:
				pg.ref[c] = pg.centerRef(c, pg.uc[x], pg.vc[r], in)
				pg.judge[c] = pg.cellLinesOf(c, x, r)
			case in:
				row[x] = gridInside
				pg.judge[c] = judgeInside
			default:
				pg.judge[c] = judgeOutside
			}
		}
	}
	keep(&gm.links, pg.links) // for the next grid
	return pg, true
}

// cellLinesOf appends the cellLines of boundary cell c (column x, row y),
// whose ref is set, to lines and returns its index, or returns judgeSlow:
// for a cell whose ref is refUnknown, or that has more than two edges, or
// a vertex but not exactly the two edges that meet at it.
func (pg *polyGrid) cellLinesOf(c, x, y int) uint16 {
	ref := pg.ref[c]
	g := &pg.g
	if ref&refUnknown != 0 || g.level > prefilterLevel {
		return judgeSlow // (classify is not used above prefilterLevel)
	}
	// A boundary cell has an edge. The sign bit of a line at the center is
	// its link's complement bit (see centerRef).
	link1, link2 := pg.links[pg.head[c]], gridLink{next: -1}
	n := 1
	if link1.next >= 0 {
		link2, n = pg.links[link1.next], 2
		if link2.next >= 0 {
			return judgeSlow
		}
	}
	s1, s2 := &pg.segs[link1.seg^link1.seg>>31], &pg.segs[link2.seg^link2.seg>>31]
	c1, c2 := uint(uint32(link1.seg)>>31), uint(uint32(link2.seg)>>31)
	in := uint(ref & refIn)
	// table bit (b1 | b2<<1): inside for sign bits b1, b2 of the lines.
	var table uint64
	if ref&refComplex == 0 {
		// Each edge crosses the cell from side to side: crossing its line
		// within the cell crosses it, and flips the parity.
		table = 0b0110 // b1 xor b2
		if in^c1^c2 == 1 {
			table = 0b1001
		}
	} else {
		// A vertex v lies in the cell (padded). With two edges only, they
		// are the two that meet at it, v to a and v to b, and a and b lie
		// outside the cell: otherwise a third edge, the next one at a or
		// b, would meet the cell too. Within the cell the boundary is then
		// the two rays from v: line 1 is crossed at the ray to a only on
		// a's side of line 2, and line 2 at the ray to b only on b's side
		// of line 1.
		if n != 2 {
			return judgeSlow
		}
		var au, av, bu, bv float64 // a, b: the far ends of s1, s2
		switch {
		case s1.bu == s2.au && s1.bv == s2.av:
			au, av, bu, bv = s1.au, s1.av, s2.bu, s2.bv
		case s2.bu == s1.au && s2.bv == s1.av:
			au, av, bu, bv = s1.bu, s1.bv, s2.au, s2.av
		default:
			return judgeSlow
		}
		da, db := s2.dist(au, av), s1.dist(bu, bv)
		if math.Abs(da) <= gridTol || math.Abs(db) <= gridTol {
			return judgeSlow // nearly one line: sides too close to tell
		}
		sa, sb := signBit(da), signBit(db)
		for b := uint(0); b < 4; b++ {
			b1, b2 := b&1, b>>1
			v := in
			if b1 != c1 && c2 == sa { // from the center across line 1, on its side of line 2
				v ^= 1
			}
			if b2 != c2 && b1 == sb { // then across line 2, on the point's side of line 1
				v ^= 1
			}
			table |= uint64(v) << b
		}
	}
	// A key's p lies off the cell's lowest leaf by di + half leaves along
	// i, and off its center by di + off.
	const half = 1 << (maxLevel - prefilterLevel - 1)
	off := float64(half - int(1)<<(maxLevel-g.level-1))
	cu, cv, du, dv := pg.uc[x], pg.vc[y], pg.duc[x], pg.dvc[y]
	k := len(pg.lines)
	pg.lines = pg.lines[:k+1] // (lines has room for every cell)
	l := &pg.lines[k]
	a1, b1 := s1.a*du, s1.b*dv
	*l = cellLines{k1: s1.dist(cu, cv) + (a1+b1)*off, a1: a1, b1: b1, k2: 1, table: table}
	if n == 2 {
		a2, b2 := s2.a*du, s2.b*dv
		l.k2, l.a2, l.b2 = s2.dist(cu, cv)+(a2+b2)*off, a2, b2
	}
	return uint16(k)
}

// dist is the signed distance of (u, v) from s's line.
func (s *gridSeg) dist(u, v float64) float64 { return s.a*u + s.b*v + s.c }

// signBit is 1 for a negative d (or -0), else 0.
func signBit(d float64) uint { return uint(math.Float64bits(d) >> 63) }

// stToUVSlope is the derivative of stToUV at s.
func stToUVSlope(s float64) float64 {
	if s >= 0.5 {
		return (8 / 3.) * s
	}
	return (8 / 3.) * (1 - s)
}

// centerRef is ref of boundary cell c, whose center (cu, cv) the even-odd
// rule puts inside when in is set; it marks the cell's links whose lines
// have the center on their negative side, and finds whether the cell is
// simple.
func (pg *polyGrid) centerRef(c int, cu, cv float64, in bool) uint8 {
	g := &pg.g
	x, y := c%g.w, c/g.w
	u0, u1 := g.ug[x]-gridTol, g.ug[x+1]+gridTol
	v0, v1 := g.vg[y]-gridTol, g.vg[y+1]+gridTol
	simple := true
	for e := pg.head[c]; e >= 0; e = pg.links[e].next {
		l := &pg.links[e]
		s := &pg.segs[l.seg]
		d := (cu-s.au)*s.dv - (cv-s.av)*s.du
		if math.Abs(d) <= gridTol*s.n {
			return refUnknown
		}
		if d < 0 {
			l.seg = ^l.seg
		}
		if (s.au >= u0 && s.au <= u1 && s.av >= v0 && s.av <= v1) ||
			(s.bu >= u0 && s.bu <= u1 && s.bv >= v0 && s.bv <= v1) {
			simple = false
		}
	}
	ref := uint8(refOut)
	if in {
		ref = refIn
	}
	if !simple {
		ref |= refComplex
	}
	return ref
}

// classify is PolygonFilter.ClassifyLeaves, each leaf decoded by dec to
// its ancestor at prefilterLevel (not above the grid's level), whose
// lowest leaf has face coordinates (i, j): keys of inside and outside grid
// cells are judged by their cell. In a boundary grid cell, let p be the
// prefilterLevel cell's center, within leafHalfDiagUV of all of it: when a
// listed edge's line comes within leafHalfDiagUV + gridTol of p, the leaf
// is unsure; otherwise no edge meets the prefilterLevel cell (unlisted
// edges do not come near the grid cell), and p's side is the grid cell
// center's, flipped by each edge that the segment from that center to p
// crosses. In a simple cell an edge is crossed exactly when its line
// separates the two points; otherwise the crossing is judged with a margin
// of gridTol (else unsure). Most cells are judged so by their cellLines,
// the rest (see cellLinesOf) by their edges.
//
// Judging a leaf costs leafWork, plus, in a cell judged by its edges, one
// for each edge of the cell; classify stops once the work of the leaves
// judged reaches budget (see PolygonFilter.ClassifyLeavesWork).
func (pg *polyGrid) classify(leaves []uint64, class []uint8, dec *leafDecoder, leafWork, budget int) (judged, work int) {
	g := &pg.g
	sh := maxLevel - g.level
	mask := 1<<sh - 1
	class = class[:len(leaves)]
	for k, leaf := range leaves {
		if work >= budget && k > 0 {
			return k, work // the leaf before spent the budget
		}
		work += leafWork
		if !s2.CellID(leaf).IsValid() || int(leaf>>61) != g.face {
			class[k] = LeafOutside // the polygon lies within the grid's face
			continue
		}
		i, j := dec.ij(leaf)
		x, y := i>>sh-g.i0, j>>sh-g.j0
		if uint(x) >= uint(g.w) || uint(y) >= uint(g.h) {
			class[k] = LeafOutside
			continue
		}
		c := y*g.w + x
		n := pg.judge[c]
		if n == judgeSlow {
			class[k] = uint8(pg.classifyByEdges(c, x, y, i, j))
			work += int(pg.edges[c])
			continue
		}
		// Branch-free over inside, outside and simple boundary cells,
		// which follow each other unpredictably.
		l := &pg.lines[n]
		di, dj := float64(i&mask), float64(j&mask)
		d1 := l.k1 + l.a1*di + l.b1*dj
		d2 := l.k2 + l.a2*di + l.b2*dj
		if math.Abs(d1) <= pg.margin || math.Abs(d2) <= pg.margin {
			class[k] = LeafUnsure
			continue
		}
		class[k] = uint8(l.table >> (signBit(d1) | signBit(d2)<<1) & 1)
	}
	return len(leaves), work
}

// classifyByEdges is classify for the leaf (i, j) in boundary cell c
// (column x, row y) whose judge is judgeSlow.
func (pg *polyGrid) classifyByEdges(c, x, y, i, j int) int {
	ref := pg.ref[c]
	if ref == refUnknown {
		return LeafUnsure
	}
	const half = 1 << (maxLevel - prefilterLevel - 1)
	pu := stToUV(float64(i+half) * (1.0 / maxSize))
	pv := stToUV(float64(j+half) * (1.0 / maxSize))
	if ref&refComplex == 0 {
		// No vertex in the cell: each listed edge crosses it, and the
		// segment from the center to p crosses the edge exactly when it
		// crosses the edge's line, that is when p lies on the other side
		// of the line from the center. Branch-free over the edges, whose
		// sides the processor cannot predict.
		in := uint64(ref)
		unsure := false
		for e := pg.head[c]; e >= 0; {
			l := pg.links[e]
			_, d, opposite := pg.side(l, pu, pv)
			unsure = unsure || math.Abs(d) <= leafHalfDiagUV+gridTol
			in ^= opposite
			e = l.next
		}
		if unsure {
			return LeafUnsure
		}
		return int(in) // LeafOutside or LeafInside
	}
	cu, cv := pg.uc[x], pg.vc[y]
	eu, ev := pu-cu, pv-cv
	tolCP := gridTol * (math.Abs(eu) + math.Abs(ev))
	// Branch-free over the edges as above: an edge can be crossed only when
	// p lies on the far side of its line from the center (opposite), and is
	// crossed when its ends lie on either side of the segment from the
	// center to p.
	in := uint64(ref & refIn)
	unsure := false
	for e := pg.head[c]; e >= 0; {
		l := pg.links[e]
		s, d, opposite := pg.side(l, pu, pv)
		oa := (s.au-cu)*ev - (s.av-cv)*eu
		ob := (s.bu-cu)*ev - (s.bv-cv)*eu
		tight := math.Abs(oa) <= tolCP || math.Abs(ob) <= tolCP
		unsure = unsure || math.Abs(d) <= leafHalfDiagUV+gridTol || (tight && opposite == 1)
		in ^= opposite & ((math.Float64bits(oa) ^ math.Float64bits(ob)) >> 63)
		e = l.next
	}
	if unsure {
		return LeafUnsure
	}
	return int(in) // LeafOutside or LeafInside
}

// side returns the edge of link l, the signed distance d of (u, v) from
// its line, and opposite: 1 when (u, v) lies on the other side of the line
// from the cell's center (the sign of d, flipped for a complemented seg,
// whose center is on the negative side), else 0. With no branch, for
// classify.
func (pg *polyGrid) side(l gridLink, u, v float64) (s *gridSeg, d float64, opposite uint64) {
	s = &pg.segs[l.seg^l.seg>>31]
	d = s.a*u + s.b*v + s.c
	return s, d, math.Float64bits(d)>>63 ^ uint64(uint32(l.seg)>>31)
}
