package geom

import "math"

// A polyGrid is the scan plan of a polygon that lies within one cube face:
// a faceGrid of its face's (u,v) plane whose cells are classed inside,
// outside or boundary, and, for each boundary cell, the edges that meet it
// and the even-odd parity at its center, so that a key in a boundary cell
// is judged against the one or two edges that cross the cell instead of
// the whole polygon.
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
//   - The slices point into buf, or into the gridMemory the grid was
//     built in when they do not fit there: a polygon's Scan reuses them.
type polyGrid struct {
	g      faceGrid
	segs   []gridSeg
	uc, vc []float64 // cell centers
	head   []int32
	links  []gridLink
	ref    []uint8
	buf    *polyGridBuf
}

// polyGridBuf backs a polyGrid's slices of cells, and its faceGrid's, for
// a grid of polyGridSide cells a side, and the polygon's scan ranges.
type polyGridBuf struct {
	edges   [2 * (polyGridSide + 1)]float64 // g.ug, g.vg
	centers [2 * polyGridSide]float64       // uc, vc
	cls     [polyGridSide * polyGridSide]uint8
	ref     [polyGridSide * polyGridSide]uint8
	head    [polyGridSide * polyGridSide]int32
	sat     [(polyGridSide + 1) * (polyGridSide + 1)]uint32
	ranges  [64]ScanRange
}

// Rows of the grid are bit masks (see newPolyGrid).
var _ [64 - polyGridSide]struct{}

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
	g, ok := newFaceGrid(fr.face, s0, s1, t0, t1, polyGridSide, pg.buf.edges[:], pg.buf.cls[:])
	if !ok {
		return nil, false
	}
	pg.g = g
	n := float64(int(1) << g.level)
	// Centers of rows and columns.
	cells := g.w * g.h
	// (A grid spans at most polyGridSide cells a side: it fits buf.)
	cbuf := pg.buf.centers[:g.w+g.h]
	pg.head, pg.ref = pg.buf.head[:cells], pg.buf.ref[:cells]
	pg.uc, pg.vc = cbuf[:g.w:g.w], cbuf[g.w:]
	for x := range pg.uc {
		pg.uc[x] = stToUV((float64(g.i0+x) + 0.5) / n)
	}
	for y := range pg.vc {
		pg.vc[y] = stToUV((float64(g.j0+y) + 0.5) / n)
	}
	for i := range pg.head {
		pg.head[i] = -1
	}
	pg.segs = take(&gm.segs, len(fr.segs))
	pg.links = gm.links[:0]
	// parity[r]: bit x is set when an odd number of edges cross row r's
	// center line left of cell x's center (by the half-open rule of the
	// even-odd test): the cell's center is inside.
	var parity [polyGridSide]uint64
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
	for r := 0; r < g.h; r++ {
		row := g.cls[r*g.w : (r+1)*g.w]
		for x := range row {
			in := parity[r]>>x&1 != 0
			switch {
			case row[x] == gridBoundary:
				pg.ref[r*g.w+x] = pg.centerRef(r*g.w+x, pg.uc[x], pg.vc[r], in)
			case in:
				row[x] = gridInside
			}
		}
	}
	keep(&gm.links, pg.links) // for the next grid
	return pg, true
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

// classify judges the leaves of the cell at prefilterLevel (not above the
// grid's level) whose lowest leaf has face coordinates (i, j), as
// PolygonFilter.ClassifyLeaf: keys of inside and outside grid cells by
// their cell. In a boundary grid cell, let p be the prefilterLevel cell's
// center, within leafHalfDiagUV of all of it: when a listed edge's line
// comes within leafHalfDiagUV + gridTol of p, the leaf is unsure;
// otherwise no edge meets the prefilterLevel cell (unlisted edges do not
// come near the grid cell), and p's side is the grid cell center's,
// flipped by each edge that the segment from that center to p crosses. In
// a simple cell an edge is crossed exactly when its line separates the two
// points; otherwise the crossing is judged with a margin of gridTol (else
// unsure).
func (pg *polyGrid) classify(i, j int) int {
	g := &pg.g
	sh := maxLevel - g.level
	x, y := i>>sh-g.i0, j>>sh-g.j0
	if x < 0 || x >= g.w || y < 0 || y >= g.h {
		return LeafOutside
	}
	c := y*g.w + x
	switch g.cls[c] {
	case gridOutside:
		return LeafOutside
	case gridInside:
		return LeafInside
	}
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
