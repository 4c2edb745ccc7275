package http_test

import (
	"slices"
	"testing"
)

var eventKeys = []string{"id", "entity_id", "correlation_id", "user_data", "timestamp_ns", "lat_nano", "lon_nano",
	"group_id", "altitude_mm", "velocity_mms", "ttl_seconds", "accuracy_mm", "heading_cdeg", "flags"}

// checkEventKeys checks that a rendered event has exactly the GeoEvent
// fields (plus distance_mm when withDistance).
func checkEventKeys(t *testing.T, what string, v any, withDistance bool) {
	t.Helper()
	checkEventKeysOf(t, what, v, withDistance, eventKeys)
}

// checkEventKeysA checks a Form A event: the GeoEvent fields and lat and
// lon in degrees (plus distance_mm when withDistance).
func checkEventKeysA(t *testing.T, what string, v any, withDistance bool) {
	t.Helper()
	checkEventKeysOf(t, what, v, withDistance, append(slices.Clone(eventKeys), "lat", "lon"))
}

func checkEventKeysOf(t *testing.T, what string, v any, withDistance bool, fields []string) {
	t.Helper()
	want := slices.Clone(fields)
	if withDistance {
		want = append(want, "distance_mm")
	}
	got := keys(v)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s: event keys %v, want %v", what, got, want)
	}
}

func checkKeys(t *testing.T, what string, v any, want ...string) {
	t.Helper()
	got := keys(v)
	slices.Sort(got)
	want = slices.Clone(want)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s: keys %v, want %v", what, got, want)
	}
}

func eq(t *testing.T, what string, got any, want string) {
	t.Helper()
	if s := str(got); s != want {
		t.Errorf("%s = %s, want %s", what, s, want)
	}
}

