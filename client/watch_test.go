package client

import (
	"context"
	"testing"
	"time"

	"github.com/geoevent/geoevent/client/internal/testserver"
	"github.com/geoevent/geoevent/core"
)

// TestWatch follows the feed of a real replica: notifications arrive in
// order as entities cross fences, a filter selects, and a second watch
// from the first one's Last resumes with nothing missed or repeated.
func TestWatch(t *testing.T) {
	s := startServer(t, testserver.Config{})
	c := newClient(t, []string{s.Addr()}, testOptions(s))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, name := range []string{"a", "b"} {
		f := &core.Fence{Name: name, Shape: core.FenceBBox, Min: core.Coordinate{LatNano: 0, LonNano: 0},
			Max: core.Coordinate{LatNano: 1_000_000_000, LonNano: 1_000_000_000}}
		if name == "b" {
			f.Min.LatNano = 500_000_000
		}
		if _, err := c.PutFence(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	w := c.Watch(ctx, 0, WatchFilter{})
	got := make(chan core.Notification, 16)
	go func() {
		for {
			n, err := w.Next()
			if err != nil {
				close(got)
				return
			}
			got <- n
		}
	}()
	// Into a, into a and b, out of both.
	for _, lat := range []int64{100_000_000, 700_000_000, 2_000_000_000} {
		if _, err := c.Upsert(ctx, []core.GeoEvent{ev(1, lat, 100_000_000)}); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"enter a", "enter b", "exit a", "exit b"}
	var seqs []uint64
	for i, wnt := range want {
		select {
		case n := <-got:
			if s := n.Type.String() + " " + n.Fence; s != wnt || n.Event.EntityID != id(1) {
				t.Fatalf("notification %d: %s of %v, want %s", i, s, n.Event.EntityID, wnt)
			}
			if len(seqs) > 0 && n.Seq <= seqs[len(seqs)-1] {
				t.Fatalf("sequence %d after %d", n.Seq, seqs[len(seqs)-1])
			}
			seqs = append(seqs, n.Seq)
		case <-ctx.Done():
			t.Fatalf("waited for %s", wnt)
		}
	}
	cancel()
	for range got {
	}

	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	w2 := c.Watch(ctx2, seqs[1], WatchFilter{Types: 1 << core.NotifyExit, Fences: []string{"b"}})
	n, err := w2.Next()
	if err != nil || n.Seq != seqs[3] || n.Fence != "b" || n.Type != core.NotifyExit {
		t.Fatalf("resumed watch: %+v, %v", n, err)
	}
	if w2.Last() != seqs[3] {
		t.Fatalf("Last = %d, want %d", w2.Last(), seqs[3])
	}
	if _, err := c.GetFence(ctx2, "nope"); err == nil || codeOf(t, err) != core.FenceNotFound.Code {
		t.Fatalf("an unknown fence: %v", err)
	}
}
