package statemachine

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/geoevent/geoevent/core"
)

// Every limit of SPEC.md at its value and one past it.

func testID(i int) core.Uint128 { return core.Uint128{Hi: 7, Lo: uint64(i)} }

func at(i int, lat, lon int64) core.GeoEvent {
	return core.GeoEvent{EntityID: testID(i), LatNano: lat, LonNano: lon}
}

func batch(n int) []core.GeoEvent {
	evs := make([]core.GeoEvent, n)
	for i := range evs {
		evs[i] = at(i+1, 38_100_000_000+int64(i)*1000, 13_360_000_000)
	}
	AssignCells(evs)
	return evs
}

func wantCode(t *testing.T, what string, err error, want core.CodeInfo) {
	t.Helper()
	if got := errCode(t, err); got != want.Code {
		t.Fatalf("%s: code %d, want %d %s (err %v)", what, got, want.Code, want.Name, err)
	}
	if want.Code != 0 && err.(*core.Error).Name != want.Name {
		t.Fatalf("%s: name %s, want %s", what, err.(*core.Error).Name, want.Name)
	}
}

func TestBatchSizeEdges(t *testing.T) {
	sm := New()
	_, err := sm.Insert(epoch, &core.InsertRequest{})
	wantCode(t, "empty batch", err, core.EmptyRequest)
	r, err := sm.Insert(epoch, &core.InsertRequest{Events: batch(10_000)})
	wantCode(t, "10000 events", err, core.OK)
	if !r.Committed || len(r.Results) != 10_000 {
		t.Fatalf("10000 events: committed %v, %d results", r.Committed, len(r.Results))
	}
	before := sm.Digest()
	_, err = sm.Upsert(epoch+1, &core.InsertRequest{Events: batch(10_001)})
	wantCode(t, "10001 events", err, core.BatchTooLarge)
	if sm.Digest() != before {
		t.Fatal("a rejected batch changed the state")
	}
}

func TestInvalidEventFailsWholeBatch(t *testing.T) {
	sm := New()
	evs := batch(3)
	evs[1].LatNano = core.MaxLatNano + 1
	evs[2].EntityID = core.Uint128{}
	r, err := sm.Insert(epoch, &core.InsertRequest{Events: evs})
	wantCode(t, "batch", err, core.OK)
	if r.Committed {
		t.Fatal("a batch with invalid events committed")
	}
	codes := []core.Code{r.Results[0].Code, r.Results[1].Code, r.Results[2].Code}
	if fmt.Sprint(codes) != "[0 9 7]" {
		t.Fatalf("per-event codes %v, want [0 9 7]", codes)
	}
	if s := sm.Stats(epoch); s.EventCount != 0 {
		t.Fatalf("%d events stored after a failed batch", s.EventCount)
	}
}

func TestClientTimestampSkewEdge(t *testing.T) {
	sm := New()
	evs := batch(2)
	evs[0].TimestampNS = epoch + core.MaxFutureSkewNS
	evs[1].TimestampNS = epoch + core.MaxFutureSkewNS + 1
	r, _ := sm.Insert(epoch, &core.InsertRequest{Events: evs})
	if r.Committed || r.Results[0].Code != 0 || r.Results[1].Code != core.TimestampInFuture.Code {
		t.Fatalf("skew edge: %+v", r)
	}
	// A server timestamp afterwards is still after every stored one.
	r, _ = sm.Insert(epoch, &core.InsertRequest{Events: evs[:1]})
	if !r.Committed {
		t.Fatalf("%+v", r)
	}
	r, _ = sm.Insert(epoch, &core.InsertRequest{Events: batch(1)})
	if !r.Committed || r.Results[0].TimestampNS != epoch+core.MaxFutureSkewNS+1 {
		t.Fatalf("fresh timestamp after an import from the future: %+v", r)
	}
}

