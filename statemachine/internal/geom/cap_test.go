package geom

import (
	"math"
	"testing"

	"github.com/golang/geo/s2"
	"pgregory.net/rapid"
)

// drawCenter draws a cap center, often at a pole, on the antimeridian, or on
// the equator.
func drawCenter(t *rapid.T) (int64, int64) {
	lat := rapid.Int64Range(-maxLatNano, maxLatNano).Draw(t, "lat")
	lon := rapid.Int64Range(-maxLonNano, maxLonNano).Draw(t, "lon")
	switch rapid.IntRange(0, 7).Draw(t, "special") {
	case 0:
		lat = maxLatNano
	case 1:
		lat = -maxLatNano
	case 2:
		lon = maxLonNano
	case 3:
		lon = -maxLonNano
	case 4:
		lat = maxLatNano - rapid.Int64Range(0, 1e9).Draw(t, "near pole")
	case 5:
		lat = 0
	}
	return lat, lon
}

// drawRadius draws a radius in mm from the scales of real queries.
func drawRadius(t *rapid.T) uint64 {
	scales := []float64{1, 10, 1e3, 1e6, 1e8, 5e9, 2e10, 4e10}
	s := rapid.SampledFrom(scales).Draw(t, "scale")
	r := uint64(s * rapid.Float64Range(0.5, 1.5).Draw(t, "factor"))
	if rapid.Bool().Draw(t, "log uniform") {
		r = uint64(math.Pow(10, rapid.Float64Range(0, math.Log10(4e10)).Draw(t, "log r")))
	}
	return min(max(r, 1), 40_000_000_000)
}

// Every point that Contains accepts has its leaf cell in Ranges and passes
// MayContainLeaf and a CapFilter's (one per cap, whose decoder keeps state
// from point to point); Contains agrees with DistanceMM. A CapFilter's
// MayContainLeaves over all the points' leaves in one run agrees with its
// MayContainLeaf of each.
func TestCapCoversContainedPoints(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lat, lon := drawCenter(t)
		radius := drawRadius(t)
		cp := NewCap(lat, lon, radius)
		rs := cp.Ranges()
		checkRanges(t, rs)
		filter := cp.Filter()
		var leaves []uint64
		theta := float64(radius) / earthRadiusMM
		for k := 0; k < 50; k++ {
			var pLat, pLon int64
			switch rapid.IntRange(0, 3).Draw(t, "kind") {
			case 0: // anywhere
				pLat = rapid.Int64Range(-maxLatNano, maxLatNano).Draw(t, "pLat")
				pLon = rapid.Int64Range(-maxLonNano, maxLonNano).Draw(t, "pLon")
			case 1: // inside
				pLat, pLon = destination(lat, lon, theta*rapid.Float64Range(0, 1).Draw(t, "f"), rapid.Float64Range(-math.Pi, math.Pi).Draw(t, "beta"))
			default: // at the rim
				f := 1 + rapid.Float64Range(-1e-6, 1e-6).Draw(t, "rim")
				pLat, pLon = destination(lat, lon, theta*f, rapid.Float64Range(-math.Pi, math.Pi).Draw(t, "beta"))
			}
			leaves = append(leaves, LeafCell(pLat, pLon))
			d, ok := cp.Contains(pLat, pLon)
			if d != DistanceMM(lat, lon, pLat, pLon) || d != DistanceMM(pLat, pLon, lat, lon) {
				t.Fatalf("Contains distance %d, DistanceMM %d", d, DistanceMM(lat, lon, pLat, pLon))
			}
			if ok != (d <= radius) {
				t.Fatalf("Contains ok=%v for distance %d radius %d", ok, d, radius)
			}
			if !ok {
				continue
			}
			leaf := LeafCell(pLat, pLon)
			if !cp.MayContainLeaf(leaf) {
				t.Fatalf("MayContainLeaf rejects (%d, %d) at %d mm, radius %d", pLat, pLon, d, radius)
			}
			if !filter.MayContainLeaf(leaf) {
				t.Fatalf("CapFilter.MayContainLeaf rejects (%d, %d) at %d mm, radius %d", pLat, pLon, d, radius)
			}
			if !inRanges(rs, leaf) {
				t.Fatalf("(%d, %d) at %d mm (radius %d) is not in ranges %x", pLat, pLon, d, radius, rs)
			}
		}
		may := make([]bool, len(leaves))
		run, alone := cp.Filter(), cp.Filter()
		run.MayContainLeaves(leaves, may)
		for k, leaf := range leaves {
			if alone.MayContainLeaf(leaf) != may[k] {
				t.Fatalf("leaf %x: MayContainLeaf %v, in a run %v", leaf, !may[k], may[k])
			}
		}
	})
}

