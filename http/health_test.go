package http_test

import (
	"context"
	"fmt"
	"io"
	stdhttp "net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/geoevent/geoevent/core"
	ghttp "github.com/geoevent/geoevent/http"

	"github.com/geoevent/geoevent/internal/testproc"
)

// TestProbesAnswerFromHealth: with Config.Health, /healthz, /readyz and
// /ping answer from it at once, and never from the backend, here one
// that does not answer at all.
func TestProbesAnswerFromHealth(t *testing.T) {
	var mu sync.Mutex
	var h ghttp.Health
	set := func(v ghttp.Health) { mu.Lock(); h = v; mu.Unlock() }
	block := make(chan struct{})
	defer close(block)
	gw := testproc.ServeGateway(t, ghttp.Config{
		Backend: fakeBackend{func(ctx context.Context, _ core.Operation, _ any) (any, error) {
			select {
			case <-ctx.Done():
			case <-block:
			}
			return nil, core.Errorf(core.ClusterUnavailable, "the backend was asked")
		}},
		Health: func() ghttp.Health { mu.Lock(); defer mu.Unlock(); return h },
	})
	base := "http://" + gw.Addr().String()
	leading := ghttp.Health{Running: true, HeartbeatAge: 3 * time.Millisecond, Replica: 1, Leader: 1, Role: "leader",
		LeaderHeard: true, Term: 4, Commit: 10, Applied: 9, PrevCommit: 9}
	noLeader := leading
	noLeader.Leader, noLeader.Role, noLeader.LeaderHeard = -1, "candidate", false
	behind := leading
	behind.Applied = 5
	replaying := leading
	replaying.Replaying = true
	stuck := leading
	stuck.HeartbeatAge = 6 * time.Second
	stopped := leading
	stopped.Running = false

	for _, c := range []struct {
		name                  string
		h                     ghttp.Health
		healthz, readyz, ping int
		reason                string // in /readyz's 503
	}{
		{"leading", leading, 200, 200, 200, ""},
		{"no leader", noLeader, 200, 503, 503, "knows no leader"},
		{"behind", behind, 200, 503, 200, "applied up to index 5 of 10"},
		{"replaying", replaying, 200, 503, 200, "catching up"},
		{"stuck loop", stuck, 503, 503, 503, "has not ticked for 6s"},
		{"stopped loop", stopped, 503, 503, 503, "not running"},
	} {
		set(c.h)
		for _, p := range []struct {
			path, key string
			want      int
		}{{"/healthz", "alive", c.healthz}, {"/readyz", "ready", c.readyz}, {"/ping", "pong", c.ping}} {
			start := time.Now()
			r := request(t, base, "GET", p.path, nil)
			if took := time.Since(start); took > time.Second {
				t.Errorf("%s: GET %s took %v", c.name, p.path, took)
			}
			if r.status != p.want || get(r.body, p.key) != (p.want == 200) {
				t.Errorf("%s: GET %s: %d %s, want %d", c.name, p.path, r.status, r.raw, p.want)
			}
			if p.want == 503 && !has(r.body, "reason") {
				t.Errorf("%s: GET %s: no reason: %s", c.name, p.path, r.raw)
			}
		}
		r := request(t, base, "GET", "/readyz", nil)
		if c.reason != "" && !strings.Contains(fmt.Sprint(get(r.body, "reason")), c.reason) {
			t.Errorf("%s: /readyz reason %q, want it to say %q", c.name, get(r.body, "reason"), c.reason)
		}
		if c.readyz == 200 && (get(r.body, "role") != "leader" || fmt.Sprint(get(r.body, "applied")) != "9") {
			t.Errorf("%s: /readyz %s", c.name, r.raw)
		}
	}
}

// TestMetricsPage: GET /metrics serves the gateway's request counters,
// latency histograms and error counts in Prometheus's text format, with
// what else the set holds and Go's runtime metrics.
func TestMetricsPage(t *testing.T) {
	set := metrics.NewSet()
	set.NewCounter("geoevent_test_total").Add(7)
	gw := testproc.ServeGateway(t, ghttp.Config{Metrics: set, Backend: fakeBackend{func(context.Context, core.Operation, any) (any, error) {
		return &core.PingReply{Pong: true}, nil
	}}})
	base := "http://" + gw.Addr().String()
	for range 3 {
		expectOK(t, request(t, base, "GET", "/ping", nil), "ping")
	}
	request(t, base, "GET", "/no/such/path", nil)
	request(t, base, "GET", "/ping?bogus=1", nil)

	res, err := stdhttp.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("GET /metrics: %d %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	for _, want := range []string{
		`geoevent_test_total 7`,
		`geoevent_http_requests_total{route="/ping",method="GET",status="2xx"} 3`,
		`geoevent_http_requests_total{route="/ping",method="GET",status="4xx"} 1`,
		`geoevent_http_requests_total{route="other",method="other",status="4xx"} 1`,
		`geoevent_http_request_seconds_count{route="/ping",method="GET"} 4`,
		`geoevent_http_request_seconds_bucket{route="/ping",method="GET",le="+Inf"} 4`,
		`geoevent_http_errors_total{code="1",name="MALFORMED_REQUEST"} 1`,
		`geoevent_http_errors_total{code="4",name="UNKNOWN_OPERATION"} 1`,
	} {
		if !strings.Contains(string(body), want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, re := range []string{`(?m)^go_goroutines \d+$`, `(?m)^go_memstats_heap_inuse_bytes \d+$`, `(?m)^process_resident_memory_bytes \d+$`} {
		if !regexp.MustCompile(re).Match(body) {
			t.Errorf("/metrics lacks %s", re)
		}
	}
}

// TestProbesWithoutHealth: a gateway without Config.Health (a remote
// backend) is alive while it answers, and ready and pongs as the
// cluster's ping says.
func TestProbesWithoutHealth(t *testing.T) {
	var pong atomic.Bool
	gw := testproc.ServeGateway(t, ghttp.Config{Backend: fakeBackend{func(_ context.Context, op core.Operation, _ any) (any, error) {
		if op != core.OpPing {
			return nil, core.Errorf(core.InternalError, "asked %s", op)
		}
		if pong.Load() {
			return &core.PingReply{Pong: true}, nil
		}
		return &core.PingReply{Reason: "no leader over there"}, nil
	}}})
	base := "http://" + gw.Addr().String()
	for _, up := range []bool{false, true} {
		pong.Store(up)
		want := map[bool]int{false: 503, true: 200}[up]
		if r := request(t, base, "GET", "/healthz", nil); r.status != 200 || get(r.body, "alive") != true {
			t.Errorf("pong %v: /healthz %d %s", up, r.status, r.raw)
		}
		for _, p := range []struct{ path, key string }{{"/readyz", "ready"}, {"/ping", "pong"}} {
			r := request(t, base, "GET", p.path, nil)
			if r.status != want || get(r.body, p.key) != up || !up && get(r.body, "reason") != "no leader over there" {
				t.Errorf("pong %v: %s %d %s", up, p.path, r.status, r.raw)
			}
		}
	}
}
