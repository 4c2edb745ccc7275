package statemachine

import (
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/statemachine/internal/geom"
)

// A polygon query whose polygon was prepared beside the state machine
// (PreparePolygon, OfferPolygon before each page) pages exactly as one
// that builds it: the same events, cursors and counted work each page, on
// the largest polygon the limits allow over 50,000 entities, with a group
// that matches nothing (many pages) and one that matches a sixteenth.
func TestOfferPolygonPagesAlike(t *testing.T) {
	sm, now, _ := reproState(50_000)
	outer, holes := worstPolygon(benchLat, benchLon, 1.4)
	pp := PreparePolygon(&core.PolygonQuery{Vertices: outer, Holes: holes})
	if pp == nil {
		t.Fatal("the largest polygon was not prepared")
	}
	if !pp.Same(&core.PolygonQuery{Vertices: slices.Clone(outer), Holes: holes}) || pp.Same(&core.PolygonQuery{Vertices: outer}) {
		t.Fatal("Same is wrong")
	}
	if PreparePolygon(&core.PolygonQuery{Vertices: outer[:100]}) != nil {
		t.Fatal("a polygon of 100 vertices was prepared")
	}
	type page struct {
		ids    []core.Uint128
		cursor string
		work   int
	}
	walk := func(g core.GroupFilter, offer bool) []page {
		sm.polygons = geom.PolygonBuilder{}
		var pages []page
		cursor := ""
		for {
			q := &core.PolygonQuery{Vertices: outer, Holes: holes, Group: g, Page: core.Page{Cursor: cursor, Limit: 500}}
			if offer {
				sm.OfferPolygon(pp, q)
			}
			r, err := sm.QueryPolygon(now, q)
			if err != nil {
				t.Fatal(err)
			}
			p := page{cursor: r.Cursor, work: sm.lastScanWork}
			for _, e := range r.Events {
				p.ids = append(p.ids, e.EntityID)
			}
			if pages = append(pages, p); !r.HasMore {
				return pages
			}
			cursor = r.Cursor
		}
	}
	for _, g := range []core.GroupFilter{{Set: true, ID: 99}, {Set: true, ID: 3}} {
		built, offered := walk(g, false), walk(g, true)
		if len(built) != len(offered) {
			t.Fatalf("group %d: %d pages built, %d prepared", g.ID, len(built), len(offered))
		}
		events := 0
		for i := range built {
			b, o := built[i], offered[i]
			if !slices.Equal(b.ids, o.ids) || b.cursor != o.cursor || b.work != o.work {
				t.Fatalf("group %d, page %d: built %d events, cursor %q, work %d; prepared %d, %q, %d",
					g.ID, i, len(b.ids), b.cursor, b.work, len(o.ids), o.cursor, o.work)
			}
			events += len(b.ids)
		}
		t.Logf("group %d: %d events in %d pages", g.ID, events, len(built))
	}
}

// TestReproductionPreparedPageTimes is TestReproductionPageTimes's polygon
// with its polygon prepared beside the state machine, as a leader prepares
// it on the connection's goroutine: it logs the time of the preparation
// and of each page, which is all the event loop does. It runs only with
// GEOEVENT_REPRO_ENTITIES set.
func TestReproductionPreparedPageTimes(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("GEOEVENT_REPRO_ENTITIES"))
	if n == 0 {
		t.Skip("set GEOEVENT_REPRO_ENTITIES to run")
	}
	sm, now, _ := reproState(n)
	outer, holes := worstPolygon(benchLat, benchLon, 1.4)
	for range 3 {
		start := time.Now()
		pp := PreparePolygon(&core.PolygonQuery{Vertices: outer, Holes: holes})
		prep := time.Since(start)
		sm.polygons = geom.PolygonBuilder{}
		wall, cpu, events := pageTimes(t, func(c string) (core.QueryResult, error) {
			q := &core.PolygonQuery{Vertices: outer, Holes: holes, Group: core.GroupFilter{Set: true, ID: 99}, Page: core.Page{Cursor: c}}
			sm.OfferPolygon(pp, q)
			return sm.QueryPolygon(now, q)
		})
		if events != 0 {
			t.Fatalf("%d events match a group no entity has", events)
		}
		t.Logf("prepared in %.1f ms; at %d entities: wall: %s", ms(prep), n, summarize(wall))
		t.Logf("at %d entities: cpu:  %s", n, summarize(cpu))
	}
}

// An invalid polygon prepared beside the state machine gives the error
// that building it gives, after the errors checked before it (the page's
// limit); one built on the state machine that fails counts the plan's
// work, which the replica's read steps are bounded by.
func TestOfferInvalidPolygon(t *testing.T) {
	sm := New()
	outer, holes := worstPolygon(benchLat, benchLon, 1.4)
	holes[99] = slices.Clone(holes[99])
	holes[99][0], holes[99][1] = holes[99][1], holes[99][0] // the last hole crosses itself
	q := &core.PolygonQuery{Vertices: outer, Holes: holes}
	pp := PreparePolygon(q)
	if pp == nil || pp.Err() == nil || pp.Bytes() > 1024 {
		t.Fatal("an invalid polygon was not found so")
	}
	before := sm.ScanWork()
	_, want := sm.QueryPolygon(epoch, q)
	if want == nil {
		t.Fatal("an invalid polygon was answered")
	}
	if w := sm.ScanWork() - before; w != uint64(workPlan+workPlanEdge*101_000) {
		t.Fatalf("a failed build counted %d units of work, want its plan's", w)
	}
	sm.OfferPolygon(pp, q)
	if _, err := sm.QueryPolygon(epoch, q); err == nil || err.Error() != want.Error() {
		t.Fatalf("prepared: %v, built: %v", err, want)
	}
	tooMany := *q
	tooMany.Limit = core.MaxQueryLimit + 1
	_, want = sm.QueryPolygon(epoch, &tooMany)
	sm.OfferPolygon(pp, &tooMany)
	if _, err := sm.QueryPolygon(epoch, &tooMany); err == nil || err.Error() != want.Error() {
		t.Fatalf("prepared, a limit too large: %v, built: %v", err, want)
	}
}
