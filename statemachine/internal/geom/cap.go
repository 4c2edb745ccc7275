package geom

import (
	"math"

	"github.com/golang/geo/r3"
	"github.com/golang/geo/s1"
	"github.com/golang/geo/s2"
)

const (
	// capMarginMM widens a cap for its covering and its prefilter. It exceeds
	// the diagonal of a leaf cell (< 15 mm), the rounding of DistanceMM
	// (0.5 mm) and the error of the haversine formula away from the antipode
	// (well under 1 mm) together.
	capMarginMM = 100

	// fullCapAngle: a cap (with margin) at least this wide covers the whole
	// sphere for our purposes. It stops within ~64 m of the antipode, where
	// the haversine formula is least precise.
	fullCapAngle = math.Pi - 1e-5

	// minWidthDeriv is s2.MinWidthMetric.Deriv: two points of one cube face
	// whose s (or t) coordinates differ by d are at least d*minWidthDeriv
	// radians apart (for small d).
	minWidthDeriv = 2 * math.Sqrt2 / 3

	// stBoxMaxAngle is the largest cap (radians) covered through its (s,t)
	// bounding box; wider caps use vertex neighbours.
	stBoxMaxAngle = 0.1
)

// Cap is a prepared radius query: the points within radiusMM of a center.
// It is a value; its methods do not modify it and are safe for concurrent
// use.
type Cap struct {
	latNano, lonNano int64
	radiusMM         uint64
	cosLat           float64   // cosine of the center's latitude
	sinLat           float64   // sine of the center's latitude
	fast             bool      // fastDistanceMM may be used (the center is within fastMaxLat of the equator)
	center           r3.Vector // unit vector of the center
	angle            float64   // radius plus capMarginMM, radians
	chord2           float64   // squared chord length of angle
	full             bool      // angle >= fullCapAngle: everything may match
	cosPre2          float64   // squared cosine of angle + prefilterSlack; see MayContainLeaf
}

// NewCap prepares the radius query of the points within radiusMM millimetres
// of (latNano, lonNano). The caller has validated the inputs (coordinates on
// the globe, 1 <= radiusMM <= 40,000,000,000); other inputs give some Cap
// without panicking.
func NewCap(latNano, lonNano int64, radiusMM uint64) Cap {
	c := Cap{
		latNano:  latNano,
		lonNano:  lonNano,
		radiusMM: radiusMM,
		cosLat:   math.Cos(float64(latNano) * nanoToRad),
		sinLat:   math.Sin(float64(latNano) * nanoToRad),
		center:   pointFromNano(latNano, lonNano),
		fast:     latNano >= -fastMaxLatNano && latNano <= fastMaxLatNano,
	}
	c.angle = (float64(radiusMM) + capMarginMM) / earthRadiusMM
	if c.angle >= fullCapAngle {
		c.full = true
		c.angle = math.Pi
		c.chord2 = 4
	} else {
		ch := 2 * math.Sin(c.angle/2)
		c.chord2 = ch * ch
		pre := c.angle + prefilterSlack
		if pre < math.Pi/2 {
			c.cosPre2 = math.Cos(pre) * math.Cos(pre)
		} else {
			c.cosPre2 = -1 // a cap this wide: the prefilter passes everything
		}
	}
	return c
}

// Contains reports whether DistanceMM(center, point) <= radiusMM, and
// returns that distance in millimetres. This rule (the rounded millimetre
// distance is at most the radius) is the definition of inclusion.
func (c *Cap) Contains(latNano, lonNano int64) (distanceMM uint64, ok bool) {
	d, fast := c.fastDistanceMM(latNano, lonNano)
	if !fast {
		d = haversineMM(c.latNano, c.lonNano, c.cosLat, latNano, lonNano)
	}
	return d, d <= c.radiusMM
}

const (
	// fastMaxLatNano bounds the latitude of a center whose distances
	// fastDistanceMM computes: 80 degrees, so that the cosine of every
	// latitude it meets (within fastMaxHalf*2 rad more) exceeds 0.15.
	fastMaxLatNano = 80_000_000_000
	// fastMaxHalf bounds half the latitude and half the longitude
	// difference (radians) that fastDistanceMM takes: about 64 km.
	fastMaxHalf = 0.01
	// fastRelTol and fastAbsTol bound how close to a half millimetre a
	// fast distance may lie and still be rounded: far more than the
	// difference between the fast and the haversineMM evaluation (a few
	// units in the last place of each, under 1e-14 relative).
	fastRelTol = 1e-11
	fastAbsTol = 1e-6
)

