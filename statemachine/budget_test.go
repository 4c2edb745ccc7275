package statemachine

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/statemachine/internal/geom"
	"github.com/golang/geo/s2"
)

// circleRing is a ring of n vertices on a circle of the given radius (in
// degrees of latitude; longitude scaled to keep it round) about (lat, lon).
func circleRing(lat, lon int64, radiusDeg float64, n int) []core.Coordinate {
	ring := make([]core.Coordinate, n)
	k := 1 / math.Cos(float64(lat)*1e-9*math.Pi/180)
	for i := range ring {
		s, c := math.Sincos(float64(i) * 2 * math.Pi / float64(n))
		ring[i] = core.Coordinate{LatNano: lat + int64(radiusDeg*s*1e9), LonNano: lon + int64(radiusDeg*c*k*1e9)}
	}
	return ring
}

// worstPolygon is the largest polygon the limits allow: an outer ring of
// 1,000 vertices about (lat, lon) with 100 holes of 1,000 vertices each in
// a 10 x 10 lattice inside it: 101,000 edges. span is the outer ring's
// radius in degrees of latitude.
func worstPolygon(lat, lon int64, span float64) ([]core.Coordinate, [][]core.Coordinate) {
	outer := circleRing(lat, lon, span, core.MaxPolygonVertices)
	holes := make([][]core.Coordinate, 0, core.MaxPolygonHoles)
	step := span * 1.2 / 9 // lattice spacing: the lattice spans 1.2 span, within the circle
	k := 1 / math.Cos(float64(lat)*1e-9*math.Pi/180)
	for a := 0; a < 10; a++ {
		for b := 0; b < 10; b++ {
			hl := lat + int64((float64(a)-4.5)*step*1e9)
			ho := lon + int64((float64(b)-4.5)*step*k*1e9)
			holes = append(holes, circleRing(hl, ho, step/3, core.MaxPolygonVertices))
		}
	}
	return outer, holes
}

// BenchmarkWorstPolygonBuild is a query of the largest polygon on an
// empty state: its validation and plan alone. Two polygons take turns, so
// that the builder's cache of the last one does not serve them.
func BenchmarkWorstPolygonBuild(b *testing.B) {
	sm := New()
	var qs [2]core.PolygonQuery
	for i := range qs {
		qs[i].Vertices, qs[i].Holes = worstPolygon(benchLat+int64(i)*1_000_000, benchLon, 1.4)
	}
	for i := 0; i < b.N; i++ {
		if _, err := sm.QueryPolygon(epoch, &qs[i%2]); err != nil {
			b.Fatal(err)
		}
	}
}

// reproState holds n entities uniform in the benchmarks' 2 x 2 degree box,
// in groups 0 to 15; it returns them too.
func reproState(n int) (*StateMachine, uint64, []core.GeoEvent) {
	sm, now := New(), uint64(epoch)
	r := rand.New(rand.NewPCG(1, 2))
	all := make([]core.GeoEvent, 0, n)
	for first := 1; first <= n; first += benchBatch {
		now += 1e6
		evs := benchEvents(r, first, min(benchBatch, n-first+1))
		if _, err := sm.Insert(now, &core.InsertRequest{Events: evs}); err != nil {
			panic(err)
		}
		all = append(all, evs...)
	}
	return sm, now, all
}

// pageTimes pages a query to its end and returns each page's wall time and
// thread processor time, and the events it returned in all.
func pageTimes(t testing.TB, page func(cursor string) (core.QueryResult, error)) (wall, cpu []time.Duration, events int) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cursor := ""
	for {
		c0, w0 := threadCPU(), time.Now()
		r, err := page(cursor)
		w, c := time.Since(w0), threadCPU()-c0
		if err != nil {
			t.Fatal(err)
		}
		wall, cpu = append(wall, w), append(cpu, c)
		events += len(r.Events)
		if !r.HasMore {
			return wall, cpu, events
		}
		cursor = r.Cursor
	}
}