func TestInsertExistingKeyFails(t *testing.T) {
	sm := New()
	ev := batch(1)
	ev[0].TimestampNS = epoch - 5
	if r, _ := sm.Insert(epoch, &core.InsertRequest{Events: ev}); !r.Committed {
		t.Fatal(r)
	}
	r, _ := sm.Insert(epoch, &core.InsertRequest{Events: ev})
	if r.Committed || r.Results[0].Code != core.EventExists.Code {
		t.Fatalf("second insert of the same key: %+v", r)
	}
	u, _ := sm.Upsert(epoch, &core.InsertRequest{Events: ev})
	if !u.Committed || !u.Results[0].Updated {
		t.Fatalf("upsert of the same key: %+v", u)
	}
	if s := sm.Stats(epoch); s.EventCount != 1 {
		t.Fatalf("%d events, want 1", s.EventCount)
	}
}

func TestUpsertIsIdempotentOnPositions(t *testing.T) {
	sm := New()
	evs := batch(100)
	sm.Upsert(epoch, &core.InsertRequest{Events: evs})
	sm.Upsert(epoch+1e9, &core.InsertRequest{Events: evs})
	if s := sm.Stats(epoch + 1e9); s.EventCount != 100 || s.EntityCount != 100 {
		t.Fatalf("after two upserts: %+v", s)
	}
}

func TestIDListEdges(t *testing.T) {
	ids := func(n int) []core.Uint128 {
		out := make([]core.Uint128, n)
		for i := range out {
			out[i] = testID(i + 1)
		}
		return out
	}
	sm := New()
	sm.Insert(epoch, &core.InsertRequest{Events: batch(5)})
	_, err := sm.DeleteEntities(epoch, &core.DeleteRequest{})
	wantCode(t, "delete none", err, core.EmptyRequest)
	_, err = sm.DeleteEntities(epoch, &core.DeleteRequest{EntityIDs: ids(10_001)})
	wantCode(t, "delete 10001", err, core.BatchTooLarge)
	_, err = sm.DeleteEntities(epoch, &core.DeleteRequest{EntityIDs: []core.Uint128{testID(1), {}}})
	wantCode(t, "delete with a zero id", err, core.InvalidEntityID)
	if s := sm.Stats(epoch); s.EntityCount != 5 {
		t.Fatal("a rejected delete deleted something")
	}
	_, err = sm.GetLatestBatch(epoch, nil)
	wantCode(t, "batch none", err, core.EmptyRequest)
	_, err = sm.GetLatestBatch(epoch, ids(10_001))
	wantCode(t, "batch 10001", err, core.BatchTooLarge)
	res, err := sm.GetLatestBatch(epoch, ids(10_000))
	wantCode(t, "batch 10000", err, core.OK)
	if len(res) != 10_000 || !res[4].Found || res[5].Found {
		t.Fatalf("batch of 10000: %d results", len(res))
	}
	d, err := sm.DeleteEntities(epoch, &core.DeleteRequest{EntityIDs: ids(10_000)})
	wantCode(t, "delete 10000", err, core.OK)
	if d.Deleted != 5 || d.NotFound != 9_995 {
		t.Fatalf("delete 10000: %+v", d)
	}
}

func TestRadiusEdges(t *testing.T) {
	sm := New()
	sm.Insert(epoch, &core.InsertRequest{Events: batch(10)})
	c := core.Coordinate{LatNano: 38_100_000_000, LonNano: 13_360_000_000}
	for _, tc := range []struct {
		center core.Coordinate
		radius uint64
		limit  uint32
		want   core.CodeInfo
	}{
		{c, 0, 0, core.InvalidRadius},
		{c, 1, 0, core.OK},
		{c, core.MaxRadiusMM, 0, core.OK},
		{c, core.MaxRadiusMM + 1, 0, core.InvalidRadius},
		{core.Coordinate{LatNano: core.MaxLatNano, LonNano: 0}, 5, 0, core.OK},
		{core.Coordinate{LatNano: core.MaxLatNano + 1, LonNano: 0}, 5, 0, core.InvalidCoordinates},
		{core.Coordinate{LatNano: 0, LonNano: -core.MaxLonNano}, 5, 0, core.OK},
		{core.Coordinate{LatNano: 0, LonNano: -core.MaxLonNano - 1}, 5, 0, core.InvalidCoordinates},
		{c, 5, core.MaxQueryLimit, core.OK},
		{c, 5, core.MaxQueryLimit + 1, core.QueryResultTooLarge},
	} {
		_, err := sm.QueryRadius(epoch, &core.RadiusQuery{Center: tc.center, RadiusMM: tc.radius, Page: core.Page{Limit: tc.limit}})
		wantCode(t, fmt.Sprintf("radius %d at %v limit %d", tc.radius, tc.center, tc.limit), err, tc.want)
	}
	r, _ := sm.QueryRadius(epoch, &core.RadiusQuery{Center: c, RadiusMM: 1})
	if len(r.Events) != 1 || r.DistancesMM[0] != 0 {
		t.Fatalf("1 mm around an entity: %+v", r)
	}
}

