package geom

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/geoevent/geoevent/core"
)

// The polygon of statemachine's BenchmarkQueryPolygon (benchPolygon there):
// a 20-vertex star-ish ring about 5 km across with a square hole in its
// middle, centred at random points of a 2 x 2 degree box around Palermo.

func bench20(lat, lon int64) ([]core.Coordinate, [][]core.Coordinate) {
	const r1, r2 = 22_500_000, 15_000_000
	outer := make([]core.Coordinate, 20)
	for i := range outer {
		rad := int64(r1)
		if i%2 == 1 {
			rad = r2
		}
		s, c := math.Sincos(float64(i) * 2 * math.Pi / 20)
		outer[i] = core.Coordinate{LatNano: lat + int64(float64(rad)*s), LonNano: lon + int64(float64(rad)*c*1.27)}
	}
	const h = 4_000_000
	hole := []core.Coordinate{{LatNano: lat - h, LonNano: lon - h}, {LatNano: lat - h, LonNano: lon + h}, {LatNano: lat + h, LonNano: lon + h}, {LatNano: lat + h, LonNano: lon - h}}
	return outer, [][]core.Coordinate{hole}
}

// bench20Centers returns n centers of bench20 polygons.
func bench20Centers(n int) [][2]int64 {
	r := rand.New(rand.NewPCG(9, 10))
	out := make([][2]int64, n)
	for i := range out {
		out[i] = [2]int64{38_110_000_000 - 1_000_000_000 + r.Int64N(2_000_000_000), 13_360_000_000 - 1_000_000_000 + r.Int64N(2_000_000_000)}
	}
	return out
}

// benchPoly is the rings of a benchmark polygon.
type benchPoly struct {
	outer []core.Coordinate
	holes [][]core.Coordinate
}

// bench20Polys is the benchmark polygon at 64 random centers.
func bench20Polys() []benchPoly {
	var ps []benchPoly
	for _, c := range bench20Centers(64) {
		o, h := bench20(c[0], c[1])
		ps = append(ps, benchPoly{o, h})
	}
	return ps
}

func BenchmarkNewPolygonBench20(b *testing.B) {
	ps := bench20Polys()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p := &ps[i&63]
		i++
		if _, err := NewPolygon(p.outer, p.holes); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPolygonBench20Scan(b *testing.B) {
	var ps []*Polygon
	for _, c := range bench20Centers(64) {
		p, err := NewPolygon(bench20(c[0], c[1]))
		if err != nil {
			b.Fatal(err)
		}
		ps = append(ps, p)
	}
	b.ReportAllocs()
	i, n := 0, 0
	for b.Loop() {
		rs, _ := ps[i&63].Scan()
		i++
		n += len(rs)
	}
	b.ReportMetric(float64(n)/float64(b.N), "ranges")
}

// benchRun is about a run of keys of the index's leaves (72 at most).
const benchRun = 48

// BenchmarkPolygonBench20Classify judges, for each of 64 polygons, the
// sorted leaves of points uniform over the polygon's box that fall in its
// scan ranges not marked Inside, as a scan of 1,000,000 entities in the
// 2 x 2 degree box does (about 26 per square kilometre), in runs of
// benchRun as a scan takes them from the index's leaves; ns/leaf is per
// judged leaf.
func BenchmarkPolygonBench20Classify(b *testing.B) {
	type job struct {
		p      *Polygon
		leaves []uint64
	}
	r := rand.New(rand.NewPCG(3, 4))
	var jobs []job
	total := 0
	for _, c := range bench20Centers(64) {
		p, err := NewPolygon(bench20(c[0], c[1]))
		if err != nil {
			b.Fatal(err)
		}
		rs, _ := p.Scan()
		var leaves []uint64
		// The box: ±23e6 nanodegrees of latitude, ±29e6 of longitude,
		// about 5 x 5 km: some 670 entities.
		for k := 0; k < 670; k++ {
			lat := c[0] - 23_000_000 + r.Int64N(46_000_000)
			lon := c[1] - 29_000_000 + r.Int64N(58_000_000)
			leaf := LeafCell(lat, lon)
			if sr, ok := scanRangeOf(rs, leaf); ok && !sr.Inside {
				leaves = append(leaves, leaf)
			}
		}
		slices.Sort(leaves)
		total += len(leaves)
		jobs = append(jobs, job{p, leaves})
	}
	filters := make([]PolygonFilter, len(jobs))
	for i := range jobs {
		_, filters[i] = jobs[i].p.Scan()
	}
	var class [benchRun]uint8
	i, n := 0, 0
	for b.Loop() {
		j := i & 63
		i++
		f := &filters[j]
		for leaves := jobs[j].leaves; len(leaves) > 0; {
			run := leaves[:min(len(leaves), benchRun)]
			f.ClassifyLeaves(run, class[:])
			n += int(class[0])
			leaves = leaves[len(run):]
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(float64(total)/64), "ns/leaf")
	b.ReportMetric(float64(total)/64, "leaves/op")
}

// BenchmarkPolygonBench20All is Build and Scan of the benchmark polygon,
// with one PolygonBuilder as a state machine has: the per-query work of
// the polygon before its keys.
func BenchmarkPolygonBench20All(b *testing.B) {
	ps := bench20Polys()
	var pb PolygonBuilder
	b.ReportAllocs()
	i, n := 0, 0
	for b.Loop() {
		q := &ps[i&63]
		i++
		p, err := pb.Build(q.outer, q.holes)
		if err != nil {
			b.Fatal(err)
		}
		rs, _ := p.Scan()
		n += len(rs)
	}
}
