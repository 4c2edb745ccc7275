package geom

import (
	"slices"

	"github.com/geoevent/geoevent/core"
)

// A PolygonBuilder makes polygons as NewPolygon does, in memory it keeps
// for the next one: a polygon it builds, and the ranges and filter of that
// polygon's Scan, hold until its next Build. A state machine keeps one, so
// that a polygon query takes no fresh memory (about 13 KB of it a query
// before, zeroed and then collected: building and scanning the benchmark
// polygon took 13.7 µs that way, 6.0 µs in a builder's memory).
//
// A slice longer than keepMaxElems is not kept for the next polygon, so
// that one huge polygon does not pin megabytes for good.
//
// A builder also keeps the last polygon of at least cacheMinVertices
// vertices that it built, with its rings and its scan: Build of the same
// rings again returns it, and its Scan its ranges and filter, without
// building them anew. Pages of one large query each ask for the same
// polygon (building one of 101,000 edges takes 19-23 ms, more than a
// page's budget). What it returns is the same either way: only its time
// differs. The kept polygon holds its memory (about 20 MB for 101,000
// edges) until the next Build.
//
// A polygon prepared away from the builder (PreparePolygon, on another
// goroutine) can be handed to it (Offer) to be kept in the same way, so
// that the Build of the same rings takes it instead of building.
type PolygonBuilder struct {
	mem polygonMemory

	last      *Polygon // nil when none is kept
	lastOuter []core.Coordinate
	lastHoles [][]core.Coordinate
	// The memory of lastOuter and lastHoles when Build kept them (an
	// offered polygon's rings are its own, and are never written).
	coords []core.Coordinate
	rings  [][]core.Coordinate
}

// cacheMinVertices: polygons with fewer vertices in all are cheap to
// build, and a builder does not keep them.
const cacheMinVertices = 1024

// Build validates and prepares a polygon as NewPolygon.
func (b *PolygonBuilder) Build(outer []core.Coordinate, holes [][]core.Coordinate) (*Polygon, error) {
	if b.last != nil && sameRings(outer, holes, b.lastOuter, b.lastHoles) {
		return b.last, nil
	}
	b.last = nil // its memory is about to be overwritten
	p, err := buildPolygon(outer, holes, maxBoxTests, &b.mem)
	if err != nil || p.mem != &b.mem {
		return p, err // (a polygon too wide for the plane has memory of its own)
	}
	n := len(outer)
	for _, h := range holes {
		n += len(h)
	}
	if n >= cacheMinVertices {
		b.coords = append(b.coords[:0], outer...)
		for _, h := range holes {
			b.coords = append(b.coords, h...)
		}
		b.rings = b.rings[:0]
		at := len(outer)
		for _, h := range holes {
			b.rings = append(b.rings, b.coords[at:at+len(h):at+len(h)])
			at += len(h)
		}
		b.last, b.lastOuter, b.lastHoles = p, b.coords[:len(outer):len(outer)], b.rings
		p.keepScan = true
	}
	return p, nil
}

// A PreparedPolygon is a polygon built, with its scan, in memory of its
// own, by PreparePolygon, with the rings it was built of.
type PreparedPolygon struct {
	p     *Polygon
	outer []core.Coordinate
	holes [][]core.Coordinate
	edges int
}

// PreparePolygon builds the polygon of outer and holes as NewPolygon does,
// and its Scan, for a builder's Offer: the work of a builder's Build of
// those rings, done beforehand, on any goroutine. It returns nil and
// NewPolygon's error when the polygon is not valid, and nil and no error
// when a builder would not keep it (fewer than cacheMinVertices vertices,
// or too wide for the plane). The rings are kept, not copied: the caller
// does not change them afterwards.
//
// Once it has returned, the prepared polygon is never written again:
// builders on several goroutines may share it.
func PreparePolygon(outer []core.Coordinate, holes [][]core.Coordinate) (*PreparedPolygon, error) {
	n := len(outer)
	for _, h := range holes {
		n += len(h)
	}
	if n < cacheMinVertices {
		return nil, nil
	}
	mem := new(polygonMemory)
	p, err := buildPolygon(outer, holes, maxBoxTests, mem)
	if err != nil || p.mem != mem {
		return nil, err
	}
	p.keepScan = true
	p.Scan()
	return &PreparedPolygon{p: p, outer: outer, holes: holes, edges: p.Edges()}, nil
}

// SameRings reports whether two polygons' rings are the same lists of
// vertices.
func SameRings(outer []core.Coordinate, holes [][]core.Coordinate, outer2 []core.Coordinate, holes2 [][]core.Coordinate) bool {
	return sameRings(outer, holes, outer2, holes2)
}

// Polygon returns the prepared polygon, its Scan done.
func (pp *PreparedPolygon) Polygon() *Polygon { return pp.p }

// Edges returns the polygon's number of edges, which its memory is
// proportional to (about 200 bytes an edge).
func (pp *PreparedPolygon) Edges() int { return pp.edges }

// Offer has the builder keep pp as the last polygon it built: its next
// Build of pp's rings returns pp's polygon, whose Scan is done. What
// Build returns is the same either way.
func (b *PolygonBuilder) Offer(pp *PreparedPolygon) {
	if pp == nil || b.last == pp.p {
		return
	}
	b.last, b.lastOuter, b.lastHoles = pp.p, pp.outer, pp.holes
}

// sameRings reports whether two polygons' rings are the same lists of
// vertices.
func sameRings(outer []core.Coordinate, holes [][]core.Coordinate, outer2 []core.Coordinate, holes2 [][]core.Coordinate) bool {
	if len(holes) != len(holes2) || !slices.Equal(outer, outer2) {
		return false
	}
	for i := range holes {
		if !slices.Equal(holes[i], holes2[i]) {
			return false
		}
	}
	return true
}

// keepMaxElems bounds the slices a builder keeps: 16,384 elements, at most
// 1 MiB each (a seg is 64 bytes), enough for 4,000 edges.
const keepMaxElems = 16384

// polygonMemory is the memory of one polygon and its scan, reused from one
// polygon to the next when a builder owns it. Every slice it hands out is
// zeroed first.
type polygonMemory struct {
	planar planarPolygon // the polygon itself, unless it needs S2 loops
	segs   []seg         // planarIndex.init: the rings' edges in the plane
	rings  []ringIndex   // planarIndex.init
	slab   []int32       // planarIndex.init: the band arrays
	uvSegs []uvSeg       // faceRings.init
	grid   *gridMemory   // Scan, allocated by the first
}

// gridMemory is the memory of a polyGrid.
type gridMemory struct {
	pg    polyGrid
	buf   polyGridBuf
	segs  []gridSeg
	links []gridLink
}

// take returns n zeroed elements, from the front of *kept when it is long
// enough, else newly allocated (and kept, unless n exceeds keepMaxElems).
func take[T any](kept *[]T, n int) []T {
	if cap(*kept) >= n {
		s := (*kept)[:n]
		clear(s)
		return s
	}
	s := make([]T, n)
	keep(kept, s)
	return s
}

// keep has *kept hold s's memory for the next use, unless s can hold more
// than keepMaxElems elements.
func keep[T any](kept *[]T, s []T) {
	if cap(s) <= keepMaxElems {
		*kept = s[:0]
	}
}
