package sim

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/geoevent/geoevent/core"
)

// testTicks is the length of the runs of go test (20 s simulated): with
// the quiet period at the end (about 5-6 s), some 14 s of faults.
const testTicks = 20000

// TestSeeds runs a bounded set of seeds; each must pass every checker.
// (One after the other: the state machine's scan writes a package-level
// sink, which the race detector reports when replicas run in parallel.)
func TestSeeds(t *testing.T) {
	seeds := 48
	if testing.Short() {
		seeds = 8
	}
	start := time.Now()
	ops, crashes := 0, 0
	for seed := int64(1); seed <= int64(seeds); seed++ {
		r := Run(seed, testTicks, Options{})
		ops += r.Stats.Ops
		crashes += r.Stats.Crashes
		if r.Failed() {
			t.Errorf("seed %d failed:\n%s\nconfig: %s\nreplay: %s", seed, r.Failure, r.Stats.Config, r.ReplayCommand())
		}
		if len(r.Stats.Unchecked) > 0 {
			t.Errorf("seed %d: linearizability of entities %v not decided within the budget", seed, r.Stats.Unchecked)
		}
	}
	t.Logf("%d seeds of %d ticks: %d operations, %d crashes, in %v", seeds, testTicks, ops, crashes, time.Since(start))
}

// TestDeterminism: the same seed gives the same run, byte for byte (and
// logging it changes nothing); another seed gives another run.
func TestDeterminism(t *testing.T) {
	for _, seed := range []int64{3, 77, 1 << 40} {
		a := Run(seed, 6000, Options{})
		var log bytes.Buffer
		b := Run(seed, 6000, Options{Log: &log})
		if a.Digest != b.Digest || a.Failure != b.Failure || a.Stats.Ops != b.Stats.Ops {
			t.Fatalf("seed %d: two runs differ: %s vs %s", seed, a.Digest, b.Digest)
		}
		if log.Len() == 0 || !strings.Contains(log.String(), "invokes op 1:") {
			t.Fatalf("seed %d: the verbose log is empty", seed)
		}
		if c := Run(seed+1, 6000, Options{}); c.Digest == a.Digest {
			t.Fatalf("seeds %d and %d give the same digest", seed, seed+1)
		}
	}
}

// checkerFailure reports whether a failure comes from the checkers of the
// clients' history (not from the run itself or the disk).
func checkerFailure(f string) bool {
	for _, p := range []string{"lost write:", "linearizability:", "observed:"} {
		if strings.HasPrefix(f, p) {
			return true
		}
	}
	return false
}

// TestForgottenSyncedWritesAreCaught breaks the disk's fault model on
// purpose: a crash forgets synced entries, so acknowledged writes vanish.
// The history checkers must see it, and porcupine alone must too.
func TestForgottenSyncedWritesAreCaught(t *testing.T) {
	caught, linearizability := 0, 0
	for seed := int64(1); seed <= 10; seed++ {
		w := newWorld(seed, 20000, Options{BugForgetSyncedOnCrash: true})
		r := w.result()
		if !r.Failed() {
			continue
		}
		if !checkerFailure(r.Failure) {
			t.Fatalf("seed %d failed outside the history checkers: %s", seed, r.Failure)
		}
		caught++
		if msg := w.checkLinearizable(); strings.HasPrefix(msg, "linearizability:") {
			linearizability++
		}
	}
	if caught < 5 || linearizability < 5 {
		t.Fatalf("a disk that forgets synced writes failed %d of 10 seeds (porcupine alone: %d); want at least 5", caught, linearizability)
	}
}

// mutationCaught runs seeds with a reply mutated as the client records it
// (a stand-in for a replica bug) and reports how many runs the checkers
// failed.
func mutationCaught(t *testing.T, seeds int, newMutate func() func(w *world, op *opRec, code core.Code, reply any) any) (caught int) {
	t.Helper()
	for seed := int64(1); seed <= int64(seeds); seed++ {
		w := newWorld(seed, 10000, Options{NoFaults: seed%2 == 0})
		mutate := newMutate()
		w.mutate = func(op *opRec, code core.Code, reply any) any { return mutate(w, op, code, reply) }
		if r := w.result(); r.Failed() {
			if !checkerFailure(r.Failure) {
				t.Fatalf("seed %d failed outside the history checkers: %s", seed, r.Failure)
			}
			caught++
		}
	}
	return caught
}

// TestCheckersCatchMutatedReplies: replies that a buggy replica could give
// are caught.
func TestCheckersCatchMutatedReplies(t *testing.T) {
	once := func(f func(w *world, op *opRec, reply any) (any, bool)) func() func(w *world, op *opRec, code core.Code, reply any) any {
		return func() func(w *world, op *opRec, code core.Code, reply any) any {
			done := false
			return func(w *world, op *opRec, code core.Code, reply any) any {
				if done || code != 0 || op.callTick < 3000 {
					return reply
				}
				if r, ok := f(w, op, reply); ok {
					done = true
					w.tracef("test: mutated the reply of op %d", op.id)
					return r
				}
				return reply
			}
		}
	}
	cases := []struct {
		name   string
		mutate func(w *world, op *opRec, reply any) (any, bool)
	}{
		{"history misses its newest event", func(w *world, op *opRec, reply any) (any, bool) {
			r, ok := reply.(*core.QueryResult)
			if !ok || op.kind != core.OpEntityHistory || len(r.Events) < 2 || r.HasMore {
				return nil, false
			}
			c := *r
			c.Events = c.Events[:len(c.Events)-1]
			return &c, true
		}},
		{"get latest finds nothing", func(w *world, op *opRec, reply any) (any, bool) {
			r, ok := reply.(*core.LatestResult)
			if !ok || !r.Found {
				return nil, false
			}
			return &core.LatestResult{}, true
		}},
		{"latest batch shows an older event", func(w *world, op *opRec, reply any) (any, bool) {
			r, ok := reply.(*core.LatestResults)
			if !ok || len(*r) == 0 || !(*r)[0].Found {
				return nil, false
			}
			c := append(core.LatestResults(nil), *r...)
			c[0].Event.TimestampNS--
			return &c, true
		}},
		{"ttl set reports an expiry an hour late", func(w *world, op *opRec, reply any) (any, bool) {
			r, ok := reply.(*core.TTLSetReply)
			if !ok || r.ExpiresAtNS == 0 {
				return nil, false
			}
			return &core.TTLSetReply{ExpiresAtNS: r.ExpiresAtNS + 3600_000_000_000}, true
		}},
		{"radius query misses an entity", func(w *world, op *opRec, reply any) (any, bool) {
			r, ok := reply.(*core.QueryResult)
			if !ok || op.kind != core.OpQueryRadius || len(r.Events) == 0 || r.HasMore || op.paged {
				return nil, false
			}
			c := *r
			c.Events, c.DistancesMM = c.Events[1:], c.DistancesMM[1:]
			return &c, true
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if n := mutationCaught(t, 4, once(tc.mutate)); n < 3 {
				t.Fatalf("caught in %d of 4 seeds", n)
			}
		})
	}
}
