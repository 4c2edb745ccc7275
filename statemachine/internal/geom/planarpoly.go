package geom

import (
	"math/bits"

	"github.com/geoevent/geoevent/core"
)

// PlanarPolygon is a polygon whose edges are straight lines in longitude
// and latitude (as GeoJSON, PostGIS geometry, Turf and Tile38 read a
// polygon), not great-circle arcs as Polygon's: an edge between two
// points of one parallel follows the parallel. Coordinates are taken as
// they are, without wrapping: an edge from longitude 179 to -179 crosses
// 358 degrees of the plane, not the antimeridian.
//
// Inclusion is exact, in integer nanodegrees: the even-odd rule over the
// edges of every ring (outer and holes), a horizontal ray from the point
// toward growing longitude, with the half-open rule at vertices (an edge
// counts when exactly one of its ends lies above the point's latitude). A
// point inside the outer ring and outside every hole is inside; a point
// on an edge is inside on one side of the polygon and outside on the
// other (of an axis-aligned rectangle: in on its west and south edges,
// out on its east and north), so polygons that share edges tile. Rings are
// checked for their vertex counts, coordinates and area, not for
// crossings: a ring that crosses itself or another gets the even-odd
// rule's answer.
type PlanarPolygon struct {
	rings [][]planarVertex
	edges int
	box   Box // the rings' bounding box in the plane: its covering is the polygon's

	// Bands of latitude over the box, each listing the edges whose
	// latitude range meets it (as pairs of vertices, a before b): only
	// they can cross a point's ray.
	lat0      int64 // the box's minimum latitude
	bandWidth int64 // nanodegrees of latitude a band
	bandStart []int32
	bandEdges []planarEdge
}

type planarVertex struct{ lon, lat int64 }

type planarEdge struct{ a, b planarVertex }

// maxPlanarBands bounds the bands of a polygon's index.
const maxPlanarBands = 1024

// NewPlanarPolygon validates and prepares a planar polygon: at most
// MaxPolygonHoles holes (102), rings of MinPolygonVertices to
// MaxPolygonVertices distinct vertices after dropping a closing repeat
// (103 below, 102 above), vertices on the globe (100), no vertex repeated
// next to itself and no ring of zero area (103).
func NewPlanarPolygon(outer []core.Coordinate, holes [][]core.Coordinate) (*PlanarPolygon, error) {
	if len(holes) > core.MaxPolygonHoles {
		return nil, core.Errorf(core.PolygonTooComplex, "polygon has %d holes, at most %d are allowed", len(holes), core.MaxPolygonHoles)
	}
	p := &PlanarPolygon{rings: make([][]planarVertex, 0, 1+len(holes))}
	minLat, maxLat, minLon, maxLon := int64(maxLatNano), int64(-maxLatNano), maxLonNano0, -maxLonNano0
	for r := 0; r <= len(holes); r++ {
		ring := outer
		if r > 0 {
			ring = holes[r-1]
		}
		if len(ring) > core.MaxPolygonVertices+1 {
			return nil, core.Errorf(core.PolygonTooComplex, "%s has more than %d vertices (%d given)", ringName(r), core.MaxPolygonVertices, len(ring))
		}
		vs := make([]planarVertex, 0, len(ring))
		for i, c := range ring {
			if !core.ValidCoordinate(c.LatNano, c.LonNano) {
				return nil, core.Errorf(core.InvalidCoordinates, "%s vertex %d (lat_nano %d, lon_nano %d) is outside latitude ±90 / longitude ±180 degrees", ringName(r), i, c.LatNano, c.LonNano)
			}
			vs = append(vs, planarVertex{lon: c.LonNano, lat: c.LatNano})
		}
		if n := len(vs); n >= 2 && vs[0] == vs[n-1] {
			vs = vs[:n-1]
		}
		switch n := len(vs); {
		case n > core.MaxPolygonVertices:
			return nil, core.Errorf(core.PolygonTooComplex, "%s has %d vertices, at most %d are allowed", ringName(r), n, core.MaxPolygonVertices)
		case n < core.MinPolygonVertices:
			return nil, core.Errorf(core.InvalidPolygon, "%s has %d distinct vertices, at least %d are needed", ringName(r), n, core.MinPolygonVertices)
		}
		for i, v := range vs {
			if v == vs[(i+1)%len(vs)] {
				return nil, core.Errorf(core.InvalidPolygon, "%s repeats vertex %d next to itself", ringName(r), i)
			}
			minLat, maxLat = min(minLat, v.lat), max(maxLat, v.lat)
			minLon, maxLon = min(minLon, v.lon), max(maxLon, v.lon)
		}
		if !hasArea(vs) {
			return nil, core.Errorf(core.InvalidPolygon, "%s has no area: its vertices lie on one line", ringName(r))
		}
		p.rings = append(p.rings, vs)
		p.edges += len(vs)
	}
	p.box = NewBox(minLat, minLon, maxLat, maxLon)
	p.index(minLat, maxLat)
	return p, nil
}

