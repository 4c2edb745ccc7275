package io

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/geoevent/geoevent/core"
	ghttp "github.com/geoevent/geoevent/http"
)

// TestWebhookTrimmedByRetention, end to end on a real replica: a hook
// whose receiver is down while set_feed_retention trims the feed past its
// position is delivered, once the receiver is back, the batch it was
// posting (read before the trim: at least once) and then from the feed's
// new start, the first post from there saying "trimmed": true.
func TestWebhookTrimmedByRetention(t *testing.T) {
	srv := serve(t, formatDir(t), Options{})
	c := localClient(t, srv.Server)
	ctx := context.Background()
	rc := newReceiver(t)
	wh, err := srv.StartWebhooks(WebhookOptions{Client: c, Body: ghttp.WebhookBody,
		Timeout: 300 * time.Millisecond, BackoffMin: 10 * time.Millisecond, BackoffMax: 40 * time.Millisecond, Batch: 100, Poll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	if _, err := c.PutFence(ctx, &core.Fence{Name: "zone", Shape: core.FenceBBox, Max: core.Coordinate{LatNano: 1e9, LonNano: 1e9}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutHook(ctx, &core.Hook{Name: "h", URL: rc.URL}); err != nil {
		t.Fatal(err)
	}
	rc.mode.Store("fail")
	// 1,500 entities enter the zone in one write.
	evs := make([]core.GeoEvent, 1500)
	for i := range evs {
		evs[i] = core.GeoEvent{EntityID: core.Uint128{Hi: 9, Lo: uint64(i + 1)}, LatNano: 5e8, LonNano: 5e8}
	}
	if _, err := c.Upsert(ctx, evs); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a failed post", 10*time.Second, func() bool { return rc.posts.Load() >= 1 })
	r, err := c.SetFeedRetention(ctx, &core.FeedRetention{MaxAgeS: 3600, MaxNotifications: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := c.Hook(ctx, "h"); h.Delivered >= r.Start {
		t.Fatalf("the hook was delivered to %d before the trim to %d", h.Delivered, r.Start)
	}
	rc.mode.Store("ok")
	waitFor(t, "the delivery from the start", 10*time.Second, func() bool { h, _ := c.Hook(ctx, "h"); return h.Delivered == r.Last })
	got := rc.seqs()
	rc.mu.Lock()
	trimmed := append([]bool(nil), rc.trimmed...)
	rc.mu.Unlock()
	if len(got) != 1100 || got[99] >= r.Start || got[100] != r.Start || got[1099] != r.Last {
		t.Fatalf("delivered %d notifications: %v ... (start %d, last %d)", len(got), got[:min(len(got), 3)], r.Start, r.Last)
	}
	if len(trimmed) != 11 || trimmed[0] || !trimmed[1] || slices.Contains(trimmed[2:], true) {
		t.Fatalf("trimmed flags of the posts: %v", trimmed)
	}
}
