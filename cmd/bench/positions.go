package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Position streams (--position-streams N --feed URL): N Server-Sent Event
// streams of GET /feed/positions at URL (a replica's gateway), each over a
// random box of positionBoxNano a side in the bench's box, open while the
// load runs, in the bench's own process. The report is the events the
// streams received a second over the measured run; the replica's own
// processor time is read beside it (docs/performance.md, Position
// streams).

// positionBoxNano is a stream's box side: 0.05 degrees, about 5.5 km, so
// that 1,000 streams cover about 60% of the bench's box.
const positionBoxNano = 50_000_000

// positionStreams is the open streams and what they have received.
type positionStreams struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	events atomic.Int64
	failed atomic.Int64
}

// openPositionStreams opens n streams and returns once each has answered
// its headers (or failed).
func openPositionStreams(base string, n int) *positionStreams {
	ctx, cancel := context.WithCancel(context.Background())
	ps := &positionStreams{cancel: cancel}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	r := rand.New(rand.NewPCG(7, 7))
	var ready sync.WaitGroup
	for range n {
		lat, lon := point(r)
		lat, lon = min(lat, 39_110_000_000-positionBoxNano), min(lon, 14_360_000_000-positionBoxNano)
		url := fmt.Sprintf("%s/feed/positions?bbox=%.9f,%.9f,%.9f,%.9f", base,
			degrees(lat), degrees(lon), degrees(lat+positionBoxNano), degrees(lon+positionBoxNano))
		ps.wg.Add(1)
		ready.Add(1)
		go func() {
			defer ps.wg.Done()
			req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
			resp, err := hc.Do(req)
			ready.Done()
			if err != nil || resp.StatusCode != http.StatusOK {
				ps.failed.Add(1)
				return
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				if bytes.HasPrefix(sc.Bytes(), []byte("event: position")) {
					ps.events.Add(1)
				} else if bytes.HasPrefix(sc.Bytes(), []byte("event: error")) && ctx.Err() == nil {
					ps.failed.Add(1)
				}
			}
		}()
	}
	ready.Wait()
	return ps
}

// stop closes the streams and waits for their readers.
func (ps *positionStreams) stop() {
	ps.cancel()
	ps.wg.Wait()
}

// measureFrom counts the events received from now until the returned
// function is called, which reports them.
func (ps *positionStreams) measureFrom() func(n int) {
	e0, t0 := ps.events.Load(), time.Now()
	return func(n int) {
		fmt.Printf("position streams %d: events/s %.0f  failed %d\n", n,
			float64(ps.events.Load()-e0)/time.Since(t0).Seconds(), ps.failed.Load())
	}
}
