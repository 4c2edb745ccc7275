package statemachine

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/geoevent/geoevent/core"
)

// The benchmarks of the foundation issue. Data: entities uniform in a 2 x 2
// degree box around lat 38.11, lon 13.36. Names are fixed so results can be
// tracked across commits; each reports its throughput with ReportMetric.

const (
	benchEntities = 1_000_000
	benchBatch    = 10_000
	benchLat      = 38_110_000_000
	benchLon      = 13_360_000_000
	benchHalfBox  = 1_000_000_000 // one degree each way
)

func benchPoint(r *rand.Rand) (int64, int64) {
	return benchLat - benchHalfBox + r.Int64N(2*benchHalfBox), benchLon - benchHalfBox + r.Int64N(2*benchHalfBox)
}

// benchID draws one of the ids 1..n that benchEvents gives entities.
func benchID(r *rand.Rand, n int) core.Uint128 {
	return core.Uint128{Hi: 1, Lo: uint64(1 + r.IntN(n))}
}

func benchEvents(r *rand.Rand, firstID, n int) []core.GeoEvent {
	evs := make([]core.GeoEvent, n)
	for i := range evs {
		lat, lon := benchPoint(r)
		evs[i] = core.GeoEvent{EntityID: core.Uint128{Hi: 1, Lo: uint64(firstID + i)}, LatNano: lat, LonNano: lon, GroupID: uint64(i % 16)}
	}
	AssignCells(evs)
	return evs
}

var (
	benchOnce sync.Once
	benchSM   *StateMachine
	benchNow  uint64

	velocityOnce sync.Once
	velocitySM   *StateMachine
	velocityNow  uint64
)

// loaded returns a state machine holding benchEntities entities, built once
// and shared by the read benchmarks.
func loaded(b *testing.B) *StateMachine {
	benchOnce.Do(func() {
		benchSM, benchNow = newBench(), epoch
		insertBench(benchSM, rand.New(rand.NewPCG(1, 2)), &benchNow, nil)
	})
	return benchSM
}

// loadedWithVelocity returns a state machine holding the entities of
// loaded whose events also carry a speed and a heading, as a fleet's do:
// fields beyond position and group, which the store keeps in its full
// chunks (store.go). Built once, for the queries' ...Velocity benchmarks.
func loadedWithVelocity() (*StateMachine, uint64) {
	velocityOnce.Do(func() {
		velocitySM, velocityNow = newBench(), epoch
		insertBench(velocitySM, rand.New(rand.NewPCG(1, 2)), &velocityNow, func(evs []core.GeoEvent) {
			for i := range evs {
				evs[i].VelocityMMS, evs[i].HeadingCdeg = uint32(1+i%30_000), uint16(i%36_000)
			}
		})
	})
	return velocitySM, velocityNow
}

// insertBench inserts benchEntities new entities into sm, a batch every
// millisecond from *now on, and leaves *now at the last batch's time. dress,
// when set, adds fields to each batch's events before it is inserted.
func insertBench(sm *StateMachine, r *rand.Rand, now *uint64, dress func([]core.GeoEvent)) {
	for first := 1; first <= benchEntities; first += benchBatch {
		*now += 1e6
		evs := benchEvents(r, first, benchBatch)
		if dress != nil {
			dress(evs)
		}
		if _, err := sm.Insert(*now, &core.InsertRequest{Events: evs}); err != nil {
			panic(err)
		}
	}
}

func BenchmarkInsertBatch10k(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	sm := newBench()
	now := uint64(epoch)
	next := 1
	// Preload to the benchmark's state size, then time further batches of new entities.
	for ; next <= benchEntities; next += benchBatch {
		now += 1e6
		sm.Insert(now, &core.InsertRequest{Events: benchEvents(r, next, benchBatch)})
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		evs := benchEvents(r, next, benchBatch)
		next += benchBatch
		now += 1e6
		b.StartTimer()
		if r, _ := sm.Insert(now, &core.InsertRequest{Events: evs}); !r.Committed {
			b.Fatal("not committed")
		}
	}
	sm.flushSpatial() // the changes left pending are part of the work
	b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "events/s")
}