// MayContainLeaf rejects points well outside the radius, and Ranges are
// sized to the query.
func TestCapTightness(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lat, lon := drawCenter(t)
		radius := uint64(math.Pow(10, rapid.Float64Range(3, 9).Draw(t, "log r"))) // 1 m .. 1000 km
		cp := NewCap(lat, lon, radius)
		theta := float64(radius) / earthRadiusMM
		pLat, pLon := destination(lat, lon, theta*1.01+1e-6, rapid.Float64Range(-math.Pi, math.Pi).Draw(t, "beta"))
		if cp.MayContainLeaf(LeafCell(pLat, pLon)) {
			t.Fatalf("MayContainLeaf accepts a point at %d mm, radius %d", DistanceMM(lat, lon, pLat, pLon), radius)
		}
		rs := cp.Ranges()
		if len(rs) > 25 {
			t.Fatalf("%d ranges", len(rs))
		}
		// The covered area is a small multiple of the cap's area.
		var leaves float64
		for _, r := range rs {
			leaves += float64((r.Max-r.Min)/2 + 1)
		}
		leafArea := 4 * math.Pi / (6 * math.Pow(4, 30)) // average, steradians
		capArea := 4 * math.Pi * math.Pow(math.Sin(theta/2), 2)
		if ratio := leaves * leafArea / capArea; ratio > 40 {
			t.Fatalf("ranges cover %.1f times the cap's area (%d ranges)", ratio, len(rs))
		}
	})
}

func TestCapWholeEarth(t *testing.T) {
	for _, r := range []uint64{20_015_115_000, 30_000_000_000, 40_000_000_000} {
		cp := NewCap(deg(10), deg(20), r)
		rs := cp.Ranges()
		if len(rs) != 1 || rs[0].Min != firstLeaf || rs[0].Max != lastLeaf {
			t.Fatalf("radius %d: ranges %x", r, rs)
		}
		if !cp.MayContainLeaf(LeafCell(deg(-10), deg(-160))) {
			t.Fatalf("radius %d: antipode rejected", r)
		}
		if _, ok := cp.Contains(deg(-10), deg(-160)); !ok {
			t.Fatalf("radius %d: antipode not contained", r)
		}
	}
	// Just short of half the circumference: the antipode is outside.
	cp := NewCap(0, 0, 20_015_000_000)
	if _, ok := cp.Contains(0, deg(180)); ok {
		t.Fatal("antipode inside")
	}
	if _, ok := cp.Contains(0, deg(179)); !ok {
		t.Fatal("179 degrees away is not inside")
	}
	if !inRanges(cp.Ranges(), LeafCell(0, deg(179))) {
		t.Fatal("179 degrees away is not in ranges")
	}
}

func TestCapInvalidLeaf(t *testing.T) {
	cp := NewCap(0, 0, 1000)
	for _, id := range []uint64{0, 2, ^uint64(0), 7 << 61} {
		if cp.MayContainLeaf(id) {
			t.Fatalf("MayContainLeaf(%x) = true", id)
		}
	}
}

func BenchmarkCapRanges1km(b *testing.B) {
	cp := NewCap(deg(38.11), deg(13.36), 1_000_000)
	n := 0
	for b.Loop() {
		n += len(cp.Ranges())
	}
	b.ReportMetric(float64(n)/float64(b.N), "ranges")
}

func BenchmarkCapContains(b *testing.B) {
	cp := NewCap(deg(38.11), deg(13.36), 1_000_000)
	lat, lon := deg(38.115), deg(13.365)
	for b.Loop() {
		cp.Contains(lat, lon)
	}
}

func BenchmarkCapMayContainLeaf(b *testing.B) {
	cp := NewCap(deg(38.11), deg(13.36), 1_000_000)
	leaf := LeafCell(deg(38.115), deg(13.365))
	for b.Loop() {
		cp.MayContainLeaf(leaf)
	}
}

// TestCapSTBoxHoldsBoundary checks the sampled (s,t) box against a dense
// walk of the cap's boundary: 4,096 points, none outside the box, for caps
// up to the size the box is used for, anywhere on a face (edges included).
func TestCapSTBoxHoldsBoundary(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lat, lon := drawCenter(t)
		center := pointFromNano(lat, lon)
		angle := stBoxMaxAngle * rapid.Float64Range(1e-9, 1).Draw(t, "size")
		f, s0, s1, t0, t1, ok := capSTBox(center, angle)
		if !ok {
			return
		}
		e1 := s2.Ortho(s2.Point{Vector: center}).Vector
		e2 := center.Cross(e1)
		for k := 0; k < 4096; k++ {
			sin, cos := math.Sincos(2 * math.Pi * float64(k) / 4096)
			p := center.Mul(math.Cos(angle)).Add(e1.Mul(math.Sin(angle) * cos)).Add(e2.Mul(math.Sin(angle) * sin))
			pf, s, tt := faceST(p)
			if pf != f || s < s0 || s > s1 || tt < t0 || tt > t1 {
				t.Fatalf("boundary point %d (face %d, %v, %v) outside box face %d [%v,%v]x[%v,%v]", k, pf, s, tt, f, s0, s1, t0, t1)
			}
		}
	})
}

