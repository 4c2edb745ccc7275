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
type PolygonBuilder struct {
	mem polygonMemory

	last       *Polygon // nil when none is kept
	lastOuter  []core.Coordinate
	lastHoles  [][]core.Coordinate
	lastCoords []core.Coordinate // the memory of lastOuter and lastHoles
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
		b.lastCoords = append(b.lastCoords[:0], outer...)
		for _, h := range holes {
			b.lastCoords = append(b.lastCoords, h...)
		}
		b.lastOuter = b.lastCoords[:len(outer):len(outer)]
		b.lastHoles = b.lastHoles[:0]
		at := len(outer)
		for _, h := range holes {
			b.lastHoles = append(b.lastHoles, b.lastCoords[at:at+len(h):at+len(h)])
			at += len(h)
		}
		b.last = p
		p.keepScan = true
	}
	return p, nil
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
