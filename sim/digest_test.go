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
		{1, 20000, 1, "all", "4dce8e029513ec171df1d01128841b7a706a511baa82f271e12cd85b73bdfe4b"},
		{2, 20000, 3, "all", "86b2e977d133f019736e8307b65e95aade203b130b0629e7138f0469434e5546"},
		{3, 20000, 3, "crash", "e0651aff29e11d630731f96fd92a2b7dee7b5483b67575c118c3cb4128c30c37"},
		{4, 20000, 5, "network", "3416125161fba6edbb12e653d754f60c25bbbcbb28c0482e643cb01883d1569d"},
		{5, 20000, 3, "partition", "83f1cb7564c139c6cde5256f5491f19e5f13e2f1dba8323afc73e597c7edfeaf"},
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