// TestApproxLeafPoint: the prefilter's decoded point lies within
// prefilterSlack of every leaf's own center (s2's decoding).
func TestApproxLeafPoint(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lat, lon := drawCenter(t)
		leaf := LeafCell(lat, lon)
		p := s2.Point{Vector: approxLeafPoint(leaf).Normalize()}
		if a := float64(p.Distance(s2.CellID(leaf).Point())); a > prefilterSlack {
			t.Fatalf("decoded point %g rad from the leaf (slack %g)", a, prefilterSlack)
		}
		if s2.CellID(leaf).Parent(prefilterLevel) != s2.CellIDFromLatLng(s2.LatLngFromPoint(p)).Parent(prefilterLevel) {
			t.Fatalf("decoded point is not in the leaf's level-%d ancestor", prefilterLevel)
		}
	})
}

// TestFastDistanceMatchesHaversine: wherever fastDistanceMM answers, it is
// exactly haversineMM's rounded distance, at every latitude it accepts and
// every distance up to its limit, including points at half-millimetre
// distances where rounding is closest to going the other way.
func TestFastDistanceMatchesHaversine(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lat, lon := drawCenter(t)
		if rapid.Bool().Draw(t, "mid latitudes") {
			lat = rapid.Int64Range(-fastMaxLatNano-1000, fastMaxLatNano+1000).Draw(t, "mid lat")
		}
		cp := NewCap(lat, lon, 1000)
		for k := 0; k < 200; k++ {
			theta := math.Pow(10, rapid.Float64Range(-10, -1.7).Draw(t, "log theta"))
			if rapid.IntRange(0, 3).Draw(t, "tie") == 0 {
				// A distance of about k + 0.5 mm.
				mm := math.Floor(theta*earthRadiusMM) + 0.5
				theta = mm / earthRadiusMM
			}
			pLat, pLon := destination(lat, lon, theta, rapid.Float64Range(-math.Pi, math.Pi).Draw(t, "beta"))
			want := haversineMM(lat, lon, cp.cosLat, pLat, pLon)
			if got, ok := cp.fastDistanceMM(pLat, pLon); ok && got != want {
				t.Fatalf("fastDistanceMM(%d, %d) from (%d, %d) = %d, haversineMM %d", pLat, pLon, lat, lon, got, want)
			}
			if got, _ := cp.Contains(pLat, pLon); got != want {
				t.Fatalf("Contains distance %d, haversineMM %d", got, want)
			}
		}
	})
}

// The fast path answers nearly always for a city-sized query.
func TestFastDistanceUsuallyAnswers(t *testing.T) {
	cp := NewCap(deg(38.11), deg(13.36), 1_000_000)
	misses := 0
	for k := 0; k < 100_000; k++ {
		theta := 1e6 / earthRadiusMM * float64(k) / 100_000
		pLat, pLon := destination(deg(38.11), deg(13.36), theta, float64(k))
		if _, ok := cp.fastDistanceMM(pLat, pLon); !ok {
			misses++
		}
	}
	if misses > 10 {
		t.Fatalf("fastDistanceMM declined %d of 100,000 points", misses)
	}
}

// The decoder of a scan decodes exactly as approxLeafPoint, whatever the
// previous id: nearby ids (which share levels), far ones, repeats.
func TestLeafDecoderMatches(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var d leafDecoder
		lat, lon := drawCenter(t)
		id := LeafCell(lat, lon)
		for k := 0; k < 100; k++ {
			switch rapid.IntRange(0, 3).Draw(t, "step") {
			case 0:
				lat, lon = drawCenter(t)
				id = LeafCell(lat, lon)
			case 1: // a neighbour along the curve
				id = uint64(s2.CellID(id).Advance(rapid.Int64Range(-1<<20, 1<<20).Draw(t, "advance")))
				if !s2.CellID(id).IsValid() {
					id = LeafCell(lat, lon)
				}
			case 2: // change one bit-pair of the position
				bit := 2 * rapid.IntRange(0, 29).Draw(t, "bit")
				id ^= uint64(rapid.IntRange(1, 3).Draw(t, "pair")) << (bit + 1)
			}
			if got, want := d.point(id), approxLeafPoint(id); got != want {
				t.Fatalf("decoder point of %x = %v, approxLeafPoint %v", id, got, want)
			}
		}
	})
}
