package geom

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"github.com/golang/geo/s2"

	"github.com/geoevent/geoevent/core"
)

// fuzzReader reads fuzz bytes, giving zeros when they run out.
type fuzzReader struct{ b []byte }

func (r *fuzzReader) byte() byte {
	if len(r.b) == 0 {
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *fuzzReader) int64() int64 {
	var buf [8]byte
	for i := range buf {
		buf[i] = r.byte()
	}
	return int64(binary.LittleEndian.Uint64(buf[:]))
}

// decodePolygon turns fuzz bytes into rings and probe points. The first byte
// picks the grid the vertices lie on (so that crossings, touches and
// duplicates are common) and the number of holes; then each ring has a
// vertex count and vertices as signed byte offsets on that grid, or raw
// int64 coordinates.
func decodePolygon(data []byte) (outer []core.Coordinate, holes [][]core.Coordinate, probes []core.Coordinate) {
	r := &fuzzReader{b: data}
	mode := r.byte()
	scales := []int64{1_000_000_000, 100_000_000, 1_000_000, 1_000, 1, 10_000_000_000}
	scale := scales[int(mode&7)%len(scales)]
	raw := mode&7 == 7
	nHoles := int(mode>>3) % 4
	baseLat := int64(int8(r.byte())) * 700_000_000 // within ±89 degrees
	baseLon := int64(int8(r.byte())) * 1_410_000_000
	vertex := func() core.Coordinate {
		if raw {
			return core.Coordinate{LatNano: r.int64() % (maxLatNano + 2), LonNano: r.int64() % (maxLonNano + 2)}
		}
		return core.Coordinate{
			LatNano: baseLat + int64(int8(r.byte()))*scale,
			LonNano: wrapLonNano(baseLon + int64(int8(r.byte()))*scale),
		}
	}
	ring := func() []core.Coordinate {
		n := int(r.byte() % 12)
		out := make([]core.Coordinate, n)
		for i := range out {
			out[i] = vertex()
		}
		return out
	}
	outer = ring()
	for h := 0; h < nHoles; h++ {
		holes = append(holes, ring())
	}
	for len(r.b) > 0 && len(probes) < 64 {
		probes = append(probes, vertex())
	}
	return outer, holes, probes
}

// encodeGrid encodes rings given as offsets on the 1-degree grid (mode 0)
// around (0, 0), for seeds.
func encodeGrid(rings [][][2]int8, probes [][2]int8) []byte {
	out := []byte{byte((len(rings) - 1) << 3), 0, 0}
	for _, ring := range rings {
		out = append(out, byte(len(ring)))
		for _, v := range ring {
			out = append(out, byte(v[0]), byte(v[1]))
		}
	}
	for _, p := range probes {
		out = append(out, byte(p[0]), byte(p[1]))
	}
	return out
}

func FuzzNewPolygon(f *testing.F) {
	probes := [][2]int8{{0, 0}, {1, 1}, {2, 2}, {5, 5}, {3, 7}, {-1, 4}, {9, 9}, {4, 4}}
	f.Add(encodeGrid([][][2]int8{{{0, 0}, {1, 1}, {1, 0}, {0, 1}}}, probes))                                       // bowtie
	f.Add(encodeGrid([][][2]int8{{{0, 0}, {0, 10}, {10, 10}, {10, 0}}, {{4, 4}, {6, 4}, {6, 6}, {4, 6}}}, probes)) // square with a hole
	f.Add(encodeGrid([][][2]int8{{{0, 0}, {0, 10}, {10, 10}, {10, 0}}, {{4, 4}, {6, 4}, {6, 6}, {4, 6}}, {{5, 5}, {7, 5}, {7, 7}}}, probes))
	f.Add(encodeGrid([][][2]int8{{{0, 0}, {0, 10}, {10, 10}, {10, 0}, {0, 0}}, {{0, 0}, {2, 1}, {1, 2}}}, probes))
	f.Add(encodeGrid([][][2]int8{{{0, 0}, {0, 2}, {0, 1}, {1, 1}}}, probes)) // spike
	f.Add(encodeGrid([][][2]int8{{{0, 0}, {0, 1}, {0, 1}, {1, 1}}}, probes)) // duplicate
	f.Add(encodeGrid([][][2]int8{{{0, 0}, {0, 100}, {0, -100}}}, probes))    // along the equator
	f.Add(encodeGrid([][][2]int8{{{-80, -80}, {-80, 80}, {80, 80}, {80, -80}}, {{0, 0}, {1, 0}, {0, 1}}}, probes))
	// Within one cube face: the grid of ScanRanges.
	f.Add(encodeGrid([][][2]int8{{{0, 0}, {0, 3}, {3, 3}, {3, 0}}, {{1, 1}, {2, 1}, {2, 2}, {1, 2}}}, [][2]int8{{0, 0}, {1, 1}, {2, 2}, {1, 2}, {3, 3}}))
	f.Add(encodeGrid([][][2]int8{{{10, 10}, {10, 13}, {12, 14}, {14, 12}, {13, 10}}}, [][2]int8{{11, 11}, {12, 12}, {13, 13}, {10, 10}}))
	f.Add([]byte{7, 0, 0, 3, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	// A comb within one face: boundary cells of the grid with several
	// edges and vertices, probes on and beside its teeth.
	f.Add(encodeGrid([][][2]int8{{{20, 20}, {20, 30}, {21, 30}, {21, 22}, {22, 22}, {22, 30}, {23, 30}, {23, 22}, {24, 22}, {24, 30}, {25, 30}, {25, 20}}},
		[][2]int8{{20, 21}, {21, 21}, {21, 25}, {22, 25}, {23, 25}, {24, 21}, {25, 25}, {26, 25}, {22, 22}}))
	// One builder for every input, as a state machine has one for every
	// query: each input's polygon is built in memory a previous one used.
	var builder PolygonBuilder
	f.Fuzz(func(t *testing.T, data []byte) {
		outer, holes, probes := decodePolygon(data)
		p, err := NewPolygon(outer, holes)
		bp, berr := builder.Build(outer, holes)
		if (err == nil) != (berr == nil) || (err != nil && err.Error() != berr.Error()) {
			t.Fatalf("NewPolygon: %v; Build: %v", err, berr)
		}
		if err != nil {
			var e *core.Error
			if !errors.As(err, &e) || (e.Code != 100 && e.Code != 102 && e.Code != 103) {
				t.Fatalf("unexpected error %v", err)
			}
			if p != nil {
				t.Fatal("polygon and error")
			}
			return
		}
		rs := p.Ranges()
		checkRanges(t, rs)
		srs := p.ScanRanges()
		checkScanRanges(t, srs)
		_, sf := p.Scan()
		bsrs, bsf := bp.Scan()
		if !slices.Equal(srs, bsrs) {
			t.Fatalf("scan ranges %v, by the builder %v", srs, bsrs)
		}
		ref := newRef(outer, holes)
		bruteForceValid(t, ref)
		for _, q := range probes {
			if !core.ValidCoordinate(q.LatNano, q.LonNano) {
				p.ContainsPoint(q.LatNano, q.LonNano) // must not panic
				continue
			}
			got := p.ContainsPoint(q.LatNano, q.LonNano)
			if got != p.ContainsPoint(q.LatNano, q.LonNano) {
				t.Fatal("not deterministic")
			}
			if got && !inRanges(rs, LeafCell(q.LatNano, q.LonNano)) {
				t.Fatalf("(%d, %d) inside but not in ranges", q.LatNano, q.LonNano)
			}
			if r, ok := scanRangeOf(srs, LeafCell(q.LatNano, q.LonNano)); (got && !ok) || (ok && r.Inside && !got) {
				t.Fatalf("(%d, %d) inside %v, scan range %v %+v", q.LatNano, q.LonNano, got, ok, r)
			}
			c := sf.ClassifyLeaf(LeafCell(q.LatNano, q.LonNano))
			if (c == LeafOutside && got) || (c == LeafInside && !got) {
				t.Fatalf("(%d, %d) inside %v, but the scan's filter judges its leaf %d", q.LatNano, q.LonNano, got, c)
			}
			if bp.ContainsPoint(q.LatNano, q.LonNano) != got || bsf.ClassifyLeaf(LeafCell(q.LatNano, q.LonNano)) != c {
				t.Fatalf("(%d, %d): the builder's polygon judges it otherwise", q.LatNano, q.LonNano)
			}
			if want := ref.contains(q.LatNano, q.LonNano); got != want && ref.boundaryDistance(q.LatNano, q.LonNano) > 1e-13 {
				t.Fatalf("ContainsPoint(%d, %d) = %v, reference %v", q.LatNano, q.LonNano, got, want)
			}
		}
	})
}

// bruteForceValid checks an accepted polygon the slow way with S2's exact
// predicates: no two edges cross or share a vertex, other than consecutive
// edges of one ring at their common vertex, and every hole starts inside
// the outer ring and outside the other holes.
func bruteForceValid(t *testing.T, ref *refPolygon) {
	t.Helper()
	loops := append([]*s2.Loop{ref.outer}, ref.holes...)
	type edge struct {
		a, b    s2.Point
		ring, i int
	}
	var edges []edge
	for r, l := range loops {
		n := l.NumVertices()
		for i := 0; i < n; i++ {
			edges = append(edges, edge{l.Vertex(i), l.Vertex(i + 1), r, i})
		}
	}
	for x := range edges {
		for y := x + 1; y < len(edges); y++ {
			e, f := edges[x], edges[y]
			if e.ring == f.ring {
				n := loops[e.ring].NumVertices()
				if f.i == e.i+1 || (e.i == 0 && f.i == n-1) {
					if c := s2.CrossingSign(e.a, e.b, f.a, f.b); c == s2.Cross {
						t.Fatalf("ring %d: consecutive edges %d and %d cross", e.ring, e.i, f.i)
					}
					continue
				}
			}
			if c := s2.CrossingSign(e.a, e.b, f.a, f.b); c != s2.DoNotCross {
				t.Fatalf("rings %d and %d: edges %d and %d meet (%v)", e.ring, f.ring, e.i, f.i, c)
			}
		}
	}
	for h, hl := range ref.holes {
		v := hl.Vertex(0)
		if !ref.outer.ContainsPoint(v) {
			t.Fatalf("hole %d is not inside the outer ring", h)
		}
		for j, other := range ref.holes {
			if j != h && other.ContainsPoint(v) {
				t.Fatalf("hole %d is inside hole %d", h, j)
			}
		}
	}
}
