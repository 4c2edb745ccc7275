package geom

import (
	"math"

	"github.com/golang/geo/r1"
	"github.com/golang/geo/s1"
	"github.com/golang/geo/s2"
)

// Box is a prepared bounding-box query: the points whose latitude lies
// between two parallels and whose longitude lies on the arc of the equator
// that runs east from one meridian to another. Its edges are the parallels
// and meridians themselves (a parallel is not a great circle: a box's
// northern edge in the northern hemisphere is not the shortest path
// between its corners). It is a value; its methods do not modify it.
//
// Inclusion is exact, in integers: minLat <= lat <= maxLat, and lon on
// the arc from minLon to maxLon (when minLon > maxLon the arc crosses the
// antimeridian). Longitudes -180 and 180 name one meridian, and a pole
// (latitude +-90) lies on every meridian: the box holds them when it holds
// the place they name.
type Box struct {
	minLat, maxLat, minLon, maxLon int64
	fullLon                        bool // every longitude
	wide                           bool // the arc spans more than 180 degrees

	cap Cap // contains the box: its covering is the box's

	// For the leaf prefilter (see BoxFilter): the sines of the latitude
	// bounds widened by boxSlack, the unit directions of the two
	// meridians in the equator's plane, and boxSlack's sine.
	sinLo, sinHi   float64
	ax, ay, bx, by float64
	slack          float64
}

// boxSlack widens the prefilter's judgement: more than the distance from a
// leaf cell's approximate point (approxLeafPoint) to any point of the leaf,
// plus the error of the tests.
const boxSlack = 2 * prefilterSlack

// NewBox prepares the box query. The caller has validated the inputs
// (latitudes within +-90 degrees with minLat <= maxLat, longitudes within
// +-180 degrees); other inputs give some Box without panicking.
func NewBox(minLat, minLon, maxLat, maxLon int64) Box {
	b := Box{minLat: minLat, maxLat: maxLat, minLon: minLon, maxLon: maxLon}
	span := maxLon - minLon
	if span < 0 {
		span += 2 * maxLonNano0
	}
	b.fullLon = span >= 2*maxLonNano0
	b.wide = span > maxLonNano0

	lo := float64(minLat) * nanoToRad
	hi := float64(maxLat) * nanoToRad
	b.sinLo, b.sinHi = -2, 2
	if lo-boxSlack > -math.Pi/2 {
		b.sinLo = math.Sin(lo - boxSlack)
	}
	if hi+boxSlack < math.Pi/2 {
		b.sinHi = math.Sin(hi + boxSlack)
	}
	b.ax, b.ay = math.Cos(float64(minLon)*nanoToRad), math.Sin(float64(minLon)*nanoToRad)
	b.bx, b.by = math.Cos(float64(maxLon)*nanoToRad), math.Sin(float64(maxLon)*nanoToRad)
	b.slack = math.Sin(boxSlack)

	// The covering is that of a cap holding the box (s2.Rect.CapBound),
	// with its center rounded to nanodegrees (at most 0.06 mm away) and
	// its radius rounded up, plus a millimetre.
	lng := s1.IntervalFromEndpoints(float64(minLon)*nanoToRad, float64(maxLon)*nanoToRad)
	if b.fullLon {
		lng = s1.FullInterval()
	}
	rect := s2.Rect{Lat: r1.Interval{Lo: lo, Hi: hi}, Lng: lng}
	c := rect.CapBound()
	ll := s2.LatLngFromPoint(c.Center())
	cLat := int64(math.Round(ll.Lat.Degrees() * 1e9))
	cLon := int64(math.Round(ll.Lng.Degrees() * 1e9))
	cLat = min(max(cLat, -maxLatNano), maxLatNano)
	cLon = min(max(cLon, -maxLonNano0), maxLonNano0)
	radiusMM := uint64(math.Ceil(c.Radius().Radians()*earthRadiusMM)) + 1
	b.cap = NewCap(cLat, cLon, radiusMM)
	return b
}

// maxLonNano0 is maxLonNano as an int64 of the box's arithmetic.
const maxLonNano0 = int64(maxLonNano)

// Contains reports whether the point lies in the box: the definition of
// inclusion.
func (b *Box) Contains(latNano, lonNano int64) bool {
	if latNano < b.minLat || latNano > b.maxLat {
		return false
	}
	if latNano == maxLatNano || latNano == -maxLatNano || b.fullLon {
		return true
	}
	if b.onArc(lonNano) {
		return true
	}
	switch lonNano {
	case maxLonNano0:
		return b.onArc(-maxLonNano0)
	case -maxLonNano0:
		return b.onArc(maxLonNano0)
	}
	return false
}

// onArc reports whether lon lies on the arc east from minLon to maxLon.
func (b *Box) onArc(lon int64) bool {
	if b.minLon <= b.maxLon {
		return b.minLon <= lon && lon <= b.maxLon
	}
	return lon >= b.minLon || lon <= b.maxLon
}

// AppendScanRanges appends the box's covering for an index scan; no range
// is marked Inside. A small box within one cube face is covered by the
// cells that meet the (s,t) bounding box of its outline (see boxSTCells);
// another, by its bounding cap's covering (Cap.AppendScanRanges).
func (b *Box) AppendScanRanges(dst []ScanRange) []ScanRange {
	var buf [81]s2.CellID
	cells, ok := b.appendSTCells(buf[:0])
	if !ok {
		return b.cap.AppendScanRanges(dst)
	}
	return appendCellScanRanges(dst, cells)
}

