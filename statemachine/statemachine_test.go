package statemachine

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/io/hugepages"
	"pgregory.net/rapid"
)

// TestMain lengthens rapid's runs (30 steps by default) unless the command
// line sets -rapid.steps itself, and gives benchmarks the huge pages a
// replica has.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.steps" })
	if !set {
		flag.Set("rapid.steps", "200")
	}
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
		hugepages.Advise() // as cmd/replica does: measure the memory the server has
	}
	os.Exit(m.Run())
}

// errCode is the result code of an error returned by the state machine
// (0 for nil). Any other error type is a test failure.
func errCode(t interface{ Fatalf(string, ...any) }, err error) core.Code {
	if err == nil {
		return 0
	}
	var e *core.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is not a *core.Error", err)
	}
	return e.Code
}

const (
	boxLat0, boxLat1 = 38_000_000_000, 38_200_000_000 // nanodegrees
	boxLon0, boxLon1 = 13_300_000_000, 13_500_000_000
	epoch            = 1_700_000_000_000_000_000
)

// harness runs the state machine and the reference model side by side.
type harness struct {
	sm  *StateMachine
	m   *refModel
	now uint64
	ids []core.Uint128
}

func newHarness() *harness {
	h := &harness{sm: New(), m: newRefModel(), now: epoch}
	for i := 1; i <= 6; i++ {
		h.ids = append(h.ids, core.Uint128{Hi: uint64(i % 2), Lo: uint64(i)})
	}
	return h
}

func (h *harness) id(t *rapid.T, label string) core.Uint128 {
	if rapid.IntRange(0, 30).Draw(t, label+"_zero") == 0 {
		return core.Uint128{}
	}
	return rapid.SampledFrom(h.ids).Draw(t, label)
}

func coord(t *rapid.T, label string) core.Coordinate {
	// Positions lie on a grid of 1,000 nanodegrees and polygon vertices half
	// a step off it, so no position lies on a polygon's vertex or meridian
	// edge, where either answer would be right.
	c := core.Coordinate{
		LatNano: boxLat0 + 1000*rapid.Int64Range(0, (boxLat1-boxLat0)/1000).Draw(t, label+"_lat"),
		LonNano: boxLon0 + 1000*rapid.Int64Range(0, (boxLon1-boxLon0)/1000).Draw(t, label+"_lon"),
	}
	switch rapid.IntRange(0, 40).Draw(t, label+"_bad") {
	case 0:
		c.LatNano = rapid.SampledFrom([]int64{-90_000_000_001, 90_000_000_001, 90_000_000_000, -90_000_000_000}).Draw(t, label+"_badlat")
	case 1:
		c.LonNano = rapid.SampledFrom([]int64{-180_000_000_001, 180_000_000_001, 180_000_000_000, -180_000_000_000}).Draw(t, label+"_badlon")
	}
	return c
}

func (h *harness) event(t *rapid.T) core.GeoEvent {
	id := h.id(t, "entity")
	c := coord(t, "pos")
	ev := core.GeoEvent{
		EntityID:    id,
		LatNano:     c.LatNano,
		LonNano:     c.LonNano,
		GroupID:     uint64(rapid.IntRange(0, 2).Draw(t, "group")),
		TTLSeconds:  rapid.SampledFrom([]uint32{0, 0, 0, 1, 3, 10, math.MaxUint32}).Draw(t, "ttl"),
		VelocityMMS: rapid.Uint32Range(0, 1_000_000_000).Draw(t, "velocity"),
		HeadingCdeg: uint16(rapid.IntRange(0, 35_999).Draw(t, "heading")),
		AltitudeMM:  rapid.Int32Range(-10_000_000, 100_000_000).Draw(t, "alt"),
		Flags:       rapid.Uint16().Draw(t, "flags"),
		UserData:    core.Uint128{Lo: rapid.Uint64().Draw(t, "user")},
	}
	if rapid.IntRange(0, 2).Draw(t, "sparse") == 0 {
		// A position alone (and maybe a TTL), as most fleets send: the
		// store keeps no ext for it (see entity).
		ev.VelocityMMS, ev.HeadingCdeg, ev.AltitudeMM, ev.Flags, ev.UserData = 0, 0, 0, 0, core.Uint128{}
	}
	switch rapid.IntRange(0, 30).Draw(t, "badfield") {
	case 0:
		ev.AltitudeMM = 100_000_001
	case 1:
		ev.HeadingCdeg = 36_000
	case 2:
		ev.VelocityMMS = 1_000_000_001
	}
	switch rapid.IntRange(0, 9).Draw(t, "tskind") {
	case 0: // an existing timestamp of this entity, if any
		if e := h.m.ents[id]; e != nil {
			ev.TimestampNS = rapid.SampledFrom(e.events).Draw(t, "existing").TimestampNS
		}
	case 1: // an import from the past
		ev.TimestampNS = h.now - rapid.Uint64Range(1, 20_000_000_000).Draw(t, "past")
	case 2: // from the near future, or beyond the allowed skew
		ev.TimestampNS = h.now + rapid.SampledFrom([]uint64{1, 60_000_000_000, 60_000_000_001}).Draw(t, "future")
	}
	return ev
}