// fastDistanceMM is haversineMM(center, point) without the library's sine,
// cosine and arcsine, for points near the center: ok is false when it
// cannot tell the rounded result, and the caller must use haversineMM.
//
// It evaluates the same haversine formula with Taylor polynomials, exact to
// well below a unit in the last place for the small angles it takes
// (|half difference| <= fastMaxHalf):
//   - sin²x as a polynomial in x² to x^8 (next term < 2e-20 x²);
//   - the point's cosine of latitude as cos(a+δ) = cos a (1 - 2 sin²(δ/2))
//     minus sin a sin δ, sin δ to δ^7 (next term < 3e-22 δ);
//   - asin √h as √h times a polynomial in h to h^4 (h < 2.3e-4, next term
//     < 2e-20), so that the polynomial is evaluated while the square root
//     is, instead of after it.
//
// The two evaluations differ by far less than fastRelTol*d + fastAbsTol,
// so when d lies further than that from a half millimetre both round to
// the same millimetre; closer than that, ok is false.
func (c *Cap) fastDistanceMM(latNano, lonNano int64) (distanceMM uint64, ok bool) {
	if !c.fast {
		return 0, false
	}
	dLat := float64(latNano-c.latNano) * (nanoToRad / 2)
	dLon := float64(lonNano-c.lonNano) * (nanoToRad / 2)
	if !(math.Abs(dLat) <= fastMaxHalf && math.Abs(dLon) <= fastMaxHalf) {
		return 0, false
	}
	sLat2 := sin2Small(dLat)
	cosB := c.cosLat*(1-2*sLat2) - c.sinLat*sinSmall(2*dLat)
	h := sLat2 + c.cosLat*cosB*sin2Small(dLon)
	d := math.Sqrt(h) * asinSqrtFactor(h) * (2 * earthRadiusMM)
	fl := math.Floor(d)
	frac := d - fl
	if math.Abs(frac-0.5) <= d*fastRelTol+fastAbsTol {
		return 0, false
	}
	if frac > 0.5 {
		fl++
	}
	return uint64(fl), true
}

// sinSmall is sin x for |x| <= 2*fastMaxHalf, to x^7.
func sinSmall(x float64) float64 {
	x2 := x * x
	return x - x*x2*(1.0/6-x2*(1.0/120-x2*(1.0/5040)))
}

// sin2Small is sin²x for |x| <= fastMaxHalf, to x^8:
// x² - x⁴/3 + 2x⁶/45 - x⁸/315.
func sin2Small(x float64) float64 {
	x2 := x * x
	return x2 * (1 - x2*(1.0/3-x2*(2.0/45-x2*(1.0/315))))
}

// asinSqrtFactor is asin(√h)/√h for 0 <= h <= 2.3e-4, to h^4:
// 1 + h/6 + 3h²/40 + 5h³/112 + 35h⁴/1152.
func asinSqrtFactor(h float64) float64 {
	return 1 + h*(1.0/6+h*(3.0/40+h*(5.0/112+h*(35.0/1152))))
}

// MayContainLeaf is a cheap prefilter on a leaf cell id: false means that no
// point whose LeafCell is leaf lies within the radius (by Contains). It
// decodes the leaf's level-22 ancestor (no trigonometry, no square root) and
// compares its angle from the center with the radius plus the 10 cm margin
// plus that ancestor's size. It is false for an invalid cell id.
func (c *Cap) MayContainLeaf(leaf uint64) bool {
	if judged, may := c.judgeWithoutPoint(leaf); judged {
		return may
	}
	return c.mayContainPoint(approxLeafPoint(leaf))
}

// judgeWithoutPoint is MayContainLeaf where it needs no point: a full or
// wide cap, or an invalid cell id. judged is false otherwise.
func (c *Cap) judgeWithoutPoint(leaf uint64) (judged, may bool) {
	switch {
	case c.full:
		return true, true
	case !s2.CellID(leaf).IsValid():
		return true, false
	case c.cosPre2 < 0:
		return true, true
	}
	return false, false
}

// mayContainPoint is MayContainLeaf for p = approxLeafPoint(leaf) of a
// valid leaf, when the cap is neither full nor wide. The leaf lies within
// prefilterSlack of p, a point of its level-22 ancestor, so it can be
// within angle of the center only if p is within angle + prefilterSlack:
// p.c >= cos(angle + slack) |p|, squared.
func (c *Cap) mayContainPoint(p r3.Vector) bool {
	d := p.Dot(c.center)
	return d > 0 && d*d >= c.cosPre2*p.Norm2()
}

// CapFilter is MayContainLeaf for the keys of one index scan: keys that
// follow each other on the Hilbert curve share their leading levels, and
// the filter decodes only the levels in which a key differs from the
// previous one. It is not safe for concurrent use.
type CapFilter struct {
	c   *Cap
	dec leafDecoder
}

