package main

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/geoevent/geoevent/client"
	"github.com/geoevent/geoevent/core"

	"github.com/geoevent/geoevent/internal/testproc"
)

// loadEntities inserts n entities spread over the whole globe, in batches.
func loadEntities(t *testing.T, cl *client.Client, n int) {
	t.Helper()
	loadEntitiesIn(t, cl, n, 0, 0, 170_000_000_000, 358_000_000_000)
}

// loadEntitiesIn inserts n entities spread over the box of the given
// height and width (nanodegrees) about (lat, lon), in batches.
func loadEntitiesIn(t *testing.T, cl *client.Client, n int, lat, lon, height, width int64) {
	t.Helper()
	const batch = 10_000
	for first := 0; first < n; first += batch {
		evs := make([]core.GeoEvent, min(batch, n-first))
		for i := range evs {
			k := int64(first + i)
			evs[i] = core.GeoEvent{EntityID: core.Uint128{Hi: 3, Lo: uint64(k + 1)},
				LatNano: lat + (k*7919)%height - height/2, LonNano: lon + (k*104729)%width - width/2, GroupID: 1}
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
	return repeatQueries(t, 64, stop, func(int, string) (string, error) {
		q := &core.RadiusQuery{Center: core.Coordinate{LatNano: 0, LonNano: 0}, RadiusMM: 20_000_000_000, Group: core.GroupFilter{Set: true, ID: 999}, Page: core.Page{Limit: 1000}}
		_, err := cl.QueryRadius(context.Background(), q)
		return "", err
	})
}

// repeatQueries runs n clients, each sending page(client, cursor) again and
// again (page returns the next page's cursor, "" for a first page), until
// stop is closed; wait returns how many pages they were answered.
func repeatQueries(t *testing.T, n int, stop <-chan struct{}, page func(client int, cursor string) (string, error)) (wait func() int64) {
	var wg sync.WaitGroup
	var pages atomic.Int64
	for k := range n {
		wg.Go(func() {
			cursor := ""
			for {
				select {
				case <-stop:
					return
				default:
				}
				var err error
				if cursor, err = page(k, cursor); err != nil {
					t.Errorf("expensive query: %v", err)
					return
				}
				pages.Add(1)
			}
		})
	}
	return func() int64 { wg.Wait(); return pages.Load() }
}

// worstPolygon is the largest polygon query the limits allow: an outer
// ring of 1,000 vertices, radius 1.4 degrees, about (lat, lon) degrees,
// with 100 holes of 1,000 vertices in a 10 x 10 lattice inside it (101,000
// edges), filtered by a group no entity has.
func worstPolygon(lat, lon float64) *core.PolygonQuery {
	stretch := 1 / math.Cos(lat*math.Pi/180) // keeps the rings round
	circle := func(lat, lon, r float64) []core.Coordinate {
		vs := make([]core.Coordinate, core.MaxPolygonVertices)
		for i := range vs {
			s, c := math.Sincos(2 * math.Pi * float64(i) / float64(len(vs)))
			vs[i] = core.Coordinate{LatNano: int64((lat + r*s) * 1e9), LonNano: int64((lon + r*c*stretch) * 1e9)}
		}
		return vs
	}
	q := &core.PolygonQuery{Vertices: circle(lat, lon, 1.4), Group: core.GroupFilter{Set: true, ID: 999}}
	step := 1.4 * 1.2 / 9
	for k := range core.MaxPolygonHoles {
		q.Holes = append(q.Holes, circle(lat+(float64(k/10)-4.5)*step, lon+(float64(k%10)-4.5)*step*stretch, step/3))
	}
	return q
}

// polygonQueries runs 4 clients paging worstPolygon queries over and over,
// half of them one polygon and half another a little apart, so that the
// replica has two to build, until stop is closed.
func polygonQueries(t *testing.T, cl *client.Client, stop <-chan struct{}) (wait func() int64) {
	qs := []*core.PolygonQuery{worstPolygon(polygonLat, polygonLon), worstPolygon(polygonLat+0.01, polygonLon)}
	return repeatQueries(t, 4, stop, func(k int, cursor string) (string, error) {
		q := *qs[k%2]
		q.Page = core.Page{Cursor: cursor, Limit: 1000}
		r, err := cl.QueryPolygon(context.Background(), &q)
		if err != nil {
			return "", err
		}
		return r.Cursor, nil
	})
}

// The polygon tests' polygons lie about (polygonLat, polygonLon) degrees;
// loadPolygonEntities puts n entities in a box about it that holds them.
const polygonLat, polygonLon = 20.0, 30.0

func loadPolygonEntities(t *testing.T, cl *client.Client, n int) {
	t.Helper()
	loadEntitiesIn(t, cl, n, polygonLat*1e9, polygonLon*1e9, 3_000_000_000, 3_200_000_000)
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
	pingOnOneUnder(t, 300_000, loadEntities, expensiveQueries)
}

// TestPingWhilePolygonsRun: 4 clients paging polygon queries of 1,000
// vertices with 100 holes of 1,000 vertices (two such polygons, each
// built where its frames arrive, not on the event loop) that match
// nothing over 300,000 entities in them: GET /ping answers with a p99
// under 50 ms.
func TestPingWhilePolygonsRun(t *testing.T) {
	pingOnOneUnder(t, 300_000, loadPolygonEntities, polygonQueries)
}

// pingOnOneUnder starts a dev server, loads n entities, runs the queries
// and measures /ping while they run.
func pingOnOneUnder(t *testing.T, n int, load func(*testing.T, *client.Client, int), queries func(*testing.T, *client.Client, <-chan struct{}) func() int64) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	srv := testproc.StartDev(t, testproc.DevOptions{HTTP: true})
	base := srv.URL
	cl := srv.Client(devClientOptions)
	load(t, cl, n)

	stop := make(chan struct{})
	wait := queries(t, cl, stop)
	time.Sleep(500 * time.Millisecond)
	missed := pingWindows(t, []string{"replica"}, []string{base})
	close(stop)
	t.Logf("%d expensive pages answered", wait())
	if len(missed) > 0 {
		t.Errorf("/ping while expensive queries run, in two windows, want p99 under 50 ms: %v", missed)
	}
}

// pingWindows measures /ping on each base at once for 5 s and returns what
// missed a p99 of 50 ms. Other work on the machine can stretch a few
// pings of a window; a loop held by the queries stretches every window: a
// second window is measured when the first misses, and what it returns is
// the second's misses.
func pingWindows(t *testing.T, names, bases []string) (missed []string) {
	for window := range 2 {
		var wg sync.WaitGroup
		lats := make([][]time.Duration, len(bases))
		for k, base := range bases {
			wg.Go(func() { lats[k] = pingLatencies(t, base, 5*time.Second) })
		}
		wg.Wait()
		missed = nil
		for k, who := range names {
			lat := lats[k]
			if len(lat) == 0 {
				missed = append(missed, who+" answered no ping")
				continue
			}
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
	return missed
}

// devClientOptions are those of the tests' clients of a dev server.
var devClientOptions = client.Options{PoolSize: 64}

// TestPingWhileExpensiveQueriesRunOnThree: the same load on a 3-replica
// cluster (the queries through every replica, so followers forward them):
// /ping on the leader and on a follower keeps a p99 under 50 ms, and the
// leader keeps its term (no election).
func TestPingWhileExpensiveQueriesRunOnThree(t *testing.T) {
	pingOnThreeUnder(t, 300_000, loadEntities, expensiveQueries)
}

// TestPingWhilePolygonsRunOnThree: the polygon load of
// TestPingWhilePolygonsRun on a 3-replica cluster, through every replica
// (the leader builds the polygons a follower forwards where they arrive
// too): /ping on the leader and on a follower keeps a p99 under 50 ms,
// and the leader keeps its term.
func TestPingWhilePolygonsRunOnThree(t *testing.T) {
	pingOnThreeUnder(t, 300_000, loadPolygonEntities, polygonQueries)
}

// pingOnThreeUnder starts a 3-replica cluster, loads n entities, runs the
// queries through every replica and measures /ping on the leader and on a
// follower while they run, and the leader's term before and after.
func pingOnThreeUnder(t *testing.T, n int, load func(*testing.T, *client.Client, int), queries func(*testing.T, *client.Client, <-chan struct{}) func() int64) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	c := newCluster(t, 3)
	c.HTTP = []string{testproc.FreeAddr(t), testproc.FreeAddr(t), testproc.FreeAddr(t)}
	for i := range 3 {
		c.Start(i)
	}
	leader := c.AgreedLeader(20 * time.Second)
	if leader < 0 {
		t.Fatal("no leader")
	}
	cl := c.Client(c.Addrs, client.Options{PoolSize: 64})
	load(t, cl, n)
	term := func() uint64 {
		top, err := cl.Topology(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return top.Version
	}
	before := term()

	stop := make(chan struct{})
	wait := queries(t, cl, stop)
	time.Sleep(500 * time.Millisecond)
	missed := pingWindows(t, []string{"leader", "follower"}, []string{"http://" + c.HTTP[leader], "http://" + c.HTTP[(leader+1)%3]})
	close(stop)
	pages := wait()
	if len(missed) > 0 {
		t.Errorf("/ping while expensive queries run, in two windows, want p99 under 50 ms: %v", missed)
	}
	if after := term(); after != before || c.AgreedLeader(5*time.Second) != leader {
		t.Errorf("the leadership changed while the queries ran: term %d, then %d", before, after)
	}
	t.Logf("%d expensive pages answered", pages)
}
