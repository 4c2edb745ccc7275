package examples_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/geoevent/geoevent/client"
	"github.com/geoevent/geoevent/core"

	"github.com/geoevent/geoevent/internal/testproc"
)

// TestWatchAcrossFailover: three `replica start` processes, a fence, a
// writer moving an entity in and out of it, and a Watch following the
// feed. The leader is killed with SIGKILL mid-stream; the watch goes on
// through the new leader and, at the end, holds exactly the feed the
// cluster holds: every notification once, in sequence order.
func TestWatchAcrossFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	c3, _ := testproc.StartCluster(t, "9a3f2c1e-0000-4000-8000-00000000fa12", 3)
	cluster, addrs := c3.ID, c3.Addrs
	opts := client.Options{Cluster: cluster, RequestTimeout: 2 * time.Second, BaseBackoff: 20 * time.Millisecond}
	c, err := client.New(addrs, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	putZone(t, ctx, c)

	// The watcher has its own client, as a subscriber elsewhere would.
	wc, err := client.New(addrs, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Close()
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	var mu sync.Mutex
	var got []core.Notification
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		w := wc.Watch(wctx, 0, client.WatchFilter{})
		for {
			n, err := w.Next()
			if err != nil {
				return
			}
			mu.Lock()
			got = append(got, n)
			mu.Unlock()
		}
	}()

	var acked atomic.Int64
	write := func(i int) {
		lat := int64(500_000_000)
		if i%2 == 1 {
			lat = 2_000_000_000 // out of the zone: each write is an enter or an exit
		}
		if _, err := c.Upsert(ctx, []core.GeoEvent{{EntityID: core.Uint128{Lo: 1}, LatNano: lat, LonNano: 500_000_000}}); err == nil {
			acked.Add(1)
		}
	}
	i := 0
	for ; i < 100; i++ {
		write(i)
	}
	waitWatched := func(n int) int { // until the watch holds n notifications, or 20 s
		deadline := time.Now().Add(20 * time.Second)
		for {
			mu.Lock()
			have := len(got)
			mu.Unlock()
			if have >= n || time.Now().After(deadline) {
				return have
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if have := waitWatched(50); have < 50 {
		t.Fatalf("the watch has %d notifications of the first 100 writes", have)
	}
	leader := findLeader(t, c3, 5*time.Second)
	c3.Kill(leader)
	t.Logf("killed the leader, replica %d, after %d acknowledged writes", leader, acked.Load())
	for ; i < 200; i++ {
		write(i)
	}

	// The cluster's feed, read whole from whichever replica the client
	// reaches: a follower answers from what it has applied, so the read
	// goes on until the feed holds a notification for each acknowledged
	// write (or the context ends).
	var feed []core.Notification
	for after := uint64(0); ; {
		p, err := c.ReadFeed(ctx, &core.FeedRequest{After: after, Limit: core.MaxFeedLimit})
		if err != nil {
			t.Fatalf("the feed holds %d notifications for %d acknowledged writes: %v", len(feed), acked.Load(), err)
		}
		feed = append(feed, p.Notifications...)
		after = p.Next
		if !p.HasMore && int64(len(feed)) >= acked.Load() {
			break
		}
		if !p.HasMore {
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitWatched(len(feed))
	wcancel()
	<-watched
	if len(got) != len(feed) {
		t.Fatalf("the watch has %d notifications, the feed %d", len(got), len(feed))
	}
	for k := range feed {
		if got[k] != feed[k] {
			t.Fatalf("notification %d: watched %+v, the feed has %+v", k, got[k], feed[k])
		}
		if k > 0 && feed[k].Seq <= feed[k-1].Seq {
			t.Fatalf("sequence %d after %d", feed[k].Seq, feed[k-1].Seq)
		}
	}
	t.Logf("%d writes acknowledged, %d notifications, all watched once across the failover", acked.Load(), len(feed))
}

// TestFeedFromFollower: a follower's gateway serves GET /feed from what
// its replica has applied, not through the leader. Three replicas with
// gateways, a fence and writes that cross it; then the leader and the
// other follower are killed, so that there is no leader and no quorum,
// and the remaining follower's gateway still answers a feed page that
// holds the notifications of the acknowledged writes.
func TestFeedFromFollower(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	c3 := testproc.NewCluster(t, "9a3f2c1e-0000-4000-8000-00000000fa13", 3)
	gateways := []string{testproc.FreeAddr(t), testproc.FreeAddr(t), testproc.FreeAddr(t)}
	c3.HTTP = gateways
	leader := c3.StartAll()
	cluster, addrs := c3.ID, c3.Addrs
	c, err := client.New(addrs, client.Options{Cluster: cluster, RequestTimeout: 2 * time.Second, BaseBackoff: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	putZone(t, ctx, c)
	const writes = 10
	for i := range writes {
		lat := int64(500_000_000)
		if i%2 == 1 {
			lat = 2_000_000_000
		}
		if _, err := c.Upsert(ctx, []core.GeoEvent{{EntityID: core.Uint128{Lo: 1}, LatNano: lat, LonNano: 500_000_000}}); err != nil {
			t.Fatal(err)
		}
	}
	leader = findLeader(t, c3, 5*time.Second)
	follower := (leader + 1) % 3
	// The follower has applied what the leader committed once its feed,
	// read through the binary protocol from it alone, holds every write's
	// notification.
	fc, err := client.New([]string{addrs[follower]}, client.Options{Cluster: cluster, RequestTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	for {
		p, err := fc.ReadFeed(ctx, &core.FeedRequest{})
		if err == nil && len(p.Notifications) == writes {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the follower's feed: %v, %v", p, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, i := range []int{leader, (leader + 2) % 3} {
		c3.Kill(i)
	}
	resp, err := http.Get("http://" + gateways[follower] + "/feed?after=0&wait_ms=0&types=enter")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct {
		Notifications []struct {
			Seq   uint64 `json:"seq,string"`
			Type  string `json:"type"`
			Fence string `json:"fence"`
		} `json:"notifications"`
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /feed from the follower without a leader: %d %s", resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, &page); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if len(page.Notifications) != writes/2 {
		t.Fatalf("the follower's gateway has %d enter notifications, want %d: %s", len(page.Notifications), writes/2, body)
	}
	for _, n := range page.Notifications {
		if n.Type != "enter" || n.Fence != "zone" {
			t.Fatalf("notification %+v", n)
		}
	}
}

// putZone puts the fence "zone", the bbox from (0, 0) to (1, 1) degrees,
// retrying while the cluster settles its first leader.
func putZone(t *testing.T, ctx context.Context, c *client.Client) {
	t.Helper()
	zone := &core.Fence{Name: "zone", Shape: core.FenceBBox,
		Min: core.Coordinate{LatNano: 0, LonNano: 0}, Max: core.Coordinate{LatNano: 1_000_000_000, LonNano: 1_000_000_000}}
	for {
		if _, err := c.PutFence(ctx, zone); err == nil {
			return
		} else if ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
