package statemachine

import (
	"cmp"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/statemachine/internal/btree"
	"github.com/geoevent/geoevent/statemachine/internal/geom"
)

// The new spatial reads (nearest, bbox) and the filters on every spatial
// read, against brute force over the entities' latest events.

// queryWorld is a state machine and the latest event of each entity it
// holds (no TTLs: all are visible), built from a rapid draw.
type queryWorld struct {
	sm     *StateMachine
	latest map[core.Uint128]core.GeoEvent
	now    uint64
	center core.Coordinate
}

// drawPoint draws a point near the center (within about spread
// nanodegrees), often on one of a few shared spots, so that distances tie.
func drawPoint(t *rapid.T, c core.Coordinate, spread int64, label string) core.Coordinate {
	if rapid.IntRange(0, 4).Draw(t, label+" shared") == 0 {
		k := rapid.Int64Range(0, 3).Draw(t, label+" spot")
		return clampCoord(core.Coordinate{LatNano: c.LatNano + k*spread/7, LonNano: c.LonNano - k*spread/5})
	}
	return clampCoord(core.Coordinate{
		LatNano: c.LatNano + rapid.Int64Range(-spread, spread).Draw(t, label+" dlat"),
		LonNano: c.LonNano + rapid.Int64Range(-spread, spread).Draw(t, label+" dlon"),
	})
}

func clampCoord(c core.Coordinate) core.Coordinate {
	c.LatNano = min(max(c.LatNano, -90e9), 90e9)
	if c.LonNano > 180e9 {
		c.LonNano -= 360e9
	}
	if c.LonNano < -180e9 {
		c.LonNano += 360e9
	}
	return c
}

// drawCenter draws a place on the globe, often an awkward one: a pole, the
// antimeridian.
func drawCenter(t *rapid.T) core.Coordinate {
	return rapid.SampledFrom([]core.Coordinate{
		{LatNano: 52_500_000_000, LonNano: 13_400_000_000},
		{LatNano: 0, LonNano: 180_000_000_000},
		{LatNano: -10_000_000_000, LonNano: -179_999_000_000},
		{LatNano: 89_999_000_000, LonNano: 45_000_000_000},
		{LatNano: -90_000_000_000, LonNano: 0},
	}).Draw(t, "center")
}

func newQueryWorld(t *rapid.T) *queryWorld {
	w := &queryWorld{sm: New(), latest: map[core.Uint128]core.GeoEvent{}, now: epoch, center: drawCenter(t)}
	spread := rapid.SampledFrom([]int64{1_000, 1_000_000, 100_000_000}).Draw(t, "spread")
	n := rapid.IntRange(0, 60).Draw(t, "entities")
	for i := range n {
		w.write(t, i, drawPoint(t, w.center, spread, fmt.Sprint("entity ", i)))
	}
	return w
}

// write sets entity i's position, with a random group and flags.
func (w *queryWorld) write(t *rapid.T, i int, c core.Coordinate) {
	w.now += 1_000
	ev := core.GeoEvent{EntityID: core.Uint128{Hi: 7, Lo: uint64(i + 1)}, LatNano: c.LatNano, LonNano: c.LonNano,
		GroupID: uint64(rapid.IntRange(0, 2).Draw(t, "group")), Flags: uint16(rapid.IntRange(0, 7).Draw(t, "flags"))}
	evs := []core.GeoEvent{ev}
	AssignCells(evs)
	r, err := w.sm.Upsert(w.now, &core.InsertRequest{Events: evs})
	if err != nil || !r.Committed {
		t.Fatalf("write: %v %+v", err, r)
	}
	ev.TimestampNS, ev.CellID = r.Results[0].TimestampNS, evs[0].CellID
	w.latest[ev.EntityID] = ev
}

func drawFilter(t *rapid.T, w *queryWorld) (core.GroupFilter, core.Filter) {
	var g core.GroupFilter
	if rapid.IntRange(0, 3).Draw(t, "group filtered") == 0 {
		g = core.GroupFilter{Set: true, ID: uint64(rapid.IntRange(0, 2).Draw(t, "group id"))}
	}
	var f core.Filter
	if rapid.Bool().Draw(t, "filtered") {
		f.SinceNS = rapid.Uint64Range(0, w.now).Draw(t, "since")
		f.FlagsAll = uint16(rapid.IntRange(0, 7).Draw(t, "flags_all"))
		f.FlagsAny = uint16(rapid.IntRange(0, 7).Draw(t, "flags_any"))
	}
	return g, f
}