const (
	// boxSTMaxSpan bounds the latitude and longitude spans (nanodegrees)
	// of a box covered through its (s,t) bounding box.
	boxSTMaxSpan = 2_000_000_000
	// boxSTSamples is how many points of each edge of the box's outline
	// bound its image in (s,t), corners included.
	boxSTSamples = 9
	// boxSTPad widens that bound, as a share of its size: far more than
	// an edge's image strays from the straight line between samples
	// (parallels and meridians are smooth and the samples at most a
	// quarter of a degree apart), and than the leaves' size.
	boxSTPad = 0.05
)

// appendSTCells appends the cells that meet the padded (s,t) bounding
// box of the box's outline, at the level where that box spans 5 to 9
// cells a side (as Cap.AppendScanRanges), or returns false when the box
// is too large (over boxSTMaxSpan either way), crosses the antimeridian,
// reaches a pole, or its outline leaves one cube face. A box within a
// face is the image of its outline's inside, so the bound holds every
// point of it.
func (b *Box) appendSTCells(dst []s2.CellID) ([]s2.CellID, bool) {
	if b.minLon > b.maxLon || b.maxLon-b.minLon > boxSTMaxSpan || b.maxLat-b.minLat > boxSTMaxSpan ||
		b.maxLat >= maxLatNano-boxSTMaxSpan || b.minLat <= -maxLatNano+boxSTMaxSpan {
		return dst, false
	}
	f := -1
	var s0, s1, t0, t1 float64
	for k := range 4 * (boxSTSamples - 1) {
		side, i := k/(boxSTSamples-1), int64(k%(boxSTSamples-1))
		lat, lon := b.minLat, b.minLon
		switch side {
		case 0: // south edge, west to east
			lon = b.minLon + (b.maxLon-b.minLon)*i/(boxSTSamples-1)
		case 1: // east edge, south to north
			lon, lat = b.maxLon, b.minLat+(b.maxLat-b.minLat)*i/(boxSTSamples-1)
		case 2: // north edge, east to west
			lat, lon = b.maxLat, b.maxLon-(b.maxLon-b.minLon)*i/(boxSTSamples-1)
		case 3: // west edge, north to south
			lat = b.maxLat - (b.maxLat-b.minLat)*i/(boxSTSamples-1)
		}
		pf, s, t := faceST(pointFromNano(lat, lon))
		switch {
		case f < 0:
			f, s0, s1, t0, t1 = pf, s, s, t, t
		case pf != f:
			return dst, false
		}
		s0, s1, t0, t1 = min(s0, s), max(s1, s), min(t0, t), max(t1, t)
	}
	ps, pt := (s1-s0)*boxSTPad+1e-9, (t1-t0)*boxSTPad+1e-9
	s0, s1, t0, t1 = s0-ps, s1+ps, t0-pt, t1+pt
	if !(s0 > 0 && s1 < 1 && t0 > 0 && t1 < 1) {
		return dst, false
	}
	r := max(s1-s0, t1-t0) / 2
	level := min(max(-math.Ilogb(r)-1, 0)+2, maxLevel)
	n := float64(int(1) << level)
	return appendFaceIJBlock(dst, f, level, int(s0*n), int(s1*n), int(t0*n), int(t1*n)), true
}

// mayContainPoint reports whether some point within boxSlack of p (not
// necessarily a unit vector) may lie in the box: false only when none
// does.
func (b *Box) mayContainPoint(x, y, z float64) bool {
	n := math.Sqrt(x*x + y*y + z*z)
	if z < b.sinLo*n || z > b.sinHi*n {
		return false
	}
	if b.fullLon {
		return true
	}
	s := b.slack * n
	// The signed sines of p's angles from the two meridian planes.
	fromA := b.ax*y - b.ay*x // east of minLon's meridian when positive
	toB := x*b.by - y*b.bx   // west of maxLon's meridian when positive
	if !b.wide {
		return fromA >= -s && toB >= -s
	}
	// Over 180 degrees: out only when strictly inside the complementary
	// arc (east of maxLon and west of minLon, under 180 degrees).
	return !(-toB > s && -fromA > s)
}

// BoxFilter judges the leaf cells of one index scan's keys for a box,
// decoding only the levels in which a key differs from the previous one
// (as CapFilter). It is not safe for concurrent use.
type BoxFilter struct {
	b   *Box
	dec leafDecoder
}

// Filter returns a BoxFilter for b.
func (b *Box) Filter() BoxFilter { return BoxFilter{b: b} }

// MayContainLeaves sets may[k] to false when no point of the leaf cell
// leaves[k] lies in the box, and to true otherwise (the point must then be
// tested). Only as many leaves as may holds are judged.
func (f *BoxFilter) MayContainLeaves(leaves []uint64, may []bool) {
	leaves = leaves[:min(len(leaves), len(may))]
	for k, leaf := range leaves {
		p := f.dec.point(leaf)
		may[k] = f.b.mayContainPoint(p.X, p.Y, p.Z)
	}
}
