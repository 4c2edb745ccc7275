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

// circle is a ring of n vertices about (lat, lon), radiusDeg degrees of
// latitude across, round on the ground.
func circle(lat, lon int64, radiusDeg float64, n int) []core.Coordinate {
	ring := make([]core.Coordinate, n)
	k := 1 / math.Cos(float64(lat)*1e-9*math.Pi/180)
	for i := range ring {
		s, c := math.Sincos(float64(i) * 2 * math.Pi / float64(n))
		ring[i] = core.Coordinate{LatNano: lat + int64(radiusDeg*s*1e9), LonNano: lon + int64(radiusDeg*c*k*1e9)}
	}
	return ring
}

// A builder keeps the last large polygon it built: the same rings again
// get it back, scan and all, and anything else (other rings, the same
// slice changed in place, a failed polygon in between) a polygon built
// anew; each answers as NewPolygon's does.
func TestPolygonBuilderKeepsLastLarge(t *testing.T) {
	const lat, lon = 38_110_000_000, 13_360_000_000
	outer := circle(lat, lon, 1, 1000)
	holes := [][]core.Coordinate{circle(lat, lon, 0.3, 600), circle(lat+500_000_000, lon, 0.1, 100)}
	same := func(what string, got *Polygon, outer []core.Coordinate, holes [][]core.Coordinate) {
		t.Helper()
		want, err := NewPolygon(outer, holes)
		if err != nil {
			t.Fatal(err)
		}
		wantRS, wantF := want.Scan()
		gotRS, gotF := got.Scan()
		if !slices.Equal(wantRS, gotRS) {
			t.Fatalf("%s: %d ranges, NewPolygon's %d", what, len(gotRS), len(wantRS))
		}
		if got.Edges() != want.Edges() {
			t.Fatalf("%s: %d edges, NewPolygon's %d", what, got.Edges(), want.Edges())
		}
		inside := 0
		for i := range 2000 {
			// Out to 1.2 degrees: inside, in the holes and beyond.
			q := probeAt(destination(lat, lon, 1.2*math.Pi/180*float64(i%100)/100, float64(i)*0.77))
			w := want.ContainsPoint(q.lat, q.lon)
			if w {
				inside++
			}
			if g := got.ContainsPoint(q.lat, q.lon); w != g {
				t.Fatalf("%s: ContainsPoint(%d, %d) = %v, NewPolygon's %v", what, q.lat, q.lon, g, w)
			}
			if w, g := wantF.ClassifyLeaf(q.leaf), gotF.ClassifyLeaf(q.leaf); w != g {
				t.Fatalf("%s: ClassifyLeaf(%d) = %d, NewPolygon's %d", what, q.leaf, g, w)
			}
		}
		if inside < 500 || inside > 1500 {
			t.Fatalf("%s: %d probes of 2,000 inside: the probes miss the polygon", what, inside)
		}
	}
	var b PolygonBuilder
	p1, err := b.Build(outer, holes)
	if err != nil {
		t.Fatal(err)
	}
	same("first", p1, outer, holes)
	if p2, _ := b.Build(slices.Clone(outer), [][]core.Coordinate{slices.Clone(holes[0]), slices.Clone(holes[1])}); p2 != p1 {
		t.Fatal("the same rings again were built anew")
	}
	same("kept", p1, outer, holes)
	// The caller's slice changed in place: another polygon.
	holes[1][7].LatNano += 1_000
	p3, err := b.Build(outer, holes)
	if err != nil {
		t.Fatal(err)
	}
	same("changed in place", p3, outer, holes)
	// A failed polygon in between overwrites the builder's memory.
	bowtie := slices.Clone(outer)
	bowtie[0], bowtie[1] = bowtie[1], bowtie[0]
	if _, err := b.Build(bowtie, holes); err == nil {
		t.Fatal("a bowtie was accepted")
	}
	p4, err := b.Build(outer, holes)
	if err != nil {
		t.Fatal(err)
	}
	same("after a failure", p4, outer, holes)
	// A small polygon in between: the large one is built anew after it.
	if _, err := b.Build(circle(lat, lon, 0.5, 10), nil); err != nil {
		t.Fatal(err)
	}
	p5, _ := b.Build(outer, holes)
	same("after a small one", p5, outer, holes)
}