// passing lists the latest events that pass the group and filter, in
// entity id order.
func (w *queryWorld) passing(g core.GroupFilter, f core.Filter) []core.GeoEvent {
	var out []core.GeoEvent
	for _, ev := range w.latest {
		if (!g.Set || ev.GroupID == g.ID) && (f.SinceNS == 0 || ev.TimestampNS > f.SinceNS) &&
			ev.Flags&f.FlagsAll == f.FlagsAll && (f.FlagsAny == 0 || ev.Flags&f.FlagsAny != 0) {
			out = append(out, ev)
		}
	}
	slices.SortFunc(out, func(a, b core.GeoEvent) int { return a.EntityID.Compare(b.EntityID) })
	return out
}

type nearHit struct {
	id core.Uint128
	d  uint64
}

func TestQueryNearestModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := newQueryWorld(t)
		if rapid.Bool().Draw(t, "small budget") {
			w.sm.SetMaxScanWork(rapid.IntRange(1, 3_000).Draw(t, "budget"))
		}
		g, f := drawFilter(t, w)
		q := core.NearestQuery{Center: drawPoint(t, w.center, 1_000_000, "query"), Group: g, Filter: f,
			Page: core.Page{Limit: uint32(rapid.IntRange(1, 12).Draw(t, "k"))}}
		if rapid.Bool().Draw(t, "bounded") {
			q.MaxDistanceMM = rapid.Uint64Range(1, 20_000_000).Draw(t, "max_distance")
		}
		var want []nearHit
		for _, ev := range w.passing(g, f) {
			d := geom.DistanceMM(q.Center.LatNano, q.Center.LonNano, ev.LatNano, ev.LonNano)
			if q.MaxDistanceMM == 0 || d <= q.MaxDistanceMM {
				want = append(want, nearHit{ev.EntityID, d})
			}
		}
		slices.SortFunc(want, func(a, b nearHit) int {
			if c := cmp.Compare(a.d, b.d); c != 0 {
				return c
			}
			return a.id.Compare(b.id)
		})
		// Page through, the first page's k at a time; between pages an
		// entity may move, and the answer stays exact for those that do
		// not: each moved entity is dropped from the comparison.
		var got []nearHit
		moved := map[core.Uint128]bool{}
		for pages := 0; ; pages++ {
			if pages > 10_000 {
				t.Fatal("paging does not end")
			}
			res, err := w.sm.QueryNearest(w.now, &q)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Events) > int(q.Limit) || len(res.DistancesMM) != len(res.Events) {
				t.Fatalf("%d events, %d distances for k %d", len(res.Events), len(res.DistancesMM), q.Limit)
			}
			for i, ev := range res.Events {
				if ev != w.latest[ev.EntityID] && !moved[ev.EntityID] {
					t.Fatalf("event %+v, want %+v", ev, w.latest[ev.EntityID])
				}
				got = append(got, nearHit{ev.EntityID, res.DistancesMM[i]})
			}
			if !res.HasMore {
				break
			}
			q.Cursor = res.Cursor
			if len(w.latest) > 0 && rapid.IntRange(0, 3).Draw(t, "move") == 0 {
				i := rapid.IntRange(0, len(w.latest)-1).Draw(t, "mover")
				moved[core.Uint128{Hi: 7, Lo: uint64(i + 1)}] = true
				w.write(t, i, drawPoint(t, w.center, 1_000_000, "moved"))
			}
		}
		keep := func(h []nearHit) []nearHit {
			return slices.DeleteFunc(slices.Clone(h), func(x nearHit) bool { return moved[x.id] })
		}
		if g, wnt := keep(got), keep(want); !slices.Equal(g, wnt) {
			t.Fatalf("nearest\n got %v\nwant %v", g, wnt)
		}
	})
}

func TestQueryBBoxModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := newQueryWorld(t)
		if rapid.Bool().Draw(t, "small budget") {
			w.sm.SetMaxScanWork(rapid.IntRange(1, 3_000).Draw(t, "budget"))
		}
		g, f := drawFilter(t, w)
		a := drawPoint(t, w.center, 1_000_000, "corner a")
		b := drawPoint(t, w.center, 1_000_000, "corner b")
		q := core.BBoxQuery{MinLatNano: min(a.LatNano, b.LatNano), MaxLatNano: max(a.LatNano, b.LatNano),
			MinLonNano: a.LonNano, MaxLonNano: b.LonNano, Group: g, Filter: f,
			Page: core.Page{Limit: uint32(rapid.IntRange(1, 12).Draw(t, "limit"))}}
		box := geom.NewBox(q.MinLatNano, q.MinLonNano, q.MaxLatNano, q.MaxLonNano)
		var want []core.GeoEvent
		for _, ev := range w.passing(g, f) {
			if refInBox(q, ev.LatNano, ev.LonNano) {
				want = append(want, ev)
			}
			if box.Contains(ev.LatNano, ev.LonNano) != refInBox(q, ev.LatNano, ev.LonNano) {
				t.Fatalf("geom.Box and the model disagree on (%d, %d)", ev.LatNano, ev.LonNano)
			}
		}
		sortByKey(want)
		got := pageAll(t, func(cursor string) (core.QueryResult, error) {
			q.Cursor = cursor
			return w.sm.QueryBBox(w.now, &q)
		})
		if !slices.Equal(got, want) {
			t.Fatalf("bbox\n got %v\nwant %v", got, want)
		}
	})
}

// sortByKey sorts events by (leaf cell id, entity id), the order of
// radius, polygon and bbox results.
func sortByKey(evs []core.GeoEvent) {
	slices.SortFunc(evs, func(a, b core.GeoEvent) int {
		if c := cmp.Compare(a.CellID, b.CellID); c != 0 {
			return c
		}
		return a.EntityID.Compare(b.EntityID)
	})
}

// pageAll runs a query's pages to the end and returns their events.
func pageAll(t *rapid.T, run func(cursor string) (core.QueryResult, error)) []core.GeoEvent {
	var out []core.GeoEvent
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 10_000 {
			t.Fatal("paging does not end")
		}
		res, err := run(cursor)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, res.Events...)
		if !res.HasMore {
			return out
		}
		cursor = res.Cursor
	}
}

// refInBox is the box's definition: latitude between the parallels,
// longitude on the arc east from min_lon to max_lon; a pole is on every
// meridian, and longitudes -180 and 180 are one.
func refInBox(q core.BBoxQuery, lat, lon int64) bool {
	if lat < q.MinLatNano || lat > q.MaxLatNano {
		return false
	}
	if lat == 90e9 || lat == -90e9 || q.MinLonNano == -180e9 && q.MaxLonNano == 180e9 {
		return true
	}
	east := func(from, to int64) int64 { return ((to-from)%360e9 + 360e9) % 360e9 }
	return east(q.MinLonNano, lon) <= east(q.MinLonNano, q.MaxLonNano)
}

// TestFiltersOnRadiusAndPolygon: the filters select on radius and polygon
// pages exactly as group does, paged under a small budget too.
func TestFiltersOnRadiusAndPolygon(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := newQueryWorld(t)
		if rapid.Bool().Draw(t, "small budget") {
			w.sm.SetMaxScanWork(rapid.IntRange(1, 3_000).Draw(t, "budget"))
		}
		g, f := drawFilter(t, w)
		limit := core.Page{Limit: uint32(rapid.IntRange(1, 12).Draw(t, "limit"))}
		c := w.center
		if c.LatNano == -90e9 {
			c.LatNano++
		}
		rq := core.RadiusQuery{Center: c, RadiusMM: rapid.Uint64Range(1, 50_000_000).Draw(t, "radius"), Group: g, Filter: f, Page: limit}
		d := int64(rapid.IntRange(1_000, 2_000_000).Draw(t, "half side"))
		lat0 := min(max(c.LatNano, -89e9), 89e9)
		pq := core.PolygonQuery{Vertices: []core.Coordinate{
			{LatNano: lat0 - d, LonNano: c.LonNano - d}, {LatNano: lat0 - d, LonNano: c.LonNano + d},
			{LatNano: lat0 + d, LonNano: c.LonNano + d}, {LatNano: lat0 + d, LonNano: c.LonNano - d},
		}, Group: g, Filter: f, Page: limit}
		for k := range pq.Vertices {
			pq.Vertices[k] = clampCoord(pq.Vertices[k])
		}
		pass := map[core.Uint128]bool{}
		for _, ev := range w.passing(g, f) {
			pass[ev.EntityID] = true
		}
		rAll := rq
		rAll.Group, rAll.Filter = core.GroupFilter{}, core.Filter{}
		pAll := pq
		pAll.Group, pAll.Filter = core.GroupFilter{}, core.Filter{}
		for _, c := range []struct {
			name       string
			all, match func(string) (core.QueryResult, error)
		}{
			{"radius",
				func(s string) (core.QueryResult, error) { q := rAll; q.Cursor = s; return w.sm.QueryRadius(w.now, &q) },
				func(s string) (core.QueryResult, error) { q := rq; q.Cursor = s; return w.sm.QueryRadius(w.now, &q) }},
			{"polygon",
				func(s string) (core.QueryResult, error) { q := pAll; q.Cursor = s; return w.sm.QueryPolygon(w.now, &q) },
				func(s string) (core.QueryResult, error) { q := pq; q.Cursor = s; return w.sm.QueryPolygon(w.now, &q) }},
		} {
			want := slices.DeleteFunc(pageAll(t, c.all), func(ev core.GeoEvent) bool { return !pass[ev.EntityID] })
			if got := pageAll(t, c.match); !slices.Equal(got, want) {
				t.Fatalf("%s\n got %v\nwant %v", c.name, got, want)
			}
		}
	})
}