// Filter returns a CapFilter for c.
func (c *Cap) Filter() CapFilter { return CapFilter{c: c} }

// MayContainLeaf is c.MayContainLeaf(leaf).
func (f *CapFilter) MayContainLeaf(leaf uint64) bool {
	var may [1]bool
	f.MayContainLeaves([]uint64{leaf}, may[:])
	return may[0]
}

// MayContainLeaves sets may[k] to MayContainLeaf(leaves[k]) for each leaf,
// in order: a run of an index scan's keys in one call. may should be as
// long as leaves; only as many leaves as it holds are judged.
func (f *CapFilter) MayContainLeaves(leaves []uint64, may []bool) {
	leaves = leaves[:min(len(leaves), len(may))]
	may = may[:len(leaves)]
	for k, leaf := range leaves {
		if judged, m := f.c.judgeWithoutPoint(leaf); judged {
			may[k] = m
			continue
		}
		may[k] = f.c.mayContainPoint(f.dec.point(leaf))
	}
}

// Ranges returns sorted, disjoint leaf-cell-id ranges, adjacent ones merged,
// whose union holds the LeafCell of every point within the radius.
//
// A cap of radius under about 640 km that lies within one cube face is
// covered by the cells that meet its (s,t) bounding box, at the level where
// that box spans 3 to 5 cells a side (at most 25 cells, usually 9 to 16,
// merged into fewer ranges: 5 for a 1 km cap). Other caps use the 3 or 4 cells around the nearest
// cell vertex at the level where cells are twice as wide as the cap (as
// s2.Cap.CellUnionBound) or the six cube faces, keeping, for caps wider than
// about 12 km, only the children of those cells that meet the cap. A cap of
// about half the circumference (20,015 km) or more gets one range of every
// leaf cell.
func (c *Cap) Ranges() []CellRange {
	if c.full {
		return []CellRange{{firstLeaf, lastLeaf}}
	}
	var buf [25]s2.CellID
	return rangesOf(appendCapCells(buf[:0], c.center, c.angle, 1))
}

// ScanRanges covers the cap for an index scan, one level finer than
// Ranges (the (s,t) box spans 5 to 9 cells a side: at most 81 cells,
// merged into ranges); no range is marked Inside. A 1 km query then scans
// fewer keys outside the circle for a few more tree seeks: about 7% faster
// than at Ranges' level, while one level finer still is slower again. (A
// grid of inside, outside and boundary cells, as polygons have, cut a 1
// km query's keys from about 255 to 110, but building it cost about what
// the per-key prefilter it spared did; it was removed.)
func (c *Cap) ScanRanges() []ScanRange { return c.AppendScanRanges(nil) }

// AppendScanRanges appends ScanRanges to dst: a caller that keeps dst
// between queries saves allocating them (fresh memory, written at once).
func (c *Cap) AppendScanRanges(dst []ScanRange) []ScanRange {
	if c.full {
		return append(dst, ScanRange{CellRange: CellRange{firstLeaf, lastLeaf}})
	}
	var buf [81]s2.CellID
	return appendCellScanRanges(dst, appendCapCells(buf[:0], c.center, c.angle, 2))
}

// appendCellScanRanges sorts cells and appends their ranges to dst,
// merging those that overlap or are adjacent.
func appendCellScanRanges(dst []ScanRange, cells []s2.CellID) []ScanRange {
	for i := 1; i < len(cells); i++ {
		for j := i; j > 0 && cells[j] < cells[j-1]; j-- {
			cells[j], cells[j-1] = cells[j-1], cells[j]
		}
	}
	first := len(dst)
	for _, id := range cells {
		r := CellRange{uint64(id.RangeMin()), uint64(id.RangeMax())}
		if n := len(dst); n > first && (r.Min <= dst[n-1].Max || r.Min-dst[n-1].Max <= 2) {
			dst[n-1].Max = max(dst[n-1].Max, r.Max)
			continue
		}
		dst = append(dst, ScanRange{CellRange: r})
	}
	return dst
}