// tick moves time on, mostly by whole seconds so that operations land
// exactly on TTL expiries (ttl_seconds are whole seconds), sometimes by a
// nanosecond to land just past them.
func (h *harness) tick(t *rapid.T) {
	h.now += uint64(rapid.IntRange(0, 4).Draw(t, "dt_s"))*1_000_000_000 + uint64(rapid.IntRange(0, 1).Draw(t, "dt_ns"))
}

func (h *harness) write(t *rapid.T, upsert bool) {
	h.tick(t)
	events := make([]core.GeoEvent, rapid.IntRange(1, 4).Draw(t, "n"))
	for i := range events {
		events[i] = h.event(t)
	}
	AssignCells(events)
	req := core.InsertRequest{Events: slices_clone(events)}
	var got core.InsertReply
	var err error
	if upsert {
		got, err = h.sm.Upsert(h.now, &req)
	} else {
		got, err = h.sm.Insert(h.now, &req)
	}
	want, wantCode := h.m.write(h.now, events, upsert)
	if c := errCode(t, err); c != wantCode {
		t.Fatalf("write: code %d, model %d", c, wantCode)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("write (upsert=%v) of %+v:\n got   %+v\n model %+v", upsert, events, got, want)
	}
	for i := range events {
		if req.Events[i] != events[i] {
			t.Fatal("write modified its request")
		}
	}
}

func slices_clone(e []core.GeoEvent) []core.GeoEvent { return append([]core.GeoEvent(nil), e...) }

// idList draws a list of ids: usually a few, sometimes more (none zero)
// than one group that GetLatestBatch warms at a time (writeAhead).
func (h *harness) idList(t *rapid.T) []core.Uint128 {
	if rapid.IntRange(0, 9).Draw(t, "long") == 0 {
		n := rapid.IntRange(writeAhead-1, 2*writeAhead+1).Draw(t, "nids")
		return rapid.SliceOfN(rapid.SampledFrom(h.ids), n, n).Draw(t, "ids")
	}
	n := rapid.IntRange(0, 4).Draw(t, "nids")
	ids := make([]core.Uint128, n)
	for i := range ids {
		ids[i] = h.id(t, "id")
	}
	return ids
}

func (h *harness) group(t *rapid.T) core.GroupFilter {
	if rapid.Bool().Draw(t, "filter") {
		return core.GroupFilter{Set: true, ID: uint64(rapid.IntRange(0, 2).Draw(t, "gid"))}
	}
	return core.GroupFilter{}
}

// scanBudget sets, for the next query, how much work one page may do:
// usually the real budget, otherwise one of random small size (from less
// than a key's work to several keys' more than a plan's), so that pages
// end early at every kind of place. It reports whether pages may then be
// short.
func (h *harness) scanBudget(t *rapid.T) bool {
	h.sm.scanBudget = 0
	if rapid.Bool().Draw(t, "small_budget") {
		h.sm.scanBudget = rapid.IntRange(1, 2*workPlan+20*(workKey+workEntity+workContains)).Draw(t, "scan_budget")
	}
	return h.sm.scanBudget > 0
}

// walk reads every page of a query with the given limit and checks the
// paging contract: full pages while HasMore (or, when short, any page up
// to the limit: the scan budget may end one early), a cursor exactly then.
func walk(t *rapid.T, limit int, short bool, page func(cursor string) (core.QueryResult, error)) ([]core.GeoEvent, []uint64, core.Code) {
	var events []core.GeoEvent
	var dists []uint64
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatal("paging does not end")
		}
		r, err := page(cursor)
		if c := errCode(t, err); c != 0 {
			if pages > 0 {
				t.Fatalf("page %d failed with %d after the first succeeded", pages, c)
			}
			return nil, nil, c
		}
		if r.HasMore != (r.Cursor != "") {
			t.Fatalf("HasMore %v with cursor %q", r.HasMore, r.Cursor)
		}
		if r.HasMore && len(r.Events) != limit && !short {
			t.Fatalf("a page with more to come has %d events, limit %d", len(r.Events), limit)
		}
		if len(r.Events) > limit {
			t.Fatalf("page of %d events exceeds limit %d", len(r.Events), limit)
		}
		events = append(events, r.Events...)
		dists = append(dists, r.DistancesMM...)
		if !r.HasMore {
			return events, dists, 0
		}
		cursor = r.Cursor
	}
}

