package http_test

import (
	"bytes"
	"io"
	"math"
	stdhttp "net/http"
	"strings"
	"testing"
	"time"

	ghttp "github.com/geoevent/geoevent/http"
)

// circle returns n vertices on a circle of radius r degrees around (lat,
// lon), counter-clockwise, as Form B or Form A coordinate objects.
func circle(lat, lon, r float64, n int, formA bool) []any {
	out := make([]any, n)
	for i := range n {
		a := 2 * math.Pi * float64(i) / float64(n)
		la, lo := lat+r*math.Sin(a), lon+r*math.Cos(a)
		if formA {
			out[i] = map[string]any{"lat": math.Round(la*1e7) / 1e7, "lon": math.Round(lo*1e7) / 1e7}
		} else {
			out[i] = map[string]any{"lat_nano": int64(math.Round(la * 1e9)), "lon_nano": int64(math.Round(lo * 1e9))}
		}
	}
	return out
}

func square(lat0, lon0, lat1, lon1 float64) []any {
	v := func(la, lo float64) any {
		return map[string]any{"lat_nano": int64(math.Round(la * 1e9)), "lon_nano": int64(math.Round(lo * 1e9))}
	}
	return []any{v(lat0, lon0), v(lat0, lon1), v(lat1, lon1), v(lat1, lon0)}
}

