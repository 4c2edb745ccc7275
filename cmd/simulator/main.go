// Command simulator runs GeoEvent's deterministic simulation (package sim).
//
//	simulator [--seed N] [--ticks T] [--replicas R] [--faults F] [--duration D]
//	          [--verbose] [--parallel P] [--visualize DIR]
//
// With --seed it runs that one seed; --verbose then prints every event of
// the run. Without --seed it runs random seeds until --duration is over
// (default 1m), printing progress every few seconds. On a failure it prints
// the seed, the failure and the command line that replays it (with every
// flag that shapes the run), and exits with status 1.
//
// --replicas is the cluster's size, 1, 3 or 5; without it each seed draws
// its own (1, 3 or 5 with chances 1/4, 1/2, 1/4), and the replay command
// names the one drawn (giving it changes nothing: the seed drew it).
//
// --faults is the fault profile (default all):
//
//	none       no faults: delays and disk latencies only
//	network    loss, duplication and reordering on every link, client connections dropped
//	partition  network, plus partitions between replicas (splits, one-way cuts, isolated leader)
//	crash      replica crashes (unsynced writes lost, torn log tails) and restarts;
//	           with 3 or 5 replicas, damaged log records and history checkpoints on a
//	           minority (repaired, or rebuilt, from peers)
//	all        all of the above, each at a rate drawn from the seed
//
// Every profile has message delays and clock drift, and every fault stops
// for the quiet period at the end of the run, when liveness is checked.
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/geoevent/geoevent/sim"
)

func main() {
	seed := flag.Int64("seed", -1, "run this seed only (default: random seeds until --duration is over)")
	ticks := flag.Int("ticks", 20000, "simulated ticks (milliseconds) per seed")
	duration := flag.Duration("duration", time.Minute, "how long to run random seeds")
	verbose := flag.Bool("verbose", false, "with --seed: print every event of the run; otherwise: a line per seed")
	parallel := flag.Int("parallel", runtime.NumCPU(), "seeds run at once (each seed runs in one goroutine)")
	visualize := flag.String("visualize", "", "write a porcupine visualization of a non-linearizable history to this directory")
	replicas := flag.Int("replicas", 0, "replicas in the cluster: 1, 3 or 5 (default: drawn from each seed)")
	faultsName := flag.String("faults", "all", "fault profile: none, network, partition, crash (with damaged logs and histories in a cluster) or all")
	flag.Parse()

	faults, err := sim.ParseFaults(*faultsName)
	if err != nil {
		fmt.Fprintln(os.Stderr, "simulator:", err)
		os.Exit(2)
	}
	switch *replicas {
	case 0, 1, 3, 5:
	default:
		fmt.Fprintf(os.Stderr, "simulator: --replicas %d: want 1, 3 or 5\n", *replicas)
		os.Exit(2)
	}
	opts := sim.Options{VisualizeDir: *visualize, Replicas: *replicas, Faults: faults}
	if *seed >= 0 {
		if *verbose {
			opts.Log = os.Stdout
		}
		start := time.Now()
		r := sim.Run(*seed, *ticks, opts)
		report(r, time.Since(start))
		if r.Failed() {
			os.Exit(1)
		}
		return
	}
	os.Exit(runRandom(*ticks, *duration, *parallel, *verbose, opts))
}

func report(r sim.Result, took time.Duration) {
	fmt.Printf("seed %d: %d replicas, faults %s, %d ticks, %d operations (%d unknown outcome, %d reads abandoned), %d crashes, %d damaged logs, %d damaged histories, %d connection drops, %d partitions, %d leaders, %d of %d replica frames lost, %d digests compared, %.2fs\n",
		r.Seed, r.Replicas, r.Faults, r.Ticks, r.Stats.Ops, r.Stats.Unknown, r.Stats.Abandoned, r.Stats.Crashes, r.Stats.DamagedLogs, r.Stats.DamagedHistories, r.Stats.Drops,
		r.Stats.Partitions, r.Stats.LeaderChanges, r.Stats.PeerLost, r.Stats.PeerFrames, r.Stats.DigestNotes, took.Seconds())
	fmt.Printf("  config: %s\n  digest: %s\n", r.Stats.Config, r.Digest)
	if len(r.Stats.Unchecked) > 0 {
		fmt.Printf("  warning: linearizability of entities %v was not decided within the checker's budget\n", r.Stats.Unchecked)
	}
	if r.Failed() {
		fmt.Printf("FAILED seed %d:\n  %s\nreplay: %s\n", r.Seed, r.Failure, r.ReplayCommand())
	} else {
		fmt.Println("  ok")
	}
}

func runRandom(ticks int, duration time.Duration, parallel int, verbose bool, opts sim.Options) int {
	start := time.Now()
	deadline := start.Add(duration)
	var (
		runs, unchecked atomic.Int64
		mu              sync.Mutex
		failed          *sim.Result
		wg              sync.WaitGroup
	)
	stop := make(chan struct{})
	for range max(1, parallel) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				mu.Lock()
				done := failed != nil
				mu.Unlock()
				if done {
					return
				}
				seed := rand.Int64N(1 << 62)
				t0 := time.Now()
				r := sim.Run(seed, ticks, opts)
				runs.Add(1)
				if len(r.Stats.Unchecked) > 0 {
					unchecked.Add(1)
				}
				if verbose {
					mu.Lock()
					report(r, time.Since(t0))
					mu.Unlock()
				}
				if r.Failed() {
					mu.Lock()
					if failed == nil {
						failed = &r
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	go func() {
		wg.Wait()
		close(stop)
	}()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for running := true; running; {
		select {
		case <-stop:
			running = false
		case <-tick.C:
			n := runs.Load()
			fmt.Printf("%6.0fs: %d seeds, %.1f seeds/s\n", time.Since(start).Seconds(), n, float64(n)/time.Since(start).Seconds())
		}
	}
	n := runs.Load()
	el := time.Since(start)
	fmt.Printf("%d seeds of %d ticks in %.1fs: %.1f seeds/s with %d at once\n", n, ticks, el.Seconds(), float64(n)/el.Seconds(), max(1, parallel))
	if u := unchecked.Load(); u > 0 {
		fmt.Printf("warning: %d seeds had an entity whose linearizability was not decided within the checker's budget\n", u)
	}
	if failed != nil {
		fmt.Printf("FAILED seed %d:\n  %s\nreplay: %s\n", failed.Seed, failed.Failure, failed.ReplayCommand())
		return 1
	}
	fmt.Println("ok")
	return 0
}
