package client

import (
	"errors"
	"math"
	"math/big"
	"testing"

	"github.com/google/uuid"
	"pgregory.net/rapid"

	"github.com/geoevent/geoevent/core"
)

// exactNano is the reference: deg*1e9 in exact rational arithmetic,
// rounded half away from zero.
func exactNano(deg float64) int64 {
	x := new(big.Rat).SetFloat64(deg)
	x.Mul(x, big.NewRat(1_000_000_000, 1))
	neg := x.Sign() < 0
	x.Abs(x)
	x.Add(x, big.NewRat(1, 2))
	n := new(big.Int).Quo(x.Num(), x.Denom()) // floor of |x| + 1/2
	if neg {
		n.Neg(n)
	}
	return n.Int64()
}

// genDegrees draws degrees within ±limit: uniform floats, floats near and
// on ties (k+1/2 nanodegrees, odd multiples of 2^-m), and the bounds.
func genDegrees(limit float64) *rapid.Generator[float64] {
	return rapid.OneOf(
		rapid.Float64Range(-limit, limit),
		rapid.Custom(func(t *rapid.T) float64 {
			k := rapid.Int64Range(-int64(limit*1e9), int64(limit*1e9)).Draw(t, "k")
			d := (float64(k) + 0.5) / 1e9
			for range rapid.IntRange(-3, 3).Draw(t, "ulps") {
				d = math.Nextafter(d, math.Inf(1))
			}
			return d
		}),
		rapid.Custom(func(t *rapid.T) float64 {
			m := rapid.IntRange(10, 40).Draw(t, "m")
			odd := rapid.Int64Range(-int64(limit)<<m/2, int64(limit)<<m/2).Draw(t, "odd")*2 + 1
			return math.Ldexp(float64(odd), -m)
		}),
		rapid.SampledFrom([]float64{0, math.Copysign(0, -1), limit, -limit, 1.0 / 1024, -1.0 / 1024, 5e-10, -5e-10, 1e-300}),
	)
}

func TestNanodegreesExact(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := genDegrees(181).Draw(t, "deg")
		if d < -181 || d > 181 {
			t.Skip()
		}
		if got, want := nanodegrees(d), exactNano(d); got != want {
			t.Fatalf("nanodegrees(%v) = %d, exact rounding gives %d", d, got, want)
		}
	})
}

func TestPositionEdges(t *testing.T) {
	for _, c := range []struct {
		lat, lon float64
		want     core.Coordinate
	}{
		{90, 180, core.Coordinate{LatNano: 90_000_000_000, LonNano: 180_000_000_000}},
		{-90, -180, core.Coordinate{LatNano: -90_000_000_000, LonNano: -180_000_000_000}},
		{38.115, 13.361, core.Coordinate{LatNano: 38_115_000_000, LonNano: 13_361_000_000}},
		{1.0 / 1024, -1.0 / 1024, core.Coordinate{LatNano: 976_563, LonNano: -976_563}},                   // exact ties, away from zero
		{5e-10, -5e-10, core.Coordinate{LatNano: 1, LonNano: -1}},                                         // 5e-10's float64 lies just above the half
		{4.9e-10, -4.9e-10, core.Coordinate{}},                                                            // below the half
		{16.0000000005, 15.0000000005, core.Coordinate{LatNano: 16_000_000_000, LonNano: 15_000_000_001}}, // the float64 decides, not the text
		{90.0000000004, 180.0000000004, core.Coordinate{LatNano: 90_000_000_000, LonNano: 180_000_000_000}},
		{-90.0000000004, -180.0000000004, core.Coordinate{LatNano: -90_000_000_000, LonNano: -180_000_000_000}},
	} {
		got, err := Position(c.lat, c.lon)
		if err != nil || got != c.want {
			t.Errorf("Position(%v, %v) = %+v, %v; want %+v", c.lat, c.lon, got, err, c.want)
		}
	}
	for _, c := range []struct{ lat, lon float64 }{
		{90.0000000006, 0}, {-90.0000000006, 0}, {0, 180.0000000006}, {0, -180.0000000006},
		{91, 0}, {0, 181}, {1e300, 0}, {0, -1e300},
		{math.NaN(), 0}, {0, math.NaN()}, {math.Inf(1), 0}, {0, math.Inf(-1)},
	} {
		got, err := Position(c.lat, c.lon)
		var ce *core.Error
		if !errors.As(err, &ce) || ce.Code != core.InvalidCoordinates.Code || got != (core.Coordinate{}) {
			t.Errorf("Position(%v, %v) = %+v, %v; want INVALID_COORDINATES", c.lat, c.lon, got, err)
		}
	}
}

