package http_test

import (
	"io"
	stdhttp "net/http"
	"strings"
	"testing"
)

// TestBBoxAndNearest: the two new queries in both forms against a real
// replica, with the filters, paging, and their answers' shapes.
func TestBBoxAndNearest(t *testing.T) {
	e := newEnv(t)
	a, b, c, far := newID(), newID(), newID(), newID()
	e.insert(
		ev(a, 38_100_000_000, 13_360_000_000, "flags", 1, "group_id", 1),
		ev(b, 38_100_100_000, 13_360_000_000, "flags", 3, "group_id", 1),
		ev(c, 38_100_200_000, 13_360_000_000, "flags", 2, "group_id", 2),
		ev(far, 38_200_000_000, 13_360_000_000, "flags", 1),
	)
	ids := func(r resp) []string {
		evs, _ := get(r.body, "events").([]any)
		out := []string{}
		for i := range evs {
			id, _ := get(evs[i], "entity_id").(string)
			out = append(out, id)
		}
		return out
	}
	same := func(what string, got []string, want ...string) {
		t.Helper()
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: %v, want %v", what, got, want)
		}
	}

	// Nearest, Form B: ordered by distance, with distance_mm.
	r := e.req("POST", "/query/nearest", map[string]any{"center_lat_nano": 38_100_000_000, "center_lon_nano": 13_360_000_000, "k": 2})
	expectOK(t, r, "nearest B")
	same("nearest B", ids(r), a, b)
	checkEventKeys(t, "nearest B event", get(r.body, "events", 0), true)
	eq(t, "nearest distance 0", get(r.body, "events", 0, "distance_mm"), "0")
	eq(t, "nearest distance 1", get(r.body, "events", 1, "distance_mm"), "11120")
	eq(t, "nearest has_more", get(r.body, "has_more"), "true")
	cursor := get(r.body, "cursor").(string)
	r = e.req("POST", "/query/nearest", map[string]any{"center_lat_nano": 38_100_000_000, "center_lon_nano": 13_360_000_000, "k": 2, "cursor": cursor})
	expectOK(t, r, "nearest page 2")
	same("nearest page 2", ids(r), c, far)
	eq(t, "nearest page 2 has_more", get(r.body, "has_more"), "false")

	// Form A, a bounded distance and the filters.
	r = e.req("POST", "/query/nearest", map[string]any{"center_lat": 38.1, "center_lon": 13.36, "k": 10, "max_distance_m": 100_000, "flags_any": 2})
	expectOK(t, r, "nearest A")
	same("nearest A", ids(r), b, c)
	checkEventKeysA(t, "nearest A event", get(r.body, "events", 0), true)
	r = e.req("POST", "/query/nearest", map[string]any{"center_lat": 38.1, "center_lon": 13.36, "k": 10, "max_distance_m": 1000})
	same("nearest within 1 km", ids(r), a, b, c)
	r = e.req("POST", "/query/nearest", map[string]any{"center_lat": 38.1, "center_lon": 13.36, "k": 10, "flags_all": 3})
	same("nearest flags_all", ids(r), b)
	r = e.req("POST", "/query/nearest", map[string]any{"center_lat": 38.1, "center_lon": 13.36, "k": 10, "group_id": 1})
	same("nearest group", ids(r), a, b)

	// Bbox, Form B then A.
	r = e.req("POST", "/query/bbox", map[string]any{"min_lat_nano": 38_099_000_000, "min_lon_nano": 13_359_000_000,
		"max_lat_nano": 38_100_150_000, "max_lon_nano": 13_361_000_000})
	expectOK(t, r, "bbox B")
	got := ids(r)
	if len(got) != 2 || !(got[0] == a && got[1] == b || got[0] == b && got[1] == a) {
		t.Errorf("bbox B: %v, want %s and %s", got, a, b)
	}
	checkEventKeys(t, "bbox event", get(r.body, "events", 0), false)
	r = e.req("POST", "/query/bbox", map[string]any{"min_lat": 38, "min_lon": 13, "max_lat": 39, "max_lon": 14, "since_ns": 0, "flags_all": 1, "group_id": 1})
	expectOK(t, r, "bbox A")
	if got := ids(r); len(got) != 2 {
		t.Errorf("bbox A filtered: %v", got)
	}
	checkEventKeysA(t, "bbox A event", get(r.body, "events", 0), false)
	// Across the antimeridian: a box from 170 east to -170 holds none of
	// them; one from 0 to -170 (eastward, most of the globe) holds all.
	r = e.req("POST", "/query/bbox", map[string]any{"min_lat": -90, "min_lon": 170, "max_lat": 90, "max_lon": -170})
	same("bbox across the antimeridian", ids(r))
	r = e.req("POST", "/query/bbox", map[string]any{"min_lat": -90, "min_lon": 0, "max_lat": 90, "max_lon": -170, "limit": 10})
	if got := ids(r); len(got) != 4 {
		t.Errorf("bbox most of the globe: %v", got)
	}

	// The filters on radius and polygon.
	r = e.req("POST", "/query/radius", map[string]any{"center_lat": 38.1, "center_lon": 13.36, "radius_m": 1000, "flags_all": 2})
	expectOK(t, r, "radius filtered")
	if got := ids(r); len(got) != 2 {
		t.Errorf("radius flags_all 2: %v", got)
	}
	r = e.req("POST", "/query/polygon", map[string]any{"vertices": []any{
		map[string]any{"lat": 38, "lon": 13}, map[string]any{"lat": 38, "lon": 14}, map[string]any{"lat": 39, "lon": 14}, map[string]any{"lat": 39, "lon": 13}},
		"flags_any": 2, "group_id": 2})
	expectOK(t, r, "polygon filtered")
	same("polygon filtered", ids(r), c)
}

