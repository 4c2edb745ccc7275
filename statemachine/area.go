package statemachine

import "github.com/geoevent/geoevent/core"

// FenceArea returns the exact test that judges def on apply: whether an
// entity at (lat, lon) nanodegrees in group is inside the fence (its
// group filter included). The errors are put_fence's. The HTTP gateway's
// position stream filters by it, away from the loop: the test reads
// nothing but def, and each call has its own.
func FenceArea(def *core.Fence) (contains func(latNano, lonNano int64, group uint64) bool, err error) {
	f, err := checkFence(def)
	if err != nil {
		return nil, err
	}
	return f.contains, nil
}
