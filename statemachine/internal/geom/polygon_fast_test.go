package geom

import (
	"math"
	"reflect"
	"testing"

	"github.com/golang/geo/r3"
	"pgregory.net/rapid"

	"github.com/geoevent/geoevent/core"
)

// sameAsSweeps checks that NewPolygon answers exactly as it does with its
// pair-by-pair crossing check for small polygons (noEdgesMeet) turned off,
// which a bound on box tests below bruteForceMinTests does: the same error
// (code and message) or equal polygons.
func sameAsSweeps(t tb, outer []core.Coordinate, holes [][]core.Coordinate) {
	fast, errFast := newPolygon(outer, holes, maxBoxTests)
	slow, errSlow := newPolygon(outer, holes, bruteForceMinTests-1)
	switch {
	case (errFast == nil) != (errSlow == nil):
		t.Fatalf("fast path error %v, sweeps error %v", errFast, errSlow)
	case errFast != nil:
		if errFast.Error() != errSlow.Error() || !reflect.DeepEqual(errFast, errSlow) {
			t.Fatalf("fast path error %v, sweeps error %v", errFast, errSlow)
		}
	case !reflect.DeepEqual(fast, slow):
		t.Fatalf("fast path and sweeps give different polygons")
	}
}

// drawTangle draws small rings on a coarse grid, so that crossings,
// touches, duplicate vertices, spikes and holes that cross, touch or lie
// outside the outer ring (or inside another hole) are common, on any of
// several scales, near a random point or a pole.
func drawTangle(t *rapid.T) (outer []core.Coordinate, holes [][]core.Coordinate) {
	scale := rapid.SampledFrom([]int64{1_000_000_000, 10_000_000, 100_000, 1_000, 1}).Draw(t, "scale")
	lat := rapid.Int64Range(-89_000_000_000, 89_000_000_000).Draw(t, "lat")
	if rapid.IntRange(0, 9).Draw(t, "pole") == 0 {
		lat = rapid.SampledFrom([]int64{90_000_000_000 - 4*scale, -90_000_000_000 + 4*scale}).Draw(t, "nearPole")
	}
	lon := rapid.Int64Range(-180_000_000_000, 180_000_000_000).Draw(t, "lon")
	ring := func(name string, nMax int) []core.Coordinate {
		n := rapid.IntRange(0, nMax).Draw(t, name+"n")
		out := make([]core.Coordinate, n)
		for i := range out {
			out[i] = core.Coordinate{
				LatNano: max(min(lat+rapid.Int64Range(-4, 4).Draw(t, name+"y")*scale, maxLatNano), -maxLatNano),
				LonNano: wrapLonNano(lon + rapid.Int64Range(-4, 4).Draw(t, name+"x")*scale),
			}
		}
		if n > 0 && rapid.Bool().Draw(t, name+"closed") {
			out = append(out, out[0])
		}
		return out
	}
	outer = ring("outer", 14)
	for h := rapid.IntRange(0, 4).Draw(t, "holes"); h > 0; h-- {
		holes = append(holes, ring("hole", 7))
	}
	return outer, holes
}

// The pair-by-pair check of small polygons changes no answer of
// NewPolygon: on tangled rings (mostly invalid), on valid polygons, and on
// valid polygons with a tangled hole added.
func TestPolygonFastPathSameAsSweeps(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		switch rapid.IntRange(0, 2).Draw(t, "kind") {
		case 0:
			outer, holes := drawTangle(t)
			sameAsSweeps(t, outer, holes)
		case 1:
			outer, holes, _, _, _ := drawPolygon(t)
			sameAsSweeps(t, outer, holes)
		default:
			outer, holes, lat, lon, rMax := drawPolygon(t)
			// A triangle about a random point near the polygon, of a random
			// size: inside, outside, crossing or touching its rings.
			var hole []core.Coordinate
			cLat, cLon := destination(lat, lon, rMax*rapid.Float64Range(0, 1.2).Draw(t, "hr"), rapid.Float64Range(-math.Pi, math.Pi).Draw(t, "hb"))
			size := rMax * rapid.Float64Range(0, 0.5).Draw(t, "hs")
			for k := 0; k < 3; k++ {
				vLat, vLon := destination(cLat, cLon, size, float64(k)*2*math.Pi/3)
				hole = append(hole, core.Coordinate{LatNano: vLat, LonNano: vLon})
			}
			if rapid.Bool().Draw(t, "shareVertex") && len(holes) > 0 {
				hole[0] = holes[0][0]
			}
			sameAsSweeps(t, outer, append(holes, hole))
		}
	})
}

// The fast path's answers on the fuzzer's polygons (see FuzzNewPolygon).
func FuzzPolygonFastPath(f *testing.F) {
	probes := [][2]int8{{0, 0}}
	f.Add(encodeGrid([][][2]int8{{{0, 0}, {1, 1}, {1, 0}, {0, 1}}}, probes))
	f.Add(encodeGrid([][][2]int8{{{0, 0}, {0, 10}, {10, 10}, {10, 0}}, {{4, 4}, {6, 4}, {6, 6}, {4, 6}}}, probes))
	f.Add(encodeGrid([][][2]int8{{{0, 0}, {0, 10}, {10, 10}, {10, 0}}, {{4, 4}, {6, 4}, {6, 6}, {4, 6}}, {{5, 5}, {7, 5}, {7, 7}}}, probes))
	f.Add(encodeGrid([][][2]int8{{{0, 0}, {0, 10}, {10, 10}, {10, 0}, {0, 0}}, {{0, 0}, {2, 1}, {1, 2}}}, probes))
	f.Add(encodeGrid([][][2]int8{{{0, 0}, {0, 10}, {10, 10}, {10, 0}}, {{-1, 4}, {6, 4}, {6, 6}}}, probes))
	f.Add(encodeGrid([][][2]int8{{{0, 0}, {0, 2}, {0, 1}, {1, 1}}}, probes))
	f.Add(encodeGrid([][][2]int8{{{0, 0}, {0, 1}, {0, 1}, {1, 1}}}, probes))
	f.Add(encodeGrid([][][2]int8{{{0, 0}, {0, 4}, {2, 2}, {4, 4}, {4, 0}, {2, 2}}}, probes)) // touches itself at a vertex
	f.Fuzz(func(t *testing.T, data []byte) {
		outer, holes, _ := decodePolygon(data)
		sameAsSweeps(t, outer, holes)
	})
}

// faceOf is faceST's face.
func TestFaceOfMatchesFaceST(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := func(name string) float64 {
			return rapid.OneOf(rapid.Float64Range(-1, 1), rapid.SampledFrom([]float64{0, 1, -1, 0.5, -0.5})).Draw(t, name)
		}
		p := r3.Vector{X: c("x"), Y: c("y"), Z: c("z")}
		if f, _, _ := faceST(p); faceOf(p) != f {
			t.Fatalf("faceOf(%v) = %d, faceST %d", p, faceOf(p), f)
		}
	})
}