func sameEvents(t *rapid.T, what string, got, want []core.GeoEvent) {
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, model %d\n got   %v\n model %v", what, len(got), len(want), ids(got), ids(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: event %d differs\n got   %+v\n model %+v", what, i, got[i], want[i])
		}
	}
}

func ids(evs []core.GeoEvent) []string {
	var s []string
	for _, e := range evs {
		s = append(s, fmt.Sprintf("%d@%d", e.EntityID.Lo, e.TimestampNS))
	}
	return s
}

func (h *harness) radius(t *rapid.T) {
	q := core.RadiusQuery{
		Center:   coord(t, "center"),
		RadiusMM: rapid.SampledFrom([]uint64{0, 1, 300_000, 2_000_000, 8_000_000, 30_000_000, 40_000_000_000, 40_000_000_001}).Draw(t, "radius"),
		Group:    h.group(t),
	}
	limit := rapid.IntRange(1, 4).Draw(t, "limit")
	q.Limit = uint32(limit)
	got, dists, code := walk(t, limit, h.scanBudget(t), func(c string) (core.QueryResult, error) {
		q.Cursor = c
		return h.sm.QueryRadius(h.now, &q)
	})
	var wantCode core.Code
	switch {
	case !core.ValidCoordinate(q.Center.LatNano, q.Center.LonNano):
		wantCode = 100
	case q.RadiusMM < 1 || q.RadiusMM > 40_000_000_000:
		wantCode = 101
	}
	if code != wantCode {
		t.Fatalf("radius %+v: code %d, model %d", q, code, wantCode)
	}
	if code != 0 {
		return
	}
	hits := h.m.radius(h.now, q)
	// A point within a thousandth of a millimetre of the rounding boundary
	// may fall either way between two floating-point formulas.
	ambiguous := func(ev core.GeoEvent) bool {
		d := haversineMM(q.Center.LatNano, q.Center.LonNano, ev.LatNano, ev.LonNano)
		return math.Abs(d-(float64(q.RadiusMM)+0.5)) < 1e-3
	}
	var want []core.GeoEvent
	var wantDist []float64
	for _, hit := range hits {
		if !ambiguous(hit.ev) {
			want = append(want, hit.ev)
			wantDist = append(wantDist, hit.dist)
		}
	}
	var gotKept []core.GeoEvent
	var gotDist []uint64
	for i, ev := range got {
		if !ambiguous(ev) {
			gotKept = append(gotKept, ev)
			gotDist = append(gotDist, dists[i])
		}
	}
	sameEvents(t, "radius", gotKept, want)
	for i := range gotDist {
		if math.Abs(float64(gotDist[i])-math.Round(wantDist[i])) > 1 {
			t.Fatalf("distance %d mm, model %.3f mm", gotDist[i], wantDist[i])
		}
	}
}

func (h *harness) polygon(t *rapid.T) {
	// An axis-aligned quadrilateral in the box, either winding, open or
	// closed, optionally with a hole strictly inside it.
	lat0 := boxLat0 + 500 + 1000*rapid.Int64Range(0, (boxLat1-boxLat0)/1000-2000).Draw(t, "lat0")
	lon0 := boxLon0 + 500 + 1000*rapid.Int64Range(0, (boxLon1-boxLon0)/1000-2000).Draw(t, "lon0")
	dLat := 4000 * rapid.Int64Range(250, (boxLat1-lat0)/4000).Draw(t, "dlat")
	dLon := 4000 * rapid.Int64Range(250, (boxLon1-lon0)/4000).Draw(t, "dlon")
	ring := func(la, lo, dla, dlo int64) []core.Coordinate {
		r := []core.Coordinate{pt(la, lo), pt(la, lo+dlo), pt(la+dla, lo+dlo), pt(la+dla, lo)}
		if rapid.Bool().Draw(t, "reverse") {
			r[1], r[3] = r[3], r[1]
		}
		if rapid.Bool().Draw(t, "closed") {
			r = append(r, r[0])
		}
		return r
	}
	q := core.PolygonQuery{Vertices: ring(lat0, lon0, dLat, dLon), Group: h.group(t)}
	if rapid.Bool().Draw(t, "hole") {
		q.Holes = [][]core.Coordinate{ring(lat0+dLat/4, lon0+dLon/4, dLat/2, dLon/2)}
	}
	limit := rapid.IntRange(1, 4).Draw(t, "limit")
	q.Limit = uint32(limit)
	got, _, code := walk(t, limit, h.scanBudget(t), func(c string) (core.QueryResult, error) {
		q.Cursor = c
		return h.sm.QueryPolygon(h.now, &q)
	})
	if code != 0 {
		t.Fatalf("valid polygon %+v rejected with %d", q, code)
	}
	var want []core.GeoEvent
	for _, hit := range h.m.polygon(h.now, q) {
		want = append(want, hit.ev)
	}
	sameEvents(t, "polygon", got, want)
}