// appendCapCells appends to dst cells whose union contains the cap of the
// given center (unit vector) and angle (radians, < pi). extra is how many
// levels below the level where the cap's (s,t) box spans at most 3 cells
// the covering goes (0 to 2): at most (2^(extra+1)+1)^2 cells.
func appendCapCells(dst []s2.CellID, center r3.Vector, angle float64, extra int) []s2.CellID {
	if angle < stBoxMaxAngle {
		if cells, ok := appendCapCellsST(dst, center, angle, extra); ok {
			return cells
		}
	}
	// The level where cells are at least twice as wide as the cap's radius:
	// the four cells around the cell vertex nearest to the center cover it.
	// Below level 0, the six faces do.
	level := s2.MinWidthMetric.MaxLevel(angle) - 1
	var cells []s2.CellID
	if level < 0 {
		cells = []s2.CellID{
			s2.CellIDFromFace(0), s2.CellIDFromFace(1), s2.CellIDFromFace(2),
			s2.CellIDFromFace(3), s2.CellIDFromFace(4), s2.CellIDFromFace(5),
		}
	} else {
		f, s, t := faceST(center)
		cells = cellIDFromFaceIJ(f, stToIJ(s), stToIJ(t)).VertexNeighbors(level)
	}
	if level >= 8 {
		return append(dst, cells...)
	}
	// A wide cap: its cells are few and their scans long, so it pays to keep
	// only the children that meet the cap.
	sc := s2.CapFromCenterAngle(s2.Point{Vector: center}, s1.Angle(angle))
	for _, id := range cells {
		for _, k := range id.Children() {
			if sc.IntersectsCell(s2.CellFromCellID(k)) {
				dst = append(dst, k)
			}
		}
	}
	return dst
}

// appendCapCellsST covers a small cap by the cells that meet its (s,t)
// bounding box on the center's face; ok is false when that box leaves the
// face.
//
// The box is measured, not bounded by the face's worst-case metric: the
// gnomonic map of a face takes the cap's boundary circle to an ellipse, and
// (u,v) -> (s,t) is monotone in each axis, so the box of the boundary's
// image is the cap's box. capBoxSamples points of the boundary are mapped;
// between two samples the ellipse bulges past their extent by at most
// 1 - cos(pi/capBoxSamples) of its half-width (2% for 16 samples), and the
// box is widened by capBoxPad of its half-widths to cover that.
func appendCapCellsST(dst []s2.CellID, center r3.Vector, angle float64, extra int) (cells []s2.CellID, ok bool) {
	f, s0, s1, t0, t1, ok := capSTBox(center, angle)
	if !ok {
		return dst, false
	}
	// The finest level whose cells are at least the box's larger half-side
	// wide, then extra levels below it.
	r := max(s1-s0, t1-t0) / 2
	level := min(max(-math.Ilogb(r)-1, 0)+extra, maxLevel)
	n := float64(int(1) << level)
	i0, i1 := int(s0*n), int(s1*n)
	j0, j1 := int(t0*n), int(t1*n)
	return appendFaceIJBlock(dst, f, level, i0, i1, j0, j1), true
}

const (
	capBoxSamples = 16
	capBoxPad     = 0.05
)

// capBoxDirs are the cosine and sine of the capBoxSamples directions about
// a cap's center in which capSTBox samples its boundary.
var capBoxDirs = func() (d [capBoxSamples][2]float64) {
	for k := range d {
		sin, cos := math.Sincos(2 * math.Pi * float64(k) / capBoxSamples)
		d[k] = [2]float64{cos, sin}
	}
	return d
}()

// capSTBox returns the face of the cap's center and the (s,t) box holding
// the cap on it; ok is false when some of the cap may lie off that face.
func capSTBox(center r3.Vector, angle float64) (f int, s0, s1, t0, t1 float64, ok bool) {
	f, sc, tc := faceST(center)
	e1 := s2.Ortho(s2.Point{Vector: center}).Vector
	e2 := center.Cross(e1)
	cosA, sinA := math.Cos(angle), math.Sin(angle)
	s0, s1, t0, t1 = sc, sc, tc, tc
	for _, d := range capBoxDirs {
		p := center.Mul(cosA).Add(e1.Mul(sinA * d[0])).Add(e2.Mul(sinA * d[1]))
		pf, s, t := faceST(p)
		if pf != f {
			return 0, 0, 0, 0, 0, false
		}
		s0, s1, t0, t1 = min(s0, s), max(s1, s), min(t0, t), max(t1, t)
	}
	ps, pt := (s1-s0)*capBoxPad/2+1e-15, (t1-t0)*capBoxPad/2+1e-15
	s0, s1, t0, t1 = s0-ps, s1+ps, t0-pt, t1+pt
	if !(s0 > 0 && s1 < 1 && t0 > 0 && t1 < 1) {
		return 0, 0, 0, 0, 0, false
	}
	return f, s0, s1, t0, t1, true
}

// stToIJ is the leaf coordinate of s, as in package s2.
func stToIJ(s float64) int {
	return min(max(int(math.Floor(maxSize*s)), 0), maxSize-1)
}
