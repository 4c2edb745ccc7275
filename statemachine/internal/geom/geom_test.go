package geom

import (
	"math"
	"testing"

	"github.com/golang/geo/s1"
	"github.com/golang/geo/s2"
	"pgregory.net/rapid"
)

func TestLeafCellMatchesS2(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lat := rapid.Int64Range(-maxLatNano, maxLatNano).Draw(t, "lat")
		lon := rapid.Int64Range(-maxLonNano, maxLonNano).Draw(t, "lon")
		want := s2.CellIDFromLatLng(s2.LatLngFromDegrees(float64(lat)/1e9, float64(lon)/1e9))
		got := s2.CellID(LeafCell(lat, lon))
		if got != want || !got.IsLeaf() {
			t.Fatalf("LeafCell(%d, %d) = %v, want %v", lat, lon, got, want)
		}
	})
}

// The cube-face arithmetic copied from package s2 agrees with it.
func TestCellIDFromFaceIJ(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lat := rapid.Int64Range(-maxLatNano, maxLatNano).Draw(t, "lat")
		lon := rapid.Int64Range(-maxLonNano, maxLonNano).Draw(t, "lon")
		p := pointFromNano(lat, lon)
		f, s, tt := faceST(p)
		got := cellIDFromFaceIJ(f, stToIJ(s), stToIJ(tt))
		want := s2.CellFromPoint(s2.Point{Vector: p}).ID()
		if got != want {
			t.Fatalf("cellIDFromFaceIJ = %v, want %v", got, want)
		}
		level := rapid.IntRange(0, 30).Draw(t, "level")
		if got.Parent(level) != want.Parent(level) {
			t.Fatalf("parents differ")
		}
		shift := maxLevel - level
		if got := cellIDFromFaceIJLevel(f, stToIJ(s)>>shift, stToIJ(tt)>>shift, level); got != want.Parent(level) {
			t.Fatalf("cellIDFromFaceIJLevel = %v, want %v", got, want.Parent(level))
		}
	})
	// Corners of every face.
	for f := 0; f < 6; f++ {
		for _, ij := range [][2]int{{0, 0}, {0, maxSize - 1}, {maxSize - 1, 0}, {maxSize - 1, maxSize - 1}} {
			id := cellIDFromFaceIJ(f, ij[0], ij[1])
			if !id.IsLeaf() || id.Face() != f {
				t.Fatalf("face %d corner %v: %v", f, ij, id)
			}
		}
	}
}

func TestPointFromNanoCanonical(t *testing.T) {
	if pointFromNano(deg(90), deg(10)) != pointFromNano(deg(90), deg(-170)) {
		t.Fatal("north pole depends on longitude")
	}
	if pointFromNano(deg(-90), 0) != pointFromNano(deg(-90), deg(33)) {
		t.Fatal("south pole depends on longitude")
	}
	if pointFromNano(deg(12), deg(-180)) != pointFromNano(deg(12), deg(180)) {
		t.Fatal("longitude -180 and 180 differ")
	}
}

func TestDistanceMMKnown(t *testing.T) {
	oneDeg := uint64(math.Round(EarthRadiusM * 1000 * math.Pi / 180)) // 111,195,080 mm
	if oneDeg != 111_195_080 {
		t.Fatalf("one degree on this sphere is %d mm", oneDeg)
	}
	half := uint64(math.Round(EarthRadiusM * 1000 * math.Pi)) // 20,015,114,442 mm
	cases := []struct {
		aLat, aLon, bLat, bLon int64
		want                   uint64
	}{
		{0, 0, 0, 0, 0},
		{deg(10), deg(20), deg(10), deg(20), 0},
		{0, 0, deg(1), 0, oneDeg},
		{0, 0, 0, deg(1), oneDeg},
		{deg(45), deg(7), deg(46), deg(7), oneDeg},
		{0, deg(179.5), 0, deg(-179.5), oneDeg}, // across the antimeridian
		{deg(90), 0, deg(89), deg(123), oneDeg},
		{deg(90), 0, deg(-90), 0, half},
		{0, 0, 0, deg(180), half},
		{0, 0, 0, 1, 0},  // one nanodegree: 0.11 mm
		{0, 0, 0, 5, 1},  // 0.56 mm
		{0, 0, 0, 9, 1},  // 1.0007 mm
		{0, 0, 0, 14, 2}, // 1.557 mm
	}
	for _, tc := range cases {
		if got := DistanceMM(tc.aLat, tc.aLon, tc.bLat, tc.bLon); got != tc.want {
			t.Errorf("DistanceMM(%d,%d,%d,%d) = %d, want %d", tc.aLat, tc.aLon, tc.bLat, tc.bLon, got, tc.want)
		}
		if got := DistanceMM(tc.bLat, tc.bLon, tc.aLat, tc.aLon); got != tc.want {
			t.Errorf("DistanceMM reversed (%d,%d,%d,%d) = %d, want %d", tc.aLat, tc.aLon, tc.bLat, tc.bLon, got, tc.want)
		}
	}
}

// DistanceMM agrees with the angle between unit vectors (atan2 of cross and
// dot products, precise at every distance) to within a millimetre, except
// close to the antipode where the haversine formula loses precision.
func TestDistanceMMReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		aLat := rapid.Int64Range(-maxLatNano, maxLatNano).Draw(t, "aLat")
		aLon := rapid.Int64Range(-maxLonNano, maxLonNano).Draw(t, "aLon")
		var bLat, bLon int64
		if rapid.Bool().Draw(t, "near") {
			theta := math.Pow(10, rapid.Float64Range(-9, math.Log10(math.Pi)).Draw(t, "log theta"))
			bLat, bLon = destination(aLat, aLon, theta, rapid.Float64Range(-math.Pi, math.Pi).Draw(t, "beta"))
		} else {
			bLat = rapid.Int64Range(-maxLatNano, maxLatNano).Draw(t, "bLat")
			bLon = rapid.Int64Range(-maxLonNano, maxLonNano).Draw(t, "bLon")
		}
		got := DistanceMM(aLat, aLon, bLat, bLon)
		pa := s2.PointFromLatLng(s2.LatLng{Lat: s1.Angle(float64(aLat) * nanoToRad), Lng: s1.Angle(float64(aLon) * nanoToRad)})
		pb := s2.PointFromLatLng(s2.LatLng{Lat: s1.Angle(float64(bLat) * nanoToRad), Lng: s1.Angle(float64(bLon) * nanoToRad)})
		ref := pa.Distance(pb).Radians() * earthRadiusMM
		tol := 1.0
		if fromAntipode := math.Pi*earthRadiusMM - ref; fromAntipode < 1e6 {
			tol = 200 // the haversine formula near the antipode
		}
		if math.Abs(float64(got)-ref) > tol {
			t.Fatalf("DistanceMM = %d, reference %.3f", got, ref)
		}
		if got != DistanceMM(bLat, bLon, aLat, aLon) {
			t.Fatalf("DistanceMM is not symmetric")
		}
	})
}

func TestMergeRanges(t *testing.T) {
	got := mergeRanges([]CellRange{{9, 11}, {1, 3}, {5, 7}, {15, 21}, {17, 19}, {25, 25}})
	want := []CellRange{{1, 11}, {15, 21}, {25, 25}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}
