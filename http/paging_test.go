package http_test

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// walk pages a query with limit until has_more is false and returns the
// event ids in order.
func walk(t *testing.T, e *env, what string, page func(cursor any) resp) []string {
	t.Helper()
	var ids []string
	var cursor any
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatalf("%s: no end after 1000 pages", what)
		}
		r := page(cursor)
		expectOK(t, r, what)
		for _, ev := range get(r.body, "events").([]any) {
			ids = append(ids, get(ev, "id").(string))
		}
		if str(get(r.body, "has_more")) != "true" {
			if str(get(r.body, "cursor")) != "null" {
				t.Fatalf("%s: last page has a cursor: %s", what, r.raw)
			}
			return ids
		}
		cursor = get(r.body, "cursor")
		if _, ok := cursor.(string); !ok {
			t.Fatalf("%s: has_more without a cursor: %s", what, r.raw)
		}
	}
}

func checkSame(t *testing.T, what string, paged, whole []string, wantLen int) {
	t.Helper()
	if len(whole) != wantLen {
		t.Fatalf("%s: the unpaged answer has %d events, want %d", what, len(whole), wantLen)
	}
	if !slices.Equal(paged, whole) {
		t.Fatalf("%s: paged answer (%d events) differs from the unpaged one (%d)", what, len(paged), len(whole))
	}
}

func TestPagination(t *testing.T) {
	e := newEnv(t)
	// 250 entities in a 0.02 x 0.02 degree box, in two groups.
	var events []map[string]any
	for i := range 250 {
		events = append(events, ev(newID(), 45_000_000_000+int64(i%16)*1_250_000, 7_000_000_000+int64(i/16)*1_250_000, "group_id", i%2))
	}
	e.insert(events...)
	// One entity with 120 events of history.
	hist := newID()
	var h []map[string]any
	for i := range 120 {
		h = append(h, ev(hist, 50_000_000_000+int64(i), 7_000_000_000))
	}
	e.insert(h...)

	radius := func(form string, limit int, group any) func(cursor any) resp {
		return func(cursor any) resp {
			body := map[string]any{"limit": limit, "cursor": cursor}
			if form == "a" {
				body["center_lat"], body["center_lon"], body["radius_m"] = 45.01, 7.01, 5000
			} else {
				body["center_lat_nano"], body["center_lon_nano"], body["radius_mm"] = 45_010_000_000, 7_010_000_000, 5_000_000
			}
			if group != nil {
				body["group_id"] = group
			}
			return e.req("POST", "/query/radius", body)
		}
	}
	for _, form := range []string{"a", "b"} {
		whole := walk(t, e, "radius whole", radius(form, 10_000, nil))
		for _, limit := range []int{1, 7, 100, 249, 250} {
			checkSame(t, fmt.Sprintf("radius Form %s limit %d", form, limit), walk(t, e, "radius", radius(form, limit, nil)), whole, 250)
		}
		wholeG := walk(t, e, "radius group whole", radius(form, 10_000, "1"))
		checkSame(t, "radius group 1 limit 9", walk(t, e, "radius group", radius(form, 9, 1)), wholeG, 125)
	}

	polygon := func(limit int, formA bool) func(cursor any) resp {
		return func(cursor any) resp {
			vs := square(44.99, 6.99, 45.03, 7.03)
			if formA {
				vs = []any{map[string]any{"lat": 44.99, "lon": 6.99}, map[string]any{"lat": 44.99, "lon": 7.03},
					map[string]any{"lat": 45.03, "lon": 7.03}, map[string]any{"lat": 45.03, "lon": 6.99}}
			}
			return e.req("POST", "/query/polygon", map[string]any{"vertices": vs, "limit": limit, "cursor": cursor})
		}
	}
	whole := walk(t, e, "polygon whole", polygon(10_000, false))
	checkSame(t, "polygon limit 13", walk(t, e, "polygon", polygon(13, false)), whole, 250)
	checkSame(t, "polygon A limit 50", walk(t, e, "polygon A", polygon(50, true)), whole, 250)

	latest := func(limit int, form string) func(cursor any) resp {
		return func(cursor any) resp {
			return e.req("POST", "/query/latest?form="+form, map[string]any{"limit": limit, "cursor": cursor})
		}
	}
	whole = walk(t, e, "latest whole", latest(10_000, "b"))
	checkSame(t, "latest limit 11", walk(t, e, "latest", latest(11, "b")), whole, 251)
	checkSame(t, "latest A limit 64", walk(t, e, "latest A", latest(64, "a")), whole, 251)

	history := func(limit int, form string) func(cursor any) resp {
		return func(cursor any) resp {
			q := url.Values{"limit": {fmt.Sprint(limit)}, "form": {form}}
			if c, ok := cursor.(string); ok {
				q.Set("cursor", c)
			}
			return e.req("GET", "/entity/"+hist+"/history?"+q.Encode(), nil)
		}
	}
	whole = walk(t, e, "history whole", history(10_000, "b"))
	checkSame(t, "history limit 17", walk(t, e, "history", history(17, "b")), whole, 120)
	checkSame(t, "history A limit 1", walk(t, e, "history A", history(1, "a")), whole, 120)
	// since/until bound the walk.
	r := e.req("GET", "/entity/"+hist+"/history", nil)
	first := get(r.body, "events", 10, "timestamp_ns")
	last := get(r.body, "events", 19, "timestamp_ns")
	r = e.req("GET", fmt.Sprintf("/entity/%s/history?since_ns=%v&until_ns=%v", hist, first, last), nil)
	if n := len(get(r.body, "events").([]any)); n != 10 {
		t.Fatalf("history since/until: %d events", n)
	}
}

