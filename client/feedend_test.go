package client

import (
	"context"
	"testing"
	"time"

	"github.com/geoevent/geoevent/client/internal/testserver"
	"github.com/geoevent/geoevent/core"
)

// TestWatchFromEnd: a watch from FeedEnd skips what the feed holds and
// returns what comes after; the feed's retention is set and read back.
func TestWatchFromEnd(t *testing.T) {
	s := startServer(t, testserver.Config{})
	c := newClient(t, []string{s.Addr()}, testOptions(s))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.PutFence(ctx, &core.Fence{Name: "a", Shape: core.FenceBBox, Min: core.Coordinate{LatNano: 0, LonNano: 0},
		Max: core.Coordinate{LatNano: 1_000_000_000, LonNano: 1_000_000_000}}); err != nil {
		t.Fatal(err)
	}
	move := func(lat int64) {
		if _, err := c.Upsert(ctx, []core.GeoEvent{ev(1, lat, 100_000_000)}); err != nil {
			t.Fatal(err)
		}
	}
	move(100_000_000)   // enter
	move(2_000_000_000) // exit
	w := c.Watch(ctx, FeedEnd, WatchFilter{})
	got := make(chan core.Notification, 1)
	go func() {
		if n, err := w.Next(); err == nil {
			got <- n
		}
		close(got)
	}()
	time.Sleep(100 * time.Millisecond) // the watch's first read finds the end
	move(100_000_000)                  // enters again
	n, ok := <-got
	if !ok || n.Type != core.NotifyEnter {
		t.Fatalf("first of a watch from the end: %+v %v", n, ok)
	}
	r, err := c.FeedRetention(ctx)
	if err != nil || r.Last != n.Seq || r.MaxAgeS != 86400 {
		t.Fatalf("retention %+v %v, last want %d", r, err, n.Seq)
	}
	if r, err = c.SetFeedRetention(ctx, &core.FeedRetention{MaxAgeS: 600, MaxNotifications: 1000}); err != nil || r.MaxAgeS != 600 {
		t.Fatalf("set: %+v %v", r, err)
	}
	if _, err := c.SetFeedRetention(ctx, &core.FeedRetention{MaxAgeS: 1, MaxNotifications: 1000}); err == nil {
		t.Fatal("an age of 1 s was accepted")
	}
}
