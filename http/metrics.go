package http

import (
	"bytes"
	"fmt"
	stdhttp "net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/geoevent/geoevent/core"
)

// The gateway's metrics, in Config.Metrics (its own set when that is nil),
// served with the rest of the set and Go's runtime and process metrics by
// GET /metrics in Prometheus's text format. The library is
// github.com/VictoriaMetrics/metrics: a counter increment and a histogram
// observation cost 56 ns against client_golang's 97 ns on this project's
// machine (docs/operations.md, Metrics).
//
// Per request the gateway takes the time twice and records into
// instruments it made when it started (per route and method) or at their
// first use (per status class and error code): no name is formatted and
// no map is written on the request's path.

// LatencyBuckets are the upper bounds, in seconds, of the gateway's
// latency histograms: 50 µs doubling to 52 s.
var LatencyBuckets = metrics.ExponentialBuckets(50e-6, 2, 21)

// routeMetrics are one route's and method's instruments.
type routeMetrics struct {
	set      *metrics.Set
	labels   string // route="...",method="..."
	duration *metrics.PrometheusHistogram
	byClass  [6]atomic.Pointer[metrics.Counter] // by status / 100
}

func newRouteMetrics(set *metrics.Set, route, method string) *routeMetrics {
	m := &routeMetrics{set: set, labels: fmt.Sprintf(`route=%q,method=%q`, route, method)}
	m.duration = set.NewPrometheusHistogramExt(`geoevent_http_request_seconds{`+m.labels+`}`, LatencyBuckets)
	return m
}

// done records a request answered with status (0: one the gateway did not
// write through call.writeLine, a 2xx) that began at start.
func (m *routeMetrics) done(start time.Time, status int) {
	m.duration.Update(time.Since(start).Seconds())
	k := status / 100
	if status == 0 {
		k = 2
	}
	if k < 1 || k >= len(m.byClass) {
		k = 5
	}
	c := m.byClass[k].Load()
	if c == nil {
		c = m.set.GetOrCreateCounter(fmt.Sprintf(`geoevent_http_requests_total{%s,status="%dxx"}`, m.labels, k))
		m.byClass[k].Store(c)
	}
	c.Inc()
}

// gatewayMetrics are the gateway's instruments.
type gatewayMetrics struct {
	set *metrics.Set
	// byRoute: each endpoint's methods' (HEAD counts as GET); other is a
	// request for no endpoint or a method it does not take.
	byRoute map[*endpoint]map[string]*routeMetrics // written only by New
	other   *routeMetrics
	errors  sync.Map // core.Code -> *metrics.Counter
}

func newGatewayMetrics(set *metrics.Set) *gatewayMetrics {
	return &gatewayMetrics{set: set, byRoute: map[*endpoint]map[string]*routeMetrics{},
		other: newRouteMetrics(set, "other", "other")}
}

// add makes the instruments of e's method.
func (m *gatewayMetrics) add(e *endpoint, method string) {
	if m.byRoute[e] == nil {
		m.byRoute[e] = map[string]*routeMetrics{}
	}
	m.byRoute[e][method] = newRouteMetrics(m.set, e.path, method)
}

// route is the instruments of a request of method for e.
func (m *gatewayMetrics) route(e *endpoint, method string) *routeMetrics {
	if method == "HEAD" {
		method = "GET"
	}
	if rm := m.byRoute[e][method]; rm != nil {
		return rm
	}
	return m.other
}

// failed counts an answer with an error code.
func (m *gatewayMetrics) failed(info core.CodeInfo) {
	c, ok := m.errors.Load(info.Code)
	if !ok {
		c, _ = m.errors.LoadOrStore(info.Code, m.set.GetOrCreateCounter(
			fmt.Sprintf(`geoevent_http_errors_total{code="%d",name=%q}`, info.Code, info.Name)))
	}
	c.(*metrics.Counter).Inc()
}

// feedReaders counts the feed's readers open, for the gauges.
type feedReaders struct {
	streams, polls atomic.Int64
}

// feedGauges registers the gauges of the feed's readers: GET /feed's
// streams and long polls, GET /feed/positions's streams. With a set that
// another gateway shares, the first one's are kept.
func (g *Gateway) feedGauges() {
	set := g.metrics.set
	set.GetOrCreateGauge(`geoevent_http_feed_streams`, func() float64 { return float64(g.readers.streams.Load()) })
	set.GetOrCreateGauge(`geoevent_http_feed_long_polls`, func() float64 { return float64(g.readers.polls.Load()) })
	set.GetOrCreateGauge(`geoevent_http_position_streams`, func() float64 { return float64(g.posStreams.n.Load()) })
}

// metricsContentType is Prometheus's text exposition format.
var metricsContentType = []string{"text/plain; version=0.0.4; charset=utf-8"}

// GET /metrics: the metrics of Config.Metrics (the gateway's and, in the
// server, the replica's) and Go's runtime and process metrics, in
// Prometheus's text format.
func (g *Gateway) metricsPage(c *call) *failure {
	if _, f := c.params(); f != nil {
		return f
	}
	var b bytes.Buffer
	g.metrics.set.WritePrometheus(&b)
	metrics.WriteProcessMetrics(&b)
	h := c.w.Header()
	h["Content-Type"] = metricsContentType
	h["Content-Length"] = []string{fmt.Sprint(b.Len())}
	h["Cache-Control"] = noStore
	c.status = stdhttp.StatusOK
	c.w.WriteHeader(stdhttp.StatusOK)
	if c.r.Method != "HEAD" {
		c.w.Write(b.Bytes())
	}
	return nil
}