func BenchmarkUpsertBatch10k(b *testing.B) {
	sm := loaded(b)
	r := rand.New(rand.NewPCG(5, 6))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		evs := make([]core.GeoEvent, benchBatch)
		for j := range evs {
			lat, lon := benchPoint(r)
			evs[j] = core.GeoEvent{EntityID: benchID(r, benchEntities), LatNano: lat, LonNano: lon}
		}
		AssignCells(evs)
		benchNow += 1e6
		b.StartTimer()
		if r, _ := sm.Upsert(benchNow, &core.InsertRequest{Events: evs}); !r.Committed {
			b.Fatal("not committed")
		}
	}
	sm.flushSpatial() // the changes left pending are part of the work
	b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "events/s")
}

func BenchmarkQueryRadius1km(b *testing.B) {
	sm := loaded(b)
	benchRadius(b, sm, benchNow)
}

// BenchmarkQueryRadius1kmVelocity is BenchmarkQueryRadius1km over entities
// whose events carry a speed and a heading (no target).
func BenchmarkQueryRadius1kmVelocity(b *testing.B) {
	sm, now := loadedWithVelocity()
	benchRadius(b, sm, now)
}

// benchRadius runs 1 km radius queries at random points of the box against
// sm at time now.
func benchRadius(b *testing.B, sm *StateMachine, now uint64) {
	r := rand.New(rand.NewPCG(7, 8))
	results := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		lat, lon := benchPoint(r)
		res, err := sm.QueryRadius(now, &core.RadiusQuery{Center: core.Coordinate{LatNano: lat, LonNano: lon}, RadiusMM: 1_000_000})
		if err != nil {
			b.Fatal(err)
		}
		results += len(res.Events)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "queries/s")
	b.ReportMetric(float64(results)/float64(b.N), "results/query")
}

// benchPolygon is a 20-vertex star-ish ring about 5 km across with a
// square hole in its middle, centred on (lat, lon).
func benchPolygon(lat, lon int64) ([]core.Coordinate, [][]core.Coordinate) {
	const r1, r2 = 22_500_000, 15_000_000 // nanodegrees: ~2.5 km and ~1.7 km north-south
	outer := make([]core.Coordinate, 20)
	for i := range outer {
		rad := int64(r1)
		if i%2 == 1 {
			rad = r2
		}
		s, c := sinCos(float64(i) * 2 * 3.141592653589793 / 20)
		outer[i] = core.Coordinate{LatNano: lat + int64(float64(rad)*s), LonNano: lon + int64(float64(rad)*c*1.27)}
	}
	const h = 4_000_000
	hole := []core.Coordinate{pt(lat-h, lon-h), pt(lat-h, lon+h), pt(lat+h, lon+h), pt(lat+h, lon-h)}
	return outer, [][]core.Coordinate{hole}
}

func BenchmarkQueryPolygon(b *testing.B) {
	sm := loaded(b)
	benchPolygonQueries(b, sm, benchNow)
}

// BenchmarkQueryPolygonVelocity is BenchmarkQueryPolygon over entities
// whose events carry a speed and a heading (no target).
func BenchmarkQueryPolygonVelocity(b *testing.B) {
	sm, now := loadedWithVelocity()
	benchPolygonQueries(b, sm, now)
}

// benchPolygonQueries runs benchPolygon queries at random points of the box
// against sm at time now.
func benchPolygonQueries(b *testing.B, sm *StateMachine, now uint64) {
	r := rand.New(rand.NewPCG(9, 10))
	results := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		lat, lon := benchPoint(r)
		outer, holes := benchPolygon(lat, lon)
		res, err := sm.QueryPolygon(now, &core.PolygonQuery{Vertices: outer, Holes: holes})
		if err != nil {
			b.Fatal(err)
		}
		results += len(res.Events)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "queries/s")
	b.ReportMetric(float64(results)/float64(b.N), "results/query")
}

