package io

import (
	"context"
	"math"
	"sync"
	"testing"

	"github.com/geoevent/geoevent/client"
	"github.com/geoevent/geoevent/core"
)

// polygonQuery is a polygon query of 1,000 vertices about (lat, 20)
// degrees with a hole of 200: one preparing builds.
func polygonQuery(lat float64) *core.PolygonQuery {
	ring := func(r float64, n int) []core.Coordinate {
		vs := make([]core.Coordinate, n)
		for i := range vs {
			s, c := math.Sincos(2 * math.Pi * float64(i) / float64(n))
			vs[i] = core.Coordinate{LatNano: int64((lat + r*s) * 1e9), LonNano: int64((20 + r*c) * 1e9)}
		}
		return vs
	}
	return &core.PolygonQuery{Vertices: ring(1, 1000), Holes: [][]core.Coordinate{ring(0.2, 200)}}
}

// polygonFrame is the payload of polygonQuery(lat).
func polygonFrame(t *testing.T, lat float64) []byte {
	t.Helper()
	p, err := core.AppendRequestMessage(nil, core.OpQueryPolygon, polygonQuery(lat))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Frames of one polygon sent at once by many connections share one
// build; another polygon gets its own; the memory of prepared polygons is
// counted, and over maxPreparedBytes frames are decoded but not built; a
// follower prepares nothing.
func TestPrepareReadSharesAndBounds(t *testing.T) {
	s := &Server{disk: &disk{}, loopDone: make(chan struct{}), readPrep: readPrep{builds: make(chan struct{}, maxPrepareBuilds)}}
	h := core.Header{ClientID: 1, Request: 1, Type: core.MsgRequest}
	a, b := polygonFrame(t, 10), polygonFrame(t, 10.001)
	if s.prepareRead(h, a, false) != nil {
		t.Fatal("a follower prepared a read")
	}
	s.disk.leading.Store(true)
	var wg sync.WaitGroup
	var polys sync.Map
	for k := range 16 {
		wg.Go(func() {
			f := a
			if k%4 == 0 {
				f = b
			}
			pr := s.prepareRead(h, f, false)
			if pr == nil || pr.Polygon() == nil {
				t.Error("a polygon of 1,200 vertices was not prepared")
				return
			}
			polys.Store(pr.Polygon(), true)
		})
	}
	wg.Wait()
	n := 0
	polys.Range(func(any, any) bool { n++; return true })
	if n != 2 {
		t.Fatalf("16 frames of 2 polygons built %d", n)
	}
	held := s.readPrep.bytes.Load()
	if held < 2*1200*200 || held > 4*1200*200 {
		t.Fatalf("two polygons of 1,200 edges counted %d bytes", held)
	}
	s.readPrep.bytes.Store(maxPreparedBytes)
	if pr := s.prepareRead(h, polygonFrame(t, 10.002), false); pr == nil || pr.Polygon() != nil {
		t.Fatal("over the memory bound, a frame was not decoded, or was built")
	}
	if pr := s.prepareRead(h, a, false); pr == nil || pr.Polygon() == nil {
		t.Fatal("over the memory bound, a recent polygon was not shared")
	}
}

// A leader prepares the polygon queries of its in-process connections (the
// HTTP gateway's) and of its TCP clients, with a session and without: each
// new polygon is built beside the loop and kept for its next frames, and
// the answers are the loop's.
func TestServerPreparesPolygonReads(t *testing.T) {
	r := serve(t, formatDir(t), Options{})
	lc := dialLocal(t, r.Server)
	session := localSession(t, lc)
	localRequest(t, lc, session, 1, core.OpInsert, &core.InsertRequest{Events: []core.GeoEvent{
		{EntityID: core.Uint128{Lo: 1}, LatNano: 10_500_000_000, LonNano: 20_000_000_000}, // inside
		{EntityID: core.Uint128{Lo: 2}, LatNano: 10_000_000_000, LonNano: 20_000_000_000}, // in the hole
	}})
	recent := func() (n int) {
		r.readPrep.mu.Lock()
		defer r.readPrep.mu.Unlock()
		for _, pr := range r.readPrep.recent {
			if pr != nil {
				n++
			}
		}
		return n
	}
	res := localRequest(t, lc, session, 0, core.OpQueryPolygon, polygonQuery(10)).(*core.QueryResult)
	if len(res.Events) != 1 || res.Events[0].EntityID.Lo != 1 || recent() != 1 {
		t.Fatalf("over a local connection: %d events, %d polygons prepared", len(res.Events), recent())
	}
	cl, err := client.New([]string{r.Addr().String()}, client.Options{Cluster: testCluster})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, lat := range []float64{10, 10.001} { // sessionless reads
		res, err = cl.QueryPolygon(context.Background(), polygonQuery(lat))
		if err != nil || len(res.Events) != 1 {
			t.Fatalf("over TCP: %+v, %v", res, err)
		}
	}
	if recent() != 2 {
		t.Fatalf("%d polygons prepared for 2", recent())
	}
}
