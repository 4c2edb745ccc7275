package main

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/geoevent/geoevent/client"
	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/io/store"

	"github.com/geoevent/geoevent/internal/testproc"
)

// newCluster formats n replicas of a cluster on loopback.
func newCluster(t *testing.T, n int) *testproc.Cluster {
	t.Helper()
	return testproc.NewCluster(t, "00000000-0000-0000-0000-0000c1057e20", n)
}

// writeLog records every batch written and whether it was acknowledged.
type writeLog struct {
	mu    sync.Mutex
	tried []uint64 // first entity Lo of each batch
	acked map[uint64]bool
}

const clusterBatch = 10

func batchIDs(first uint64) []core.Uint128 {
	ids := make([]core.Uint128, clusterBatch)
	for j := range ids {
		ids[j] = core.Uint128{Hi: 5, Lo: first + uint64(j)}
	}
	return ids
}

// write inserts the batch starting at entity first and records the outcome.
func (wl *writeLog) write(ctx context.Context, cl *client.Client, first uint64) error {
	evs := make([]core.GeoEvent, clusterBatch)
	for j, id := range batchIDs(first) {
		evs[j] = core.GeoEvent{EntityID: id, LatNano: 48_850_000_000 + int64(j), LonNano: 2_350_000_000}
	}
	wl.mu.Lock()
	wl.tried = append(wl.tried, first)
	wl.mu.Unlock()
	r, err := cl.Insert(ctx, evs)
	if err == nil && !r.Committed {
		err = fmt.Errorf("not committed: %+v", r.Results)
	}
	if err == nil {
		wl.mu.Lock()
		wl.acked[first] = true
		wl.mu.Unlock()
	}
	return err
}

// TestClusterFailover runs three replicas, writes all along, kills the
// leader with SIGKILL, measures how long until a write succeeds again,
// restarts the old leader, and then checks that every acknowledged write is
// readable through every replica's address, that no batch is half applied,
// and that the three logs on disk agree on every committed entry.
func TestClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	c := newCluster(t, 3)
	for i := range c.Procs {
		c.Start(i)
	}
	start := time.Now()
	leader := c.Leader(-1, 20*time.Second)
	if leader < 0 {
		t.Fatal("no leader elected within 20 s")
	}
	t.Logf("replica %d leads, %v after the start", leader, time.Since(start).Round(time.Millisecond))

	wl := &writeLog{acked: map[uint64]bool{}}
	writeCtx, stopWrites := context.WithCancel(ctx)
	var wg sync.WaitGroup
	const writers = 4
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := c.Client(c.Addrs, client.Options{RequestTimeout: time.Second, TotalTimeout: 5 * time.Second,
				BaseBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, MaxRetries: 100})
			for i := uint64(0); writeCtx.Err() == nil; i++ {
				_ = wl.write(writeCtx, cl, uint64(w)<<40|i*clusterBatch+1)
			}
		}()
	}
	time.Sleep(3 * time.Second)
	wl.mu.Lock()
	before := len(wl.acked)
	wl.mu.Unlock()
	if before == 0 {
		t.Fatal("no write was acknowledged before the kill")
	}

	// Kill the leader; a probe writes until a write succeeds again.
	killedAt := time.Now()
	c.Kill(leader)
	probe := c.Client(c.Addrs, client.Options{RequestTimeout: 500 * time.Millisecond, TotalTimeout: 2 * time.Second,
		BaseBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, MaxRetries: 100})
	var failover time.Duration
	for i := uint64(0); ; i++ {
		if ctx.Err() != nil {
			t.Fatalf("no write succeeded within %v of killing the leader", time.Since(killedAt))
		}
		if err := wl.write(ctx, probe, 7<<40|i*clusterBatch+1); err == nil {
			failover = time.Since(killedAt)
			break
		}
	}
	next := c.Leader(leader, 20*time.Second)
	if next < 0 {
		t.Fatal("no new leader within 20 s of the kill")
	}
	t.Logf("killed leader %d; replica %d leads now; failover (kill to the next acknowledged write) took %v",
		leader, next, failover.Round(time.Millisecond))

	time.Sleep(2 * time.Second)
	c.Start(leader) // the old leader comes back as a follower and catches up
	time.Sleep(3 * time.Second)
	stopWrites()
	wg.Wait()
	wl.mu.Lock()
	t.Logf("%d batches acknowledged (%d before the kill), %d tried", len(wl.acked), before, len(wl.tried))
	wl.mu.Unlock()

	// Every acknowledged batch is there whole, through every address; no
	// batch is half there.
	time.Sleep(time.Second) // let the restarted replica catch up
	for i, addr := range c.Addrs {
		cl := c.Client([]string{addr}, client.Options{TotalTimeout: 20 * time.Second})
		checkBatches(ctx, t, cl, wl, fmt.Sprintf("replica %d (%s)", i, addr))
	}

	// The logs agree: stop the followers, then the leader (so that it
	// commits nothing the followers lack), and compare them on disk.
	final := c.Leader(-1, 10*time.Second)
	for i, p := range c.Procs {
		if i != final {
			p.Stop(syscall.SIGTERM)
		}
	}
	if final >= 0 {
		c.Procs[final].Stop(syscall.SIGTERM)
	}
	compareLogs(t, c.Dirs)
}