func TestEndpointsFormB(t *testing.T) {
	e := newEnv(t)
	truck, van, ghost := newID(), newID(), newID()

	// POST /events (insert): results {index, code, id, timestamp_ns}.
	r := e.req("POST", "/events", map[string]any{"events": []any{
		ev(truck, 38_115_000_000, 13_361_000_000, "correlation_id", "77", "user_data", "6ba7b810-9dad-11d1-80b4-00c04fd430c8",
			"group_id", 7, "altitude_mm", -5000, "velocity_mms", 12_500, "ttl_seconds", 0, "accuracy_mm", 3000,
			"heading_cdeg", 9000, "flags", 5),
		ev(van, 38_116_000_000, 13_362_000_000, "group_id", "8"),
	}})
	expectOK(t, r, "insert")
	checkKeys(t, "insert reply", r.body, "results", "committed")
	eq(t, "committed", get(r.body, "committed"), "true")
	checkKeys(t, "insert result", get(r.body, "results", 0), "index", "code", "id", "timestamp_ns")
	eq(t, "results[1].index", get(r.body, "results", 1, "index"), "1")
	eq(t, "results[1].code", get(r.body, "results", 1, "code"), "0")
	truckTS, _ := get(r.body, "results", 0, "timestamp_ns").(string)
	if truckTS == "" || get(r.body, "results", 0, "id") != truck+":"+truckTS {
		t.Fatalf("insert result id/timestamp: %s", r.raw)
	}

	// GET /entity/{id}: every field, as sent.
	r = e.req("GET", "/entity/"+truck, nil)
	expectOK(t, r, "getLatest")
	checkKeys(t, "getLatest", r.body, "event", "found")
	eq(t, "found", get(r.body, "found"), "true")
	evt := get(r.body, "event")
	checkEventKeys(t, "getLatest", evt, false)
	for k, want := range map[string]string{
		"id": `"` + truck + ":" + truckTS + `"`, "entity_id": `"` + truck + `"`,
		"correlation_id": `"00000000-0000-0000-0000-00000000004d"`, "user_data": `"6ba7b810-9dad-11d1-80b4-00c04fd430c8"`,
		"timestamp_ns": `"` + truckTS + `"`, "lat_nano": "38115000000", "lon_nano": "13361000000", "group_id": "7",
		"altitude_mm": "-5000", "velocity_mms": "12500", "ttl_seconds": "0", "accuracy_mm": "3000", "heading_cdeg": "9000", "flags": "5",
	} {
		eq(t, "event."+k, get(evt, k), want)
	}
	// A decimal id works in Form B; an unknown entity is found false.
	r = e.req("GET", "/entity/"+decimalOf(t, truck), nil)
	expectOK(t, r, "getLatest decimal")
	eq(t, "decimal id", get(r.body, "event", "entity_id"), `"`+truck+`"`)
	r = e.req("GET", "/entity/"+ghost, nil)
	expectOK(t, r, "getLatest unknown")
	eq(t, "unknown", r.body, `{"event":null,"found":false}`)

	// POST /events upsert: results carry updated.
	r = e.req("POST", "/events", map[string]any{"mode": "upsert", "events": []any{
		ev(truck, 38_115_500_000, 13_361_000_000), ev(ghost, 1, 1)}})
	expectOK(t, r, "upsert")
	checkKeys(t, "upsert result", get(r.body, "results", 0), "index", "code", "updated", "id", "timestamp_ns")
	eq(t, "updated[0]", get(r.body, "results", 0, "updated"), "true")
	eq(t, "updated[1]", get(r.body, "results", 1, "updated"), "false")

	// POST /query/radius (Form B): distance_mm in results.
	r = e.req("POST", "/query/radius", map[string]any{"center_lat_nano": 38_115_000_000, "center_lon_nano": 13_361_000_000, "radius_mm": 100_000})
	expectOK(t, r, "radius")
	checkKeys(t, "radius", r.body, "events", "has_more", "cursor")
	eq(t, "radius has_more", get(r.body, "has_more"), "false")
	eq(t, "radius cursor", get(r.body, "cursor"), "null")
	if n := len(get(r.body, "events").([]any)); n != 1 {
		t.Fatalf("radius: %d events: %s", n, r.raw)
	}
	checkEventKeys(t, "radius", get(r.body, "events", 0), true)
	eq(t, "distance_mm", get(r.body, "events", 0, "distance_mm"), "55598") // 0.0005 degrees of latitude: 55597.54 mm
	// group filter
	r = e.req("POST", "/query/radius", map[string]any{"center_lat_nano": "38115000000", "center_lon_nano": "13361000000", "radius_mm": "1000000", "group_id": "8"})
	expectOK(t, r, "radius group")
	if n := len(get(r.body, "events").([]any)); n != 1 || get(r.body, "events", 0, "entity_id") != van {
		t.Fatalf("radius group 8: %s", r.raw)
	}

	// POST /query/polygon (Form B vertices), open ring.
	square := []any{
		map[string]any{"lat_nano": 38_110_000_000, "lon_nano": 13_350_000_000},
		map[string]any{"lat_nano": 38_110_000_000, "lon_nano": 13_370_000_000},
		map[string]any{"lat_nano": 38_120_000_000, "lon_nano": 13_370_000_000},
		map[string]any{"lat_nano": 38_120_000_000, "lon_nano": 13_350_000_000},
	}
	r = e.req("POST", "/query/polygon", map[string]any{"vertices": square})
	expectOK(t, r, "polygon")
	if n := len(get(r.body, "events").([]any)); n != 2 {
		t.Fatalf("polygon: %d events: %s", n, r.raw)
	}
	checkEventKeys(t, "polygon", get(r.body, "events", 0), false)
	// A hole around the van excludes it.
	hole := []any{
		map[string]any{"lat_nano": 38_115_800_000, "lon_nano": 13_361_800_000},
		map[string]any{"lat_nano": 38_116_200_000, "lon_nano": 13_361_800_000},
		map[string]any{"lat_nano": 38_116_200_000, "lon_nano": 13_362_200_000},
		map[string]any{"lat_nano": 38_115_800_000, "lon_nano": 13_362_200_000},
	}
	r = e.req("POST", "/query/polygon", map[string]any{"vertices": square, "holes": []any{hole}})
	expectOK(t, r, "polygon with hole")
	if n := len(get(r.body, "events").([]any)); n != 1 || get(r.body, "events", 0, "entity_id") != truck {
		t.Fatalf("polygon with hole: %s", r.raw)
	}

	// POST /query/latest: newest first; body optional; since_ns, group_id.
	r = e.req("POST", "/query/latest", nil)
	expectOK(t, r, "latest")
	if n := len(get(r.body, "events").([]any)); n != 3 {
		t.Fatalf("latest: %d events: %s", n, r.raw)
	}
	eq(t, "latest[0] is the newest (ghost)", get(r.body, "events", 0, "entity_id"), `"`+ghost+`"`)
	r = e.req("POST", "/query/latest", map[string]any{"group_id": 8, "limit": 10, "since_ns": 0})
	expectOK(t, r, "latest group")
	if n := len(get(r.body, "events").([]any)); n != 1 {
		t.Fatalf("latest group 8: %s", r.raw)
	}

	// POST /entities/batch: null in place of a missing entity.
	missing := newID()
	r = e.req("POST", "/entities/batch", map[string]any{"entity_ids": []any{truck, missing, van}})
	expectOK(t, r, "batch")
	checkKeys(t, "batch", r.body, "events")
	if evs := get(r.body, "events").([]any); len(evs) != 3 || evs[1] != nil || get(evs[0], "entity_id") != truck || get(evs[2], "entity_id") != van {
		t.Fatalf("batch: %s", r.raw)
	}
	// POST /query/latest with entity_ids: the same lookup.
	r2 := e.req("POST", "/query/latest", map[string]any{"entity_ids": []any{truck, missing, van}})
	expectOK(t, r2, "latest lookup")
	if string(r2.raw) != string(r.raw) {
		t.Errorf("query/latest lookup %s differs from entities/batch %s", r2.raw, r.raw)
	}

	// GET /entity/{id}/history: both of the truck's events, oldest first.
	r = e.req("GET", "/entity/"+truck+"/history", nil)
	expectOK(t, r, "history")
	if n := len(get(r.body, "events").([]any)); n != 1 {
		// upsert without timestamp replaced the latest event
		t.Fatalf("history: %s", r.raw)
	}
	e.insert(ev(truck, 38_115_600_000, 13_361_000_000))
	r = e.req("GET", "/entity/"+truck+"/history?since_ns=0&limit=10", nil)
	if n := len(get(r.body, "events").([]any)); n != 2 || str(get(r.body, "events", 0, "lat_nano")) != "38115500000" {
		t.Fatalf("history: %s", r.raw)
	}

	// TTL.
	r = e.req("POST", "/ttl/set", map[string]any{"entity_id": truck, "ttl_seconds": 3600})
	expectOK(t, r, "ttl set")
	checkKeys(t, "ttl set", r.body, "success", "expires_at_ns")
	exp := get(r.body, "expires_at_ns")
	r = e.req("POST", "/ttl/extend", map[string]any{"entity_id": truck, "extend_by_seconds": 60})
	expectOK(t, r, "ttl extend")
	checkKeys(t, "ttl extend", r.body, "success", "previous_expires_at_ns", "new_expires_at_ns")
	eq(t, "previous", get(r.body, "previous_expires_at_ns"), str(exp))
	r = e.req("POST", "/ttl/clear", map[string]any{"entity_id": truck})
	expectOK(t, r, "ttl clear")
	if str(get(r.body, "previous_expires_at_ns")) == "null" {
		t.Fatalf("ttl clear: %s", r.raw)
	}
	r = e.req("POST", "/ttl/clear", map[string]any{"entity_id": truck})
	eq(t, "ttl clear again", r.body, `{"previous_expires_at_ns":null,"success":true}`)

	// DELETE /entities.
	r = e.req("DELETE", "/entities", map[string]any{"entity_ids": []any{van, missing}})
	expectOK(t, r, "delete")
	eq(t, "delete", r.body, `{"deleted_count":1,"not_found_count":1}`)

	// POST /cleanup/expired: body optional.
	r = e.req("POST", "/cleanup/expired", nil)
	expectOK(t, r, "cleanup")
	eq(t, "cleanup", r.body, `{"entries_removed":0,"entries_scanned":0}`)
	r = e.req("POST", "/cleanup/expired", map[string]any{"max_entries": 5})
	expectOK(t, r, "cleanup with body")

	// GET /stats, /status, /topology, /ping.
	r = e.req("GET", "/stats", nil)
	expectOK(t, r, "stats")
	checkKeys(t, "stats", r.body, "event_count", "entity_count", "storage_bytes", "replica_count", "primary_replica", "replication_lag_ms")
	eq(t, "entity_count", get(r.body, "entity_count"), "2")
	eq(t, "event_count", get(r.body, "event_count"), "3")
	eq(t, "storage_bytes", get(r.body, "storage_bytes"), "384")
	eq(t, "replica_count", get(r.body, "replica_count"), "1")
	r = e.req("GET", "/status", nil)
	expectOK(t, r, "status")
	checkKeys(t, "status", r.body, "events_count", "entities_count", "index_bytes", "uptime_seconds", "version", "cluster_state", "node_id", "cluster_id")
	eq(t, "version", get(r.body, "version"), `"1.0.0"`)
	eq(t, "cluster_state", get(r.body, "cluster_state"), `"healthy"`)
	// The cluster id, as the dev banner prints it, in either form.
	cluster := `"` + testCluster.String() + `"`
	eq(t, "status cluster_id", get(r.body, "cluster_id"), cluster)
	eq(t, "status cluster_id, form a", get(e.req("GET", "/status?form=a", nil).body, "cluster_id"), cluster)
	r = e.req("GET", "/topology", nil)
	expectOK(t, r, "topology")
	checkKeys(t, "topology", r.body, "version", "num_shards", "replication_factor", "shards", "cluster_id")
	checkKeys(t, "shard", get(r.body, "shards", 0), "shard_id", "primary", "replicas")
	checkKeys(t, "node", get(r.body, "shards", 0, "primary"), "node_id", "address", "status", "last_contact_ms", "lag_ms")
	eq(t, "primary address", get(r.body, "shards", 0, "primary", "address"), `"`+e.replica.Addr().String()+`"`)
	eq(t, "primary status", get(r.body, "shards", 0, "primary", "status"), `"healthy"`)
	eq(t, "primary last_contact_ms", get(r.body, "shards", 0, "primary", "last_contact_ms"), `0`)
	eq(t, "primary lag_ms", get(r.body, "shards", 0, "primary", "lag_ms"), `0`)
	eq(t, "topology cluster_id", get(r.body, "cluster_id"), cluster)
	eq(t, "topology cluster_id, form a", get(e.req("GET", "/topology?form=a", nil).body, "cluster_id"), cluster)
	r = e.req("GET", "/ping", nil)
	eq(t, "ping", r.body, `{"pong":true}`)

	// HEAD works where GET does.
	if r := e.req("HEAD", "/stats", nil); r.status != 200 || len(r.raw) != 0 {
		t.Errorf("HEAD /stats: %d %q", r.status, r.raw)
	}
}