func TestDefaultLimit(t *testing.T) {
	sm := New()
	sm.Insert(epoch, &core.InsertRequest{Events: batch(1_001)})
	r, err := sm.QueryLatest(epoch, &core.LatestQuery{})
	if err != nil || len(r.Events) != core.DefaultQueryLimit || !r.HasMore {
		t.Fatalf("default limit: %d events, has_more %v, %v", len(r.Events), r.HasMore, err)
	}
	r, _ = sm.QueryLatest(epoch, &core.LatestQuery{Page: core.Page{Cursor: r.Cursor}})
	if len(r.Events) != 1 || r.HasMore {
		t.Fatalf("second page: %d events", len(r.Events))
	}
}

func TestCursorErrors(t *testing.T) {
	sm := New()
	sm.Insert(epoch, &core.InsertRequest{Events: batch(3)})
	c := core.Coordinate{LatNano: 38_100_000_000, LonNano: 13_360_000_000}
	r, _ := sm.QueryRadius(epoch, &core.RadiusQuery{Center: c, RadiusMM: 1e6, Page: core.Page{Limit: 1}})
	if !r.HasMore {
		t.Fatal("want more pages")
	}
	_, err := sm.QueryLatest(epoch, &core.LatestQuery{Page: core.Page{Cursor: r.Cursor}})
	wantCode(t, "radius cursor for latest", err, core.InvalidCursor)
	for _, bad := range []string{"x", "AAAA", r.Cursor[:len(r.Cursor)-4], r.Cursor + "AAAA", "!" + r.Cursor[1:]} {
		_, err := sm.QueryRadius(epoch, &core.RadiusQuery{Center: c, RadiusMM: 1e6, Page: core.Page{Cursor: bad}})
		wantCode(t, "cursor "+bad, err, core.InvalidCursor)
	}
	cur := encodeCursor(kindHistory, keyOf(testID(2), 5))
	_, err = sm.History(epoch, &core.HistoryQuery{EntityID: testID(1), Page: core.Page{Cursor: cur}})
	wantCode(t, "history cursor of another entity", err, core.InvalidCursor)
}

// TestCursorEncodings: a cursor is URL-safe base64 without padding (no
// character a URL's query changes), and the same key in standard base64,
// padded or not, or URL-safe with padding, pages on exactly as it does.
func TestCursorEncodings(t *testing.T) {
	sm := New()
	sm.Insert(epoch, &core.InsertRequest{Events: batch(3)})
	c := core.Coordinate{LatNano: 38_100_000_000, LonNano: 13_360_000_000}
	first, _ := sm.QueryRadius(epoch, &core.RadiusQuery{Center: c, RadiusMM: 1e6, Page: core.Page{Limit: 1}})
	if len(first.Cursor) != 35 || strings.Trim(first.Cursor, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
		t.Fatalf("cursor %q is not 35 characters of URL-safe base64", first.Cursor)
	}
	want, _ := sm.QueryRadius(epoch, &core.RadiusQuery{Center: c, RadiusMM: 1e6, Page: core.Page{Limit: 1, Cursor: first.Cursor}})
	raw, err := base64.RawURLEncoding.DecodeString(first.Cursor)
	if err != nil {
		t.Fatal(err)
	}
	for _, alt := range []string{
		base64.StdEncoding.EncodeToString(raw),
		base64.RawStdEncoding.EncodeToString(raw),
		base64.URLEncoding.EncodeToString(raw),
	} {
		got, err := sm.QueryRadius(epoch, &core.RadiusQuery{Center: c, RadiusMM: 1e6, Page: core.Page{Limit: 1, Cursor: alt}})
		if err != nil || !slices.Equal(got.Events, want.Events) || got.Cursor != want.Cursor {
			t.Errorf("cursor %q (%q in another encoding): %+v %v, want %+v", alt, first.Cursor, got, err, want)
		}
	}
	// A standard cursor holding both '+' and '/', read in its alphabet.
	k := keyOf(core.Uint128{Hi: ^uint64(0), Lo: 0xfbef_fbef_fbef_fbef}, 0xfbff_fbff_fbff_fbff)
	old := oldCursor(kindHistory, k)
	if !strings.ContainsAny(old, "+") || !strings.ContainsAny(old, "/") {
		t.Fatalf("%q holds no '+' or no '/'", old)
	}
	if got, ok, err := decodeCursor(old, kindHistory); err != nil || !ok || got != k {
		t.Errorf("old cursor %q: %v %v %v, want %v", old, got, ok, err, k)
	}
	// Mixed alphabets are refused.
	mixed := strings.Replace(old, "/", "_", 1)
	if _, _, err := decodeCursor(mixed, kindHistory); err == nil {
		t.Errorf("mixed alphabets %q accepted", mixed)
	}
}

