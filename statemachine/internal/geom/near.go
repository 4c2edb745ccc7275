package geom

import "math"

// LeafDistances estimates the distances from a center to leaf cells, for
// sizing a nearest query's first cap: no more than a guess, since the
// query's caps decide what matches.
type LeafDistances struct {
	center r3Vec
	dec    leafDecoder
}

type r3Vec struct{ x, y, z float64 }

// NewLeafDistances prepares estimates of distances from (latNano, lonNano).
func NewLeafDistances(latNano, lonNano int64) LeafDistances {
	c := pointFromNano(latNano, lonNano)
	return LeafDistances{center: r3Vec{c.X, c.Y, c.Z}}
}

// AppendChord2 appends, for each leaf, the squared chord from the center
// to the leaf's approximate point (approxLeafPoint), which orders leaves
// by distance as MM does; MM converts the one a caller picks.
func (l *LeafDistances) AppendChord2(dst []float64, leaves []uint64) []float64 {
	for _, leaf := range leaves {
		p := l.dec.point(leaf)
		inv := 1 / math.Sqrt(p.X*p.X+p.Y*p.Y+p.Z*p.Z)
		dx, dy, dz := p.X*inv-l.center.x, p.Y*inv-l.center.y, p.Z*inv-l.center.z
		dst = append(dst, dx*dx+dy*dy+dz*dz)
	}
	return dst
}

// MM returns an upper bound of the distance in millimetres from the
// center to the points of a leaf whose AppendChord2 value is chord2: the
// distance to its approximate point plus the slack of that approximation.
func (l *LeafDistances) MM(chord2 float64) uint64 {
	const slackMM = prefilterSlack*earthRadiusMM + 1
	angle := 2 * math.Asin(min(math.Sqrt(max(chord2, 0))/2, 1))
	return uint64(angle*earthRadiusMM + slackMM)
}
