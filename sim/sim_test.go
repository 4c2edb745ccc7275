package sim

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/geoevent/geoevent/core"
)

// testTicks is the length of the runs of go test (20 s simulated): with
// the quiet period at the end (about 5-6 s for one replica), some 14 s of
// faults. clusterTicks is longer: a cluster's quiet period (up to 12 s)
// allows for elections.
const (
	testTicks    = 20000
	clusterTicks = 30000
)

// runSeeds runs seeds first..first+count-1 with the options; each must pass
// every checker.
func runSeeds(t *testing.T, first int64, count, ticks int, opts Options) {
	t.Helper()
	start := time.Now()
	ops, crashes, parts, leaders := 0, 0, 0, 0
	for seed := first; seed < first+int64(count); seed++ {
		r := Run(seed, ticks, opts)
		ops += r.Stats.Ops
		crashes += r.Stats.Crashes
		parts += r.Stats.Partitions
		leaders += r.Stats.LeaderChanges
		if r.Failed() {
			t.Errorf("seed %d failed:\n%s\nconfig: %s\nreplay: %s", seed, r.Failure, r.Stats.Config, r.ReplayCommand())
		}
		if len(r.Stats.Unchecked) > 0 {
			t.Errorf("seed %d: linearizability of entities %v not decided within the budget", seed, r.Stats.Unchecked)
		}
	}
	t.Logf("%d seeds of %d ticks (replicas %d, faults %s): %d operations, %d crashes, %d partitions, %d leaders, in %v",
		count, ticks, opts.Replicas, opts.Faults, ops, crashes, parts, leaders, time.Since(start))
}

// seedCount is n, or n/6 (at least 2) with -short.
func seedCount(n int) int {
	if testing.Short() {
		return max(2, n/6)
	}
	return n
}

// TestSeeds runs a bounded set of seeds with one replica; each must pass
// every checker. The seed tests run in parallel with each other (each run
// is one goroutine of its own).
func TestSeeds(t *testing.T) {
	t.Parallel()
	runSeeds(t, 1, seedCount(48), testTicks, Options{Replicas: 1})
}

// TestSeedsThreeReplicas runs seeds with a cluster of three and every
// fault.
func TestSeedsThreeReplicas(t *testing.T) {
	t.Parallel()
	runSeeds(t, 1001, seedCount(72), clusterTicks, Options{Replicas: 3})
}

// TestSeedsFiveReplicas runs seeds with a cluster of five and every fault.
func TestSeedsFiveReplicas(t *testing.T) {
	t.Parallel()
	runSeeds(t, 2001, seedCount(40), clusterTicks, Options{Replicas: 5})
}

// TestFaultProfiles runs a few seeds of each profile, with one replica and
// with three, and checks that a profile injects only its faults.
func TestFaultProfiles(t *testing.T) {
	t.Parallel()
	for _, replicas := range []int{1, 3} {
		for _, f := range []Faults{FaultsNone, FaultsNetwork, FaultsPartition, FaultsCrash} {
			t.Run(fmt.Sprintf("%d/%s", replicas, f), func(t *testing.T) {
				for seed := int64(3001); seed < 3001+int64(seedCount(3)); seed++ {
					r := Run(seed, clusterTicks, Options{Replicas: replicas, Faults: f})
					if r.Failed() {
						t.Errorf("seed %d failed:\n%s\nconfig: %s\nreplay: %s", seed, r.Failure, r.Stats.Config, r.ReplayCommand())
					}
					st := r.Stats
					if !f.crashes() && st.Crashes+st.DamagedLogs > 0 || !f.network() && st.Drops > 0 || !f.partitions() && st.Partitions > 0 {
						t.Errorf("seed %d, profile %s: %d crashes, %d damaged logs, %d drops, %d partitions", seed, f, st.Crashes, st.DamagedLogs, st.Drops, st.Partitions)
					}
				}
			})
		}
	}
}

