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
		{1, 20000, 1, "all", "f6d20e257f0decd4124f93146fd5c91a38e86bc1399f1e0c119baf881adbcf84"},
		{2, 20000, 3, "all", "2a9ef81ad36f009958a57875bfa88dbb6bcb6137d601b586308aead31f7e54c2"},
		{3, 20000, 3, "crash", "4f5b826d6a2d38a1afbdaf9bdeba2f4a3463dc7fef29fcadbc14965aca6f0d39"},
		{4, 20000, 5, "network", "9aec99e65c2683ce0273d21356bb0823177ef4a4fa0359761d8d57dc2f475aae"},
		{5, 20000, 3, "partition", "a722e70299c555ca8db3b56c1c7edd74d87fe4473f11e2133d1210fdd77036f7"},
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
