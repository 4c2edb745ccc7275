package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/geoevent/geoevent/core"
)

// Feed subscribers (--subscribers N --feed URL): the measurement of many
// readers of the fence feed while the cluster ingests. Before the run,
// --fences fences are put (fences.go), so that moves make notifications;
// then the ingest runs
// once alone (unless --baseline=false) and once with N Server-Sent Event
// streams of GET /feed open at --feed (one connection each), read by a
// second bench process (the bench started again with --subscribe-only),
// so that the readers do not take the load's threads. Each
// notification's latency is its arrival at the bench minus its op_ns (the
// leader's time for the entry, taken before it committed: the latency
// from commit and then some), and each stream checks its sequences only
// grow. The report is the ingest rate of both runs and their ratio, the
// notifications received and the latency percentiles. Over the binary
// protocol it also times notifications from the acknowledgement of the
// write that made them (sampledStreams streams, spread over the order in
// which the streams opened, keep each notification's event timestamp and
// arrival; matched after the run with the batch whose stored timestamps
// hold it): how long after its writer learnt of the commit a reader did.
// A notification that arrives first counts as 0. The streams are spread
// because the server wakes its streams for a commit in about the order
// they began to wait, so the first ones opened are served first: they
// would time the fastest readers only. The subscriber process runs at
// --subscriber-procs threads (GOMAXPROCS; Go's default, one per core,
// unless set) with the bench's GOGC.

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

// sampledStreams is how many streams keep their notifications' arrivals
// for the match with the acknowledgements.
const sampledStreams = 10

// ackLog records when each batch was acknowledged: its events' stored
// timestamps, which the server assigns in order, entry after entry, so
// batches' spans do not overlap.
type ackLog struct {
	mu    sync.Mutex
	spans []ackSpan
}

type ackSpan struct{ lo, hi, at int64 }

func (a *ackLog) add(results []core.EventResult) {
	if len(results) == 0 {
		return
	}
	now := time.Now().UnixNano()
	lo, hi := int64(results[0].TimestampNS), int64(results[0].TimestampNS)
	for _, r := range results {
		lo, hi = min(lo, int64(r.TimestampNS)), max(hi, int64(r.TimestampNS))
	}
	a.mu.Lock()
	a.spans = append(a.spans, ackSpan{lo, hi, now})
	a.mu.Unlock()
}

func (a *ackLog) reset() {
	if a != nil {
		a.mu.Lock()
		a.spans = nil
		a.mu.Unlock()
	}
}

// arrival is a sampled notification: its event's timestamp and when it
// came.
type arrival struct{ TS, At int64 }

// subscribers are the feed's readers of a run.
type subscribers struct {
	arrivals  [sampledStreams][]arrival
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
	every := max(n/sampledStreams, 1) // sampled streams spread over the opening order
	for i := range n {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			var sample *[]arrival
			if k := i / every; i%every == 0 && k < sampledStreams {
				sample = &s.arrivals[k]
			}
			s.read(ctx, hc, base, after, ready, sample)
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
// With sample, it keeps each notification's arrival there.
func (s *subscribers) read(ctx context.Context, hc *http.Client, base string, after uint64, ready chan<- error, sample *[]arrival) {
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
				s.firstFail.Do(func() { fmt.Fprintln(os.Stderr, "bench: a feed stream ended:", err) })
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
			if sample != nil {
				if ts, ok := jsonString(line, `"timestamp_ns":"`); ok {
					*sample = append(*sample, arrival{int64(ts), now})
				}
			}
		case bytes.HasPrefix(line, []byte("event: error")):
			s.failures.Add(1)
			s.firstFail.Do(func() { fmt.Fprintln(os.Stderr, "bench: a feed stream failed") })
		}
	}
}

func (s *subscribers) stop() {
	s.cancel()
	s.wg.Wait()
}

