package io

import (
	"context"
	"encoding/json"
	stdio "io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/geoevent/geoevent/client"
	"github.com/geoevent/geoevent/core"
	ghttp "github.com/geoevent/geoevent/http"
)

// receiver is a webhook receiver on loopback whose answers the test
// switches: ok (204), fail (500) or stall (no answer until the post gives
// up). It keeps the sequences of each post it acknowledged, in order.
type receiver struct {
	*httptest.Server
	mode  atomic.Value // "ok", "fail", "stall"
	posts atomic.Int64 // every post, answered or not

	mu      sync.Mutex
	batches [][]uint64 // acknowledged posts' sequences
	trimmed []bool
	types   []string
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{}
	rc.mode.Store("ok")
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.posts.Add(1)
		b, _ := stdio.ReadAll(r.Body)
		switch rc.mode.Load().(string) {
		case "fail":
			w.WriteHeader(500)
			return
		case "stall":
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return
		}
		var body struct {
			Hook          string `json:"hook"`
			Trimmed       bool   `json:"trimmed"`
			Notifications []struct {
				Seq  string `json:"seq"`
				Type string `json:"type"`
			} `json:"notifications"`
		}
		if err := json.Unmarshal(b, &body); err != nil || r.Header.Get("Content-Type") != "application/json" || r.Method != "POST" {
			t.Errorf("a post that is not JSON: %v %s %q", err, r.Method, b)
		}
		var seqs []uint64
		rc.mu.Lock()
		for _, n := range body.Notifications {
			s, _ := strconv.ParseUint(n.Seq, 10, 64)
			seqs = append(seqs, s)
			rc.types = append(rc.types, n.Type)
		}
		rc.batches = append(rc.batches, seqs)
		rc.trimmed = append(rc.trimmed, body.Trimmed)
		rc.mu.Unlock()
		w.WriteHeader(204)
	}))
	t.Cleanup(rc.Close)
	return rc
}

// seqs is every acknowledged sequence, in the order posted.
func (rc *receiver) seqs() []uint64 {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []uint64
	for _, b := range rc.batches {
		out = append(out, b...)
	}
	return out
}