func BenchmarkGetLatest(b *testing.B) {
	sm := loaded(b)
	r := rand.New(rand.NewPCG(11, 12))
	ids := make([]core.Uint128, 1<<16)
	for i := range ids {
		ids[i] = benchID(r, benchEntities)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if res, _ := sm.GetLatest(benchNow, ids[i&(len(ids)-1)]); !res.Found {
			b.Fatal("not found")
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lookups/s")
}

// BenchmarkGetLatestBatch looks up batches of 100 random entities (a
// dashboard's fleet, POST /entities/batch), and reports lookups, not
// batches, a second.
func BenchmarkGetLatestBatch(b *testing.B) {
	sm := loaded(b)
	r := rand.New(rand.NewPCG(13, 14))
	const batch, batches = 100, 1 << 10
	ids := make([]core.Uint128, batch*batches)
	for i := range ids {
		ids[i] = benchID(r, benchEntities)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		at := i % batches * batch
		res, err := sm.GetLatestBatch(benchNow, ids[at:at+batch])
		if err != nil || !res[0].Found {
			b.Fatal("not found", err)
		}
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "lookups/s")
}

// BenchmarkDeleteBatch deletes batches of 1,000 random entities (a
// DELETE /entities), inserting them again between batches (not timed), and
// reports entities deleted a second.
func BenchmarkDeleteBatch(b *testing.B) {
	sm := loaded(b)
	r := rand.New(rand.NewPCG(17, 18))
	const batch = 1000
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		ids := make([]core.Uint128, batch)
		evs := make([]core.GeoEvent, batch)
		for j := range ids {
			ids[j] = benchID(r, benchEntities)
			lat, lon := benchPoint(r)
			evs[j] = core.GeoEvent{EntityID: ids[j], LatNano: lat, LonNano: lon}
		}
		AssignCells(evs)
		benchNow += 1e6
		b.StartTimer()
		d, err := sm.DeleteEntities(benchNow, &core.DeleteRequest{EntityIDs: ids})
		if err != nil || d.Deleted == 0 {
			b.Fatalf("delete: %+v %v", d, err)
		}
		b.StopTimer()
		// Put them back (an id drawn twice is deleted once).
		if _, err := sm.Upsert(benchNow, &core.InsertRequest{Events: evs}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "deletes/s")
}

var (
	movedOnce sync.Once
	movedSM   *StateMachine
	movedNow  uint64
)

// moved returns a state machine holding benchEntities entities that have
// each been inserted and then moved once, in random order: unlike
// loaded's, their order in time is not their order in memory (as in a
// fleet whose vehicles report at their own pace).
func moved(b *testing.B) *StateMachine {
	movedOnce.Do(func() {
		r := rand.New(rand.NewPCG(3, 4))
		movedSM, movedNow = newBench(), epoch
		insertBench(movedSM, r, &movedNow, nil)
		order := r.Perm(benchEntities)
		for k := 0; k < benchEntities; k += benchBatch {
			evs := benchEvents(r, 1, benchBatch)
			for i := range evs {
				evs[i].EntityID.Lo = uint64(1 + order[k+i])
			}
			movedNow += 1e6
			if _, err := movedSM.Upsert(movedNow, &core.InsertRequest{Events: evs}); err != nil {
				panic(err)
			}
		}
	})
	return movedSM
}

// BenchmarkQueryLatest reads pages of the default 1,000 latest positions
// across all entities, each from a random place in time (a cursor just
// after a random entity's latest event), and reports pages a second.
func BenchmarkQueryLatest(b *testing.B) {
	sm := moved(b)
	r := rand.New(rand.NewPCG(15, 16))
	cursors := make([]string, 256)
	for i := range cursors {
		slot, ok := sm.ids.get(benchID(r, benchEntities))
		if !ok {
			b.Fatal("an entity is missing")
		}
		cursors[i] = encodeCursor(kindLatest, timeKey(sm.store.at(slot)))
	}
	results := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := sm.QueryLatest(movedNow, &core.LatestQuery{Page: core.Page{Cursor: cursors[i%len(cursors)]}})
		if err != nil {
			b.Fatal(err)
		}
		results += len(res.Events)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pages/s")
	b.ReportMetric(float64(results)/float64(b.N), "results/page")
}

// BenchmarkHistory reads whole histories of 1,000 events (one page of
// the default limit) of random entities: "where has it been". The state
// holds 1,000 entities that each reported 1,000 times, a batch of one
// report each a second.
func BenchmarkHistory(b *testing.B) {
	const entities, reports = 1_000, 1_000
	r := rand.New(rand.NewPCG(17, 18))
	sm, now := New(), uint64(epoch)
	for range reports {
		now += 1e9
		if _, err := sm.Insert(now, &core.InsertRequest{Events: benchEvents(r, 1, entities)}); err != nil {
			b.Fatal(err)
		}
	}
	results := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		q := core.HistoryQuery{EntityID: benchID(r, entities)}
		res, err := sm.History(now, &q)
		if err != nil {
			b.Fatal(err)
		}
		results += len(res.Events)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pages/s")
	b.ReportMetric(float64(results)/float64(b.N), "results/page")
}

// BenchmarkMemoryPerEntity builds a state of benchEntities entities with one
// event each and reports live heap bytes per entity after a GC.
func BenchmarkMemoryPerEntity(b *testing.B) {
	for i := 0; i < b.N; i++ {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		r := rand.New(rand.NewPCG(13, 14))
		sm := newBench()
		now := uint64(epoch)
		for first := 1; first <= benchEntities; first += benchBatch {
			now += 1e6
			sm.Insert(now, &core.InsertRequest{Events: benchEvents(r, first, benchBatch)})
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/benchEntities, "bytes/entity")
		runtime.KeepAlive(sm)
	}
}

func sinCos(x float64) (float64, float64) { return math.Sin(x), math.Cos(x) }

// BenchmarkReadSnapshot restores the benchmark state (1,000,000 entities)
// from its snapshot: what a follower that is sent a snapshot, or a replica
// that restarts, spends before it serves.
func BenchmarkReadSnapshot(b *testing.B) {
	var buf bytes.Buffer
	if err := loaded(b).WriteSnapshot(&buf); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := ReadSnapshot(bytes.NewReader(buf.Bytes())); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(benchEntities)/(b.Elapsed().Seconds()/float64(b.N)), "entities/s")
}

// BenchmarkCleanupExpiredHistory: 10,000 entities report once a second
// with a TTL of 1,000 s, so each holds a history of about 1,000 events
// (four blocks), and every second one more of each expires. Entity e
// began reporting at second e%64, so that their removal dues (expiry +
// ttl/16) are spread over the 62.5 s between an entity's cleanups. One op
// is a second: a batch of the 10,000 entities' new events, then a
// cleanup, which takes some 160 entities and removes some 63 events of
// each (158-159 and 63.0 measured). It reports what cleanup costs per
// event it removes, and those two counts.
func BenchmarkCleanupExpiredHistory(b *testing.B) {
	const entities, ttl = 10_000, 1_000
	r := rand.New(rand.NewPCG(1, 2))
	sm := New()
	now := uint64(epoch)
	var took time.Duration
	removed, scanned := 0, 0
	second := func(k int) {
		evs := benchEvents(r, 1, entities)
		kept := evs[:0]
		for i := range evs {
			evs[i].TTLSeconds = ttl
			if i%64 <= k {
				kept = append(kept, evs[i])
			}
		}
		if _, err := sm.Insert(now, &core.InsertRequest{Events: kept}); err != nil {
			b.Fatal(err)
		}
		now += 1e9
		start := time.Now()
		cl, err := sm.CleanupExpired(now-1, &core.CleanupRequest{})
		took += time.Since(start)
		removed += int(cl.Removed)
		scanned += int(cl.Scanned)
		if err != nil || cl.Scanned == core.DefaultCleanupLimit {
			b.Fatalf("cleanup: %+v %v", cl, err)
		}
	}
	for k := range ttl + 64 {
		second(k)
	}
	b.ResetTimer()
	took, removed, scanned = 0, 0, 0
	for k := range b.N {
		second(ttl + 64 + k)
	}
	if removed < b.N*entities/2 {
		b.Fatalf("%d events removed in %d seconds", removed, b.N)
	}
	b.ReportMetric(float64(took.Nanoseconds())/float64(removed), "cleanup-ns/event")
	b.ReportMetric(float64(scanned)/float64(b.N), "entities/cleanup")
	b.ReportMetric(float64(removed)/float64(scanned), "events/entity")
}

// BenchmarkQueryNearest10 asks for the 10 nearest entities to random points
// of the box (target: 100 k queries/s); ...100 for the 100 nearest (target
// 30 k).
func BenchmarkQueryNearest10(b *testing.B)  { benchNearest(b, loaded(b), 10) }
func BenchmarkQueryNearest100(b *testing.B) { benchNearest(b, loaded(b), 100) }

func benchNearest(b *testing.B, sm *StateMachine, k uint32) {
	benchQueries(b, func(lat, lon int64) (core.QueryResult, error) {
		return sm.QueryNearest(benchNow, &core.NearestQuery{Center: core.Coordinate{LatNano: lat, LonNano: lon}, Page: core.Page{Limit: k}})
	})
}

// BenchmarkQueryBBox asks for 2 km by 2 km boxes at random points of the
// box (target: at least BenchmarkQueryRadius1km's rate).
func BenchmarkQueryBBox(b *testing.B) {
	sm := loaded(b)
	const halfLat, halfLon = 8_993_000, 11_420_000 // 1 km at latitude 38.1
	benchQueries(b, func(lat, lon int64) (core.QueryResult, error) {
		return sm.QueryBBox(benchNow, &core.BBoxQuery{MinLatNano: lat - halfLat, MinLonNano: lon - halfLon, MaxLatNano: lat + halfLat, MaxLonNano: lon + halfLon})
	})
}

// benchQueries runs query at random points of the box and reports its
// rate and results.
func benchQueries(b *testing.B, query func(lat, lon int64) (core.QueryResult, error)) {
	r := rand.New(rand.NewPCG(7, 8))
	results := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		lat, lon := benchPoint(r)
		res, err := query(lat, lon)
		if err != nil {
			b.Fatal(err)
		}
		results += len(res.Events)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "queries/s")
	b.ReportMetric(float64(results)/float64(b.N), "results/query")
}