func TestLimits(t *testing.T) {
	e := newEnv(t)

	// Events per batch: 1 and 10,000 commit; 10,001 is 300 in both forms.
	e.insert(ev(newID(), 20_000_000_000, 20_000_000_000))
	batch := make([]any, 10_000)
	for i := range batch {
		batch[i] = ev(newID(), 30_000_000_000+int64(i)*1000, 30_000_000_000)
	}
	r := e.req("POST", "/events", map[string]any{"events": batch})
	expectOK(t, r, "10,000 events")
	if str(get(r.body, "committed")) != "true" || len(get(r.body, "results").([]any)) != 10_000 {
		t.Fatalf("10,000 events: not committed")
	}
	before := e.stats()
	over := append(batch, ev(newID(), 1, 1))
	expectErr(t, e.req("POST", "/events", map[string]any{"events": over}), "10,001 events", "b", 400, 300, "BATCH_TOO_LARGE")
	expectErr(t, e.req("POST", "/events?form=a", map[string]any{"events": over}), "10,001 events A", "a", 400, 300, "BATCH_TOO_LARGE")

	// Page limits: 10,000 is allowed, 10,001 is 300 QUERY_RESULT_TOO_LARGE.
	center := map[string]any{"center_lat_nano": 30_005_000_000, "center_lon_nano": 30_000_000_000, "radius_mm": 10_000_000}
	with := func(m map[string]any, k string, v any) map[string]any {
		out := map[string]any{k: v}
		for k, v := range m {
			if _, ok := out[k]; !ok {
				out[k] = v
			}
		}
		return out
	}
	r = e.req("POST", "/query/radius", with(center, "limit", 10_000))
	expectOK(t, r, "limit 10,000")
	if n := len(get(r.body, "events").([]any)); n != 10_000 || str(get(r.body, "has_more")) != "false" {
		t.Fatalf("limit 10,000: %d events, has_more %s", n, str(get(r.body, "has_more")))
	}
	r = e.req("POST", "/query/radius", with(center, "limit", 1))
	if n := len(get(r.body, "events").([]any)); n != 1 || str(get(r.body, "has_more")) != "true" {
		t.Fatalf("limit 1: %d events", n)
	}
	r = e.req("POST", "/query/radius", center)
	if n := len(get(r.body, "events").([]any)); n != 1000 {
		t.Fatalf("default limit: %d events", n)
	}
	expectErr(t, e.req("POST", "/query/radius", with(center, "limit", 10_001)), "radius limit 10,001", "b", 400, 300, "QUERY_RESULT_TOO_LARGE")
	expectErr(t, e.req("POST", "/query/radius", with(center, "limit", "99999999999999999999999")), "radius limit huge", "b", 400, 300, "QUERY_RESULT_TOO_LARGE")
	expectErr(t, e.req("POST", "/query/polygon", map[string]any{"vertices": circle(1, 1, 0.1, 3, true), "limit": 10_001}), "polygon limit 10,001", "a", 400, 300, "QUERY_RESULT_TOO_LARGE")
	expectOK(t, e.req("POST", "/query/polygon", map[string]any{"vertices": circle(1, 1, 0.1, 3, true), "limit": 10_000}), "polygon limit 10,000")
	expectErr(t, e.req("POST", "/query/latest", map[string]any{"limit": 10_001}), "latest limit 10,001", "b", 400, 300, "QUERY_RESULT_TOO_LARGE")
	r = e.req("POST", "/query/latest", map[string]any{"limit": 10_000})
	if n := len(get(r.body, "events").([]any)); n != 10_000 || str(get(r.body, "has_more")) != "true" {
		t.Fatalf("latest limit 10,000 of 10,001: %d events", n)
	}
	id := get(batch[0], "entity_id").(string)
	expectErr(t, e.req("GET", "/entity/"+id+"/history?limit=10001", nil), "history limit 10,001", "b", 400, 300, "QUERY_RESULT_TOO_LARGE")
	expectOK(t, e.req("GET", "/entity/"+id+"/history?limit=10000", nil), "history limit 10,000")

	// Radius: Form A 1 to 40,000,000 m (an int32), Form B 1 to 40,000,000,000 mm.
	for _, c := range []struct {
		body string
		form string
		ok   bool
	}{
		{`{"center_lat":0,"center_lon":0,"radius_m":1}`, "a", true},
		{`{"center_lat":0,"center_lon":0,"radius_m":40000000,"limit":1}`, "a", true},
		{`{"center_lat":0,"center_lon":0,"radius_m":0}`, "a", false},
		{`{"center_lat":0,"center_lon":0,"radius_m":40000001}`, "a", false},
		{`{"center_lat":0,"center_lon":0,"radius_m":2147483648}`, "a", false},
		{`{"center_lat":0,"center_lon":0,"radius_m":"40000000","limit":1}`, "a", true},
		{`{"center_lat_nano":0,"center_lon_nano":0,"radius_mm":1}`, "b", true},
		{`{"center_lat_nano":0,"center_lon_nano":0,"radius_mm":40000000000,"limit":1}`, "b", true},
		{`{"center_lat_nano":0,"center_lon_nano":0,"radius_mm":0}`, "b", false},
		{`{"center_lat_nano":0,"center_lon_nano":0,"radius_mm":40000000001}`, "b", false},
		{`{"center_lat_nano":0,"center_lon_nano":0,"radius_mm":-1}`, "b", false},
		// Coordinates at their edges.
		{`{"center_lat":-90,"center_lon":180,"radius_m":1}`, "a", true},
		{`{"center_lat":90.0000000004,"center_lon":-180.0000000004,"radius_m":1}`, "a", true},
		{`{"center_lat_nano":90000000000,"center_lon_nano":-180000000000,"radius_mm":1}`, "b", true},
	} {
		r := e.req("POST", "/query/radius", c.body)
		if c.ok {
			expectOK(t, r, c.body)
		} else {
			expectErr(t, r, c.body, c.form, 400, 101, "INVALID_RADIUS")
		}
	}
	expectErr(t, e.req("POST", "/query/radius", `{"center_lat":90.0000000005,"center_lon":0,"radius_m":1}`), "lat 90.0000000005", "a", 400, 100, "INVALID_COORDINATES")
	expectErr(t, e.req("POST", "/query/radius", `{"center_lat_nano":0,"center_lon_nano":180000000001,"radius_mm":1}`), "lon 180000000001", "b", 400, 100, "INVALID_COORDINATES")

	// Polygon vertices: 3 and 1,000 (and 1,000 closed with a 1,001st) are
	// allowed; 1,001 distinct and 1,002 are 102; fewer than 3 is 103.
	expectOK(t, e.req("POST", "/query/polygon", map[string]any{"vertices": circle(10, 10, 0.5, 3, false)}), "3 vertices")
	expectOK(t, e.req("POST", "/query/polygon", map[string]any{"vertices": circle(10, 10, 0.5, 3, true)}), "3 vertices A")
	c1000 := circle(10, 10, 0.5, 1000, false)
	expectOK(t, e.req("POST", "/query/polygon", map[string]any{"vertices": c1000}), "1,000 vertices")
	expectOK(t, e.req("POST", "/query/polygon", map[string]any{"vertices": append(c1000, c1000[0])}), "1,000 vertices closed")
	expectOK(t, e.req("POST", "/query/polygon", map[string]any{"vertices": circle(10, 10, 0.5, 1000, true)}), "1,000 vertices A")
	expectErr(t, e.req("POST", "/query/polygon", map[string]any{"vertices": circle(10, 10, 0.5, 1001, false)}), "1,001 vertices", "b", 400, 102, "POLYGON_TOO_COMPLEX")
	expectErr(t, e.req("POST", "/query/polygon", map[string]any{"vertices": circle(10, 10, 0.5, 1001, true)}), "1,001 vertices A", "a", 400, 102, "POLYGON_TOO_COMPLEX")
	expectErr(t, e.req("POST", "/query/polygon", map[string]any{"vertices": circle(10, 10, 0.5, 1002, false)}), "1,002 vertices", "b", 400, 102, "POLYGON_TOO_COMPLEX")
	expectErr(t, e.req("POST", "/query/polygon", map[string]any{"vertices": circle(10, 10, 0.5, 2, false)}), "2 vertices", "b", 400, 103, "INVALID_POLYGON")
	expectErr(t, e.req("POST", "/query/polygon", map[string]any{"vertices": circle(10, 10, 0.5, 100_000, true)}), "100,000 vertices A", "a", 400, 102, "POLYGON_TOO_COMPLEX")

	// Holes: 100 are allowed, 101 are 102; a hole of 1,002 vertices is 102.
	outer := square(0, 0, 10.5, 10.5)
	var holes []any
	for i := range 11 {
		for j := range 10 {
			holes = append(holes, square(float64(i)+0.2, float64(j)+0.2, float64(i)+0.4, float64(j)+0.4))
		}
	}
	expectOK(t, e.req("POST", "/query/polygon", map[string]any{"vertices": outer, "holes": holes[:100]}), "100 holes")
	expectErr(t, e.req("POST", "/query/polygon", map[string]any{"vertices": outer, "holes": holes[:101]}), "101 holes", "b", 400, 102, "POLYGON_TOO_COMPLEX")
	expectErr(t, e.req("POST", "/query/polygon", map[string]any{"vertices": outer, "holes": []any{circle(5, 5, 0.1, 1002, false)}}), "a hole of 1,002", "b", 400, 102, "POLYGON_TOO_COMPLEX")
	expectOK(t, e.req("POST", "/query/polygon", map[string]any{"vertices": outer, "holes": []any{circle(5, 5, 0.1, 1000, false)}}), "a hole of 1,000")

	// Entity id lists: 10,000 allowed, 10,001 are 300 BATCH_TOO_LARGE.
	ids := make([]any, 10_000)
	for i := range ids {
		ids[i] = get(batch[i], "entity_id")
	}
	r = e.req("POST", "/entities/batch", map[string]any{"entity_ids": ids})
	if expectOK(t, r, "10,000 ids"); len(get(r.body, "events").([]any)) != 10_000 {
		t.Fatalf("10,000 ids: short answer")
	}
	expectOK(t, e.req("POST", "/query/latest?form=a", map[string]any{"entity_ids": ids}), "10,000 ids latest")
	ids = append(ids, newID())
	for _, p := range []string{"/entities/batch", "/query/latest", "/delete"} {
		expectErr(t, e.req("POST", p, map[string]any{"entity_ids": ids}), "10,001 ids "+p, "b", 400, 300, "BATCH_TOO_LARGE")
	}
	expectErr(t, e.req("DELETE", "/entities?form=a", map[string]any{"entity_ids": ids}), "10,001 ids delete A", "a", 400, 300, "BATCH_TOO_LARGE")

	// Cleanup max_entries: 1 to 2^31-1; TTL seconds: 0 to 2^32-1.
	expectOK(t, e.req("POST", "/cleanup/expired", `{"max_entries":2147483647}`), "max_entries 2^31-1")
	expectOK(t, e.req("POST", "/cleanup/expired", `{"max_entries":1}`), "max_entries 1")
	expectErr(t, e.req("POST", "/cleanup/expired", `{"max_entries":2147483648}`), "max_entries 2^31", "b", 400, 108, "INVALID_ARGUMENT")
	expectErr(t, e.req("POST", "/ttl/set", map[string]any{"entity_id": id, "ttl_seconds": 4_294_967_296}), "ttl 2^32", "b", 400, 108, "INVALID_ARGUMENT")
	expectErr(t, e.req("POST", "/ttl/extend", map[string]any{"entity_id": id, "extend_by_seconds": -1}), "extend -1", "b", 400, 108, "INVALID_ARGUMENT")
	if after := e.stats(); after != before {
		t.Fatalf("rejected requests changed the state:\nbefore %s\nafter  %s", before, after)
	}
	r = e.req("POST", "/ttl/set", map[string]any{"entity_id": id, "ttl_seconds": 4_294_967_295})
	expectOK(t, r, "ttl 2^32-1")
	r = e.req("POST", "/ttl/extend", map[string]any{"entity_id": id, "extend_by_seconds": "4294967295"})
	expectOK(t, r, "extend 2^32-1")
}

