package io

import (
	"math"
	"sync"
	"testing"

	"github.com/geoevent/geoevent/core"
)

// polygonFrame is a polygon query of 1,000 vertices about (lat, 20)
// degrees with a hole of 200: one preparing builds.
func polygonFrame(t *testing.T, lat float64) []byte {
	t.Helper()
	ring := func(r float64, n int) []core.Coordinate {
		vs := make([]core.Coordinate, n)
		for i := range vs {
			s, c := math.Sincos(2 * math.Pi * float64(i) / float64(n))
			vs[i] = core.Coordinate{LatNano: int64((lat + r*s) * 1e9), LonNano: int64((20 + r*c) * 1e9)}
		}
		return vs
	}
	p, err := core.AppendRequestMessage(nil, core.OpQueryPolygon, &core.PolygonQuery{Vertices: ring(1, 1000), Holes: [][]core.Coordinate{ring(0.2, 200)}})
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