func TestTTLErrors(t *testing.T) {
	sm := New()
	sm.Insert(epoch, &core.InsertRequest{Events: batch(1)})
	_, err := sm.TTLSet(epoch, &core.TTLSetRequest{EntityID: testID(99), TTLSeconds: 5})
	wantCode(t, "ttl set unknown", err, core.EntityNotFound)
	_, err = sm.TTLSet(epoch, &core.TTLSetRequest{TTLSeconds: 5})
	wantCode(t, "ttl set zero id", err, core.InvalidEntityID)
	_, err = sm.TTLExtend(epoch, &core.TTLExtendRequest{EntityID: testID(1), ExtendBySeconds: 5})
	wantCode(t, "extend without ttl", err, core.NoTTLSet)
	c, err := sm.TTLClear(epoch, &core.TTLClearRequest{EntityID: testID(1)})
	if err != nil || c.HadTTL {
		t.Fatalf("clear without ttl: %+v %v", c, err)
	}
	s, _ := sm.TTLSet(epoch, &core.TTLSetRequest{EntityID: testID(1), TTLSeconds: 10})
	if s.ExpiresAtNS != epoch+10e9 {
		t.Fatalf("expires at %d", s.ExpiresAtNS)
	}
	x, _ := sm.TTLExtend(epoch, &core.TTLExtendRequest{EntityID: testID(1), ExtendBySeconds: 5})
	if x.PreviousExpiresAtNS != epoch+10e9 || x.NewExpiresAtNS != epoch+15e9 {
		t.Fatalf("extend: %+v", x)
	}
	// Expiry is judged at the operation's timestamp: just before, visible;
	// at it, gone.
	if r, _ := sm.GetLatest(epoch+15e9-1, testID(1)); !r.Found {
		t.Fatal("invisible before its expiry")
	}
	if r, _ := sm.GetLatest(epoch+15e9, testID(1)); r.Found {
		t.Fatal("visible at its expiry")
	}
	_, err = sm.TTLClear(epoch+15e9, &core.TTLClearRequest{EntityID: testID(1)})
	wantCode(t, "clear an expired entity", err, core.EntityNotFound)
	cl, err := sm.CleanupExpired(epoch+15e9, &core.CleanupRequest{MaxEntries: core.MaxCleanupLimit})
	if err != nil || cl.Scanned != 1 || cl.Removed != 1 {
		t.Fatalf("cleanup: %+v %v", cl, err)
	}
	_, err = sm.CleanupExpired(epoch, &core.CleanupRequest{MaxEntries: core.MaxCleanupLimit + 1})
	wantCode(t, "cleanup over max", err, core.InvalidArgument)
}

func TestHistoryTimeRange(t *testing.T) {
	sm := New()
	_, err := sm.History(epoch, &core.HistoryQuery{EntityID: testID(1), SinceNS: 10, UntilNS: 9})
	wantCode(t, "since after until", err, core.InvalidTimeRange)
	_, err = sm.History(epoch, &core.HistoryQuery{EntityID: testID(1), SinceNS: 10, UntilNS: 10})
	wantCode(t, "since equals until", err, core.OK)
	_, err = sm.History(epoch, &core.HistoryQuery{})
	wantCode(t, "zero id", err, core.InvalidEntityID)
}