// BenchmarkQueryNearest10At10M and ...100At10M are the nearest benchmarks
// over 10,000,000 entities at the same density as the others' 1,000,000
// (a box of 10 times the area, the queries in the middle of it): a
// nearest query's cost grows with k and the density around it, not with
// the number of entities. Building the state takes about a minute and
// 2 GB, so they run only when GEOEVENT_BENCH_10M is set.
func BenchmarkQueryNearest10At10M(b *testing.B)  { benchNearest(b, loaded10M(b), 10) }
func BenchmarkQueryNearest100At10M(b *testing.B) { benchNearest(b, loaded10M(b), 100) }

var (
	tenMOnce sync.Once
	tenMSM   *StateMachine
)

func loaded10M(b *testing.B) *StateMachine {
	if os.Getenv("GEOEVENT_BENCH_10M") == "" {
		b.Skip("set GEOEVENT_BENCH_10M to build 10,000,000 entities")
	}
	tenMOnce.Do(func() {
		sm, now := New(), uint64(epoch)
		r := rand.New(rand.NewPCG(1, 2))
		half := int64(math.Round(math.Sqrt(10) * benchHalfBox)) // 10 times the area
		for first := 1; first <= 10*benchEntities; first += benchBatch {
			now += 1e6
			evs := make([]core.GeoEvent, benchBatch)
			for i := range evs {
				evs[i] = core.GeoEvent{EntityID: core.Uint128{Hi: 1, Lo: uint64(first + i)},
					LatNano: benchLat - half + r.Int64N(2*half), LonNano: benchLon - half + r.Int64N(2*half), GroupID: uint64(i % 16)}
			}
			AssignCells(evs)
			if _, err := sm.Insert(now, &core.InsertRequest{Events: evs}); err != nil {
				panic(err)
			}
		}
		tenMSM = sm // (its entities never expire: benchNow reads them all)
	})
	return tenMSM
}

// BenchmarkQueryPolygonPlanar is BenchmarkQueryPolygon's polygons with
// planar edges (no target).
func BenchmarkQueryPolygonPlanar(b *testing.B) {
	sm := loaded(b)
	benchQueries(b, func(lat, lon int64) (core.QueryResult, error) {
		outer, holes := benchPolygon(lat, lon)
		return sm.QueryPolygon(benchNow, &core.PolygonQuery{Vertices: outer, Holes: holes, Edges: core.EdgesPlanar})
	})
}