// TestDegreesRoundTrip: every coordinate on the globe survives Degrees and
// Position, and Degrees is the float64 nearest the exact quotient.
func TestDegreesRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := core.Coordinate{
			LatNano: rapid.Int64Range(-core.MaxLatNano, core.MaxLatNano).Draw(t, "lat"),
			LonNano: rapid.Int64Range(-core.MaxLonNano, core.MaxLonNano).Draw(t, "lon"),
		}
		lat, lon := Degrees(c.LatNano, c.LonNano)
		back, err := Position(lat, lon)
		if err != nil || back != c {
			t.Fatalf("Position(Degrees(%+v)) = %+v, %v", c, back, err)
		}
		want, _ := new(big.Rat).SetFrac64(c.LatNano, 1_000_000_000).Float64()
		if lat != want {
			t.Fatalf("Degrees lat of %d = %v, nearest float64 is %v", c.LatNano, lat, want)
		}
	})
	for _, n := range []int64{core.MaxLatNano, -core.MaxLatNano, 0, 1, -1} {
		if lat, _ := Degrees(n, 0); lat != float64(n)/1e9 {
			t.Errorf("Degrees(%d) = %v", n, lat)
		}
	}
	if lat, lon := Degrees(90_000_000_000, -180_000_000_000); lat != 90 || lon != -180 {
		t.Errorf("Degrees of the bounds = %v, %v", lat, lon)
	}
}

func TestNewEventAndIDs(t *testing.T) {
	u := uuid.MustParse("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
	ev, err := NewEvent(u, 38.115, -13.361)
	if err != nil {
		t.Fatal(err)
	}
	want := core.GeoEvent{EntityID: core.FromUUID(u), LatNano: 38_115_000_000, LonNano: -13_361_000_000}
	if ev != want {
		t.Fatalf("NewEvent = %+v, want %+v", ev, want)
	}
	if ev.EntityID.String() != u.String() {
		t.Fatalf("entity %v, want %v", ev.EntityID, u)
	}
	ev2, err := NewEvent(core.Uint128{Lo: 7}, 0, 0)
	if err != nil || ev2.EntityID != (core.Uint128{Lo: 7}) {
		t.Fatalf("NewEvent(Uint128) = %+v, %v", ev2, err)
	}
	if _, err := NewEvent(u, 0, 200); err == nil {
		t.Fatal("NewEvent at longitude 200 succeeded")
	}
	ids := IDs(u, uuid.Nil)
	if len(ids) != 2 || ids[0] != core.FromUUID(u) || !ids[1].IsZero() {
		t.Fatalf("IDs(uuid) = %v", ids)
	}
	if got := IDs(core.Uint128{Hi: 1}, core.Uint128{Lo: 2}); len(got) != 2 || got[0] != (core.Uint128{Hi: 1}) || got[1] != (core.Uint128{Lo: 2}) {
		t.Fatalf("IDs(Uint128) = %v", got)
	}
	if len(IDs[uuid.UUID]()) != 0 {
		t.Fatal("IDs() is not empty")
	}
	rapid.Check(t, func(t *rapid.T) {
		var raw uuid.UUID
		copy(raw[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "bytes"))
		if id := IDOf(raw); id.String() != raw.String() || id.UUID() != raw || IDOf(id) != id {
			t.Fatalf("IDOf(%v) = %v", raw, id)
		}
	})
}

func BenchmarkPosition(b *testing.B) {
	for _, c := range []struct {
		name     string
		lat, lon float64
	}{{"plain", 38.1157, 13.3615}, {"ties", 1.0 / 1024, -1.0 / 1024}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Position(c.lat, c.lon); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