func TestEndpointsFormA(t *testing.T) {
	e := newEnv(t)
	truck, van := newID(), newID()

	// POST /events?form=a: results {index, result, id, timestamp_ns}.
	r := e.req("POST", "/events?form=a", map[string]any{"events": []any{
		ev(truck, 38_115_000_000, 13_361_000_000, "group_id", -1), ev(van, 38_116_000_000, 13_362_000_000)}})
	expectOK(t, r, "insert A")
	checkKeys(t, "insert A result", get(r.body, "results", 0), "index", "result", "id", "timestamp_ns")
	eq(t, "result", get(r.body, "results", 0, "result"), "0")
	eq(t, "committed", get(r.body, "committed"), "true")
	// upsert in Form A: no updated field.
	r = e.req("POST", "/events?form=A", map[string]any{"mode": "upsert", "events": []any{ev(van, 38_116_000_001, 13_362_000_000)}})
	expectOK(t, r, "upsert A")
	checkKeys(t, "upsert A result", get(r.body, "results", 0), "index", "result", "id", "timestamp_ns")

	// GET /entity/{id}?form=a; group_id -1 is 2^64-1, shown as an int64
	// in Form A, unsigned in Form B.
	r = e.req("GET", "/entity/"+truck+"?form=a", nil)
	expectOK(t, r, "getLatest A")
	checkEventKeysA(t, "getLatest A", get(r.body, "event"), false)
	eq(t, "group_id", get(r.body, "event", "group_id"), "-1")
	eq(t, "lat", get(r.body, "event", "lat"), "38.115")
	eq(t, "lon", get(r.body, "event", "lon"), "13.361")
	r = e.req("GET", "/entity/"+truck, nil)
	eq(t, "group_id Form B", get(r.body, "event", "group_id"), `"18446744073709551615"`)
	// Unknown: 404 with the GetLatestResponse shape and the error fields.
	r = e.req("GET", "/entity/"+newID()+"?form=a", nil)
	if r.status != 404 {
		t.Fatalf("getLatest A unknown: %d %s", r.status, r.raw)
	}
	checkKeys(t, "404", r.body, "event", "found", "error_code", "error_name", "message")
	eq(t, "404 found", get(r.body, "found"), "false")
	eq(t, "404 code", get(r.body, "error_code"), "3")
	eq(t, "404 name", get(r.body, "error_name"), `"ENTITY_NOT_FOUND"`)
	// Form A takes UUIDs only.
	r = e.req("GET", "/entity/12345?form=a", nil)
	expectErr(t, r, "decimal id in Form A", "a", 400, 101, "INVALID_ENTITY_ID")

	// POST /query/radius (Form A by its fields): degrees and metres; events
	// with degrees and distance_mm.
	r = e.req("POST", "/query/radius", map[string]any{"center_lat": 38.115, "center_lon": 13.361, "radius_m": 10})
	expectOK(t, r, "radius A")
	if n := len(get(r.body, "events").([]any)); n != 1 {
		t.Fatalf("radius A: %s", r.raw)
	}
	checkEventKeysA(t, "radius A", get(r.body, "events", 0), true)
	eq(t, "radius A distance_mm", get(r.body, "events", 0, "distance_mm"), "0")
	// group_id as the int64 Form A shows.
	r = e.req("POST", "/query/radius", map[string]any{"center_lat": 38.115, "center_lon": 13.361, "radius_m": 10_000, "group_id": -1})
	if n := len(get(r.body, "events").([]any)); n != 1 || get(r.body, "events", 0, "entity_id") != truck {
		t.Fatalf("radius A group -1: %s", r.raw)
	}
	// A Form A body decides even against ?form=b.
	r = e.req("POST", "/query/radius?form=b", map[string]any{"center_lat": 100, "center_lon": 0, "radius_m": 1})
	expectErr(t, r, "Form A body, ?form=b", "a", 400, 100, "INVALID_COORDINATES")

	// POST /query/polygon with {lat, lon} vertices, closed ring.
	r = e.req("POST", "/query/polygon", map[string]any{"vertices": []any{
		map[string]any{"lat": 38.11, "lon": 13.35}, map[string]any{"lat": 38.11, "lon": 13.37},
		map[string]any{"lat": 38.12, "lon": 13.37}, map[string]any{"lat": 38.12, "lon": 13.35},
		map[string]any{"lat": 38.11, "lon": 13.35}}, "limit": 10})
	expectOK(t, r, "polygon A")
	if n := len(get(r.body, "events").([]any)); n != 2 {
		t.Fatalf("polygon A: %s", r.raw)
	}
	// A Form A polygon error is in Form A.
	r = e.req("POST", "/query/polygon", map[string]any{"vertices": []any{
		map[string]any{"lat": 1, "lon": 1}, map[string]any{"lat": 2, "lon": 2}}})
	expectErr(t, r, "polygon A too few", "a", 400, 103, "INVALID_POLYGON")

	// POST /entities/batch?form=a: missing entities omitted.
	r = e.req("POST", "/entities/batch?form=a", map[string]any{"entity_ids": []any{newID(), van, newID()}})
	expectOK(t, r, "batch A")
	if evs := get(r.body, "events").([]any); len(evs) != 1 || get(evs[0], "entity_id") != van {
		t.Fatalf("batch A: %s", r.raw)
	}
	r = e.req("POST", "/query/latest?form=a", map[string]any{"entity_ids": []any{newID(), van}})
	if evs := get(r.body, "events").([]any); len(evs) != 1 {
		t.Fatalf("latest lookup A: %s", r.raw)
	}

	// The shared-body endpoints in Form A: errors in Form A.
	r = e.req("POST", "/ttl/extend?form=a", map[string]any{"entity_id": truck, "extend_by_seconds": 1})
	expectErr(t, r, "ttl extend A without TTL", "a", 400, 106, "NO_TTL_SET")
	r = e.req("POST", "/ttl/set?form=a", map[string]any{"entity_id": newID(), "ttl_seconds": 1})
	expectErr(t, r, "ttl set A unknown", "a", 400, 3, "ENTITY_NOT_FOUND")
	r = e.req("POST", "/ttl/set?form=a", map[string]any{"entity_id": truck, "ttl_seconds": 100})
	expectOK(t, r, "ttl set A")
	r = e.req("GET", "/entity/"+truck+"/history?form=a&until_ns=1", nil)
	expectOK(t, r, "history A")
	eq(t, "history A", r.body, `{"cursor":null,"events":[],"has_more":false}`)
	r = e.req("POST", "/delete?form=a", map[string]any{"entity_ids": []any{}})
	expectErr(t, r, "delete A empty", "a", 400, 101, "EMPTY_REQUEST")
	r = e.req("DELETE", "/entities?form=a", map[string]any{"entity_ids": []any{truck}})
	eq(t, "delete A", r.body, `{"deleted_count":1,"not_found_count":0}`)
	r = e.req("POST", "/cleanup/expired?form=a", "")
	expectOK(t, r, "cleanup A")
	r = e.req("GET", "/stats?form=a", nil)
	expectOK(t, r, "stats A")
	eq(t, "entity_count A", get(r.body, "entity_count"), "1")
}

