package statemachine

import "github.com/geoevent/geoevent/core"

// FenceArea returns the exact test that judges def on apply: whether an
// entity at (lat, lon) nanodegrees in group is inside the fence (its
// group filter included), and the fence's covering: disjoint S2 cells
// (ids) that hold the leaf cell of every point the test accepts, as the
// fence index holds them. The errors are put_fence's. The HTTP gateway's
// position streams find their candidates by the covering and filter by
// the test, away from the loop: the test reads nothing but def, and each
// call has its own.
func FenceArea(def *core.Fence) (contains func(latNano, lonNano int64, group uint64) bool, cells []uint64, err error) {
	f, err := checkFence(def)
	if err != nil {
		return nil, nil, err
	}
	return f.contains, f.cells, nil
}
