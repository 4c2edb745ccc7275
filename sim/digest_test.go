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
		{1, 20000, 1, "all", "7603ecd5a98953072a0465bdef46b6114fbbd48f448a792e5b9b4b24e31e2ab6"},
		{2, 20000, 3, "all", "4ee87b4682fc430a24a9eb1820d23570b5267252325e22f591d035bb0c2778d1"},
		{3, 20000, 3, "crash", "54d424bb217280099e9b63155d9e10e4ff20be03493086aa3d697b19c801e168"},
		{4, 20000, 5, "network", "97471401a5ef5d2c330a94ad22e7cdb10762a2c847e8a034f46748f16bd8c6de"},
		{5, 20000, 3, "partition", "d005bc14fc855aa6b479a666894ca24f2ddda57678b336d8d8db1e4d19935642"},
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
	for _, op := range core.Operations() {
		if !drawn[op] {
			t.Errorf("the workload never draws %s", op)
		}
	}
}