func TestAliases(t *testing.T) {
	e := newEnv(t)
	a, b := newID(), newID()
	// POST /insert is POST /events.
	for _, path := range []string{"/events", "/insert"} {
		r := e.req("POST", path, map[string]any{"events": []any{ev(a, 1_000_000_000, 2_000_000_000)}})
		expectOK(t, r, path)
		checkKeys(t, path, get(r.body, "results", 0), "index", "code", "id", "timestamp_ns")
		r = e.req("POST", path+"?form=a", map[string]any{"events": []any{ev(a, 100_000_000_000, 0)}})
		expectErr(t, r, path+" Form A invalid", "a", 400, 100, "INVALID_COORDINATES")
	}
	r := e.req("GET", "/entity/"+a+"/history", nil)
	if n := len(get(r.body, "events").([]any)); n != 2 {
		t.Fatalf("two inserts, one through each path: %s", r.raw)
	}
	e.insert(ev(b, 1, 1))
	// POST /delete is DELETE /entities.
	r = e.req("POST", "/delete", map[string]any{"entity_ids": []any{a}})
	eq(t, "POST /delete", r.body, `{"deleted_count":1,"not_found_count":0}`)
	r = e.req("DELETE", "/entities", map[string]any{"entity_ids": []any{a, b}})
	eq(t, "DELETE /entities", r.body, `{"deleted_count":1,"not_found_count":1}`)
	for p, allow := range map[string]string{"/insert": "POST", "/delete": "POST", "/events": "POST", "/entities": "DELETE"} {
		r := e.req("GET", p, nil)
		expectErr(t, r, "GET "+p, "b", 405, 4, "UNKNOWN_OPERATION")
		if got := r.header.Get("Allow"); got != allow {
			t.Errorf("GET %s: Allow %q, want %q", p, got, allow)
		}
	}
}
