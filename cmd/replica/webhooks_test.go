package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/geoevent/geoevent/client"
	"github.com/geoevent/geoevent/core"
)

// TestWebhookFailover: three replicas, a hook whose receiver is slow, and
// the leader killed (kill -9) mid-delivery. The new leader resumes from
// the replicated position: the receiver gets every notification (no gap),
// the first time in feed order, and the ones recorded as delivered before
// the kill only once; only what was posted after the last record may come
// twice (at least once).
func TestWebhookFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	var mu sync.Mutex
	var got []uint64 // every acknowledged notification, in the order posted
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Notifications []struct {
				Seq string `json:"seq"`
			} `json:"notifications"`
		}
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &body); err != nil {
			t.Errorf("a post that is not JSON: %v", err)
		}
		time.Sleep(30 * time.Millisecond) // a slow receiver: delivery lags the writes
		mu.Lock()
		for _, n := range body.Notifications {
			s, _ := strconv.ParseUint(n.Seq, 10, 64)
			got = append(got, s)
		}
		mu.Unlock()
	}))
	defer rc.Close()
	received := func() []uint64 {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}

	c := newCluster(t, 3)
	for i := range c.Procs {
		c.Start(i)
	}
	leader := c.Leader(-1, 20*time.Second)
	if leader < 0 {
		t.Fatal("no leader elected within 20 s")
	}
	cl := c.Client(c.Addrs, client.Options{RequestTimeout: time.Second, TotalTimeout: 10 * time.Second,
		BaseBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, MaxRetries: 100})
	if _, err := cl.PutFence(ctx, &core.Fence{Name: "zone", Shape: core.FenceBBox, Max: core.Coordinate{LatNano: 1e9, LonNano: 1e9}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.PutHook(ctx, &core.Hook{Name: "h", URL: rc.URL}); err != nil {
		t.Fatal(err)
	}

	// Entities move into the fence and out, one write every 10 ms, until
	// after the failover.
	writes := make(chan int, 1000)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			lat := int64(5e8)
			if i%2 == 1 {
				lat = 2e9
			}
			ev := core.GeoEvent{EntityID: core.Uint128{Hi: 9, Lo: uint64(i/2 + 1)}, LatNano: lat, LonNano: 5e8}
			if _, err := cl.Upsert(ctx, []core.GeoEvent{ev}); err == nil {
				writes <- i
			}
		}
	}()
	var recorded uint64
	waitUntil(t, "a recorded delivery", 20*time.Second, func() bool {
		h, err := cl.Hook(ctx, "h")
		if err == nil {
			recorded = h.Delivered
		}
		return recorded != 0 && len(writes) >= 20
	})
	c.Kill(leader)
	t.Logf("killed replica %d with the hook delivered up to %d (%d posted)", leader, recorded, len(received()))
	if c.Leader(leader, 20*time.Second) < 0 {
		t.Fatal("no new leader within 20 s")
	}
	time.Sleep(500 * time.Millisecond) // writes go on under the new leader
	close(stop)
	wg.Wait()

	// The feed as the replica this client reaches has applied it, and the
	// first arrivals, until they agree: a follower may answer before it
	// has applied the last notifications the leader already delivered.
	var feed, first []uint64
	var all []uint64
	seen := map[uint64]int{}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		page, err := cl.ReadFeed(ctx, &core.FeedRequest{Limit: core.MaxFeedLimit})
		if err != nil {
			t.Fatal(err)
		}
		feed = feed[:0]
		for _, n := range page.Notifications {
			feed = append(feed, n.Seq)
		}
		if len(feed) < 20 || page.HasMore {
			t.Fatalf("the feed holds %d notifications (more: %v)", len(feed), page.HasMore)
		}
		all, first, seen = received(), first[:0], map[uint64]int{}
		for _, s := range all {
			if seen[s] == 0 {
				first = append(first, s) // first arrivals, in order
			}
			seen[s]++
		}
		if slices.Equal(first, feed) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("first arrivals %v, want the feed %v", first, feed)
		}
	}
	last := feed[len(feed)-1]
	dups := 0
	for s, n := range seen {
		if n > 1 {
			dups++
			if s <= recorded {
				t.Fatalf("notification %d, recorded as delivered before the kill, came %d times", s, n)
			}
		}
	}
	waitUntil(t, "the new leader's record", 10*time.Second, func() bool { h, err := cl.Hook(ctx, "h"); return err == nil && h.Delivered == last })
	t.Logf("%d notifications, %d posted again after the failover", len(feed), dups)
}

func waitUntil(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
