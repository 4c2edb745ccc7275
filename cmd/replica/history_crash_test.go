package main

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/geoevent/geoevent/client"
	"github.com/geoevent/geoevent/core"

	"github.com/geoevent/geoevent/internal/testproc"
)

// TestKillNineDuringTrackKeepsHistory runs `replica dev` under a track
// load (a fleet of entities reporting in turn, inserts in batches, so
// every entity's history grows on disk), kills it with SIGKILL in the
// middle of the load, twice, restarts it on the same data directory, and
// pages through every entity's history: every acknowledged event is there
// once, at the timestamp its acknowledgement gave, no event shows twice,
// and a batch is there whole or not at all. The first round runs long
// enough for a snapshot, so that the restarts restore its history
// checkpoint and replay the log above it.
//
// Each event carries its sequence number in UserData; the sequence fixes
// its entity (1 + seq mod fleet), so a batch of consecutive numbers names
// distinct entities.
func TestKillNineDuringTrackKeepsHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	const (
		fleet   = 500
		batch   = 250
		workers = 4
		rounds  = 2
	)
	data := t.TempDir()
	addr := testproc.FreeAddr(t)
	type sent struct {
		first uint64
		ts    []uint64 // the acknowledged timestamps, nil when not acknowledged
	}
	var (
		mu      sync.Mutex
		batches []sent
		next    atomic.Uint64
		acked   atomic.Int64 // events acknowledged
	)
	start := func() (*testproc.Dev, *client.Client) {
		srv := testproc.StartDev(t, testproc.DevOptions{Dir: data, Addr: addr, HTTP: true})
		return srv, srv.Client(devClientOptions)
	}
	for round := range rounds {
		srv, cl := start()
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for ctx.Err() == nil {
					first := next.Add(batch) - batch
					evs := make([]core.GeoEvent, batch)
					for j := range evs {
						seq := first + uint64(j)
						evs[j] = core.GeoEvent{EntityID: core.Uint128{Hi: 7, Lo: 1 + seq%fleet}, UserData: core.Uint128{Lo: seq},
							LatNano: 38_100_000_000 + int64(seq%1000)*1000, LonNano: 13_360_000_000}
					}
					b := sent{first: first}
					if r, err := cl.Insert(ctx, evs); err == nil && r.Committed {
						b.ts = make([]uint64, batch)
						for j, res := range r.Results {
							b.ts[j] = res.TimestampNS
						}
						acked.Add(batch)
					}
					mu.Lock()
					batches = append(batches, b)
					mu.Unlock()
				}
			})
		}
		// The kill falls mid-load once the round has had this many
		// events acknowledged (or after a while on a slow machine). The
		// first round writes more than 64 MiB of log, so that a snapshot
		// and its history checkpoint are taken: the restarts restore the
		// checkpoint and replay the log above it.
		want := int64(100_000)
		if round == 0 {
			want = 700_000
		}
		from := acked.Load()
		for deadline := time.Now().Add(8 * time.Second); acked.Load()-from < want && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		srv.Kill()
		cancel()
		wg.Wait()
		cl.Close()
		t.Logf("round %d: %d events acknowledged, %d sent so far; %d snapshots written", round, acked.Load(), next.Load(), strings.Count(srv.Stderr(), "snapshot written"))
	}

	_, cl := start()
	ctx := context.Background()
	seen := map[uint64]uint64{} // seq -> timestamp
	total := 0
	for id := uint64(1); id <= fleet; id++ {
		q := core.HistoryQuery{EntityID: core.Uint128{Hi: 7, Lo: id}, Page: core.Page{Limit: 1000}}
		var last uint64
		for {
			page, err := cl.History(ctx, &q)
			if err != nil {
				t.Fatalf("history of entity %d: %v", id, err)
			}
			for _, e := range page.Events {
				seq := e.UserData.Lo
				switch {
				case e.EntityID != q.EntityID || 1+seq%fleet != id:
					t.Fatalf("entity %d's history holds event %d of entity %v", id, seq, e.EntityID)
				case e.TimestampNS <= last:
					t.Fatalf("entity %d's history is out of order: %d after %d", id, e.TimestampNS, last)
				}
				if _, dup := seen[seq]; dup {
					t.Fatalf("event %d shows twice in entity %d's history", seq, id)
				}
				seen[seq] = e.TimestampNS
				last = e.TimestampNS
				total++
			}
			if !page.HasMore {
				break
			}
			q.Cursor = page.Cursor
		}
	}

	ackedEvents := 0
	for _, b := range batches {
		found := 0
		for j := range uint64(batch) {
			ts, ok := seen[b.first+j]
			if !ok {
				continue
			}
			found++
			if b.ts != nil && ts != b.ts[j] {
				t.Fatalf("event %d was acknowledged at %d but is stored at %d", b.first+j, b.ts[j], ts)
			}
		}
		switch {
		case b.ts != nil && found != batch:
			t.Fatalf("acknowledged batch %d: %d of its %d events are in the history", b.first, found, batch)
		case found != 0 && found != batch:
			t.Fatalf("batch %d is half there: %d of %d events", b.first, found, batch)
		}
		if b.ts != nil {
			ackedEvents += batch
		}
	}
	if ackedEvents == 0 {
		t.Fatal("no batch was acknowledged: the test proves nothing")
	}
	if ackedEvents < 20*fleet {
		t.Logf("only %d events acknowledged: histories stayed short", ackedEvents)
	}
	t.Logf("%d events acknowledged across %d kill -9s, all in their histories once; %d events stored, %d sent", ackedEvents, rounds, total, next.Load())
}