// TestDeterminism: the same seed gives the same run, byte for byte (and
// logging it changes nothing); another seed gives another run; a run
// replayed with the flags of its replay command is the same run.
func TestDeterminism(t *testing.T) {
	for _, tc := range []struct {
		seed     int64
		replicas int
	}{{3, 1}, {77, 1}, {1 << 40, 1}, {5, 3}, {6, 5}} {
		a := Run(tc.seed, 6000, Options{Replicas: tc.replicas})
		var log bytes.Buffer
		b := Run(tc.seed, 6000, Options{Replicas: tc.replicas, Log: &log})
		if a.Digest != b.Digest || a.Failure != b.Failure || a.Stats.Ops != b.Stats.Ops {
			t.Fatalf("seed %d: two runs differ: %s vs %s", tc.seed, a.Digest, b.Digest)
		}
		if log.Len() == 0 || !strings.Contains(log.String(), "invokes op 1:") {
			t.Fatalf("seed %d: the verbose log is empty", tc.seed)
		}
		if c := Run(tc.seed+1, 6000, Options{Replicas: tc.replicas}); c.Digest == a.Digest {
			t.Fatalf("seeds %d and %d give the same digest", tc.seed, tc.seed+1)
		}
	}
	// The replica count and the profile are drawn from the seed when not
	// given; the replay command names them, and gives the same run.
	for seed := int64(10); seed < 14; seed++ {
		a := Run(seed, 3000, Options{})
		for _, flag := range []string{fmt.Sprintf("--replicas %d", a.Replicas), "--faults all", "--seed " + fmt.Sprint(seed)} {
			if !strings.Contains(a.ReplayCommand(), flag) {
				t.Fatalf("the replay command %q lacks %s", a.ReplayCommand(), flag)
			}
		}
		if b := Run(seed, int(a.Ticks), Options{Replicas: a.Replicas, Faults: a.Faults}); a.Digest != b.Digest {
			t.Fatalf("seed %d with --replicas %d differs from the run that drew it", seed, a.Replicas)
		}
	}
}

// checkerFailure reports whether a failure comes from the checkers of the
// clients' history (not from the run itself or the disk).
func checkerFailure(f string) bool {
	for _, p := range []string{"lost write:", "linearizability:", "observed:", "digest:"} {
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
		w := newWorld(seed, 20000, Options{Replicas: 1, BugForgetSyncedOnCrash: true})
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
		faults := FaultsAll
		if seed%2 == 0 {
			faults = FaultsNone
		}
		w := newWorld(seed, 10000, Options{Replicas: 1, Faults: faults})
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
		// atLeast is how many of 16 seeds must catch it. A radius
		// query's missing entity is a correct reply whenever a write to
		// that entity runs beside the query, and in 8 of 16 seeds one
		// does (the other cases are caught in all 16); 4 of those 16
		// seeds draw no radius query to mutate.
		atLeast int
	}{
		{"history misses its newest event", func(w *world, op *opRec, reply any) (any, bool) {
			r, ok := reply.(*core.QueryResult)
			if !ok || op.kind != core.OpEntityHistory || len(r.Events) < 2 || r.HasMore {
				return nil, false
			}
			c := *r
			c.Events = c.Events[:len(c.Events)-1]
			return &c, true
		}, 14},
		{"get latest finds nothing", func(w *world, op *opRec, reply any) (any, bool) {
			r, ok := reply.(*core.LatestResult)
			if !ok || !r.Found {
				return nil, false
			}
			return &core.LatestResult{}, true
		}, 14},
		{"latest batch shows an older event", func(w *world, op *opRec, reply any) (any, bool) {
			r, ok := reply.(*core.LatestResults)
			if !ok || len(*r) == 0 || !(*r)[0].Found {
				return nil, false
			}
			c := append(core.LatestResults(nil), *r...)
			c[0].Event.TimestampNS--
			return &c, true
		}, 14},
		{"ttl set reports an expiry an hour late", func(w *world, op *opRec, reply any) (any, bool) {
			r, ok := reply.(*core.TTLSetReply)
			if !ok || r.ExpiresAtNS == 0 {
				return nil, false
			}
			return &core.TTLSetReply{ExpiresAtNS: r.ExpiresAtNS + 3600_000_000_000}, true
		}, 14},
		{"radius query misses an entity", func(w *world, op *opRec, reply any) (any, bool) {
			r, ok := reply.(*core.QueryResult)
			if !ok || op.kind != core.OpQueryRadius || len(r.Events) == 0 || r.HasMore || op.paged {
				return nil, false
			}
			c := *r
			c.Events, c.DistancesMM = c.Events[1:], c.DistancesMM[1:]
			return &c, true
		}, 6},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// In some seeds the mutated reply is one the checkers cannot
			// tell from a correct one (see atLeast).
			if n := mutationCaught(t, 16, once(tc.mutate)); n < tc.atLeast {
				t.Fatalf("caught in %d of 16 seeds, want %d", n, tc.atLeast)
			}
		})
	}
}