func TestPolygonLimitsThroughStateMachine(t *testing.T) {
	sm := New()
	sq := []core.Coordinate{pt(38_000_000_000, 13_000_000_000), pt(38_000_000_000, 13_100_000_000), pt(38_100_000_000, 13_100_000_000)}
	_, err := sm.QueryPolygon(epoch, &core.PolygonQuery{Vertices: sq})
	wantCode(t, "triangle", err, core.OK)
	_, err = sm.QueryPolygon(epoch, &core.PolygonQuery{Vertices: sq[:2]})
	wantCode(t, "two vertices", err, core.InvalidPolygon)
	bowtie := []core.Coordinate{pt(38_000_000_000, 13_000_000_000), pt(38_100_000_000, 13_100_000_000), pt(38_000_000_000, 13_100_000_000), pt(38_100_000_000, 13_000_000_000)}
	_, err = sm.QueryPolygon(epoch, &core.PolygonQuery{Vertices: bowtie})
	wantCode(t, "bowtie", err, core.InvalidPolygon)
	_, err = sm.QueryPolygon(epoch, &core.PolygonQuery{Vertices: sq, Page: core.Page{Limit: core.MaxQueryLimit + 1}})
	wantCode(t, "limit", err, core.QueryResultTooLarge)
}

func pt(lat, lon int64) core.Coordinate { return core.Coordinate{LatNano: lat, LonNano: lon} }

// TestScanBudgetEndsPagesEarly: a query that matches nothing in a large
// region does at most about its budget of work per page (see
// pageLimitWork), and answers with an empty page, has_more and a cursor
// until the region is done.
func TestScanBudgetEndsPagesEarly(t *testing.T) {
	sm := New()
	sm.Insert(epoch, &core.InsertRequest{Events: batch(1_000)}) // group 0
	sm.scanBudget = 2_000
	none := core.GroupFilter{Set: true, ID: 9}
	square := []core.Coordinate{pt(38e9, 13e9), pt(38e9, 14e9), pt(39e9, 14e9), pt(39e9, 13e9)}
	for _, tc := range []struct {
		what string
		plan int
		page func(cursor string) (core.QueryResult, error)
	}{
		{"radius", workPlan, func(c string) (core.QueryResult, error) {
			return sm.QueryRadius(epoch, &core.RadiusQuery{Center: core.Coordinate{LatNano: 38_100_000_000, LonNano: 13_360_000_000}, RadiusMM: core.MaxRadiusMM, Group: none, Page: core.Page{Cursor: c}})
		}},
		{"polygon", workPlan + 4*workPlanEdge, func(c string) (core.QueryResult, error) {
			return sm.QueryPolygon(epoch, &core.PolygonQuery{Vertices: square, Group: none, Page: core.Page{Cursor: c}})
		}},
		{"latest", 0, func(c string) (core.QueryResult, error) {
			return sm.QueryLatest(epoch, &core.LatestQuery{Group: none, Page: core.Page{Cursor: c}})
		}},
	} {
		limit := pageLimitWork(sm.scanBudget, tc.plan, workKey+workEntity+workContains+workSeek)
		pages, cursor := 0, ""
		for {
			r, err := tc.page(cursor)
			if err != nil {
				t.Fatalf("%s: %v", tc.what, err)
			}
			if len(r.Events) != 0 {
				t.Fatalf("%s: %d events match a group no entity has", tc.what, len(r.Events))
			}
			if sm.lastScanWork > limit {
				t.Fatalf("%s: a page did %d units of work, more than %d", tc.what, sm.lastScanWork, limit)
			}
			pages++
			if !r.HasMore {
				break
			}
			if pages > 1_000 {
				t.Fatalf("%s: paging does not end", tc.what)
			}
			cursor = r.Cursor
		}
		// 1,000 keys at 10 units each (a key and its entity) is 10,000
		// units: at least five pages of 2,000 (more where a page's plan
		// and seeks take their share).
		if pages < 5 || pages > 100 {
			t.Fatalf("%s: %d pages, want 5 to 100", tc.what, pages)
		}
	}
}

