package geom

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/geoevent/geoevent/core"
)

// A builder that makes polygon after polygon in the same memory gives each
// exactly what NewPolygon gives it: the same error, the same scan ranges,
// and the same answers of ContainsPoint and of the scan's filter. The
// sequence mixes valid polygons of every size (more rings and edges than
// the one before, and fewer, so that stale memory of a larger one lies
// beyond a smaller one) with invalid ones that fail part way through.
func TestPolygonBuilderReusesMemory(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var b PolygonBuilder
		for k := range rapid.IntRange(2, 6).Draw(t, "polygons") {
			outer, holes, lat, lon, rMax := drawPolygon(t)
			// Stretched east-west or north-south, so that grids of
			// different shapes follow each other in the same memory.
			stretch := rapid.SampledFrom([]float64{0.2, 1, 5}).Draw(t, fmt.Sprintf("stretch %d", k))
			outer, holes = stretchLon(outer, lon, stretch), stretchRings(holes, lon, stretch)
			if rapid.IntRange(0, 3).Draw(t, fmt.Sprintf("spoil %d", k)) == 0 {
				// A bowtie: swap two vertices of the outer ring.
				outer = slices.Clone(outer)
				outer[0], outer[1] = outer[1], outer[0]
			}
			want, wantErr := NewPolygon(outer, holes)
			got, gotErr := b.Build(outer, holes)
			if (wantErr == nil) != (gotErr == nil) || (wantErr != nil && wantErr.Error() != gotErr.Error()) {
				t.Fatalf("polygon %d: builder error %v, NewPolygon error %v", k, gotErr, wantErr)
			}
			if wantErr != nil {
				continue
			}
			wantRS, wantF := want.Scan()
			gotRS, gotF := got.Scan()
			if !slices.Equal(wantRS, gotRS) {
				t.Fatalf("polygon %d: builder ranges %v, NewPolygon ranges %v", k, gotRS, wantRS)
			}
			var probes []leafProbe
			for range 100 {
				probes = append(probes, probeAt(destination(lat, lon, rMax*rapid.Float64Range(0, 1.1).Draw(t, "r"), rapid.Float64Range(-math.Pi, math.Pi).Draw(t, "bearing"))))
			}
			slices.SortFunc(probes, func(a, b leafProbe) int { return cmp.Compare(a.leaf, b.leaf) })
			for _, q := range probes {
				if w, g := want.ContainsPoint(q.lat, q.lon), got.ContainsPoint(q.lat, q.lon); w != g {
					t.Fatalf("polygon %d: ContainsPoint(%d, %d) = %v by the builder, %v by NewPolygon", k, q.lat, q.lon, g, w)
				}
				if w, g := wantF.ClassifyLeaf(q.leaf), gotF.ClassifyLeaf(q.leaf); w != g {
					t.Fatalf("polygon %d: ClassifyLeaf(%d) = %d by the builder, %d by NewPolygon", k, q.leaf, g, w)
				}
			}
		}
	})
}

// stretchLon scales the ring's longitudes about lon by f, clamped to the
// globe.
func stretchLon(ring []core.Coordinate, lon int64, f float64) []core.Coordinate {
	out := slices.Clone(ring)
	for i := range out {
		out[i].LonNano = min(max(lon+int64(float64(out[i].LonNano-lon)*f), -180e9), 180e9)
	}
	return out
}

func stretchRings(rings [][]core.Coordinate, lon int64, f float64) [][]core.Coordinate {
	out := make([][]core.Coordinate, len(rings))
	for i, r := range rings {
		out[i] = stretchLon(r, lon, f)
	}
	return out
}

// A builder keeps no memory of a polygon too large to keep, and takes no
// fresh memory for a polygon it has built before.
func TestPolygonBuilderMemory(t *testing.T) {
	var b PolygonBuilder
	outer, holes := polygon20()
	if _, err := b.Build(outer, holes); err != nil {
		t.Fatal(err)
	}
	p, _ := b.Build(outer, holes)
	p.Scan()
	allocs := testing.AllocsPerRun(100, func() {
		p, err := b.Build(outer, holes)
		if err != nil {
			t.Fatal(err)
		}
		p.Scan()
	})
	if allocs != 0 {
		t.Errorf("building and scanning a polygon built before allocates %v times", allocs)
	}
	// 21 rings of 1,000 vertices: holes of 0.0005 radians, 0.00157 apart
	// on a circle half-way out of the 0.01-radian outer ring.
	big := regular(38, 13, 0.01, 1000)
	bigHoles := make([][]core.Coordinate, 0, 20)
	for h := range 20 {
		lat, lon := destination(deg(38), deg(13), 0.005, 2*math.Pi*float64(h)/20)
		bigHoles = append(bigHoles, regular(float64(lat)/1e9, float64(lon)/1e9, 0.0005, 1000))
	}
	if _, err := b.Build(big, bigHoles); err != nil {
		t.Fatal(err)
	}
	if n := cap(b.mem.segs); n > keepMaxElems {
		t.Errorf("the builder keeps %d edges of a polygon of 21,000", n)
	}
}