func TestTTLAndDeleteEffects(t *testing.T) {
	e := newEnv(t)
	short, long, kept := newID(), newID(), newID()
	e.insert(ev(short, 60_000_000_000, 60_000_000_000, "ttl_seconds", 1),
		ev(long, 60_000_000_001, 60_000_000_000, "ttl_seconds", 3600),
		ev(kept, 60_000_000_002, 60_000_000_000))
	e.insert(ev(kept, 60_000_000_003, 60_000_000_000))
	// moved's first event has a 1 s TTL of its own, its second none.
	moved := newID()
	firstTS := e.insert(ev(moved, 60_000_000_004, 60_000_000_000, "ttl_seconds", 1))[0]
	e.insert(ev(moved, 60_000_000_005, 60_000_000_000))
	radius := map[string]any{"center_lat_nano": 60_000_000_000, "center_lon_nano": 60_000_000_000, "radius_mm": 1000}
	count := func() int {
		r := e.req("POST", "/query/radius", radius)
		return len(get(r.body, "events").([]any))
	}
	if n := count(); n != 4 {
		t.Fatalf("before expiry: %d", n)
	}
	// ttl/set 0 on long: it never expires; then a 1 s TTL from now.
	r := e.req("POST", "/ttl/set", map[string]any{"entity_id": long, "ttl_seconds": 0})
	eq(t, "ttl set 0", get(r.body, "expires_at_ns"), "0")
	r = e.req("POST", "/ttl/extend", map[string]any{"entity_id": long, "extend_by_seconds": 5})
	expectErr(t, r, "extend without TTL", "b", 400, 106, "NO_TTL_SET")
	r = e.req("POST", "/ttl/set", map[string]any{"entity_id": long, "ttl_seconds": 1})
	expectOK(t, r, "ttl set 1")
	// kept gets a TTL and loses it again.
	r = e.req("POST", "/ttl/set", map[string]any{"entity_id": kept, "ttl_seconds": 1})
	set := get(r.body, "expires_at_ns")
	r = e.req("POST", "/ttl/extend", map[string]any{"entity_id": kept, "extend_by_seconds": 1})
	eq(t, "extend previous", get(r.body, "previous_expires_at_ns"), str(set))
	r = e.req("POST", "/ttl/clear", map[string]any{"entity_id": kept})
	if str(get(r.body, "previous_expires_at_ns")) == "null" {
		t.Fatalf("ttl clear: %s", r.raw)
	}

	time.Sleep(2100 * time.Millisecond)
	// short and long have expired: invisible everywhere at once.
	if n := count(); n != 2 {
		t.Fatalf("after expiry: %d visible", n)
	}
	// moved's first event has expired on its own: gone from its history,
	// counted until cleanup, and its key is free.
	r = e.req("GET", "/entity/"+moved+"/history", nil)
	if evs := get(r.body, "events").([]any); len(evs) != 1 || str(get(evs[0], "lat_nano")) != "60000000005" {
		t.Fatalf("history after its first event expired: %s", r.raw)
	}
	eq(t, "events before cleanup", get(e.req("GET", "/stats", nil).body, "event_count"), "4")
	for _, id := range []string{short, long} {
		r = e.req("GET", "/entity/"+id, nil)
		eq(t, "expired, Form B", r.body, `{"event":null,"found":false}`)
		if r = e.req("GET", "/entity/"+id+"?form=a", nil); r.status != 404 {
			t.Errorf("expired, Form A: %d %s", r.status, r.raw)
		}
		r = e.req("GET", "/entity/"+id+"/history", nil)
		eq(t, "expired history", get(r.body, "events"), "[]")
		expectErr(t, e.req("POST", "/ttl/clear", map[string]any{"entity_id": id}), "ttl of an expired entity", "b", 400, 3, "ENTITY_NOT_FOUND")
	}
	r = e.req("POST", "/entities/batch", map[string]any{"entity_ids": []any{short, kept, long}})
	if evs := get(r.body, "events").([]any); evs[0] != nil || evs[1] == nil || evs[2] != nil {
		t.Fatalf("batch after expiry: %s", r.raw)
	}
	// Cleanup removes them, 2 entities, 2 events, and moved's expired
	// event (due a sixteenth of its TTL after its expiry).
	r = e.req("POST", "/cleanup/expired", `{"max_entries":10}`)
	eq(t, "cleanup", r.body, `{"entries_removed":3,"entries_scanned":3}`)
	r = e.req("GET", "/stats", nil)
	eq(t, "entities after cleanup", get(r.body, "entity_count"), "2")
	eq(t, "events after cleanup", get(r.body, "event_count"), "3")
	// moved's first key is free: an insert there succeeds.
	e.insert(ev(moved, 60_000_000_004, 60_000_000_000, "timestamp_ns", strings.Trim(firstTS, `"`)))
	r = e.req("GET", "/entity/"+moved+"/history", nil)
	if n := len(get(r.body, "events").([]any)); n != 2 {
		t.Fatalf("history after re-inserting the first event: %s", r.raw)
	}

	// Delete erases the latest position and the history.
	r = e.req("DELETE", "/entities", map[string]any{"entity_ids": []any{kept}})
	eq(t, "delete", r.body, `{"deleted_count":1,"not_found_count":0}`)
	r = e.req("GET", "/entity/"+kept+"/history", nil)
	eq(t, "history after delete", get(r.body, "events"), "[]")
	if n := count(); n != 1 { // moved
		t.Fatalf("after delete: %d visible", n)
	}
	r = e.req("POST", "/delete", map[string]any{"entity_ids": []any{kept}})
	eq(t, "delete again", r.body, `{"deleted_count":0,"not_found_count":1}`)
	r = e.req("GET", "/stats", nil)
	eq(t, "entities after delete", get(r.body, "entity_count"), "1")
}