// subscriberResult is what the subscriber process reports at its end.
type subscriberResult struct {
	Received, Disorder, Failures int64
	P50, P99, P999, Max          time.Duration // from op_ns
	Arrivals                     []arrival     // of the sampled streams
}

func (s *subscribers) result() subscriberResult {
	r := subscriberResult{Received: s.received.Load(), Disorder: s.disorder.Load(), Failures: s.failures.Load(),
		P50: s.hist.percentile(0.50), P99: s.hist.percentile(0.99), P999: s.hist.percentile(0.999), Max: s.hist.percentile(1)}
	for _, a := range s.arrivals {
		r.Arrivals = append(r.Arrivals, a...)
	}
	return r
}

// runSubscribeOnly is the subscriber process (--subscribe-only): it opens
// the streams, says "ready" on its output, reads them until its input
// closes and then writes its result as one JSON line.
func runSubscribeOnly(cfg config) error {
	if cfg.procs > 0 {
		runtime.GOMAXPROCS(cfg.procs)
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(benchGOGC)
	}
	s, err := startSubscribers(cfg.feedURL, cfg.subscribers)
	if err != nil {
		return err
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	time.Sleep(200 * time.Millisecond) // the last notifications arrive
	s.stop()
	return json.NewEncoder(os.Stdout).Encode(s.result())
}

// subscriberProc is the subscriber process of a run: the streams' readers
// run beside the load's sessions, not on their threads, as remote readers
// would.
type subscriberProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

// spawnSubscribers starts the bench again as the subscriber process and
// waits until its streams are open.
func spawnSubscribers(cfg config) (*subscriberProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "--subscribe-only", "--subscribers", strconv.Itoa(cfg.subscribers), "--feed", cfg.feedURL,
		"--procs", strconv.Itoa(cfg.subProcs))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &subscriberProc{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	line, err := p.out.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		stdin.Close()
		cmd.Wait()
		return nil, fmt.Errorf("the subscriber process did not start: %q %v", line, err)
	}
	return p, nil
}

// finish ends the subscriber process and returns its result.
func (p *subscriberProc) finish() (subscriberResult, error) {
	p.stdin.Close()
	var r subscriberResult
	err := json.NewDecoder(p.out).Decode(&r)
	if werr := p.cmd.Wait(); err == nil {
		err = werr
	}
	return r, err
}

// report prints the subscribers' figures after a run of el, with the
// latency from the writers' acknowledgements when acks is not nil.
func (r *subscriberResult) report(n int, el time.Duration, acks *ackLog) {
	fmt.Printf("subscribers %d  notifications received %d (%.0f/s, %.0f per stream)  out of order %d  streams failed %d\n",
		n, r.Received, float64(r.Received)/el.Seconds(), float64(r.Received)/float64(n), r.Disorder, r.Failures)
	fmt.Printf("notification latency from op_ns p50 %s  p99 %s  p999 %s  max %s\n", r.P50, r.P99, r.P999, r.Max)
	if acks == nil {
		return
	}
	spans := acks.spans
	slices.SortFunc(spans, func(a, b ackSpan) int { return cmp.Compare(a.lo, b.lo) })
	var h latencyHist
	matched, early := 0, 0
	for _, a := range r.Arrivals {
		i := sort.Search(len(spans), func(i int) bool { return spans[i].hi >= a.TS })
		if i == len(spans) || spans[i].lo > a.TS {
			continue // a write of another client, or of the baseline
		}
		matched++
		if a.At < spans[i].at {
			early++
		}
		h.add(time.Duration(a.At - spans[i].at))
	}
	fmt.Printf("notification latency from the write's acknowledgement (%d notifications of %d streams; %d came first) p50 %s  p99 %s  p999 %s  max %s\n",
		matched, min(n, sampledStreams), early, h.percentile(0.50), h.percentile(0.99), h.percentile(0.999), h.percentile(1))
}

var errNoFeed = errors.New("--subscribers and --position-streams need --feed, the HTTP base URL of a replica's gateway (replica start --http)")