// A polygon prepared beside the builder and offered to it serves the
// Build of its rings (and answers as NewPolygon's does); a Build that
// keeps another polygon afterwards writes nothing of the offered one's
// rings, which other builders may share; small and invalid polygons are
// not prepared.
func TestPreparedPolygonOffer(t *testing.T) {
	const lat, lon = 38_110_000_000, 13_360_000_000
	outer := circle(lat, lon, 1, 1000)
	holes := [][]core.Coordinate{circle(lat, lon, 0.3, 600), circle(lat+500_000_000, lon, 0.1, 100)}
	pp, err := PreparePolygon(outer, holes)
	if pp == nil || err != nil {
		t.Fatalf("a polygon of 1,700 vertices was not prepared: %v", err)
	}
	if !SameRings(pp.outer, pp.holes, slices.Clone(outer), holes) || SameRings(pp.outer, pp.holes, outer, holes[:1]) || pp.Edges() != 1700 {
		t.Fatalf("SameRings or Edges (%d) is wrong", pp.Edges())
	}
	want, err := NewPolygon(outer, holes)
	if err != nil {
		t.Fatal(err)
	}
	wantRS, _ := want.Scan()
	var b PolygonBuilder
	b.Offer(pp)
	got, err := b.Build(slices.Clone(outer), holes)
	if err != nil || got != pp.p {
		t.Fatalf("Build after Offer: %v, prepared polygon %v", err, got == pp.p)
	}
	if rs, _ := got.Scan(); !slices.Equal(rs, wantRS) {
		t.Fatalf("the prepared polygon's %d ranges, NewPolygon's %d", len(rs), len(wantRS))
	}
	for i := range 500 {
		q := probeAt(destination(lat, lon, 1.2*math.Pi/180*float64(i%100)/100, float64(i)*0.77))
		if w, g := want.ContainsPoint(q.lat, q.lon), got.ContainsPoint(q.lat, q.lon); w != g {
			t.Fatalf("ContainsPoint(%d, %d) = %v, NewPolygon's %v", q.lat, q.lon, g, w)
		}
	}
	// Another large polygon, then a third with more holes: the builder
	// keeps them in its own memory.
	keepOuter, keepHoles := slices.Clone(outer), [][]core.Coordinate{slices.Clone(holes[0]), slices.Clone(holes[1])}
	other := circle(lat, lon, 1.1, 1000)
	otherHoles := [][]core.Coordinate{circle(lat, lon, 0.2, 600), circle(lat-500_000_000, lon, 0.1, 100)}
	if _, err := b.Build(other, otherHoles); err != nil {
		t.Fatal(err)
	}
	three := append(slices.Clone(otherHoles), circle(lat+500_000_000, lon, 0.1, 100))
	if _, err := b.Build(other, three); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(pp.outer, keepOuter) || len(pp.holes) != 2 || !slices.Equal(pp.holes[0], keepHoles[0]) || !slices.Equal(pp.holes[1], keepHoles[1]) {
		t.Fatal("a later Build wrote the offered polygon's rings")
	}
	if p, _ := b.Build(outer, holes); p == pp.p {
		t.Fatal("the builder still returns the offered polygon after building others")
	}
	b.Offer(nil)
	if pp, err := PreparePolygon(circle(lat, lon, 1, 500), nil); pp != nil || err != nil {
		t.Fatalf("a polygon of 500 vertices was prepared (%v)", err)
	}
	bowtie := slices.Clone(outer)
	bowtie[0], bowtie[1] = bowtie[1], bowtie[0]
	_, wantErr := NewPolygon(bowtie, holes)
	if pp, err := PreparePolygon(bowtie, holes); pp != nil || err == nil || err.Error() != wantErr.Error() {
		t.Fatalf("an invalid polygon: %v, NewPolygon's %v", err, wantErr)
	}
}