// TestReplicaNetwork checks the links between replicas on their own: delay,
// one-way cuts, frames to a crashed replica, delivery to the incarnation
// that is up, the payload overwritten after delivery, and the shapes of
// the partitions.
func TestReplicaNetwork(t *testing.T) {
	w := newWorld(1, 0, Options{Replicas: 3, Faults: FaultsNone})
	for _, n := range w.nodes {
		w.start(n)
	}
	type got struct {
		from, to int
		req      uint32
		at       int64
		epoch    int
	}
	var delivered []got
	var lastPayload []byte
	w.onPeer = func(from, to int, h core.Header, payload []byte) bool {
		if string(payload) != "raft" {
			t.Fatalf("payload %q", payload)
		}
		lastPayload = payload
		delivered = append(delivered, got{from, to, h.Request, w.now, w.nodes[to].epoch})
		return true
	}
	send := func(from, to int, req uint32) {
		w.sendPeer(w.nodes[from], uint32(to), core.AppendFrame(nil, core.Header{ClientID: uint64(from), Request: req, Type: core.MsgReplicaFirst}, []byte("raft")))
	}
	runUntil := func(tick int64) {
		for ; w.now < tick; w.now++ {
			for len(w.events) > 0 && w.events[0].at <= w.now {
				e := w.popEvent()
				if e.kind == evToPeer || e.kind == evRestart {
					w.handle(e)
				}
			}
		}
	}
	send(0, 1, 1)
	runUntil(w.cfg.peerMaxDelay + 1)
	if len(delivered) != 1 || delivered[0].req != 1 || delivered[0].at < w.cfg.peerMinDelay {
		t.Fatalf("delivered %+v", delivered)
	}
	if string(lastPayload) == "raft" {
		t.Fatalf("the payload was not overwritten after delivery")
	}

	// A one-way cut: 0 -> 1 is lost, 1 -> 0 arrives.
	w.net.cut[0][1] = true
	send(0, 1, 2)
	send(1, 0, 3)
	runUntil(w.now + w.cfg.peerMaxDelay + 1)
	if len(delivered) != 2 || delivered[1].req != 3 {
		t.Fatalf("with 0->1 cut: delivered %+v", delivered)
	}
	w.healPartition()

	// A frame to a crashed replica is lost; one that arrives after the
	// restart goes to the new incarnation.
	w.cfg.downMin, w.cfg.downMax = w.cfg.peerMaxDelay+2, w.cfg.peerMaxDelay+2
	send(0, 2, 4)
	w.crash(w.nodes[2])
	runUntil(w.now + w.cfg.peerMaxDelay + 1)
	if len(delivered) != 2 || w.nodes[2].up {
		t.Fatalf("to a crashed replica: delivered %+v, up %v", delivered, w.nodes[2].up)
	}
	runUntil(w.now + 3)
	if !w.nodes[2].up {
		t.Fatalf("replica 2 did not restart")
	}
	w.cfg.downMin, w.cfg.downMax = 1, 1
	w.cfg.peerMinDelay, w.cfg.peerMaxDelay = 5, 5
	send(0, 2, 5)
	w.crash(w.nodes[2])
	runUntil(w.now + 6)
	if len(delivered) != 3 || delivered[2].req != 5 || delivered[2].epoch != 3 {
		t.Fatalf("to a restarted replica: delivered %+v", delivered)
	}

	// A frame that names another sender fails the run.
	w.sendPeer(w.nodes[0], 1, core.AppendFrame(nil, core.Header{ClientID: 2, Type: core.MsgReplicaFirst}, nil))
	if !strings.Contains(w.failure, "names replica 2 as its sender") {
		t.Fatalf("failure %q", w.failure)
	}
	w.failure = ""

	// The partitions' shapes.
	cutCount := func() (in, out []int) {
		in, out = make([]int, 3), make([]int, 3)
		for a := range 3 {
			for b := range 3 {
				if w.net.cut[a][b] {
					out[a]++
					in[b]++
				}
			}
		}
		return in, out
	}
	// Replica 0 leads (with the highest term, or the lowest index among
	// equals): it is the one an isolated, deaf or mute leader cuts off.
	seen := map[string]bool{}
	for i := 0; i < 200; i++ {
		w.startPartition()
		in, out := cutCount()
		shape := fmt.Sprint(in, out)
		for a := range 3 {
			if w.net.cut[a][a] {
				t.Fatalf("replica %d cut from itself", a)
			}
		}
		seen[shape] = true
		if w.net.partUntil < w.now+w.cfg.partMin || w.net.partUntil > w.now+w.cfg.partMax {
			t.Fatalf("partition until %d at %d", w.net.partUntil, w.now)
		}
		w.healPartition()
		if in, out := cutCount(); fmt.Sprint(in, out) != "[0 0 0] [0 0 0]" {
			t.Fatalf("healing left cuts %v %v", in, out)
		}
	}
	// Isolated (or split off), deaf, mute.
	for _, shape := range []string{"[2 1 1] [2 1 1]", "[2 0 0] [0 1 1]", "[0 1 1] [2 0 0]"} {
		if !seen[shape] {
			t.Errorf("never saw the partition %s", shape)
		}
	}
}