// TestPlanarPolygonQuery: planar polygon pages, filtered and paged under
// a small budget, hold exactly the passing entities the polygon contains.
func TestPlanarPolygonQuery(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := newQueryWorld(t)
		if rapid.Bool().Draw(t, "small budget") {
			w.sm.SetMaxScanWork(rapid.IntRange(1, 3_000).Draw(t, "budget"))
		}
		g, f := drawFilter(t, w)
		ring := make([]core.Coordinate, rapid.IntRange(3, 8).Draw(t, "n"))
		for i := range ring {
			ring[i] = drawPoint(t, w.center, 1_000_000, fmt.Sprint("vertex ", i))
		}
		q := core.PolygonQuery{Vertices: ring, Edges: core.EdgesPlanar, Group: g, Filter: f,
			Page: core.Page{Limit: uint32(rapid.IntRange(1, 12).Draw(t, "limit"))}}
		p, err := geom.NewPlanarPolygon(ring, nil)
		if err != nil {
			if _, err2 := w.sm.QueryPolygon(w.now, &q); err2 == nil {
				t.Fatalf("the polygon is refused (%v) but the query is not", err)
			}
			return
		}
		var want []core.GeoEvent
		for _, ev := range w.passing(g, f) {
			if in, _ := p.ContainsWork(ev.LatNano, ev.LonNano); in {
				want = append(want, ev)
			}
		}
		sortByKey(want)
		got := pageAll(t, func(cursor string) (core.QueryResult, error) {
			q.Cursor = cursor
			return w.sm.QueryPolygon(w.now, &q)
		})
		if !slices.Equal(got, want) {
			t.Fatalf("planar polygon\n got %v\nwant %v", got, want)
		}
	})
}

// TestNearestCursorEdges: cursors at the extremes end the paging, and a
// cursor of another kind is refused.
func TestNearestCursorEdges(t *testing.T) {
	sm := New()
	evs := []core.GeoEvent{{EntityID: core.Uint128{Lo: 1}, LatNano: 1, LonNano: 1}}
	AssignCells(evs)
	if _, err := sm.Insert(epoch, &core.InsertRequest{Events: evs}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []uint64{0, 1 << 40, ^uint64(0)} {
		cursor := encodeCursor(kindNearest, btree.Key{A: d, ID: core.Uint128{Hi: ^uint64(0), Lo: ^uint64(0)}})
		res, err := sm.QueryNearest(epoch, &core.NearestQuery{Page: core.Page{Limit: 5, Cursor: cursor}})
		if err != nil || len(res.Events) != 0 || res.HasMore {
			t.Fatalf("cursor at %d: %+v %v", d, res, err)
		}
	}
	_, err := sm.QueryNearest(epoch, &core.NearestQuery{Page: core.Page{Limit: 5, Cursor: encodeCursor(kindRadius, btree.Key{})}})
	if ce, ok := err.(*core.Error); !ok || ce.Code != core.InvalidCursor.Code {
		t.Fatalf("a radius cursor: %v", err)
	}
	res, err := sm.QueryNearest(epoch, &core.NearestQuery{Page: core.Page{Limit: 5}})
	if err != nil || len(res.Events) != 1 || res.DistancesMM[0] != 0 || res.HasMore {
		t.Fatalf("first page: %+v %v", res, err)
	}
	for _, q := range []core.NearestQuery{
		{Page: core.Page{Limit: 0}},
		{Page: core.Page{Limit: core.MaxQueryLimit + 1}},
		{Center: core.Coordinate{LatNano: 90_000_000_001}, Page: core.Page{Limit: 1}},
		{MaxDistanceMM: core.MaxRadiusMM + 1, Page: core.Page{Limit: 1}},
	} {
		if _, err := sm.QueryNearest(epoch, &q); err == nil {
			t.Errorf("%+v accepted", q)
		}
	}
}
