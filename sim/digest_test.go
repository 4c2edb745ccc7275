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
		{1, 20000, 1, "all", "dde34f8098c965a939acc84d19d57526a5cda902b45056e4237df82964f1387b"},
		{2, 20000, 3, "all", "9e9cb54ec6f0b2f461966139e54eeedc0891c1772763d863ab157dfff491913d"},
		{3, 20000, 3, "crash", "4c1ded6a06deea43f8432c82a60fb9dece36b95555667d296bd572413a7754ed"},
		{4, 20000, 5, "network", "dd2e5ad703270626c1660aa11cdeb645942717e69775931711332dc452aa8940"},
		{5, 20000, 3, "partition", "d827c3a3ed70937ce6310594b5c2146570f8757c10973d1268ba714ee04e6ac2"},
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