func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// localClient is a Go client of s over in-process connections, as
// cmd/replica gives the deliverer.
func localClient(t *testing.T, s *Server) *client.Client {
	c, err := client.New([]string{"local"}, client.Options{Cluster: testCluster,
		Dial: func(ctx context.Context, _ string) (client.Conn, error) { return s.DialLocal(ctx) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// fenceMoves puts a fence and moves n entities into it and out again:
// 2n notifications.
func fenceMoves(t *testing.T, c *client.Client, first, n int) {
	ctx := context.Background()
	if _, err := c.PutFence(ctx, &core.Fence{Name: "zone", Shape: core.FenceBBox, Min: core.Coordinate{}, Max: core.Coordinate{LatNano: 1e9, LonNano: 1e9}}); err != nil {
		t.Fatal(err)
	}
	for _, lat := range []int64{5e8, 2e9} {
		evs := make([]core.GeoEvent, n)
		for i := range evs {
			evs[i] = core.GeoEvent{EntityID: core.Uint128{Hi: 7, Lo: uint64(first + i + 1)}, LatNano: lat, LonNano: 5e8}
		}
		if _, err := c.Upsert(ctx, evs); err != nil {
			t.Fatal(err)
		}
	}
}

// feedSeqs is every notification's sequence the feed holds, with the
// types.
func feedSeqs(t *testing.T, c *client.Client) (seqs []uint64, types []string) {
	page, err := c.ReadFeed(context.Background(), &core.FeedRequest{Limit: core.MaxFeedLimit})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range page.Notifications {
		seqs = append(seqs, n.Seq)
		types = append(types, n.Type.String())
	}
	return seqs, types
}

// TestWebhookDelivery: a receiver on loopback that fails (500s), stalls
// (longer than the post timeout) and recovers gets every notification, in
// order, each acknowledged once; the replicated position advances once it
// acknowledges; a hook's filter holds; the metrics show the failures.
func TestWebhookDelivery(t *testing.T) {
	srv := serve(t, formatDir(t), Options{})
	c := localClient(t, srv.Server)
	ctx := context.Background()
	all, exits := newReceiver(t), newReceiver(t)
	set := metrics.NewSet()
	wh, err := srv.StartWebhooks(WebhookOptions{Client: c, Body: ghttp.WebhookBody, Metrics: set,
		Timeout: 300 * time.Millisecond, BackoffMin: 10 * time.Millisecond, BackoffMax: 80 * time.Millisecond, Batch: 3, Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	if _, err := c.PutHook(ctx, &core.Hook{Name: "all", URL: all.URL + "/geo"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutHook(ctx, &core.Hook{Name: "exits", URL: exits.URL, Fences: []string{"zone"}, Types: 1 << core.NotifyExit}); err != nil {
		t.Fatal(err)
	}

	all.mode.Store("fail")
	fenceMoves(t, c, 0, 4)
	waitFor(t, "failed posts", 10*time.Second, func() bool { return all.posts.Load() >= 4 })
	if h, _ := c.Hook(ctx, "all"); h.Delivered != 0 {
		t.Fatalf("the position moved while the receiver failed: %+v", h)
	}
	all.mode.Store("stall")
	n := all.posts.Load()
	waitFor(t, "stalled posts", 10*time.Second, func() bool { return all.posts.Load() >= n+2 })
	if h, _ := c.Hook(ctx, "all"); h.Delivered != 0 {
		t.Fatalf("the position moved while the receiver stalled: %+v", h)
	}
	var buf strings.Builder
	set.WritePrometheus(&buf)
	if !strings.Contains(buf.String(), `geoevent_webhook_failures_total{hook="all"}`) ||
		strings.Contains(buf.String(), `geoevent_webhook_failures_total{hook="all"} 0`) ||
		!strings.Contains(buf.String(), "geoevent_webhooks 2") {
		t.Fatalf("metrics:\n%s", buf.String())
	}
	all.mode.Store("ok")
	fenceMoves(t, c, 10, 3) // more after recovery

	want, types := feedSeqs(t, c)
	if len(want) != 14 {
		t.Fatalf("the feed holds %d notifications, want 14", len(want))
	}
	last := want[len(want)-1]
	waitFor(t, "every notification", 10*time.Second, func() bool { s := all.seqs(); return len(s) > 0 && s[len(s)-1] == last })
	if got := all.seqs(); !slices.Equal(got, want) {
		t.Fatalf("acknowledged %v, want %v (in order, each once)", got, want)
	}
	for _, b := range all.batches {
		if len(b) > 3 {
			t.Fatalf("a batch of %d notifications; the most is 3", len(b))
		}
	}
	waitFor(t, "the replicated position", 5*time.Second, func() bool { h, err := c.Hook(ctx, "all"); return err == nil && h.Delivered == last })

	var wantExits []uint64
	for i, s := range want {
		if types[i] == "exit" {
			wantExits = append(wantExits, s)
		}
	}
	waitFor(t, "the exits", 5*time.Second, func() bool { return len(exits.seqs()) >= len(wantExits) })
	if got := exits.seqs(); !slices.Equal(got, wantExits) || slices.ContainsFunc(exits.types, func(s string) bool { return s != "exit" }) {
		t.Fatalf("the exit hook got %v (%v), want %v", got, exits.types, wantExits)
	}

	// A deleted hook is posted to no more.
	if _, err := c.DeleteHook(ctx, "exits"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	before := exits.posts.Load()
	fenceMoves(t, c, 20, 1)
	waitFor(t, "the next post", 5*time.Second, func() bool { return len(all.seqs()) == 16 })
	if exits.posts.Load() != before {
		t.Fatal("a deleted hook was posted to")
	}
	buf.Reset()
	set.WritePrometheus(&buf)
	if strings.Contains(buf.String(), `hook="exits"`) || !strings.Contains(buf.String(), `geoevent_webhook_lag_entries{hook="all"} 0`) {
		t.Fatalf("metrics after the delete:\n%s", buf.String())
	}
}

// fakeHooks is a WebhookClient over a feed of the test's: one hook, whose
// position hook_delivered moves, and notifications of which those up to
// dropped have been trimmed.
type fakeHooks struct {
	mu      sync.Mutex
	hook    core.Hook
	feed    []uint64 // retained sequences, ascending
	dropped uint64
}

func (f *fakeHooks) Hooks(ctx context.Context, req *core.HookListRequest) (*core.HookList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &core.HookList{Hooks: []core.Hook{f.hook}, Total: 1, FeedLast: f.feed[len(f.feed)-1]}, nil
}

func (f *fakeHooks) ReadFeed(ctx context.Context, req *core.FeedRequest) (*core.FeedPage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if req.After < f.dropped {
		return nil, core.Errorf(core.FeedTrimmed, "trimmed")
	}
	page := &core.FeedPage{Start: f.feed[0], Next: req.After}
	for _, s := range f.feed {
		if s > req.After && len(page.Notifications) < int(req.Limit) {
			page.Notifications = append(page.Notifications, core.Notification{Seq: s, Type: core.NotifyEnter, Fence: "f", OpNS: 1})
			page.Next = s
		}
	}
	page.HasMore = page.Next < f.feed[len(f.feed)-1] && req.After != math.MaxUint64
	return page, nil
}

func (f *fakeHooks) HookDelivered(ctx context.Context, req *core.HookDelivered) (*core.HookDeliveredReply, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if req.Version == f.hook.Version && req.Seq > f.hook.Delivered {
		f.hook.Delivered = req.Seq
	}
	return &core.HookDeliveredReply{Delivered: f.hook.Delivered}, nil
}

func (f *fakeHooks) delivered() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hook.Delivered
}

// TestWebhookTrimmedAndLeadership: a hook whose position the feed has
// trimmed past is delivered from the feed's start, and the post says so;
// workers run only while the replica leads, and resume from the recorded
// position when it leads again.
func TestWebhookTrimmedAndLeadership(t *testing.T) {
	rc := newReceiver(t)
	fake := &fakeHooks{hook: core.Hook{Name: "h", URL: rc.URL, Version: 1, Delivered: 10}, dropped: 50}
	for s := uint64(51); s <= 60; s++ {
		fake.feed = append(fake.feed, s)
	}
	var leading atomic.Bool
	leading.Store(true)
	w := startWebhooks(WebhookOptions{Client: fake, Body: ghttp.WebhookBody, Batch: 4, Poll: 10 * time.Millisecond},
		leading.Load, make(chan struct{}))
	defer w.Close()
	waitFor(t, "the trimmed feed's delivery", 5*time.Second, func() bool { return fake.delivered() == 60 })
	if got := rc.seqs(); !slices.Equal(got, fake.feed) {
		t.Fatalf("delivered %v, want %v", got, fake.feed)
	}
	rc.mu.Lock()
	if len(rc.trimmed) != 3 || !rc.trimmed[0] || rc.trimmed[1] || rc.trimmed[2] {
		t.Fatalf("trimmed flags of the posts: %v", rc.trimmed)
	}
	rc.mu.Unlock()

	// Not leading: no worker, no post.
	leading.Store(false)
	waitFor(t, "the workers to stop", 5*time.Second, func() bool { w.mu.Lock(); defer w.mu.Unlock(); return len(w.workers) == 0 })
	fake.mu.Lock()
	fake.feed = append(fake.feed, 61, 62)
	fake.mu.Unlock()
	time.Sleep(100 * time.Millisecond)
	if n := len(rc.seqs()); n != 10 {
		t.Fatalf("%d notifications posted; a replica that does not lead posted", n)
	}
	// Leading again: from the recorded position on.
	leading.Store(true)
	waitFor(t, "the delivery after leading again", 5*time.Second, func() bool { return fake.delivered() == 62 })
	if got := rc.seqs(); !slices.Equal(got[10:], []uint64{61, 62}) {
		t.Fatalf("after leading again: %v", got)
	}
}

// BenchmarkWebhookDelivery: notifications per second through a hook to a
// receiver on loopback, in posts of 500: each op is a write of 1,000
// entities crossing a fence, delivered and recorded.
func BenchmarkWebhookDelivery(b *testing.B) {
	dir := b.TempDir() + "/data"
	if err := Format(dir, ClusterInfo{Cluster: testCluster, ReplicaIndex: 0, ReplicaCount: 1}); err != nil {
		b.Fatal(err)
	}
	s, err := Open(dir, Options{Addresses: []string{"127.0.0.1:0"}})
	if err != nil {
		b.Fatal(err)
	}
	go s.Run(context.Background())
	defer s.Close()
	c, err := client.New([]string{"local"}, client.Options{Cluster: testCluster,
		Dial: func(ctx context.Context, _ string) (client.Conn, error) { return s.DialLocal(ctx) }})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var got atomic.Int64
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Notifications []json.RawMessage `json:"notifications"`
		}
		bs, _ := stdio.ReadAll(r.Body)
		json.Unmarshal(bs, &body)
		got.Add(int64(len(body.Notifications)))
	}))
	defer rc.Close()
	wh, err := s.StartWebhooks(WebhookOptions{Client: c, Body: ghttp.WebhookBody, Poll: 5 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	defer wh.Close()
	ctx := context.Background()
	if _, err := c.PutFence(ctx, &core.Fence{Name: "zone", Shape: core.FenceBBox, Max: core.Coordinate{LatNano: 1e9, LonNano: 1e9}}); err != nil {
		b.Fatal(err)
	}
	if _, err := c.PutHook(ctx, &core.Hook{Name: "h", URL: rc.URL}); err != nil {
		b.Fatal(err)
	}
	const n = 1000
	evs := make([]core.GeoEvent, n)
	b.ResetTimer()
	for i := range b.N {
		for j := range evs {
			evs[j] = core.GeoEvent{EntityID: core.Uint128{Hi: 5, Lo: uint64(j + 1)}, LatNano: 5e8 + int64(i%2)*2e9, LonNano: 5e8}
		}
		if _, err := c.Upsert(ctx, evs); err != nil {
			b.Fatal(err)
		}
		for got.Load() < int64((i+1)*n) {
			time.Sleep(time.Millisecond)
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "notifications/s")
}
