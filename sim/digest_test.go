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
		{1, 20000, 1, "all", "27f3281f929d540c47af9874461ddd6b96e4a8557a27ca2d540ef2e6c3e87141"},
		{2, 20000, 3, "all", "54ee126f1765588fd4fe06ab711db907a564f6461eb533bf0b2cf61fc0f1654c"},
		{3, 20000, 3, "crash", "01c0a485b6c8f1cffd3f376b709e7a18f1a85df5a7cdeb5fc9334c2ab8bd20d4"},
		{4, 20000, 5, "network", "3c85236e0d7fcdc717190cc8f638f8ab95342e0a547ad7fbde221b13f548c212"},
		{5, 20000, 3, "partition", "d1de0737b8af13dacaffd463c7ca2f24212724e98a2f81f2c6cfe5d30638ef62"},
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
