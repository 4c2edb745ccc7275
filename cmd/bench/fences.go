package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/geoevent/geoevent/client"
	"github.com/geoevent/geoevent/core"
)

// Fences of --fences: polygons of benchFenceVertices vertices, about 900
// m across, at random over the bench box, as the state machine's fence
// benchmark has them: 100,000 of them add up to about 1.6 times the box's
// area, so that a random point lies inside 1.6 of them on average.
const (
	benchFenceVertices = 20
	benchFenceRadius   = 4_000_000 // nanodegrees of latitude, about 450 m
)

// benchFence is fence i of --fences: named bench-fence-i, around a point
// drawn from a source seeded by i, so that a run puts the fences an
// earlier one did (a put replaces a fence whole).
func benchFence(i int) *core.Fence {
	r := rand.New(rand.NewPCG(uint64(i), 38))
	lat, lon := point(r)
	ring := make([]core.Coordinate, benchFenceVertices)
	for k := range ring {
		a := 2 * math.Pi * float64(k) / benchFenceVertices
		ring[k] = core.Coordinate{LatNano: lat + int64(benchFenceRadius*math.Sin(a)), LonNano: lon + int64(1.27*benchFenceRadius*math.Cos(a))}
	}
	return &core.Fence{Name: "bench-fence-" + strconv.Itoa(i), Shape: core.FencePolygon, Vertices: ring}
}

// putFences puts fences 0 to n-1 through the binary protocol's put-fence
// operation, from cfg.concurrency sessions.
func putFences(ctx context.Context, c *client.Client, cfg config, n int) error {
	t0 := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, cfg.concurrency)
	for range cfg.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if _, err := c.PutFence(ctx, benchFence(i)); err != nil {
					errs <- fmt.Errorf("put fence %d: %w", i, err)
					return
				}
				if cfg.progress > 0 && i%20_000 == 0 {
					fmt.Printf("  fences %d/%d\n", i, n)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	fmt.Printf("put %d fences in %s\n", n, time.Since(t0).Round(time.Millisecond))
	return nil
}