// TestDigestCheckerCatchesDivergence: a replica whose state is not what it
// was (a stand-in: its digest is changed as the checker notes it) fails the
// run. A restarted incarnation is compared with the state it had when it
// saved the snapshot it starts on (or with the empty state).
func TestDigestCheckerCatchesDivergence(t *testing.T) {
	flip := func(d [32]byte) [32]byte { d[0] ^= 1; return d }
	fromSnapshot := 0
	for seed := int64(1); seed <= 4; seed++ {
		w := newWorld(seed, 10000, Options{Replicas: 1, Faults: FaultsCrash})
		w.cfg.crashPerTick = 1.0 / 500 // faults stop for the last half of the run
		w.nodes[0].cfg.SnapshotEvery = 7
		w.mutateDigest = func(n *node, applied uint64, d [32]byte) [32]byte {
			if n.epoch > 1 {
				return flip(d)
			}
			return d
		}
		r := w.result()
		if r.Stats.Crashes == 0 {
			t.Fatalf("seed %d: no crash", seed)
		}
		if !strings.HasPrefix(r.Failure, "digest:") {
			t.Fatalf("seed %d, one replica restarted with another state: failure %q", seed, r.Failure)
		}
		if !strings.Contains(r.Failure, "through index 0;") {
			fromSnapshot++
		}
	}
	if fromSnapshot == 0 {
		t.Fatalf("no restart from a snapshot was caught")
	}
}

// TestDigestCheckerComparesReplicas: in a cluster of three, a replica whose
// state differs from the others' fails the run.
func TestDigestCheckerComparesReplicas(t *testing.T) {
	flip := func(d [32]byte) [32]byte { d[0] ^= 1; return d }
	for seed := int64(1); seed <= 4; seed++ {
		w := newWorld(seed, 10000, Options{Replicas: 3})
		// From its fifth entry on: every run gets that far, and whatever
		// index the others note it at, replica 1 differs.
		w.mutateDigest = func(n *node, applied uint64, d [32]byte) [32]byte {
			if n.idx == 1 && applied >= 5 {
				return flip(d)
			}
			return d
		}
		if r := w.result(); !strings.HasPrefix(r.Failure, "digest:") {
			t.Fatalf("seed %d, replica 1 diverged: failure %q", seed, r.Failure)
		}
	}
}

// damageScenario scripts, in a cluster of three without random faults and
// without snapshots, the case the Repairing flag exists for. Once there is
// a leader L, follower C crashes and stays down while L and follower B
// commit entries C lacks; then B crashes and the first of those entries in
// its log is damaged (its restart cuts the log before it), and L crashes
// too. B comes back at once, C a little later, L long after: until L is
// back, B and C are a majority that does not hold those entries. A replica
// that honours Repairing lets no leader be elected until L returns; one
// that ignores it (BugDamageWithoutRepairing) elects a leader that lacks
// acknowledged writes. It returns the world, run, whether the scenario was
// set up, and whether a leader was elected while L was down.
func damageScenario(t *testing.T, seed int64, bug bool) (w *world, r Result, setUp, elected bool) {
	t.Helper()
	w = newWorld(seed, clusterTicks, Options{Replicas: 3, Faults: FaultsNone, BugDamageWithoutRepairing: bug})
	for _, n := range w.nodes {
		n.cfg.SnapshotEvery, n.cfg.SnapshotMinBytes = 0, 1<<40
	}
	crashFor := func(n *node, down int64) {
		lo, hi := w.cfg.downMin, w.cfg.downMax
		w.cfg.downMin, w.cfg.downMax = down, down
		w.crash(n)
		w.cfg.downMin, w.cfg.downMax = lo, hi
	}
	const lagFor = 2500 // ticks during which L and B commit what C lacks
	step, t1, damaged := 0, int64(0), uint64(0)
	var l, b, c *node
	w.onTick = func() {
		switch {
		case step == 0 && w.now >= 2000 && w.leader() >= 0:
			i := w.leader()
			l, b, c = w.nodes[i], w.nodes[(i+1)%3], w.nodes[(i+2)%3]
			crashFor(c, lagFor+200)
			damaged = c.disk.lastDurable() + 1
			t1, step = w.now, 1
			w.tracef("test: replica %d (leader %d) crashed; entries from %d on are on %d and %d only", c.idx, l.idx, damaged, l.idx, b.idx)
		case step == 1 && w.now == t1+lagFor:
			step = 2
			if !l.up || !b.up || w.leader() != l.idx || l.r.Status().Commit <= damaged || b.disk.lastDurable() < damaged {
				w.tracef("test: scenario not set up")
				return
			}
			step = 3
			crashFor(b, 100)
			b.disk.damageLog(damaged)
			w.damagedLogs++
			crashFor(l, 2000)
			w.tracef("test: replica %d's log damaged at %d; leader %d down", b.idx, damaged, l.idx)
		case step == 3 && !l.up && w.leader() >= 0:
			elected = true
		}
	}
	r = w.result()
	return w, r, step == 3, elected
}