// TestQueriesShareResultMemory: radius, polygon, latest and history pages
// are built in one memory of the state machine (see QueryLatest). A latest
// page larger than any radius page before it leaves that memory larger
// than the distances' own; the radius page after it must still get a
// distance for each of its events. A history page after it is its own.
func TestQueriesShareResultMemory(t *testing.T) {
	sm := New()
	sm.Insert(epoch, &core.InsertRequest{Events: batch(300)})
	c := core.Coordinate{LatNano: 38_100_000_000, LonNano: 13_360_000_000}
	small, _ := sm.QueryRadius(epoch, &core.RadiusQuery{Center: c, RadiusMM: 1_000_000, Page: core.Page{Limit: 2}})
	if len(small.Events) != 2 {
		t.Fatalf("small radius page: %d events", len(small.Events))
	}
	latest, err := sm.QueryLatest(epoch, &core.LatestQuery{Page: core.Page{Limit: 300}})
	if err != nil || len(latest.Events) != 300 || latest.Events[0].EntityID != testID(300) {
		t.Fatalf("latest page: %d events, %v", len(latest.Events), err)
	}
	r, err := sm.QueryRadius(epoch, &core.RadiusQuery{Center: c, RadiusMM: 1_000_000, Page: core.Page{Limit: 300}})
	if err != nil || len(r.Events) != 300 || len(r.DistancesMM) != 300 {
		t.Fatalf("radius after latest: %d events, %d distances, %v", len(r.Events), len(r.DistancesMM), err)
	}
	none, _ := sm.QueryLatest(epoch, &core.LatestQuery{SinceNS: epoch + 1_000})
	if none.Events != nil {
		t.Fatalf("an empty latest page holds %d events, want nil", len(none.Events))
	}
	h, err := sm.History(epoch, &core.HistoryQuery{EntityID: testID(7)})
	if err != nil || len(h.Events) != 1 || h.Events[0].EntityID != testID(7) {
		t.Fatalf("history after radius: %+v, %v", h.Events, err)
	}
	h, _ = sm.History(epoch, &core.HistoryQuery{EntityID: testID(7), SinceNS: epoch + 1_000})
	if h.Events != nil {
		t.Fatalf("an empty history page holds %d events, want nil", len(h.Events))
	}
}

// TestUpsertAfterReplacingTheLatest: an upsert batch whose first event,
// without a timestamp, replaces the entity's latest event, and whose second
// names the replaced event's timestamp: the second finds no event there
// (the store's answer, as of before the batch, found the old latest) and
// adds one. The simulator found this (seed 2012, 5 replicas).
func TestUpsertAfterReplacingTheLatest(t *testing.T) {
	sm := New()
	evs := batch(1)
	evs[0].TimestampNS = epoch - 10
	sm.Insert(epoch, &core.InsertRequest{Events: evs})
	evs[0].TimestampNS = epoch - 5
	sm.Insert(epoch, &core.InsertRequest{Events: evs})

	fresh, again := evs[0], evs[0]
	fresh.TimestampNS = 0
	again.LatNano++
	r, _ := sm.Upsert(epoch+1, &core.InsertRequest{Events: []core.GeoEvent{fresh, again}})
	if !r.Committed || !r.Results[0].Updated || r.Results[1].Updated {
		t.Fatalf("upsert [fresh, the replaced latest's timestamp]: %+v, want updated then added", r)
	}
	h, _ := sm.History(epoch+1, &core.HistoryQuery{EntityID: evs[0].EntityID})
	if len(h.Events) != 3 || h.Events[0].TimestampNS != epoch-10 || h.Events[1].TimestampNS != epoch-5 || h.Events[1].LatNano != again.LatNano {
		t.Fatalf("history after the upsert: %+v, want epoch-10, epoch-5 (the new event), then the fresh one", h.Events)
	}
	if s := sm.Stats(epoch + 1); s.EventCount != 3 {
		t.Fatalf("%d events, want 3", s.EventCount)
	}
}
