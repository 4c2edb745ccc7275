package sim

import (
	"math"

	"github.com/geoevent/geoevent/core"
)

// Geometry of the checkers: a plain reimplementation, independent of the
// state machine's, used with a margin. A point within geoMarginM of a
// region's boundary may be reported either way ("maybe"); every other
// point must be reported as the geometry says.

const (
	earthRadiusM = 6_371_008.8
	geoMarginM   = 1.0
)

type tri uint8

const (
	triNo tri = iota
	triYes
	triMaybe
)

// region is the area of a radius, polygon or bbox query, or the
// max_distance of a nearest query (a radius whose matches need not all be
// returned: only the k nearest are).
type region struct {
	radius   bool
	nearest  bool
	center   core.Coordinate
	radiusMM uint64
	outer    []core.Coordinate
	holes    [][]core.Coordinate
	box      *core.BBoxQuery
}

func rad(nano int64) float64 { return float64(nano) / 1e9 * math.Pi / 180 }

// distanceM is the haversine distance on the sphere of SPEC's radius.
func distanceM(aLat, aLon, bLat, bLon int64) float64 {
	la1, la2 := rad(aLat), rad(bLat)
	dLat, dLon := la2-la1, rad(bLon)-rad(aLon)
	h := math.Sin(dLat/2)*math.Sin(dLat/2) + math.Cos(la1)*math.Cos(la2)*math.Sin(dLon/2)*math.Sin(dLon/2)
	return 2 * earthRadiusM * math.Asin(math.Min(1, math.Sqrt(h)))
}

// contains reports whether the point lies in the region; for a radius
// query it also returns the distance from the center in metres.
func (r *region) contains(lat, lon int64) (tri, float64) {
	if b := r.box; b != nil {
		// Exact: a box is read off the integers (the simulated boxes do
		// not cross the antimeridian).
		if lat >= b.MinLatNano && lat <= b.MaxLatNano && lon >= b.MinLonNano && lon <= b.MaxLonNano {
			return triYes, 0
		}
		return triNo, 0
	}
	if r.radius {
		d := distanceM(r.center.LatNano, r.center.LonNano, lat, lon)
		lim := float64(r.radiusMM) / 1000
		switch {
		case d <= lim-geoMarginM:
			return triYes, d
		case d > lim+geoMarginM:
			return triNo, d
		}
		return triMaybe, d
	}
	// Small polygons: a local plane in metres around the first vertex.
	lat0, lon0 := r.outer[0].LatNano, r.outer[0].LonNano
	k := math.Cos(rad(lat0))
	xy := func(c core.Coordinate) (float64, float64) {
		return rad(c.LonNano-lon0) * k * earthRadiusM, rad(c.LatNano-lat0) * earthRadiusM
	}
	px, py := xy(core.Coordinate{LatNano: lat, LonNano: lon})
	in, near := ringTest(r.outer, xy, px, py)
	for _, h := range r.holes {
		hin, hnear := ringTest(h, xy, px, py)
		near = near || hnear
		if hin {
			in = false
		}
	}
	switch {
	case near:
		return triMaybe, 0
	case in:
		return triYes, 0
	}
	return triNo, 0
}

// ringTest: is the point inside the ring (even-odd rule), and is it within
// the margin of one of its edges?
func ringTest(ring []core.Coordinate, xy func(core.Coordinate) (float64, float64), px, py float64) (in, near bool) {
	n := len(ring)
	for i := 0; i < n; i++ {
		ax, ay := xy(ring[i])
		bx, by := xy(ring[(i+1)%n])
		if segDist(px, py, ax, ay, bx, by) < geoMarginM {
			near = true
		}
		if (ay > py) != (by > py) && px < ax+(py-ay)*(bx-ax)/(by-ay) {
			in = !in
		}
	}
	return in, near
}

func segDist(px, py, ax, ay, bx, by float64) float64 {
	dx, dy := bx-ax, by-ay
	t := 0.0
	if l := dx*dx + dy*dy; l > 0 {
		t = math.Max(0, math.Min(1, ((px-ax)*dx+(py-ay)*dy)/l))
	}
	return math.Hypot(px-(ax+t*dx), py-(ay+t*dy))
}