// TestDamagedLogRepairing: a damaged minority costs no acknowledged write
// when the replica honours Repairing, and the checkers catch one that does
// not (the disk cuts the log but leaves the flag unset). The history
// checker of durability must see the lost writes on its own, whatever the
// run reported first (it may be the disk's check that a returning replica
// was told to overwrite entries it had committed).
func TestDamagedLogRepairing(t *testing.T) {
	for seed := int64(1); seed <= 4; seed++ {
		w, r, ok, elected := damageScenario(t, seed, false)
		if !ok {
			t.Fatalf("seed %d: the scenario was not set up", seed)
		}
		if r.Failed() {
			t.Fatalf("seed %d, a damaged follower that repairs: %s", seed, r.Failure)
		}
		if elected || r.Stats.DamagedLogs != 1 || w.leaderChanges < 2 {
			t.Fatalf("seed %d: leader elected without the old leader: %v; %d damaged logs, %d leaders", seed, elected, r.Stats.DamagedLogs, w.leaderChanges)
		}

		w, r, ok, elected = damageScenario(t, seed, true)
		if !ok || !elected {
			t.Fatalf("seed %d, with the bug: scenario set up %v, a leader elected without the old one %v", seed, ok, elected)
		}
		if !r.Failed() {
			t.Fatalf("seed %d: a damaged replica that ignored Repairing was not caught", seed)
		}
		msg := w.checkMustSee()
		if !strings.HasPrefix(msg, "lost write:") {
			t.Fatalf("seed %d: the run failed with %q, but the durability checker saw no lost write (%q)", seed, r.Failure, msg)
		}
		t.Logf("seed %d with the bug: %.160s...", seed, r.Failure)
	}
}

// TestDamagedLogsFaultProfile: the crash profile damages logs and history
// checkpoints in clusters of three and five, never more than a minority at
// a time, and every run passes (a replica whose history is damaged
// rebuilds); a cluster of one never gets the faults.
func TestDamagedLogsFaultProfile(t *testing.T) {
	t.Parallel()
	clusterHistories := 0 // damaged histories in the clusters of 3 and 5
	for _, replicas := range []int{1, 3, 5} {
		damaged, histories, rebuilds := 0, 0, 0
		for seed := int64(4001); seed < 4001+12; seed++ {
			w := newWorld(seed, clusterTicks, Options{Replicas: replicas, Faults: FaultsCrash})
			inner := w.onTick
			w.onTick = func() {
				if inner != nil {
					inner()
				}
				k := 0
				for _, n := range w.nodes {
					if n.disk.damagedOrRepairing() {
						k++
					}
				}
				if k > (replicas-1)/2 {
					w.fail("test: %d of %d replicas damaged or repairing", k, replicas)
				}
			}
			r := w.result()
			if r.Failed() {
				t.Errorf("seed %d failed:\n%s\nconfig: %s\nreplay: %s", seed, r.Failure, r.Stats.Config, r.ReplayCommand())
			}
			damaged += r.Stats.DamagedLogs
			histories += r.Stats.DamagedHistories
			rebuilds += r.Stats.Rebuilds
		}
		switch {
		case replicas == 1 && damaged+histories > 0:
			t.Errorf("a cluster of one got %d damaged logs and %d damaged histories", damaged, histories)
		case replicas > 1 && (damaged == 0 || rebuilds != histories):
			t.Errorf("%d replicas: %d damaged logs, %d damaged histories and %d rebuilds in %d seeds", replicas, damaged, histories, rebuilds, seedCount(12))
		}
		if replicas > 1 {
			clusterHistories += histories
		}
		t.Logf("%d replicas: %d damaged logs, %d damaged histories, %d rebuilds", replicas, damaged, histories, rebuilds)
	}
	// A history is damaged only in a crash after the replica's first
	// snapshot, which the seeds of five replicas may not reach.
	if clusterHistories == 0 {
		t.Errorf("no damaged history in the clusters' %d seeds", 2*seedCount(12))
	}
}
