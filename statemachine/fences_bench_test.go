package statemachine

import (
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/geoevent/geoevent/core"
)

// benchFences is the fence count of the fence benchmarks: polygons of
// benchFenceVertices vertices, about 900 m across, at random over the
// benchmark box (their areas add up to about 1.6 times the box's: a
// point lies inside 1.6 of them on average).
const (
	benchFences        = 100_000
	benchFenceVertices = 20
	benchFenceRadius   = 4_000_000 // nanodegrees of latitude, about 450 m
)

var (
	fencedOnce sync.Once
	fencedSM   *StateMachine
	fencedNow  uint64
)

// benchFencePolygon is a benchFenceVertices-gon around (lat, lon).
func benchFencePolygon(lat, lon int64) []core.Coordinate {
	ring := make([]core.Coordinate, benchFenceVertices)
	for i := range ring {
		a := 2 * math.Pi * float64(i) / benchFenceVertices
		ring[i] = core.Coordinate{LatNano: lat + int64(benchFenceRadius*math.Sin(a)), LonNano: lon + int64(1.27*benchFenceRadius*math.Cos(a))}
	}
	return ring
}

// fenced returns a state machine like loaded's with benchFences fences,
// built once: on the same store (newBench), so that the difference
// between a Fenced benchmark and its twin without fences is the fences'.
// Its feed keeps the last 1,000,000 notifications.
func fenced(b *testing.B) (*StateMachine, uint64) {
	fencedOnce.Do(func() {
		fencedSM, fencedNow = newBench(), epoch
		fencedSM.setFeedRetention(0, 1_000_000)
		r := rand.New(rand.NewPCG(7, 8))
		for i := range benchFences {
			lat, lon := benchPoint(r)
			f := &core.Fence{Name: "f" + strconv.Itoa(i), Shape: core.FencePolygon, Vertices: benchFencePolygon(lat, lon)}
			if _, err := fencedSM.PutFence(fencedNow, f); err != nil {
				panic(err)
			}
		}
		insertBench(fencedSM, rand.New(rand.NewPCG(1, 2)), &fencedNow, nil)
	})
	return fencedSM, fencedNow
}

// BenchmarkUpsertBatch10kFenced is BenchmarkUpsertBatch10k with 100,000
// fences: every event is judged against them, and its transitions go into
// the feed. Compare its events/s with BenchmarkUpsertBatch10k's (run them
// interleaved); the difference per event is the fence check's cost.
func BenchmarkUpsertBatch10kFenced(b *testing.B) {
	sm, now := fenced(b)
	r := rand.New(rand.NewPCG(5, 6))
	fencedNow = benchMoves(b, sm, now, func(ev *core.GeoEvent) {
		ev.EntityID = benchID(r, benchEntities)
		ev.LatNano, ev.LonNano = benchPoint(r)
	})
}

// BenchmarkUpsertBatch10kFencedLocal is BenchmarkUpsertBatch10kFenced
// with a fleet's moves: each event moves its entity up to about 50 m from
// where it is, so that most events cross no fence edge (the random jumps
// of the other benchmark make about 3 notifications an event).
func BenchmarkUpsertBatch10kFencedLocal(b *testing.B) {
	sm, now := fenced(b)
	fencedNow = benchMoves(b, sm, now, localMoves(sm, now))
}

// BenchmarkUpsertBatch10kLocal is BenchmarkUpsertBatch10kFencedLocal
// without fences: the difference is the fence check's cost.
func BenchmarkUpsertBatch10kLocal(b *testing.B) {
	sm := loaded(b)
	benchNow = benchMoves(b, sm, benchNow, localMoves(sm, benchNow))
}

// localMoves returns a move that takes a random entity of sm up to about
// 50 m from where it is.
func localMoves(sm *StateMachine, now uint64) func(*core.GeoEvent) {
	pos := make([]core.Coordinate, benchEntities+1)
	for i := 1; i <= benchEntities; i++ {
		l, _ := sm.GetLatest(now, core.Uint128{Hi: 1, Lo: uint64(i)})
		pos[i] = core.Coordinate{LatNano: l.Event.LatNano, LonNano: l.Event.LonNano}
	}
	r := rand.New(rand.NewPCG(9, 10))
	return func(ev *core.GeoEvent) {
		ev.EntityID = benchID(r, benchEntities)
		p := &pos[ev.EntityID.Lo]
		p.LatNano = min(max(p.LatNano+r.Int64N(900_001)-450_000, benchLat-benchHalfBox), benchLat+benchHalfBox)
		p.LonNano = min(max(p.LonNano+r.Int64N(900_001)-450_000, benchLon-benchHalfBox), benchLon+benchHalfBox)
		ev.LatNano, ev.LonNano = p.LatNano, p.LonNano
	}
}

// benchMoves upserts batches of events that move fills in into sm from
// time now on, as log entries, and returns the time of the last batch. It
// reports the notifications of the last batch per event.
func benchMoves(b *testing.B, sm *StateMachine, now uint64, move func(*core.GeoEvent)) uint64 {
	var lastBatch uint64 // the newest sequence before the last batch
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var cpu time.Duration // the thread's processor time in Upsert: robust to a loaded machine
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		evs := make([]core.GeoEvent, benchBatch)
		for j := range evs {
			move(&evs[j])
		}
		AssignCells(evs)
		now += 1e6
		sm.BeginEntry(now/1e6, now)
		lastBatch = sm.FeedLast()
		b.StartTimer()
		c0 := threadCPU()
		if r, _ := sm.Upsert(now, &core.InsertRequest{Events: evs}); !r.Committed {
			b.Fatal("not committed")
		}
		cpu += threadCPU() - c0
	}
	sm.flushSpatial()
	b.StopTimer()
	b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "events/s")
	if cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*benchBatch), "cpu-ns/event")
	}
	b.ReportMetric(float64(countNotes(b, sm, lastBatch, now))/benchBatch, "notes/event")
	return now
}

// countNotes counts the notifications after sequence after.
func countNotes(b *testing.B, sm *StateMachine, after, now uint64) int {
	notes := 0
	for {
		p, err := sm.ReadFeed(now, &core.FeedRequest{After: after, Limit: core.MaxFeedLimit})
		if err != nil {
			b.Fatal(err)
		}
		notes += len(p.Notifications)
		if !p.HasMore {
			return notes
		}
		after = p.Next
	}
}
