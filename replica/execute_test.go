package replica

import (
	"testing"

	"github.com/geoevent/geoevent/core"
)

// TestEveryOperationExecutes: every operation of core's table has its
// executor, and an executor refuses a request of another type.
func TestEveryOperationExecutes(t *testing.T) {
	for _, op := range core.Operations() {
		if int(op) >= len(executors) || executors[op] == nil {
			t.Errorf("%s has no executor", op)
		}
	}
	r := &Replica{}
	if _, err := r.execute(core.OpQueryRadius, 1, &core.PolygonQuery{}); err == nil {
		t.Fatal("a polygon query ran as a radius query")
	}
	if _, err := r.execute(core.OpQueryRadius, 1, nil); err == nil {
		t.Fatal("a nil radius query ran")
	}
	if _, err := r.execute(core.OpQueryNearest+1, 1, nil); err == nil {
		t.Fatal("an unknown operation ran")
	}
}
