package statemachine

import (
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/geoevent/geoevent/core"
)

// BenchmarkFeedMemory fills a feed with the default retention's
// 10,000,000 notifications naming 100,000 fences, in entries of 10,000
// events, each event making 1.6 notifications on average (as the inserts
// of the fenced end-to-end benchmark do) or 3.2 (its upserts). It reports the heap
// the feed holds a notification after a collection (bytes/note), the time
// a push takes a notification (the thread's processor time), the
// collector's processor time a notification while the feed fills (the
// runtime's estimate), and how long a collection takes with the feed held
// (gc-ms: the chunks are not scanned when they hold no pointer). Run it
// with -benchtime 1x.
func BenchmarkFeedMemory(b *testing.B) {
	fences := make([]*fence, benchFences)
	for i := range fences {
		fences[i] = &fence{def: core.Fence{Name: "bench-fence-" + strconv.Itoa(i)}}
	}
	b.Run("notes=1.6", func(b *testing.B) { benchFeedMemory(b, fences, []int{1, 2, 2, 1, 2}) })
	b.Run("notes=3.2", func(b *testing.B) { benchFeedMemory(b, fences, []int{3, 3, 4, 3, 3}) })
}

// benchFeedMemory is BenchmarkFeedMemory with events that make
// pattern[i%len(pattern)] notifications.
func benchFeedMemory(b *testing.B, fences []*fence, pattern []int) {
	const total = core.DefaultFeedRetentionCount
	for range b.N {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		sm := New()
		f := &sm.watch.feed
		r := rand.New(rand.NewPCG(1, 2))
		notes := make([]fenceNote, slices.Max(pattern))
		runtime.LockOSThread()
		gc0, start := gcCPU(), threadCPU()
		for made, ev := 0, 0; made < total; ev++ {
			if ev%10_000 == 0 {
				sm.BeginEntry(uint64(1+ev/10_000), epoch+uint64(ev))
			}
			k := min(pattern[ev%len(pattern)], total-made)
			e := core.GeoEvent{EntityID: benchID(r, benchEntities), TimestampNS: epoch + uint64(ev)}
			e.LatNano, e.LonNano = benchPoint(r)
			for i := range k {
				notes[i] = fenceNote{fences[r.IntN(len(fences))], core.NotifyEnter}
			}
			f.pushEvent(&e, core.Coordinate{LatNano: e.LatNano + 1, LonNano: e.LonNano - 1}, true, notes[:k])
			made += k
		}
		push, gcFill := threadCPU()-start, gcCPU()-gc0
		runtime.UnlockOSThread()
		runtime.GC()
		runtime.ReadMemStats(&after)
		t0 := time.Now()
		runtime.GC()
		gc := time.Since(t0)
		if f.n != total {
			b.Fatalf("%d notifications retained", f.n)
		}
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/total, "bytes/note")
		b.ReportMetric(float64(push.Nanoseconds())/total, "push-cpu-ns/note")
		b.ReportMetric(gcFill*1e9/total, "gc-cpu-ns/note")
		b.ReportMetric(float64(gc.Microseconds())/1000, "gc-ms")
		runtime.KeepAlive(sm)
		runtime.KeepAlive(fences)
	}
}

// gcCPU returns the processor time the garbage collector has taken, in
// seconds, as the runtime estimates it.
func gcCPU() float64 {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64 {
		return 0
	}
	return s[0].Value.Float64()
}
