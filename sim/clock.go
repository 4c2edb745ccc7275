package sim

// Clock is one replica's clock (core.Clock): monotonic and realtime
// nanoseconds that advance with simulated time, tickNS per tick, at the
// replica's own rate.
//
// A clock runs DriftPPM parts per million fast (or slow, when negative)
// against simulated time, for both readings; each replica draws its own
// (within ±200 ppm at most), and its realtime starts at its own offset (up
// to 10 ms after the others), its monotonic clock at its own base. A
// drifting clock stays monotonic and never jumps; the checkers bound every
// operation's timestamp by the smallest and largest realtime of all clocks
// (world.realtimeBounds), so drift and offsets widen those bounds and need
// nothing else. A realtime clock that jumps back would also need the
// bounds to account for the jump.
type Clock struct {
	now      *int64 // the world's tick
	monoBase uint64
	realBase uint64
	DriftPPM int64
}

func (c *Clock) elapsedNS(tick int64) uint64 {
	ns := uint64(tick) * tickNS
	if c.DriftPPM != 0 {
		ns = uint64(int64(ns) + int64(ns)/1_000_000*c.DriftPPM)
	}
	return ns
}

// MonotonicNS is nanoseconds since an arbitrary start.
func (c *Clock) MonotonicNS() uint64 { return c.monoBase + c.elapsedNS(*c.now) }

// RealtimeNS is the simulated wall clock, nanoseconds since the Unix epoch.
func (c *Clock) RealtimeNS() uint64 { return c.realAt(*c.now) }

func (c *Clock) realAt(tick int64) uint64 { return c.realBase + c.elapsedNS(tick) }
