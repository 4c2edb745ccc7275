// Package geom is the geometry of GeoEvent queries: S2 leaf cells of points,
// great-circle distances, radius queries ([Cap]) and polygon queries with
// holes ([Polygon]), each able to list the leaf-cell-id ranges an index scan
// must visit ([CellRange]).
//
// Units: points are nanodegrees of latitude and longitude (int64, as in the
// GeoEvent record), distances are millimetres (uint64). All distances are
// great-circle distances on a sphere of radius [EarthRadiusM]; [Polygon]'s
// edges are geodesics (great-circle arcs), as in S2, [PlanarPolygon]'s
// straight lines in longitude and latitude, and [Box]'s edges are
// parallels and meridians.
//
// The package is deterministic: no goroutines, no clocks, no randomness, and
// no function panics on any input. Floating point results are the same for
// the same input on the same build; code that decides replicated state must
// carry such results in the log rather than recompute them (see DESIGN.md).
package geom

import (
	"cmp"
	"math"
	"slices"

	"github.com/golang/geo/r3"
	"github.com/golang/geo/s2"
)

// EarthRadiusM is the mean Earth radius in metres; all distances are
// great-circle distances on a sphere of this radius.
const EarthRadiusM = 6371008.8

const (
	earthRadiusMM = EarthRadiusM * 1000
	nanoToRad     = math.Pi / 180e9 // radians per nanodegree

	maxLatNano = 90_000_000_000
	maxLonNano = 180_000_000_000

	// firstLeaf and lastLeaf bound every leaf cell id: the first leaf of face
	// 0 and the last leaf of face 5.
	firstLeaf = uint64(1)
	lastLeaf  = uint64(6)<<61 - 1
)

// LeafCell returns the S2 leaf cell id (level 30) of a point given in
// nanodegrees. It is exactly
// s2.CellIDFromLatLng(s2.LatLngFromDegrees(latNano/1e9, lonNano/1e9)).
func LeafCell(latNano, lonNano int64) uint64 {
	return uint64(s2.CellIDFromLatLng(s2.LatLngFromDegrees(float64(latNano)/1e9, float64(lonNano)/1e9)))
}

// DistanceMM is the great-circle (haversine) distance between two points in
// nanodegrees, on a sphere of radius EarthRadiusM, rounded to the nearest
// millimetre.
func DistanceMM(aLatNano, aLonNano, bLatNano, bLonNano int64) uint64 {
	return haversineMM(aLatNano, aLonNano, math.Cos(float64(aLatNano)*nanoToRad), bLatNano, bLonNano)
}

// haversineMM is DistanceMM with the cosine of a's latitude given, so that a
// prepared Cap computes bit for bit the same value as DistanceMM. The
// explicit float64 conversions forbid fused multiply-adds.
func haversineMM(aLatNano, aLonNano int64, cosALat float64, bLatNano, bLonNano int64) uint64 {
	dLat := float64(bLatNano-aLatNano) * (nanoToRad / 2)
	dLon := float64(bLonNano-aLonNano) * (nanoToRad / 2)
	sLat := math.Sin(dLat)
	sLon := math.Sin(dLon)
	cosBLat := math.Cos(float64(bLatNano) * nanoToRad)
	h := float64(sLat*sLat) + float64(float64(cosALat*cosBLat)*float64(sLon*sLon))
	if !(h >= 0) { // also catches NaN
		h = 0
	} else if h > 1 {
		h = 1
	}
	d := float64(2*math.Asin(math.Sqrt(h))) * earthRadiusMM
	return uint64(math.Round(d))
}