func summarize(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	var total time.Duration
	for _, d := range s {
		total += d
	}
	p99 := s[min(len(s)-1, len(s)*99/100)]
	return fmt.Sprintf("pages %d, max %.2f ms, p99 %.2f ms, total %.1f ms", len(s), ms(s[len(s)-1]), ms(p99), ms(total))
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// TestReproductionPageTimes measures the reproductions, paged to
// their ends: a polygon of 1,000 vertices with 100 holes of 1,000 vertices
// over all the entities, and a whole-globe radius, each with a group_id
// that matches nothing. It logs each run's pages' wall time and thread
// processor time (the machine may be shared): their count, max, p99 and
// total. The first two runs' first pages build the polygon; the third's
// reuses the builder's. It runs only with GEOEVENT_REPRO_ENTITIES set (the
// state's size: the is about 2,000,000).
func TestReproductionPageTimes(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("GEOEVENT_REPRO_ENTITIES"))
	if n == 0 {
		t.Skip("set GEOEVENT_REPRO_ENTITIES to run")
	}
	sm, now, _ := reproState(n)
	none := core.GroupFilter{Set: true, ID: 99}
	outer, holes := worstPolygon(benchLat, benchLon, 1.4)
	for _, tc := range []struct {
		what string
		page func(string) (core.QueryResult, error)
	}{
		{"polygon 1,000 + 100 x 1,000 vertices", func(c string) (core.QueryResult, error) {
			return sm.QueryPolygon(now, &core.PolygonQuery{Vertices: outer, Holes: holes, Group: none, Page: core.Page{Cursor: c}})
		}},
		{"whole-globe radius", func(c string) (core.QueryResult, error) {
			return sm.QueryRadius(now, &core.RadiusQuery{Center: core.Coordinate{LatNano: benchLat, LonNano: benchLon}, RadiusMM: core.MaxRadiusMM, Group: none, Page: core.Page{Cursor: c}})
		}},
	} {
		for rep := 0; rep < 3; rep++ {
			if rep == 1 {
				// Without the builder's last polygon: the first page
				// builds the plan again.
				sm.polygons = geom.PolygonBuilder{}
			}
			wall, cpu, events := pageTimes(t, tc.page)
			if events != 0 {
				t.Fatalf("%s: %d events match a group no entity has", tc.what, events)
			}
			t.Logf("%s at %d entities: wall: %s", tc.what, n, summarize(wall))
			t.Logf("%s at %d entities: cpu:  %s", tc.what, n, summarize(cpu))
		}
	}
}

// pageLimitWork is the most work a page may do (see spatialScan.run): its
// plan; the budget less the plan, but at least a quarter of the budget,
// for its keys; a quarter of the budget more of grace for the tests of its
// last batch; and the overshoot of one step, which step bounds.
func pageLimitWork(budget, plan, step int) int {
	return plan + max(budget-plan, budget/4) + budget/4 + step
}

// walkBudgeted pages a query to its end, checking that each page's work
// (lastScanWork) stays within pageLimitWork, and returns the entity ids of
// its events in order and the number of pages.
func walkBudgeted(t *testing.T, what string, sm *StateMachine, plan, step int, page func(cursor string) (core.QueryResult, error)) (ids []core.Uint128, pages int) {
	t.Helper()
	limit := pageLimitWork(sm.workBudget(), plan, step)
	cursor := ""
	for {
		r, err := page(cursor)
		if err != nil {
			t.Fatalf("%s: page %d: %v", what, pages, err)
		}
		pages++
		if sm.lastScanWork > limit {
			t.Fatalf("%s: page %d did %d units of work, more than %d (budget %d, plan %d)", what, pages, sm.lastScanWork, limit, sm.workBudget(), plan)
		}
		for _, e := range r.Events {
			ids = append(ids, e.EntityID)
		}
		if !r.HasMore {
			return ids, pages
		}
		if pages > 100_000 {
			t.Fatalf("%s: paging does not end", what)
		}
		cursor = r.Cursor
	}
}

// bruteForce lists the ids of the events that in reports inside and whose
// group the filter admits, in the spatial index's order.
func bruteForce(evs []core.GeoEvent, g core.GroupFilter, in func(core.GeoEvent) bool) []core.Uint128 {
	var hits []core.GeoEvent
	for _, e := range evs {
		if (!g.Set || e.GroupID == g.ID) && in(e) {
			hits = append(hits, e)
		}
	}
	slices.SortFunc(hits, func(a, b core.GeoEvent) int {
		if a.CellID != b.CellID {
			return cmp.Compare(a.CellID, b.CellID)
		}
		return a.EntityID.Compare(b.EntityID)
	})
	ids := make([]core.Uint128, len(hits))
	for i, e := range hits {
		ids[i] = e.EntityID
	}
	return ids
}