// TestBodyLimit: a body of exactly 16 MiB is read; one byte more is 413
// with a JSON error body in the request's form, announced or chunked.
func TestBodyLimit(t *testing.T) {
	e := newEnv(t)
	id := newID()
	e.insert(ev(id, 1, 1))
	padded := func(n int) []byte {
		head := `{"entity_ids":["` + id + `"]`
		return []byte(head + strings.Repeat(" ", n-len(head)-1) + "}")
	}
	body := padded(ghttp.DefaultMaxBodyBytes)
	if len(body) != 16<<20 {
		t.Fatalf("body is %d bytes", len(body))
	}
	r := e.req("POST", "/entities/batch", body)
	expectOK(t, r, "16 MiB")
	over := padded(ghttp.DefaultMaxBodyBytes + 1)
	r = e.req("POST", "/entities/batch", over)
	expectErr(t, r, "16 MiB + 1", "b", 413, 300, "BATCH_TOO_LARGE")
	r = e.req("POST", "/entities/batch?form=a", over)
	expectErr(t, r, "16 MiB + 1, Form A", "a", 413, 300, "BATCH_TOO_LARGE")

	// Chunked, without a Content-Length.
	req, err := stdhttp.NewRequest("POST", e.base+"/entities/batch", io.MultiReader(bytes.NewReader(over)))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = -1
	req.Header.Set("Content-Type", "application/json")
	res, err := (&stdhttp.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 413 || !strings.Contains(string(raw), `"code":300`) {
		t.Fatalf("chunked 16 MiB + 1: %d %s", res.StatusCode, raw)
	}
}