// pointFromNano is the unit vector of a point in nanodegrees. The poles are
// exact ((0,0,±1) whatever the longitude) and longitude -180° is read as
// +180°, so that every spelling of one place gives one vector.
func pointFromNano(latNano, lonNano int64) r3.Vector {
	switch {
	case latNano == maxLatNano:
		return r3.Vector{X: 0, Y: 0, Z: 1}
	case latNano == -maxLatNano:
		return r3.Vector{X: 0, Y: 0, Z: -1}
	}
	if lonNano == -maxLonNano {
		lonNano = maxLonNano
	}
	sLat, cLat := math.Sincos(float64(latNano) * nanoToRad)
	sLon, cLon := math.Sincos(float64(lonNano) * nanoToRad)
	return r3.Vector{X: float64(cLat * cLon), Y: float64(cLat * sLon), Z: sLat}
}

// CellRange is an inclusive range [Min, Max] of leaf cell ids. A cell at any
// level is the range [id.RangeMin(), id.RangeMax()] of its leaf cells.
type CellRange struct{ Min, Max uint64 }

// A ScanRange is a range of leaf cell ids for an index scan, with what the
// query knows of it: Inside is set when every point whose LeafCell lies in
// the range is inside the query's region, so its keys need no test.
type ScanRange struct {
	CellRange
	Inside bool
}

// mergeScanRanges sorts rs, which must be disjoint, and merges neighbours
// that are adjacent (no leaf cell between them) and alike in Inside.
func mergeScanRanges(rs []ScanRange) []ScanRange {
	slices.SortFunc(rs, func(a, b ScanRange) int { return cmp.Compare(a.Min, b.Min) })
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && r.Inside == out[n-1].Inside && r.Min-out[n-1].Max <= 2 {
			out[n-1].Max = r.Max
			continue
		}
		out = append(out, r)
	}
	return out
}

// cellRanges is the CellRanges of scan ranges: adjacent ones merged
// whatever their Inside.
func cellRanges(rs []ScanRange) []CellRange {
	out := make([]CellRange, 0, len(rs))
	for _, r := range rs {
		if n := len(out); n > 0 && r.Min-out[n-1].Max <= 2 {
			out[n-1].Max = r.Max
			continue
		}
		out = append(out, r.CellRange)
	}
	return out
}

// rangesOf turns cells into sorted, disjoint leaf-cell-id ranges, merging
// ranges that overlap or that are adjacent (no leaf cell between them). It
// sorts cells.
func rangesOf(cells []s2.CellID) []CellRange {
	if len(cells) <= 32 {
		for i := 1; i < len(cells); i++ {
			for j := i; j > 0 && cells[j] < cells[j-1]; j-- {
				cells[j], cells[j-1] = cells[j-1], cells[j]
			}
		}
	} else {
		slices.Sort(cells)
	}
	var buf [32]CellRange
	out := buf[:0]
	if len(cells) > len(buf) {
		out = make([]CellRange, 0, len(cells))
	}
	for _, c := range cells {
		r := CellRange{uint64(c.RangeMin()), uint64(c.RangeMax())}
		if n := len(out); n > 0 && (r.Min <= out[n-1].Max || r.Min-out[n-1].Max <= 2) {
			out[n-1].Max = max(out[n-1].Max, r.Max)
			continue
		}
		out = append(out, r)
	}
	return slices.Clone(out)
}

// mergeRanges sorts rs and merges overlapping or adjacent ranges in place.
// Leaf cell ids are odd, so two ranges are adjacent when the next one starts
// at most 2 past the end of the previous one.
func mergeRanges(rs []CellRange) []CellRange {
	if len(rs) < 2 {
		return rs
	}
	if len(rs) <= 32 {
		for i := 1; i < len(rs); i++ {
			for j := i; j > 0 && rs[j].Min < rs[j-1].Min; j-- {
				rs[j], rs[j-1] = rs[j-1], rs[j]
			}
		}
	} else {
		slices.SortFunc(rs, func(a, b CellRange) int { return cmp.Compare(a.Min, b.Min) })
	}
	out := rs[:1]
	for _, r := range rs[1:] {
		last := &out[len(out)-1]
		if r.Min <= last.Max || r.Min-last.Max <= 2 {
			if r.Max > last.Max {
				last.Max = r.Max
			}
			continue
		}
		out = append(out, r)
	}
	return out
}
