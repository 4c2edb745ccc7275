package geom

import (
	"cmp"
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/geoevent/geoevent/core"
)

// The filter that Scan returns agrees with ContainsPoint: a leaf it judges
// outside holds no contained point, one it judges inside no other. Points
// are drawn about the polygon and close to its vertices and edges (down
// to a centimetre), judged in sorted order as a scan does, and in a
// random order.
func TestPolygonScanFilterAgrees(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		outer, holes, lat, lon, rMax := drawPolygon(t)
		p, err := NewPolygon(outer, holes)
		if err != nil {
			t.Skip(err)
		}
		var probes []leafProbe
		rings := append([][]core.Coordinate{outer}, holes...)
		along := rapid.OneOf(rapid.Just(0.0), rapid.Just(1.0), rapid.Float64Range(0, 1)) // at a vertex, or between
		for k := 0; k < 100; k++ {
			if k%2 == 0 {
				probes = append(probes, probeAt(destination(lat, lon, rMax*rapid.Float64Range(0, 1.1).Draw(t, "pr"), rapid.Float64Range(-math.Pi, math.Pi).Draw(t, "pb"))))
			} else {
				probes = append(probes, drawNearEdge(t, rings, along, []int64{0, 1, 100, 10_000, 100_000}))
			}
		}
		_, f := p.Scan()
		check := func(order string) { checkClassifier(t, order, p, probes, f.ClassifyLeaf) }
		slices.SortFunc(probes, func(a, b leafProbe) int { return cmp.Compare(a.leaf, b.leaf) })
		check("sorted")
		rapid.Permutation(probes).Draw(t, "shuffled")
		check("shuffled")
	})
}

// On the benchmark polygon the grid filter settles nearly every point.
func TestPolygonScanFilterSettles(t *testing.T) {
	outer, holes := polygon20()
	p, err := NewPolygon(outer, holes)
	if err != nil {
		t.Fatal(err)
	}
	_, f := p.Scan()
	if f.grid == nil {
		t.Fatal("the benchmark polygon is not scanned by a grid")
	}
	const n = 20_000
	if unsure := countUnsure(n, f.ClassifyLeaf); unsure > n/200 {
		t.Fatalf("%d of %d points unsure", unsure, n)
	}
}

// BenchmarkPolygonScanClassify judges the sorted leaves of points spread
// over the benchmark polygon's box, as a scan of its boundary keys does.
func BenchmarkPolygonScanClassify(b *testing.B) {
	outer, holes := polygon20()
	p, err := NewPolygon(outer, holes)
	if err != nil {
		b.Fatal(err)
	}
	var leaves []uint64
	for k := 0; k < 1000; k++ {
		lat, lon := destination(deg(38.11), deg(13.36), 2600/EarthRadiusM*math.Sqrt(float64(k)/1000), float64(k))
		leaves = append(leaves, LeafCell(lat, lon))
	}
	slices.Sort(leaves)
	_, f := p.Scan()
	n := 0
	for b.Loop() {
		for _, l := range leaves {
			n += f.ClassifyLeaf(l)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(leaves)), "ns/leaf")
}
