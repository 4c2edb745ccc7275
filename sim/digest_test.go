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
		{1, 20000, 1, "all", "55f0a00b33dd824734efe8e89073865d1d793f48eb9047817195a0626c75413a"},
		{2, 20000, 3, "all", "6a6b148c31a8835eb54d2ed858020b4b579e0a3843dcb4515229f2d0dd19d5d9"},
		{3, 20000, 3, "crash", "8191622658d592ee9d423c8b80182351155cc09125920c6342ee86c1bc3a8b6d"},
		{4, 20000, 5, "network", "b8b86880f365a8746fd93ae1d82f9dc0a5313c77e58786bc81f882122cde6a6a"},
		{5, 20000, 3, "partition", "0ce2bbe014f5dda8f291c0e0b5f91552fe9785a5888538bf4356c2c3040c09bb"},
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