func TestBBoxAndNearestErrors(t *testing.T) {
	e := newEnv(t)
	bboxB := `{"min_lat_nano":0,"min_lon_nano":0,"max_lat_nano":1000,"max_lon_nano":1000`
	nearB := `{"center_lat_nano":0,"center_lon_nano":0,"k":5`
	runErrCases(t, e, []errCase{
		{"bbox inverted latitudes", "POST", "/query/bbox", `{"min_lat":1,"min_lon":0,"max_lat":0,"max_lon":1}`, "a", 400, 103, "INVALID_POLYGON", "min_lat"},
		{"bbox latitude out of range B", "POST", "/query/bbox", `{"min_lat_nano":-90000000001,"min_lon_nano":0,"max_lat_nano":0,"max_lon_nano":1}`, "b", 400, 100, "INVALID_COORDINATES", "min_lat_nano"},
		{"bbox longitude out of range A", "POST", "/query/bbox", `{"min_lat":0,"min_lon":0,"max_lat":1,"max_lon":180.000000001}`, "a", 400, 100, "INVALID_COORDINATES", "max_lon"},
		{"bbox corner missing", "POST", "/query/bbox", `{"min_lat":0,"min_lon":0,"max_lat":1}`, "a", 400, 1, "MALFORMED_REQUEST", "max_lon is required"},
		{"bbox mixed forms", "POST", "/query/bbox", `{"min_lat":0,"min_lon_nano":0,"max_lat":1,"max_lon":1}`, "b", 400, 1, "MALFORMED_REQUEST", "mixed"},
		{"bbox unknown field", "POST", "/query/bbox", bboxB + `,"radius_mm":1}`, "b", 400, 1, "MALFORMED_REQUEST", "flags_any"},
		{"bbox limit over", "POST", "/query/bbox", bboxB + `,"limit":10001}`, "b", 400, 300, "QUERY_RESULT_TOO_LARGE", "limit"},
		{"bbox flags_all over", "POST", "/query/bbox", bboxB + `,"flags_all":65536}`, "b", 400, 108, "INVALID_ARGUMENT", "flags_all"},
		{"bbox since_ns negative", "POST", "/query/bbox", bboxB + `,"since_ns":-1}`, "b", 400, 108, "INVALID_ARGUMENT", "since_ns"},
		{"bbox radius cursor", "POST", "/query/bbox", bboxB + `,"cursor":"AQEAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}`, "b", 400, 104, "INVALID_CURSOR", "another kind"},
		{"nearest k missing", "POST", "/query/nearest", `{"center_lat":0,"center_lon":0}`, "a", 400, 1, "MALFORMED_REQUEST", "k is required"},
		{"nearest k 0", "POST", "/query/nearest", nearB + `,"k":0}`, "b", 400, 1, "MALFORMED_REQUEST", "duplicate"},
		{"nearest k 0 alone", "POST", "/query/nearest", `{"center_lat_nano":0,"center_lon_nano":0,"k":0}`, "b", 400, 108, "INVALID_ARGUMENT", "k"},
		{"nearest k over", "POST", "/query/nearest", `{"center_lat":0,"center_lon":0,"k":10001}`, "a", 400, 300, "QUERY_RESULT_TOO_LARGE", "k"},
		{"nearest k at the limit", "POST", "/query/nearest", `{"center_lat":91,"center_lon":0,"k":10000}`, "a", 400, 100, "INVALID_COORDINATES", "center_lat"},
		{"nearest limit", "POST", "/query/nearest", nearB + `,"limit":5}`, "b", 400, 1, "MALFORMED_REQUEST", "k"},
		{"nearest max_distance 0", "POST", "/query/nearest", nearB + `,"max_distance_mm":0}`, "b", 400, 101, "INVALID_RADIUS", "max_distance_mm"},
		{"nearest max_distance over A", "POST", "/query/nearest", `{"center_lat":0,"center_lon":0,"k":1,"max_distance_m":40000001}`, "a", 400, 101, "INVALID_RADIUS", "max_distance_m"},
		{"nearest flags_any over", "POST", "/query/nearest", nearB + `,"flags_any":70000}`, "b", 400, 108, "INVALID_ARGUMENT", "flags_any"},
		{"nearest bad cursor", "POST", "/query/nearest", nearB + `,"cursor":"abc"}`, "b", 400, 104, "INVALID_CURSOR", ""},
		{"radius flags a string", "POST", "/query/radius", `{"center_lat":0,"center_lon":0,"radius_m":1,"flags_all":"x"}`, "a", 400, 1, "MALFORMED_REQUEST", "flags_all"},
	})
	// Limits at their edge pass.
	r := e.req("POST", "/query/nearest", `{"center_lat":90,"center_lon":180,"k":10000,"max_distance_m":40000000,"flags_all":65535,"since_ns":18446744073709551615}`)
	expectOK(t, r, "nearest at its limits")
	r = e.req("POST", "/query/bbox", `{"min_lat":-90,"min_lon":-180,"max_lat":90,"max_lon":180,"limit":10000,"flags_any":65535}`)
	expectOK(t, r, "bbox at its limits")
	r = e.req("POST", "/query/bbox", `{"min_lat":5,"min_lon":5,"max_lat":5,"max_lon":5}`)
	expectOK(t, r, "a degenerate box")
}

