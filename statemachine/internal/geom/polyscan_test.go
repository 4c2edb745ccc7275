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

// Both ways of judging the keys of a boundary cell, by the signs of its
// lines (cellLines) and by its edges, agree with ContainsPoint on a 401 x
// 401 lattice of points over the polygon's box, and settle nine in ten of
// them at least (a point within a few metres of an edge is unsure): on the
// benchmark polygon (points 13 m apart) every boundary cell has lines, a
// vertex in some of them; a 300-vertex ring crowds cells with edges and
// vertices, a comb with edges alone, and those are judged by their edges.
// A run's judgements (ClassifyLeaves) are each leaf's alone.
func TestPolygonScanCellKinds(t *testing.T) {
	benchOuter, benchHoles := bench20(38_110_000_000, 13_360_000_000)
	// kinds counts the lattice's points in boundary cells by how their
	// cell judges them.
	type kinds struct{ byLines, byEdges, vertexCells, edgesOnly int }
	for _, tc := range []struct {
		name  string
		outer []core.Coordinate
		holes [][]core.Coordinate
		// want says what is wrong with the counts for this polygon, or "".
		want func(kinds) string
	}{
		{"bench20", benchOuter, benchHoles, func(k kinds) string {
			if k.byEdges != 0 || k.vertexCells == 0 {
				return "the benchmark polygon's cells are not all judged by their lines, vertices among them"
			}
			return ""
		}},
		{"dense", regular(38.11, 13.36, 500/EarthRadiusM, 300), nil, func(k kinds) string {
			if k.byEdges < k.byLines {
				return "the dense ring's crowded cells are not judged by their edges"
			}
			return ""
		}},
		{"comb", comb(64), nil, func(k kinds) string {
			if k.edgesOnly < k.byLines {
				return "the comb's cells crowded with edges alone are not judged by their edges"
			}
			return ""
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPolygon(tc.outer, tc.holes)
			if err != nil {
				t.Fatal(err)
			}
			_, f := p.Scan()
			pg := f.grid
			if pg == nil {
				t.Fatal("not scanned by a grid")
			}
			lat0, lat1, lon0, lon1 := int64(math.MaxInt64), int64(math.MinInt64), int64(math.MaxInt64), int64(math.MinInt64)
			for _, v := range tc.outer {
				lat0, lat1 = min(lat0, v.LatNano), max(lat1, v.LatNano)
				lon0, lon1 = min(lon0, v.LonNano), max(lon1, v.LonNano)
			}
			var leaves []leafProbe
			const n = 400
			for a := 0; a <= n; a++ {
				for b := 0; b <= n; b++ {
					leaves = append(leaves, probeAt(lat0+(lat1-lat0)*int64(a)/n, lon0+(lon1-lon0)*int64(b)/n))
				}
			}
			slices.SortFunc(leaves, func(a, b leafProbe) int { return cmp.Compare(a.leaf, b.leaf) })
			// The whole lattice in one ClassifyLeaves, by a filter of its
			// own, as a scan judges a run of keys; then each leaf alone.
			ids := make([]uint64, len(leaves))
			for k, pr := range leaves {
				ids[k] = pr.leaf
			}
			_, batch := p.Scan()
			classes := make([]uint8, len(ids))
			batch.ClassifyLeaves(ids, classes)
			var seen kinds
			unsure := 0
			for k, pr := range leaves {
				got := f.ClassifyLeaf(pr.leaf)
				if int(classes[k]) != got {
					t.Fatalf("the leaf of (%d, %d) is judged %d alone, %d in a run", pr.lat, pr.lon, got, classes[k])
				}
				i, j := f.dec.ij(pr.leaf) // as ClassifyLeaf just decoded it
				sh := maxLevel - pg.g.level
				x, y := i>>sh-pg.g.i0, j>>sh-pg.g.j0
				if x >= 0 && x < pg.g.w && y >= 0 && y < pg.g.h && pg.g.cls[y*pg.g.w+x] == gridBoundary {
					c := y*pg.g.w + x
					if pg.judge[c] == judgeSlow {
						seen.byEdges++
						if pg.ref[c]&refComplex == 0 {
							seen.edgesOnly++
						}
					} else {
						seen.byLines++
						if pg.ref[c]&refComplex != 0 {
							seen.vertexCells++
						}
					}
				}
				in := p.ContainsPoint(pr.lat, pr.lon)
				switch {
				case got == LeafUnsure:
					unsure++
				case (got == LeafInside) != in:
					t.Fatalf("the leaf of (%d, %d) is judged %d; ContainsPoint says %v", pr.lat, pr.lon, got, in)
				}
			}
			t.Logf("%d points in boundary cells: %d judged by lines (%d in cells with a vertex), %d by edges (%d in cells without); %d unsure", seen.byLines+seen.byEdges, seen.byLines, seen.vertexCells, seen.byEdges, seen.edgesOnly, unsure)
			if unsure > len(leaves)/10 {
				t.Errorf("%d of %d points unsure", unsure, len(leaves))
			}
			if msg := tc.want(seen); msg != "" {
				t.Error(msg)
			}
		})
	}
}

// A run's output shorter than its leaves judges as many leaves as it
// holds, without panicking (no input may make the package panic).
func TestRunsJudgeWhatTheirOutputHolds(t *testing.T) {
	outer, holes := polygon20()
	p, err := NewPolygon(outer, holes)
	if err != nil {
		t.Fatal(err)
	}
	in := LeafCell(deg(38.11)+10_000_000, deg(13.36)) // 1.1 km north of the center: between the hole and the ring
	out := LeafCell(deg(38.2), deg(13.36))
	leaves := []uint64{in, out, in}
	_, f := p.Scan()
	class := []uint8{9, 9}
	f.ClassifyLeaves(leaves, class)
	if class[0] != LeafInside || class[1] != LeafOutside {
		t.Fatalf("ClassifyLeaves gave %v, want inside then outside", class)
	}
	c := NewCap(deg(38.11), deg(13.36), 1_000)
	cf := c.Filter()
	may := []bool{false, true}
	cf.MayContainLeaves([]uint64{LeafCell(deg(38.11), deg(13.36)), out, in}, may)
	if !may[0] || may[1] {
		t.Fatalf("MayContainLeaves gave %v, want true then false", may)
	}
}
