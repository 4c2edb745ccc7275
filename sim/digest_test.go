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
		{1, 20000, 1, "all", "6a47b595609af3dc4242f6ccf9c7a05e9eb2e767781bf8021a3f3906fb3096c1"},
		{2, 20000, 3, "all", "a500a2008b7abbac1bb3efdfb7c68d67cfcb124271a19ee8ee80a4a0d02f6f03"},
		{3, 20000, 3, "crash", "7c5a1991131959e7e30c57c71120a9965800bb29b623f22f173f7772b2206676"},
		{4, 20000, 5, "network", "56216f26067e8e6c1890c0d03820a8d6591ab04dafac174e84f6491b3a939c03"},
		{5, 20000, 3, "partition", "37b7302f14b2ef46b584a70517ab5913cd381acb20ead1ff58338c276a3dc537"},
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
