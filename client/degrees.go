package client

import (
	"math"
	"math/big"

	"github.com/geoevent/geoevent/core"
)

// Position is the coordinate at latitude lat and longitude lon, in
// degrees: each is rounded to the nearest nanodegree, halves away from
// zero, from the exact value of the float64 (not from the decimal text it
// was written as). A float64 near 180 is within 1.5e-14 degrees of its text,
// so the two roundings differ only for text with more than nine decimals
// that is a tie or next to one: 16.0000000005's float64 is
// 16.00000000049999827, which gives 16,000,000,000 nanodegrees, not
// 16,000,000,001. For exact decimal input, set the nanodegrees directly
// (core.Coordinate, core.GeoEvent's LatNano and LonNano), or send decimal
// text to the HTTP API, which converts it exactly.
//
// Position fails with a *core.Error of code INVALID_COORDINATES when lat is
// not within [-90, 90] or lon not within [-180, 180] once rounded, or
// either is NaN or infinite.
func Position(lat, lon float64) (core.Coordinate, error) {
	// Within ±91 and ±181 first (false for NaN), so that nanodegrees sees
	// finite values whose product fits; the exact bounds apply once rounded.
	var c core.Coordinate
	if math.Abs(lat) <= 91 {
		c.LatNano = nanodegrees(lat)
	}
	if !(math.Abs(lat) <= 91) || c.LatNano < -core.MaxLatNano || c.LatNano > core.MaxLatNano {
		return core.Coordinate{}, core.Errorf(core.InvalidCoordinates, "latitude %v is not within [-90, 90] degrees", lat)
	}
	if math.Abs(lon) <= 181 {
		c.LonNano = nanodegrees(lon)
	}
	if !(math.Abs(lon) <= 181) || c.LonNano < -core.MaxLonNano || c.LonNano > core.MaxLonNano {
		return core.Coordinate{}, core.Errorf(core.InvalidCoordinates, "longitude %v is not within [-180, 180] degrees", lon)
	}
	return c, nil
}

// Degrees returns nanodegrees as degrees: each the float64 nearest to
// latNano/1e9 and lonNano/1e9. It reads a position back:
//
//	lat, lon := client.Degrees(ev.LatNano, ev.LonNano)
//
// For every coordinate on the globe, Position(Degrees(c)) is c again.
func Degrees(latNano, lonNano int64) (lat, lon float64) {
	// Both operands are exact (|nanodegrees| < 2^53) and IEEE division
	// rounds correctly, so the quotient is the nearest float64.
	return float64(latNano) / 1e9, float64(lonNano) / 1e9
}

// NewEvent is an event of entity id (a core.Uint128 or a uuid.UUID) at
// latitude lat and longitude lon in degrees, rounded as Position rounds
// them; every other field is zero (the server assigns the timestamp). Set
// the others on the result:
//
//	ev, err := client.NewEvent(truck, 38.115, 13.361)
//	ev.VelocityMMS = 12_500
//
// It fails as Position fails.
func NewEvent[T ID](id T, lat, lon float64) (core.GeoEvent, error) {
	c, err := Position(lat, lon)
	if err != nil {
		return core.GeoEvent{}, err
	}
	return core.GeoEvent{EntityID: IDOf(id), LatNano: c.LatNano, LonNano: c.LonNano}, nil
}

// nanodegrees rounds deg*1e9 to the nearest integer, halves away from zero,
// for a finite |deg| <= 181.
func nanodegrees(deg float64) int64 {
	// deg*1e9 rounds once: |r| < 2^38, so r is within 2^-16 of the exact
	// product. When r's fraction is further than that from one half, the
	// exact product rounds as r does.
	r := deg * 1e9
	if f := math.Abs(r - math.Trunc(r)); math.Abs(f-0.5) > 1.0/(1<<14) {
		return int64(math.Round(r))
	}
	// Near a tie (1/1024 degrees is exactly 976,562.5 nanodegrees): round
	// the exact product, which has at most 53+30 significant bits.
	x := new(big.Float).SetPrec(128).SetFloat64(deg)
	x.Mul(x, new(big.Float).SetPrec(128).SetInt64(1_000_000_000))
	n, _ := x.Int64() // truncated toward zero
	frac := new(big.Float).SetPrec(128).Sub(x, new(big.Float).SetPrec(128).SetInt64(n))
	if frac.Abs(frac).Cmp(big.NewFloat(0.5)) >= 0 {
		if deg < 0 {
			return n - 1
		}
		return n + 1
	}
	return n
}