// TestPageWorkBudget: the reproductions, on 200,000 entities: a
// polygon of 1,000 vertices with 100 holes of 1,000 vertices (101,000
// edges, the most the limits allow) over all of them, and a whole-globe
// radius, each with a group_id that matches nothing and with one that
// matches a sixteenth of the entities. Every page's work stays within the
// budget (its plan, and one step beyond), and paging to the end returns
// exactly the brute-force answer (the reference loops of the model for
// the polygon, the model's haversine for the radius).
func TestPageWorkBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 200,000 entities")
	}
	sm, now, evs := reproState(200_000)
	outer, holes := worstPolygon(benchLat, benchLon, 1.4)
	edges := len(outer)
	for _, h := range holes {
		edges += len(h)
	}
	refOuter := refLoop(outer)
	var refHoles []*s2.Loop
	for _, h := range holes {
		refHoles = append(refHoles, refLoop(h))
	}
	inPolygon := func(e core.GeoEvent) bool {
		p := s2.PointFromLatLng(s2.LatLngFromDegrees(float64(e.LatNano)/1e9, float64(e.LonNano)/1e9))
		if !refOuter.ContainsPoint(p) {
			return false
		}
		for _, h := range refHoles {
			if h.RectBound().ContainsPoint(p) && h.ContainsPoint(p) {
				return false
			}
		}
		return true
	}
	center := core.Coordinate{LatNano: benchLat, LonNano: benchLon}
	// One step: a key, its entity and exact test, a seek, and the edges
	// judging it reads (at most those of a cell of its grid, or of its band
	// of each ring: a few hundred here).
	step := workKey + workEntity + workContains + workSeek + 2_000
	for _, g := range []core.GroupFilter{{Set: true, ID: 99}, {Set: true, ID: 3}} {
		ids, pages := walkBudgeted(t, "polygon", sm, workPlan+workPlanEdge*edges, step, func(c string) (core.QueryResult, error) {
			return sm.QueryPolygon(now, &core.PolygonQuery{Vertices: outer, Holes: holes, Group: g, Page: core.Page{Cursor: c, Limit: core.MaxQueryLimit}})
		})
		want := bruteForce(evs, g, inPolygon)
		if !slices.Equal(ids, want) {
			t.Fatalf("polygon, group %d: %d events in %d pages, brute force %d", g.ID, len(ids), pages, len(want))
		}
		t.Logf("polygon, group %d: %d events in %d pages", g.ID, len(ids), pages)

		ids, pages = walkBudgeted(t, "radius", sm, workPlan, step, func(c string) (core.QueryResult, error) {
			return sm.QueryRadius(now, &core.RadiusQuery{Center: center, RadiusMM: core.MaxRadiusMM, Group: g, Page: core.Page{Cursor: c, Limit: core.MaxQueryLimit}})
		})
		if want := bruteForce(evs, g, func(core.GeoEvent) bool { return true }); !slices.Equal(ids, want) {
			t.Fatalf("radius, group %d: %d events in %d pages, brute force %d", g.ID, len(ids), pages, len(want))
		}
		t.Logf("radius, group %d: %d events in %d pages", g.ID, len(ids), pages)
	}
	// A small budget ends pages often, at every kind of place (gathering,
	// checking, the grace), and still gives exactly the answer.
	sm.scanBudget = 50_000
	g := core.GroupFilter{Set: true, ID: 3}
	ids, pages := walkBudgeted(t, "polygon, small budget", sm, workPlan+workPlanEdge*edges, step, func(c string) (core.QueryResult, error) {
		return sm.QueryPolygon(now, &core.PolygonQuery{Vertices: outer, Holes: holes, Group: g, Page: core.Page{Cursor: c, Limit: core.MaxQueryLimit}})
	})
	if want := bruteForce(evs, g, inPolygon); !slices.Equal(ids, want) {
		t.Fatalf("polygon, small budget: %d events in %d pages, brute force %d", len(ids), pages, len(want))
	}
	t.Logf("polygon, small budget: %d events in %d pages", len(ids), pages)
}