// index fills the bands: about one per edge, at most maxPlanarBands.
func (p *PlanarPolygon) index(minLat, maxLat int64) {
	n := int64(min(p.edges, maxPlanarBands))
	p.lat0 = minLat
	p.bandWidth = (maxLat-minLat)/n + 1 // n bands of this width cover the box
	band := func(lat int64) int { return int((lat - p.lat0) / p.bandWidth) }
	counts := make([]int32, n+1)
	for _, ring := range p.rings {
		b := ring[len(ring)-1]
		for _, a := range ring {
			for k := band(min(a.lat, b.lat)); k <= band(max(a.lat, b.lat)); k++ {
				counts[k+1]++
			}
			b = a
		}
	}
	for k := 1; k <= int(n); k++ {
		counts[k] += counts[k-1]
	}
	p.bandStart = counts
	p.bandEdges = make([]planarEdge, counts[n])
	next := append([]int32(nil), counts[:n]...)
	for _, ring := range p.rings {
		b := ring[len(ring)-1]
		for _, a := range ring {
			for k := band(min(a.lat, b.lat)); k <= band(max(a.lat, b.lat)); k++ {
				p.bandEdges[next[k]] = planarEdge{a: a, b: b}
				next[k]++
			}
			b = a
		}
	}
}

// hasArea reports whether a ring's vertices do not all lie on one line.
func hasArea(vs []planarVertex) bool {
	a := vs[0]
	for i := 1; i+1 < len(vs); i++ {
		if cross(vs[i].lon-a.lon, vs[i].lat-a.lat, vs[i+1].lon-a.lon, vs[i+1].lat-a.lat) != 0 {
			return true
		}
	}
	return false
}

// Edges is the number of the polygon's edges.
func (p *PlanarPolygon) Edges() int { return p.edges }

// Box is the polygon's bounding box, whose covering and prefilter an index
// scan uses.
func (p *PlanarPolygon) Box() *Box { return &p.box }

// ContainsWork reports whether the point is inside the polygon, and the
// edges it read (its work): those of the point's band.
func (p *PlanarPolygon) ContainsWork(latNano, lonNano int64) (in bool, work int) {
	if latNano < p.lat0 {
		return false, 1
	}
	k := (latNano - p.lat0) / p.bandWidth
	if k >= int64(len(p.bandStart)-1) {
		return false, 1
	}
	edges := p.bandEdges[p.bandStart[k]:p.bandStart[k+1]]
	for _, e := range edges {
		a, b := e.a, e.b
		// The edge from a to b counts when exactly one end lies above
		// the point and the point lies strictly west of the edge at its
		// latitude: (px - ax)(by - ay) < (py - ay)(bx - ax) when by > ay,
		// > when by < ay.
		if (a.lat > latNano) != (b.lat > latNano) {
			c := cross(lonNano-a.lon, latNano-a.lat, b.lon-a.lon, b.lat-a.lat)
			if b.lat > a.lat && c < 0 || b.lat < a.lat && c > 0 {
				in = !in
			}
		}
	}
	return in, 1 + len(edges)
}

// cross returns the sign of x1*y2 - y1*x2 (-1, 0 or 1), exactly: each
// value is a difference of nanodegrees (under 2^39 in magnitude), whose
// products need 128 bits.
func cross(x1, y1, x2, y2 int64) int {
	hi1, lo1 := mul128(x1, y2)
	hi2, lo2 := mul128(y1, x2)
	switch {
	case hi1 != hi2:
		if hi1 < hi2 {
			return -1
		}
		return 1
	case lo1 != lo2:
		if lo1 < lo2 {
			return -1
		}
		return 1
	}
	return 0
}

// mul128 returns a*b as a two's complement 128-bit value.
func mul128(a, b int64) (hi int64, lo uint64) {
	h, l := bits.Mul64(uint64(a), uint64(b))
	// Signed correction of the unsigned product.
	if a < 0 {
		h -= uint64(b)
	}
	if b < 0 {
		h -= uint64(a)
	}
	return int64(h), l
}
