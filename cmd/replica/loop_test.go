package main

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/geoevent/geoevent/client"
	"github.com/geoevent/geoevent/core"
)

// loadEntities inserts n entities spread over the whole globe, in batches.
func loadEntities(t *testing.T, cl *client.Client, n int) {
	t.Helper()
	const batch = 10_000
	for first := 0; first < n; first += batch {
		evs := make([]core.GeoEvent, min(batch, n-first))
		for i := range evs {
			k := int64(first + i)
			evs[i] = core.GeoEvent{EntityID: core.Uint128{Hi: 3, Lo: uint64(k + 1)},
				LatNano: (k*7919)%170_000_000_000 - 85_000_000_000, LonNano: (k*104729)%358_000_000_000 - 179_000_000_000, GroupID: 1}
		}
		if r, err := cl.Insert(context.Background(), evs); err != nil || !r.Committed {
			t.Fatalf("loading entities: %+v %v", r, err)
		}
	}
}

// expensiveQueries runs 64 clients sending whole-globe radius queries
// filtered by a group no entity has (each page examines a large part of
// the index and matches nothing) until stop is closed.
func expensiveQueries(t *testing.T, cl *client.Client, stop <-chan struct{}) (wait func() int64) {
	var wg sync.WaitGroup
	var pages atomic.Int64
	for range 64 {
		wg.Go(func() {
			q := &core.RadiusQuery{Center: core.Coordinate{LatNano: 0, LonNano: 0}, RadiusMM: 20_000_000_000, Group: core.GroupFilter{Set: true, ID: 999}, Page: core.Page{Limit: 1000}}
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := cl.QueryRadius(context.Background(), q); err != nil {
					t.Errorf("expensive query: %v", err)
					return
				}
				pages.Add(1)
			}
		})
	}
	return func() int64 { wg.Wait(); return pages.Load() }
}

// pingLatencies sends GET /ping to base every 20 ms for d and returns the
// latencies, sorted.
func pingLatencies(t *testing.T, base string, d time.Duration) []time.Duration {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second}
	var lat []time.Duration
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		start := time.Now()
		res, err := hc.Get(base + "/ping")
		if err != nil {
			t.Fatalf("ping: %v", err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("ping: HTTP %d", res.StatusCode)
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	return lat
}

// TestPingWhileExpensiveQueriesRun: 64 clients sending whole-globe radius
// queries that match nothing, over 300,000 entities, do not hold the
// replica's event loop: GET /ping answers with a p99 under 50 ms.
func TestPingWhileExpensiveQueriesRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	binAddr := freeAddr(t)
	srv := startChild(t, "dev", "--data", t.TempDir(), "--addresses", binAddr, "--http", "127.0.0.1:0")
	base := "http://" + httpAddrFromBanner(t, srv)
	cl := newDevClient(t, srv, binAddr)
	loadEntities(t, cl, 300_000)

	stop := make(chan struct{})
	wait := expensiveQueries(t, cl, stop)
	time.Sleep(500 * time.Millisecond)
	// Other work on the machine can stretch a few pings of a window; a
	// loop held by the queries stretches every window: a second window is
	// measured when the first misses, and both must miss.
	var p99s []time.Duration
	for window := range 2 {
		lat := pingLatencies(t, base, 5*time.Second)
		p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
		t.Logf("window %d: %d pings: p50 %v, p99 %v, max %v", window, len(lat), p50, p99, lat[len(lat)-1])
		if p99s = append(p99s, p99); p99 <= 50*time.Millisecond {
			break
		}
	}
	close(stop)
	t.Logf("%d expensive pages answered", wait())
	if len(p99s) == 2 && p99s[1] > 50*time.Millisecond {
		t.Errorf("/ping p99 %v and %v in two windows while expensive queries run, want under 50 ms", p99s[0], p99s[1])
	}
}

// newDevClient is a Go client of the dev server srv, on the cluster its
// banner names.
func newDevClient(t *testing.T, srv *child, addr string) *client.Client {
	t.Helper()
	m := readmeBannerCluster.FindStringSubmatch(srv.stdout.String())
	if m == nil {
		t.Fatalf("no cluster id in the banner:\n%s", srv.stdout)
	}
	cl, err := client.New([]string{addr}, client.Options{Cluster: clusterID(t, m[1]), PoolSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// readmeBannerCluster finds the cluster id in the dev banner.
var readmeBannerCluster = regexp.MustCompile(`cluster ([0-9a-f-]{36}),`)

// TestPingWhileExpensiveQueriesRunOnThree: the same load on a 3-replica
// cluster (the queries through every replica, so followers forward them):
// /ping on the leader and on a follower keeps a p99 under 50 ms, and the
// leader keeps its term (no election).
func TestPingWhileExpensiveQueriesRunOnThree(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	c := newCluster(t, 3)
	c.http = []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	for i := range 3 {
		c.start(i)
	}
	leader := c.agreedLeader(20 * time.Second)
	if leader < 0 {
		t.Fatal("no leader")
	}
	cl := c.client(c.addrs, client.Options{PoolSize: 64})
	loadEntities(t, cl, 300_000)
	term := func() uint64 {
		top, err := cl.Topology(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return top.Version
	}
	before := term()

	stop := make(chan struct{})
	wait := expensiveQueries(t, cl, stop)
	time.Sleep(500 * time.Millisecond)
	// Two windows at most, as on one replica.
	var missed []string
	for window := range 2 {
		var wg sync.WaitGroup
		lats := make([][]time.Duration, 2)
		for k, i := range []int{leader, (leader + 1) % 3} {
			wg.Go(func() { lats[k] = pingLatencies(t, "http://"+c.http[i], 5*time.Second) })
		}
		wg.Wait()
		missed = nil
		for k, who := range []string{"leader", "follower"} {
			lat := lats[k]
			p99 := lat[len(lat)*99/100]
			t.Logf("window %d, %s: %d pings: p50 %v, p99 %v, max %v", window, who, len(lat), lat[len(lat)/2], p99, lat[len(lat)-1])
			if p99 > 50*time.Millisecond {
				missed = append(missed, fmt.Sprintf("%s p99 %v", who, p99))
			}
		}
		if len(missed) == 0 {
			break
		}
	}
	close(stop)
	pages := wait()
	if len(missed) > 0 {
		t.Errorf("/ping while expensive queries run, in two windows, want p99 under 50 ms: %v", missed)
	}
	if after := term(); after != before || c.agreedLeader(5*time.Second) != leader {
		t.Errorf("the leadership changed while the queries ran: term %d, then %d", before, after)
	}
	t.Logf("%d expensive pages answered", pages)
}
