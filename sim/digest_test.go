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
		{1, 20000, 1, "all", "4a1b9840e345c3bd3f57e12fad795a508c2945617fdc2a6f0c2947b6aa11a047"},
		{2, 20000, 3, "all", "e884bf2d1c250f127a9ad649fa618d35cc0339017ab1b02751fdff98a17d42b3"},
		{3, 20000, 3, "crash", "43c25a59623aa769ee4955e39151efa41134ada76fc4d3a4b05c1597134568c1"},
		{4, 20000, 5, "network", "8817b72b5ac39199d7be59711286c427acc1955e81bafe9e50d649c38b0b172b"},
		{5, 20000, 3, "partition", "a8ec4bf3f2775496decdccf8b20ab13cde41e193e45b49d3cc3a641c18413bcf"},
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
