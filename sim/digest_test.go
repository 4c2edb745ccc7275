package sim

import (
	"testing"

	"github.com/geoevent/geoevent/core"
)

// TestFixedSeedDigests pins, as go run ./cmd/simulator --seed N --ticks T
// --replicas R --faults F prints them, the digests of a few fixed runs. A run's digest
// hashes every event of the run, so any change in what the cluster sends,
// logs or answers (the wire and log encodings, the replica's choices, the
// state machine's replies) changes it: a refactor that means to change
// none of them keeps this table as it is.
func TestFixedSeedDigests(t *testing.T) {
	for _, c := range []struct {
		seed     int64
		ticks    int
		replicas int
		faults   string
		digest   string
	}{
		{1, 20000, 1, "all", "ad9f2e22ee9bbe7b8d2a5f26fbf09e997ab521cb15e31c3fedaadd9f026f8760"},
		{2, 20000, 3, "all", "b09ee6fbd46fb917209c6d96a516a17b8e30fbe74384d7b2a6904cf69ad6be27"},
		{3, 20000, 3, "crash", "5cdae66866ceed1df11d88997d04eeb29376700d617e72ebdd55f4d35d2c70ca"},
		{4, 20000, 5, "network", "e5ed15bfa697cff32627eb4dcf8b5e464592502cf2e18fcc926f9f04fb02b2be"},
		{5, 20000, 3, "partition", "aef3274fd504ca1dffc7caf852ec4a665d8bc376d7dfd7d9cb6aa1fa7064bb33"},
	} {
		faults, err := ParseFaults(c.faults)
		if err != nil {
			t.Fatal(err)
		}
		r := Run(c.seed, c.ticks, Options{Replicas: c.replicas, Faults: faults})
		if r.Failed() {
			t.Fatalf("seed %d: %s", c.seed, r.Failure)
		}
		if r.Digest != c.digest {
			t.Errorf("seed %d (%d ticks, %d replicas, faults %s): digest %s, want %s", c.seed, c.ticks, c.replicas, c.faults, r.Digest, c.digest)
		}
	}
}

// TestWorkloadCoversEveryOperation: the workload draws every operation of
// core's table, so a new operation is simulated (and checked) once it has
// its weight here.
func TestWorkloadCoversEveryOperation(t *testing.T) {
	drawn := map[core.Operation]bool{}
	for _, ow := range opWeights {
		if ow.weight > 0 {
			drawn[ow.kind] = true
		}
	}
	for op := core.OpInvalid + 1; op.Valid(); op++ {
		if !drawn[op] {
			t.Errorf("the workload never draws %s", op)
		}
	}
}
