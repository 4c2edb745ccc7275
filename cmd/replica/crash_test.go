package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/geoevent/geoevent/client"
	"github.com/geoevent/geoevent/core"

	"github.com/geoevent/geoevent/internal/testproc"
)

// TestKillNineLosesNothingAcknowledged starts `replica start` as a child
// process, writes batches with the client from several goroutines, kills
// the process with SIGKILL in the middle of the writes, restarts it, and
// checks that every acknowledged batch is there whole and that no batch is
// half there.
func TestKillNineLosesNothingAcknowledged(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	rc := testproc.NewCluster(t, "00000000-0000-0000-0000-00000000c0de", 1)
	addr := rc.Addrs[0]

	const batchSize = 50
	type batch struct{ first uint64 }
	var (
		mu    sync.Mutex
		acked []batch
		tried []batch
	)
	for round := 0; round < 3; round++ {
		rc.Start(0)
		c, err := client.New([]string{addr}, client.Options{Cluster: rc.ID, PoolSize: 4, TotalTimeout: 3 * time.Second, RequestTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; ctx.Err() == nil; i++ {
					first := uint64(round)<<40 | uint64(w)<<32 | uint64(i)*batchSize + 1
					evs := make([]core.GeoEvent, batchSize)
					for j := range evs {
						evs[j] = core.GeoEvent{EntityID: core.Uint128{Hi: 1, Lo: first + uint64(j)}, LatNano: 38_100_000_000 + int64(j), LonNano: 13_360_000_000}
					}
					mu.Lock()
					tried = append(tried, batch{first})
					mu.Unlock()
					r, err := c.Insert(ctx, evs)
					if err == nil && r.Committed {
						mu.Lock()
						acked = append(acked, batch{first})
						mu.Unlock()
					}
				}
			}(w)
		}
		time.Sleep(700 * time.Millisecond)
		rc.Kill(0)
		cancel()
		wg.Wait()
		c.Close()
	}
	if len(acked) == 0 {
		t.Fatal("no write was acknowledged: the test proves nothing")
	}

	rc.Start(0)
	c, err := client.New([]string{addr}, client.Options{Cluster: rc.ID})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	isAcked := map[uint64]bool{}
	for _, b := range acked {
		isAcked[b.first] = true
	}
	for _, b := range tried {
		ids := make([]core.Uint128, batchSize)
		for j := range ids {
			ids[j] = core.Uint128{Hi: 1, Lo: b.first + uint64(j)}
		}
		res, err := c.GetLatestBatch(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, r := range res {
			if r.Found {
				found++
			}
		}
		switch {
		case found != 0 && found != batchSize:
			t.Fatalf("batch %x is half applied: %d of %d events", b.first, found, batchSize)
		case isAcked[b.first] && found == 0:
			t.Fatalf("acknowledged batch %x was lost", b.first)
		}
	}
	t.Logf("%d batches acknowledged across 3 kill -9s, all present; %d tried", len(acked), len(tried))
}

func clusterID(t *testing.T, s string) core.Uint128 {
	t.Helper()
	id, err := core.ParseUUID(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
