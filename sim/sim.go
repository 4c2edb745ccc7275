package sim

import "fmt"

// Result is the outcome of one run.
type Result struct {
	Seed     int64
	Ticks    int64  // ticks run (at least what was asked; see MinTicks)
	Replicas int    // the cluster's size
	Faults   Faults // the fault profile
	// Failure describes the first problem found, or is "" when every
	// check passed.
	Failure string
	// Digest is a SHA-256 over every event of the run, in order: the
	// same seed and ticks give the same digest.
	Digest string
	Stats  Stats
}

// Stats counts what happened in a run.
type Stats struct {
	Ops, Unknown, Abandoned int // operations; writes of unknown outcome; reads dropped
	Crashes, Drops          int // replica crashes; connection drops
	DamagedLogs             int // crashes that damaged a record of the replica's log
	DamagedHistories        int // crashes that damaged the replica's history checkpoint
	Rebuilds                int // recoveries that found history damaged and rebuilt
	Partitions              int // partitions between replicas
	LeaderChanges           int // terms with a (new) leader seen
	PeerFrames, PeerLost    int // frames between replicas sent; lost (loss, cuts, crashes)
	PeerPeak                int // the most frames between replicas sent in one tick
	DigestNotes             int // state digests noted and compared
	// Unchecked lists the entities whose linearizability check ran out of
	// its step budget (see stepBudget) and so decided nothing.
	Unchecked []int
	Config    string
}

// Failed reports whether the run found a problem.
func (r Result) Failed() bool { return r.Failure != "" }

// ReplayCommand is the command line that replays the run.
func (r Result) ReplayCommand() string {
	return fmt.Sprintf("go run ./cmd/simulator --seed %d --ticks %d --replicas %d --faults %s", r.Seed, r.Ticks, r.Replicas, r.Faults)
}

// Run simulates one seed for ticks ticks (of 1 ms simulated time each) and
// checks the history. The whole run happens in the calling goroutine (the
// linearizability checker may use its own), reads no real clock and no
// global random source: the same seed, ticks and options give the same
// Result.
func Run(seed int64, ticks int, opts Options) Result {
	return newWorld(seed, int64(ticks), opts).result()
}

// result runs the world and checks its history.
func (w *world) result() Result {
	seed := w.seed
	w.run()
	if w.failure == "" {
		w.failure = w.check()
		if w.failure != "" {
			w.tracef("FAILURE %s", w.failure)
		}
	}
	for _, n := range w.nodes {
		n.disk.hist.close() // its goroutines end with it
	}
	res := Result{Seed: seed, Ticks: w.ticks, Replicas: w.cfg.replicas, Faults: w.cfg.faults, Failure: w.failure, Digest: w.digest()}
	res.Stats = Stats{Ops: len(w.hist.ops), Crashes: w.crashes, Drops: w.drops, Config: w.cfg.String(), Unchecked: w.unchecked,
		Partitions: w.partitionsCut, LeaderChanges: w.leaderChanges, PeerFrames: w.peerSent, PeerLost: w.peerLost, PeerPeak: w.peerPeak, DigestNotes: w.digestNotes,
		DamagedLogs: w.damagedLogs, DamagedHistories: w.damagedHistories, Rebuilds: w.rebuilds}
	for _, op := range w.hist.ops {
		switch op.status {
		case stUnknown:
			res.Stats.Unknown++
		case stAbandoned:
			res.Stats.Abandoned++
		}
	}
	return res
}
