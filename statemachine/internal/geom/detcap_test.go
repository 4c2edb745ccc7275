package geom

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestDetSinCos checks detSin and detCos against package math over the
// range the circle test uses.
func TestDetSinCos(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 200_000 {
		x := (r.Float64()*2 - 1) * 4 * math.Pi
		if i%4 == 0 {
			x *= 1e-6
		}
		if d := math.Abs(detSin(x) - math.Sin(x)); d > 4e-16 {
			t.Fatalf("detSin(%v) = %v, math.Sin %v", x, detSin(x), math.Sin(x))
		}
		if d := math.Abs(detCos(x) - math.Cos(x)); d > 4e-16 {
			t.Fatalf("detCos(%v) = %v, math.Cos %v", x, detCos(x), math.Cos(x))
		}
	}
}

// TestDetCapAgrees checks that DetCap judges points as Cap.Contains does:
// circles from 1 m to 20,000 km, points near their boundaries and at
// random.
func TestDetCapAgrees(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	nano := func(deg float64) int64 { return int64(deg * 1e9) }
	for range 2_000 {
		lat, lon := nano(r.Float64()*170-85), nano(r.Float64()*360-180)
		radius := uint64(math.Exp(r.Float64() * math.Log(2e10)))
		if radius < 1000 {
			radius += 1000
		}
		d := NewDetCap(lat, lon, radius)
		c := NewCap(lat, lon, radius)
		deg := float64(radius) / earthRadiusMM * 180 / math.Pi
		for range 50 {
			pLat := min(max(lat+nano((r.Float64()*2-1)*deg*1.2), -90e9), 90e9)
			pLon := lon + nano((r.Float64()*2-1)*deg*1.2/max(0.05, math.Cos(float64(lat)*nanoToRad)))
			pLon = (pLon+540e9)%360e9 - 180e9
			if _, want := c.Contains(pLat, pLon); d.Contains(pLat, pLon) != want {
				t.Fatalf("circle (%d, %d) r %d mm, point (%d, %d): DetCap %v, Cap %v", lat, lon, radius, pLat, pLon, !want, want)
			}
		}
	}
}
