package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Feed subscribers (--subscribers N --feed URL): the measurement of many
// readers of the fence feed while the cluster ingests. Before the run,
// --fences bbox fences of about 1 km are defined at random in the
// benchmark box (PUT /fences/bench-N at --feed, replacing those of an
// earlier run), so that moves make notifications; then the ingest runs
// once alone (unless --baseline=false) and once with N Server-Sent Event
// streams of GET /feed open at --feed (one connection each). Each
// notification's latency is its arrival at the bench minus its op_ns (the
// leader's time for the entry, taken before it committed: the latency
// from commit and then some), and each stream checks its sequences only
// grow. The report is the ingest rate of both runs and their ratio, the
// notifications received and the latency percentiles.

// fenceSide is the side of a bench fence, in nanodegrees (about 1.1 km
// of latitude).
const fenceSide = 10_000_000

// defineFences puts n bbox fences at random in the benchmark box.
func defineFences(base string, n int) error {
	r := rand.New(rand.NewPCG(9, 9))
	hc := &http.Client{Timeout: 30 * time.Second}
	for i := range n {
		lat, lon := point(r)
		body := fmt.Sprintf(`{"shape":"bbox","min":{"lat_nano":%d,"lon_nano":%d},"max":{"lat_nano":%d,"lon_nano":%d}}`,
			lat, lon, lat+fenceSide, lon+fenceSide)
		req, _ := http.NewRequest("PUT", fmt.Sprintf("%s/fences/bench-%d", base, i), strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		res, err := hc.Do(req)
		if err != nil {
			return fmt.Errorf("define fence %d: %w", i, err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			return fmt.Errorf("define fence %d: %d %s", i, res.StatusCode, b)
		}
	}
	return nil
}

// latencyHist counts latencies in buckets of latencyBucket up to
// latencyBuckets of them, and those beyond in the last.
type latencyHist struct {
	counts [latencyBuckets]atomic.Int64
	max    atomic.Int64
}

const (
	latencyBucket  = 100 * time.Microsecond
	latencyBuckets = 50_000 // 5 s
)

func (h *latencyHist) add(d time.Duration) {
	d = max(d, 0)
	h.counts[min(int(d/latencyBucket), latencyBuckets-1)].Add(1)
	for {
		m := h.max.Load()
		if int64(d) <= m || h.max.CompareAndSwap(m, int64(d)) {
			return
		}
	}
}

// percentile returns the upper bound of the bucket holding the p-th
// latency (the maximum for 1).
func (h *latencyHist) percentile(p float64) time.Duration {
	var total int64
	for i := range h.counts {
		total += h.counts[i].Load()
	}
	if total == 0 {
		return 0
	}
	if p >= 1 {
		return time.Duration(h.max.Load())
	}
	want := int64(p * float64(total))
	var seen int64
	for i := range h.counts {
		if seen += h.counts[i].Load(); seen > want {
			return time.Duration(i+1) * latencyBucket
		}
	}
	return time.Duration(h.max.Load())
}

// subscribers are the feed's readers of a run.
type subscribers struct {
	hist      latencyHist
	received  atomic.Int64
	disorder  atomic.Int64 // sequences that did not grow
	failures  atomic.Int64 // streams that ended before the run did
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	firstFail sync.Once
}

// startSubscribers opens n streams of GET /feed (from the feed's current
// end) and returns once each has its headers.
func startSubscribers(base string, n int) (*subscribers, error) {
	ctx, cancel := context.WithCancel(context.Background())
	s := &subscribers{cancel: cancel}
	tr := &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: n,
		DialContext: (&net.Dialer{Timeout: 10 * time.Second}).DialContext}
	hc := &http.Client{Transport: tr}
	after, err := feedEnd(hc, base)
	if err != nil {
		cancel()
		return nil, err
	}
	ready := make(chan error, n)
	for range n {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.read(ctx, hc, base, after, ready)
		}()
	}
	for range n {
		if err := <-ready; err != nil {
			s.stop()
			return nil, err
		}
	}
	return s, nil
}

// feedEnd returns the sequence the feed ends at now.
func feedEnd(hc *http.Client, base string) (uint64, error) {
	var after uint64
	for {
		res, err := hc.Get(fmt.Sprintf("%s/feed?wait_ms=0&limit=10000&after=%d", base, after))
		if err != nil {
			return 0, err
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			return 0, fmt.Errorf("GET /feed: %d %s", res.StatusCode, b)
		}
		next, ok := jsonString(b, `"next":"`)
		if !ok {
			return 0, fmt.Errorf("GET /feed: no next in %.200s", b)
		}
		after = next
		if !bytes.Contains(b, []byte(`"has_more":true`)) {
			return after, nil
		}
	}
}

// jsonString finds key (`"name":"`) in b and parses the decimal string
// after it.
func jsonString(b []byte, key string) (uint64, bool) {
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return 0, false
	}
	b = b[i+len(key):]
	j := bytes.IndexByte(b, '"')
	if j < 0 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[:j]), 10, 64)
	return v, err == nil
}

// read follows one stream until ctx ends.
func (s *subscribers) read(ctx context.Context, hc *http.Client, base string, after uint64, ready chan<- error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/feed?after=%d", base, after), nil)
	res, err := hc.Do(req)
	if err == nil && res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		err = fmt.Errorf("GET /feed: %d %s", res.StatusCode, b)
	}
	ready <- err
	if err != nil {
		return
	}
	defer res.Body.Close()
	br := bufio.NewReaderSize(res.Body, 64<<10)
	last := after
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			if ctx.Err() == nil {
				s.failures.Add(1)
				s.firstFail.Do(func() { fmt.Println("bench: a feed stream ended:", err) })
			}
			return
		}
		switch {
		case bytes.HasPrefix(line, []byte("id: ")):
			seq, err := strconv.ParseUint(string(bytes.TrimSpace(line[4:])), 10, 64)
			if err != nil || seq <= last {
				s.disorder.Add(1)
			}
			last = seq
		case bytes.HasPrefix(line, []byte("data: ")):
			now := time.Now().UnixNano()
			if op, ok := jsonString(line, `"op_ns":"`); ok {
				s.hist.add(time.Duration(now - int64(op)))
				s.received.Add(1)
			}
		case bytes.HasPrefix(line, []byte("event: error")):
			s.failures.Add(1)
			s.firstFail.Do(func() { fmt.Println("bench: a feed stream failed") })
		}
	}
}

func (s *subscribers) stop() {
	s.cancel()
	s.wg.Wait()
}

// report prints the subscribers' figures after a run of el.
func (s *subscribers) report(n int, el time.Duration) {
	got := s.received.Load()
	fmt.Printf("subscribers %d  notifications received %d (%.0f/s, %.0f per stream)  out of order %d  streams failed %d\n",
		n, got, float64(got)/el.Seconds(), float64(got)/float64(n), s.disorder.Load(), s.failures.Load())
	fmt.Printf("notification latency from op_ns p50 %s  p99 %s  p999 %s  max %s\n",
		s.hist.percentile(0.50), s.hist.percentile(0.99), s.hist.percentile(0.999), s.hist.percentile(1))
}

var errNoFeed = errors.New("--subscribers and --fences need --feed, the HTTP base URL of a replica's gateway (replica start --http)")