// checkBatches reads every tried batch through cl.
func checkBatches(ctx context.Context, t *testing.T, cl *client.Client, wl *writeLog, where string) {
	t.Helper()
	wl.mu.Lock()
	tried := append([]uint64(nil), wl.tried...)
	wl.mu.Unlock()
	const per = core.MaxBatchIDs / clusterBatch
	for len(tried) > 0 {
		chunk := tried[:min(per, len(tried))]
		tried = tried[len(chunk):]
		var ids []core.Uint128
		for _, first := range chunk {
			ids = append(ids, batchIDs(first)...)
		}
		res, err := cl.GetLatestBatch(ctx, ids)
		if err != nil {
			t.Fatalf("%s: read: %v", where, err)
		}
		for k, first := range chunk {
			found := 0
			for _, r := range res[k*clusterBatch : (k+1)*clusterBatch] {
				if r.Found {
					found++
				}
			}
			wl.mu.Lock()
			acked := wl.acked[first]
			wl.mu.Unlock()
			switch {
			case found != 0 && found != clusterBatch:
				t.Fatalf("%s: batch %x is half applied: %d of %d events", where, first, found, clusterBatch)
			case acked && found == 0:
				t.Fatalf("%s: acknowledged batch %x is missing", where, first)
			}
		}
	}
}

// compareLogs checks that the stopped replicas' logs agree. The cluster was
// quiet before it stopped (no writes for seconds, a stable leader), so every
// follower had received the leader's whole log: the logs must hold the same
// entry (term and data) at every index up to the shortest one's end, and
// that end must reach the highest commit index any replica recorded. (The
// hard state's commit index lags, since Raft need not persist it at once:
// comparing whole logs is the stronger check.)
func compareLogs(t *testing.T, dirs []string) {
	t.Helper()
	type replicaLog struct {
		first, last uint64
		entries     map[uint64]store.Entry
	}
	logs := make([]replicaLog, len(dirs))
	var maxCommit uint64
	minLast := ^uint64(0)
	for i, dir := range dirs {
		hs, _, err := store.LoadHardState(dir)
		if err != nil {
			t.Fatal(err)
		}
		l, _, err := store.OpenLog(dir, store.LogOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rl := replicaLog{first: l.FirstIndex(), last: l.LastIndex(), entries: map[uint64]store.Entry{}}
		if rl.first != 0 {
			es, err := l.Entries(rl.first, rl.last+1)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range es {
				rl.entries[e.Index] = e
			}
		}
		l.Close()
		logs[i] = rl
		maxCommit = max(maxCommit, hs.Commit)
		minLast = min(minLast, rl.last)
		t.Logf("replica %d: log %d..%d; hard state: term %d, commit %d", i, rl.first, rl.last, hs.Term, hs.Commit)
	}
	if minLast < maxCommit {
		t.Fatalf("a replica's log ends at %d, before the commit index %d", minLast, maxCommit)
	}
	compared := 0
	for i := uint64(1); i <= minLast; i++ {
		var ref *store.Entry
		for r, rl := range logs {
			e, ok := rl.entries[i]
			if !ok {
				continue // before its log: covered by its snapshot
			}
			if ref == nil {
				ref = &e
				continue
			}
			if e.Term != ref.Term || !bytes.Equal(e.Data, ref.Data) {
				t.Fatalf("entry %d differs: replica %d has term %d, another replica term %d", i, r, e.Term, ref.Term)
			}
			compared++
		}
	}
	if compared == 0 {
		t.Fatal("no entry held by two replicas was compared")
	}
	t.Logf("the logs agree on every entry up to %d (%d comparisons)", minLast, compared)
}
