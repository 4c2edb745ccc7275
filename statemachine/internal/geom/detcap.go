package geom

import "math"

// DetCap is a circle judged the same way on every architecture, for
// verdicts that are replicated state (a circle fence's): a point is inside
// when its haversine distance from the center, rounded to the millimetre,
// is at most the radius, that is when the haversine of the point,
//
//	h = sin²(Δlat/2) + cos lat₁ cos lat₂ sin²(Δlon/2),
//
// is below sin²((radius + 0.5 mm) / 2R). It agrees with Cap.Contains
// except for points within rounding error (far below a micrometre) of the
// boundary.
//
// The rule that makes it deterministic: every value is computed by IEEE
// operations rounded one by one. Go may fuse x*y+z into one fused
// multiply-add on arm64 (and other architectures), which rounds once and
// changes low bits; the spec says an explicit float64() conversion of a
// product rounds it and so prevents the fusion. So every product below
// (and in detSin and detCos) is wrapped in float64(), and no function of
// package math is used but Sqrt, Abs and Floor, which are exact (Sqrt
// is correctly rounded everywhere); sines and cosines are detSin and
// detCos, not math.Sin and math.Cos, whose pure-Go code has fusable
// expressions. Keep it so when editing.
type DetCap struct {
	latNano, lonNano int64
	cosLat           float64 // detCos of the center's latitude
	hMax             float64 // inside: h < hMax
	all              bool    // the radius reaches the antipode: every point is inside
}

// NewDetCap prepares the circle of the points within radiusMM millimetres
// of (latNano, lonNano), inputs validated as for NewCap.
func NewDetCap(latNano, lonNano int64, radiusMM uint64) DetCap {
	c := DetCap{latNano: latNano, lonNano: lonNano, cosLat: detCos(float64(float64(latNano) * nanoToRad))}
	half := (float64(radiusMM) + 0.5) / (2 * earthRadiusMM)
	if half >= math.Pi/2 {
		c.all = true
		return c
	}
	s := detSin(half)
	c.hMax = float64(s * s)
	return c
}

// Contains reports whether (latNano, lonNano) is inside c.
func (c *DetCap) Contains(latNano, lonNano int64) bool {
	if c.all {
		return true
	}
	sLat := detSin(float64(float64(latNano-c.latNano) * (nanoToRad / 2)))
	sLon := detSin(float64(float64(lonNano-c.lonNano) * (nanoToRad / 2)))
	cosLat := detCos(float64(float64(latNano) * nanoToRad))
	h := float64(sLat*sLat) + float64(float64(c.cosLat*cosLat)*float64(sLon*sLon))
	return h < c.hMax
}

// Cody-Waite split of π/2: detPiO2Hi has 33 significant bits, so that
// k*detPiO2Hi is exact for the small k that detReduce meets.
const (
	detPiO2Hi = 1.57079632673412561417e+00 // 0x3FF921FB54400000
	detPiO2Lo = 6.07710050650619224932e-11 // π/2 - detPiO2Hi
)

// detReduce returns r and k with x = k·π/2 + r, |r| <= π/4 (about), for
// |x| up to a few π.
func detReduce(x float64) (r float64, k int64) {
	k = int64(math.Floor(float64(x*(2/math.Pi)) + 0.5))
	fk := float64(k)
	r = x - float64(fk*detPiO2Hi)
	r -= float64(fk * detPiO2Lo)
	return r, k
}

// detSinPoly and detCosPoly are the Taylor polynomials of sin and cos on
// |r| <= π/4 to r^21 and r^20 (the next terms are below 1e-20).
func detSinPoly(r float64) float64 {
	r2 := float64(r * r)
	p := -1.0 / 51090942171709440000 // -1/21!
	for _, c := range [...]float64{1.0 / 121645100408832000, -1.0 / 355687428096000, 1.0 / 1307674368000, -1.0 / 6227020800, 1.0 / 39916800, -1.0 / 362880, 1.0 / 5040, -1.0 / 120, 1.0 / 6} {
		p = float64(p*r2) + c
	}
	// p is 1/6 - r²/120 + ...: sin r = r - r³ p.
	return r - float64(float64(r*r2)*p)
}

func detCosPoly(r float64) float64 {
	r2 := float64(r * r)
	p := 1.0 / 2432902008176640000 // 1/20!
	for _, c := range [...]float64{-1.0 / 6402373705728000, 1.0 / 20922789888000, -1.0 / 87178291200, 1.0 / 479001600, -1.0 / 3628800, 1.0 / 40320, -1.0 / 720, 1.0 / 24} {
		p = float64(p*r2) + c
	}
	// p is 1/24 - r²/720 + ...: cos r = 1 - r²/2 + r⁴ p.
	return 1 - float64(r2*0.5) + float64(float64(r2*r2)*p)
}

// detSin is sin x for |x| <= 4π, within a few units in the last place,
// computed the same way on every architecture.
func detSin(x float64) float64 { return detSinShift(x, 0) }

// detCos is cos x = sin(x + π/2), as detSin.
func detCos(x float64) float64 { return detSinShift(x, 1) }

// detSinShift is sin(x + q·π/2).
func detSinShift(x float64, q int64) float64 {
	r, k := detReduce(x)
	switch (k + q) & 3 {
	case 0:
		return detSinPoly(r)
	case 1:
		return detCosPoly(r)
	case 2:
		return -detSinPoly(r)
	}
	return -detCosPoly(r)
}