func (h *harness) latest(t *rapid.T) {
	q := core.LatestQuery{Group: h.group(t)}
	if rapid.Bool().Draw(t, "since") {
		q.SinceNS = h.now - rapid.Uint64Range(0, 30_000_000_000).Draw(t, "ago")
	}
	limit := rapid.IntRange(1, 4).Draw(t, "limit")
	q.Limit = uint32(limit)
	got, _, code := walk(t, limit, h.scanBudget(t), func(c string) (core.QueryResult, error) {
		q.Cursor = c
		return h.sm.QueryLatest(h.now, &q)
	})
	if code != 0 {
		t.Fatalf("latest: code %d", code)
	}
	sameEvents(t, "latest", got, h.m.latest(h.now, q))
}

func (h *harness) history(t *rapid.T) {
	q := core.HistoryQuery{EntityID: h.id(t, "entity")}
	if rapid.Bool().Draw(t, "since") {
		q.SinceNS = h.now - rapid.Uint64Range(0, 30_000_000_000).Draw(t, "ago")
	}
	if rapid.Bool().Draw(t, "until") {
		q.UntilNS = h.now - rapid.Uint64Range(0, 30_000_000_000).Draw(t, "uago")
	}
	limit := rapid.IntRange(1, 3).Draw(t, "limit")
	q.Limit = uint32(limit)
	got, _, code := walk(t, limit, false, func(c string) (core.QueryResult, error) {
		q.Cursor = c
		return h.sm.History(h.now, &q)
	})
	var wantCode core.Code
	switch {
	case q.EntityID.IsZero():
		wantCode = 101
	case q.UntilNS != 0 && q.SinceNS > q.UntilNS:
		wantCode = 107
	}
	if code != wantCode {
		t.Fatalf("history %+v: code %d, model %d", q, code, wantCode)
	}
	if code == 0 {
		sameEvents(t, "history", got, h.m.history(h.now, q))
	}
}

func TestStateMachineAgainstModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := newHarness()
		// Writes leave spatial index changes pending (spatialbatch.go):
		// usually past the end of the test, so that they build up across
		// operations, sometimes a few.
		flushAt := rapid.SampledFrom([]int{0, 0, 1, 3, 20}).Draw(t, "flush_at")
		h.sm.flushAt = flushAt
		t.Repeat(map[string]func(*rapid.T){
			"": func(t *rapid.T) {
				if err := h.sm.checkInvariants(); err != nil {
					t.Fatal(err)
				}
			},
			"tick":   h.tick,
			"insert": func(t *rapid.T) { h.write(t, false) },
			"upsert": func(t *rapid.T) { h.write(t, true) },
			"delete": func(t *rapid.T) {
				ids := h.idList(t)
				got, err := h.sm.DeleteEntities(h.now, &core.DeleteRequest{EntityIDs: ids})
				want, wantCode := h.m.deleteEntities(h.now, ids)
				if c := errCode(t, err); c != wantCode || got != want {
					t.Fatalf("delete %v: %+v code %d; model %+v code %d", ids, got, c, want, wantCode)
				}
			},
			"ttl_set": func(t *rapid.T) {
				h.tick(t)
				req := core.TTLSetRequest{EntityID: h.id(t, "entity"), TTLSeconds: rapid.SampledFrom([]uint32{0, 1, 5, math.MaxUint32}).Draw(t, "ttl")}
				got, err := h.sm.TTLSet(h.now, &req)
				e, code := h.m.ttlEntity(req.EntityID, h.now)
				var want core.TTLSetReply
				if code == 0 {
					if req.TTLSeconds != 0 {
						e.expiresAt = satAdd(h.now, req.TTLSeconds)
					} else {
						e.expiresAt = 0
					}
					want.ExpiresAtNS = e.expiresAt
				}
				if c := errCode(t, err); c != code || got != want {
					t.Fatalf("ttl set: %+v %d; model %+v %d", got, c, want, code)
				}
			},
			"ttl_extend": func(t *rapid.T) {
				h.tick(t)
				req := core.TTLExtendRequest{EntityID: h.id(t, "entity"), ExtendBySeconds: rapid.SampledFrom([]uint32{0, 2, math.MaxUint32}).Draw(t, "by")}
				got, err := h.sm.TTLExtend(h.now, &req)
				e, code := h.m.ttlEntity(req.EntityID, h.now)
				var want core.TTLExtendReply
				if code == 0 && e.expiresAt == 0 {
					code = 106
				} else if code == 0 {
					want.PreviousExpiresAtNS = e.expiresAt
					e.expiresAt = satAdd(e.expiresAt, req.ExtendBySeconds)
					want.NewExpiresAtNS = e.expiresAt
				}
				if c := errCode(t, err); c != code || got != want {
					t.Fatalf("ttl extend: %+v %d; model %+v %d", got, c, want, code)
				}
			},
			"ttl_clear": func(t *rapid.T) {
				req := core.TTLClearRequest{EntityID: h.id(t, "entity")}
				got, err := h.sm.TTLClear(h.now, &req)
				e, code := h.m.ttlEntity(req.EntityID, h.now)
				var want core.TTLClearReply
				if code == 0 {
					want = core.TTLClearReply{PreviousExpiresAtNS: e.expiresAt, HadTTL: e.expiresAt != 0}
					e.expiresAt = 0
				}
				if c := errCode(t, err); c != code || got != want {
					t.Fatalf("ttl clear: %+v %d; model %+v %d", got, c, want, code)
				}
			},
			"cleanup": func(t *rapid.T) {
				h.tick(t)
				n := uint32(rapid.IntRange(0, 3).Draw(t, "max"))
				got, err := h.sm.CleanupExpired(h.now, &core.CleanupRequest{MaxEntries: n})
				if err != nil {
					t.Fatal(err)
				}
				if want := h.m.cleanup(h.now, n); got != want {
					t.Fatalf("cleanup(%d): %+v; model %+v", n, got, want)
				}
			},
			"get_latest": func(t *rapid.T) {
				id := h.id(t, "entity")
				got, err := h.sm.GetLatest(h.now, id)
				var want core.LatestResult
				var code core.Code
				if id.IsZero() {
					code = 101
				} else if e := h.m.visible(id, h.now); e != nil {
					want = core.LatestResult{Event: e.latest(), Found: true}
				}
				if c := errCode(t, err); c != code || got != want {
					t.Fatalf("get latest %v: %+v %d; model %+v %d", id, got, c, want, code)
				}
			},
			"get_latest_batch": func(t *rapid.T) {
				ids := h.idList(t)
				got, err := h.sm.GetLatestBatch(h.now, ids)
				code := refCheckIDs(ids)
				if c := errCode(t, err); c != code {
					t.Fatalf("latest batch %v: code %d, model %d", ids, c, code)
				}
				if code != 0 {
					return
				}
				for i, id := range ids {
					var want core.LatestResult
					if e := h.m.visible(id, h.now); e != nil {
						want = core.LatestResult{Event: e.latest(), Found: true}
					}
					if got[i] != want {
						t.Fatalf("latest batch [%d]: %+v, model %+v", i, got[i], want)
					}
				}
			},
			"radius":  h.radius,
			"polygon": h.polygon,
			"latest":  h.latest,
			"history": h.history,
			"stats": func(t *rapid.T) {
				got := h.sm.Stats(h.now)
				got.IndexBytes = 0
				if want := h.m.stats(h.now); got != want {
					t.Fatalf("stats: %+v, model %+v", got, want)
				}
			},
			"snapshot": func(t *rapid.T) {
				var buf bytes.Buffer
				if err := h.sm.WriteSnapshot(&buf); err != nil {
					t.Fatal(err)
				}
				restored, err := ReadSnapshot(bytes.NewReader(buf.Bytes()))
				if err != nil {
					t.Fatalf("restore: %v", err)
				}
				if restored.Digest() != h.sm.Digest() {
					t.Fatal("restored state has another digest")
				}
				restored.Attach(h.sm.sync) // the store restored from its checkpoint
				h.sm = restored            // go on with the restored one: it must behave the same
				h.sm.flushAt = flushAt
			},
		})
	})
}

// restored is sm written to a snapshot and read back, with the
// snapshot's bytes; a failure of either fails the test.
func restored(t interface {
	Helper()
	Fatal(...any)
}, sm *StateMachine) (*StateMachine, []byte) {
	t.Helper()
	var b bytes.Buffer
	if err := sm.WriteSnapshot(&b); err != nil {
		t.Fatal(err)
	}
	cp, err := ReadSnapshot(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	return cp, b.Bytes()
}