// TestGeoJSON: ?format=geojson and Accept: application/geo+json answer
// the queries as FeatureCollections; a polygon query takes a GeoJSON
// geometry.
func TestGeoJSON(t *testing.T) {
	e := newEnv(t)
	a, b := newID(), newID()
	e.insert(ev(a, 38_100_000_000, 13_360_000_000, "flags", 1), ev(b, 38_100_100_000, 13_360_000_000))
	e.insert(ev(a, 38_100_000_000, 13_360_500_000, "flags", 1))
	geo := func(r resp, what string, features int) {
		t.Helper()
		expectOK(t, r, what)
		if ct := r.header.Get("Content-Type"); ct != "application/geo+json" {
			t.Errorf("%s: Content-Type %q", what, ct)
		}
		eq(t, what+" type", get(r.body, "type"), `"FeatureCollection"`)
		fs, _ := get(r.body, "features").([]any)
		if len(fs) != features {
			t.Fatalf("%s: %d features, want %d: %s", what, len(fs), features, r.raw)
		}
		eq(t, what+" feature type", get(fs[0], "type"), `"Feature"`)
		if !has(get(r.body), "has_more") || !has(get(r.body), "cursor") {
			t.Errorf("%s: no has_more or cursor: %s", what, r.raw)
		}
	}
	r := e.req("POST", "/query/radius?format=geojson", map[string]any{"center_lat": 38.1, "center_lon": 13.36, "radius_m": 100_000})
	geo(r, "radius", 2)
	for i := range 2 {
		if get(r.body, "features", i, "properties", "entity_id") == a {
			eq(t, "point", get(r.body, "features", i, "geometry"), `{"coordinates":[13.3605,38.1],"type":"Point"}`)
		}
	}
	if d := get(r.body, "features", 0, "properties", "distance_mm"); str(d) == "" || !has(get(r.body, "features", 0, "properties"), "entity_id") {
		t.Errorf("radius feature properties: %s", r.raw)
	}
	r = e.req("POST", "/query/bbox?format=geojson&form=a", map[string]any{"min_lat": 38, "min_lon": 13, "max_lat": 39, "max_lon": 14, "flags_all": 1})
	geo(r, "bbox", 1)
	checkEventKeysA(t, "bbox properties", get(r.body, "features", 0, "properties"), false)
	r = e.req("POST", "/query/latest?format=geojson", map[string]any{})
	geo(r, "latest", 2)
	r = e.req("POST", "/query/latest?format=geojson", map[string]any{"entity_ids": []any{a, newID()}})
	geo(r, "latest lookup", 1)
	r = e.req("GET", "/entity/"+a+"/history?format=geojson", nil)
	geo(r, "history", 3) // two points and the line
	eq(t, "history line", get(r.body, "features", 2, "geometry", "type"), `"LineString"`)
	eq(t, "history line coordinates", get(r.body, "features", 2, "geometry", "coordinates"), "[[13.36,38.1],[13.3605,38.1]]")

	// Accept, on both the fast path and net/http's (HTTP/1.1 by default).
	req, _ := stdhttp.NewRequest("POST", e.base+"/query/nearest", strings.NewReader(`{"center_lat":38.1,"center_lon":13.36,"k":1}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json;q=0.5, Application/Geo+JSON")
	res, err := stdhttp.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/geo+json" || !strings.Contains(string(raw), `"FeatureCollection"`) {
		t.Errorf("nearest with Accept: %d %s %s", res.StatusCode, res.Header.Get("Content-Type"), raw)
	}
	// Errors stay JSON; other endpoints ignore the format.
	r = e.req("POST", "/query/radius?format=geojson", map[string]any{"center_lat": 91, "center_lon": 0, "radius_m": 1})
	expectErr(t, r, "radius error as GeoJSON", "a", 400, 100, "INVALID_COORDINATES")
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("an error's Content-Type %q", ct)
	}
	r = e.req("GET", "/stats?format=geojson", nil)
	expectOK(t, r, "stats")
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("stats Content-Type %q", ct)
	}

	// A GeoJSON polygon, and a MultiPolygon of one.
	square := []any{[]any{13, 38}, []any{14, 38}, []any{14, 39}, []any{13, 39}, []any{13, 38}}
	hole := []any{[]any{13.35, 38.05}, []any{13.3602, 38.05}, []any{13.3602, 38.15}, []any{13.35, 38.15}, []any{13.35, 38.05}}
	r = e.req("POST", "/query/polygon", map[string]any{"geometry": map[string]any{"type": "Polygon", "coordinates": []any{square, hole}}})
	expectOK(t, r, "polygon geometry")
	if evs, _ := get(r.body, "events").([]any); len(evs) != 1 || get(evs[0], "entity_id") != a {
		t.Errorf("polygon geometry with a hole: %s", r.raw)
	}
	r = e.req("POST", "/query/polygon?format=geojson", map[string]any{"geometry": map[string]any{"type": "MultiPolygon", "coordinates": []any{[]any{square}}}})
	geo(r, "multipolygon", 2)
	runErrCases(t, e, []errCase{
		{"geometry and vertices", "POST", "/query/polygon", map[string]any{"geometry": map[string]any{"type": "Polygon", "coordinates": []any{square}}, "vertices": []any{}}, "b", 400, 1, "MALFORMED_REQUEST", "send one"},
		{"multipolygon of two", "POST", "/query/polygon", map[string]any{"geometry": map[string]any{"type": "MultiPolygon", "coordinates": []any{[]any{square}, []any{square}}}}, "b", 400, 103, "INVALID_POLYGON", "2 polygons"},
		{"point geometry", "POST", "/query/polygon", map[string]any{"geometry": map[string]any{"type": "Point", "coordinates": []any{1, 2}}}, "b", 400, 1, "MALFORMED_REQUEST", "Point"},
		{"short position", "POST", "/query/polygon", map[string]any{"geometry": map[string]any{"type": "Polygon", "coordinates": []any{[]any{[]any{1}, []any{2, 3}, []any{4, 5}}}}}, "b", 400, 1, "MALFORMED_REQUEST", "position"},
		{"position off the globe", "POST", "/query/polygon", map[string]any{"geometry": map[string]any{"type": "Polygon", "coordinates": []any{[]any{[]any{181, 0}, []any{2, 3}, []any{4, 5}}}}}, "b", 400, 100, "INVALID_COORDINATES", "off the globe"},
		{"bowtie geometry", "POST", "/query/polygon", map[string]any{"geometry": map[string]any{"type": "Polygon", "coordinates": []any{[]any{[]any{0, 0}, []any{1, 1}, []any{1, 0}, []any{0, 1}}}}}, "b", 400, 103, "INVALID_POLYGON", ""},
		{"bad format", "POST", "/query/radius?format=xml", `{"center_lat":0,"center_lon":0,"radius_m":1}`, "b", 400, 1, "MALFORMED_REQUEST", "format"},
	})
}

// TestPlanarEdges: a box drawn along the 52nd parallel over 11 degrees of
// longitude; a vehicle 11 km north of the parallel at its middle is inside
// with geodesic edges (which bulge 14 km toward the pole there) and
// outside with planar ones.
func TestPlanarEdges(t *testing.T) {
	e := newEnv(t)
	north, south := newID(), newID()
	e.insert(ev(north, 52_100_000_000, 5_500_000_000), ev(south, 51_000_000_000, 5_500_000_000))
	box := []any{map[string]any{"lat": 50, "lon": 0}, map[string]any{"lat": 50, "lon": 11}, map[string]any{"lat": 52, "lon": 11}, map[string]any{"lat": 52, "lon": 0}}
	count := func(body map[string]any) int {
		t.Helper()
		r := e.req("POST", "/query/polygon", body)
		expectOK(t, r, "polygon")
		evs, _ := get(r.body, "events").([]any)
		return len(evs)
	}
	if n := count(map[string]any{"vertices": box}); n != 2 {
		t.Errorf("geodesic edges: %d entities, want 2 (the bulge holds the northern one)", n)
	}
	if n := count(map[string]any{"vertices": box, "edges": "geodesic"}); n != 2 {
		t.Errorf("explicitly geodesic: %d", n)
	}
	if n := count(map[string]any{"vertices": box, "edges": "planar"}); n != 1 {
		t.Errorf("planar edges: %d entities, want 1", n)
	}
	square := []any{[]any{0, 50}, []any{11, 50}, []any{11, 52}, []any{0, 52}, []any{0, 50}}
	if n := count(map[string]any{"geometry": map[string]any{"type": "Polygon", "coordinates": []any{square}}, "edges": "planar", "flags_any": 0}); n != 1 {
		t.Errorf("planar GeoJSON: %d entities, want 1", n)
	}
	runErrCases(t, e, []errCase{
		{"edges unknown", "POST", "/query/polygon", map[string]any{"vertices": box, "edges": "rhumb"}, "a", 400, 108, "INVALID_ARGUMENT", "edges"},
		{"edges a number", "POST", "/query/polygon", map[string]any{"vertices": box, "edges": 1}, "a", 400, 1, "MALFORMED_REQUEST", "edges"},
		{"planar collinear", "POST", "/query/polygon", map[string]any{"vertices": []any{map[string]any{"lat": 0, "lon": 0}, map[string]any{"lat": 0, "lon": 1}, map[string]any{"lat": 0, "lon": 2}}, "edges": "planar"}, "a", 400, 103, "INVALID_POLYGON", "no area"},
	})
}
