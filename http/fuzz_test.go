package http_test

import (
	"net/url"
	"testing"
	"time"
)

// fuzzRoutes are the endpoints FuzzRequests sends bodies to.
var fuzzRoutes = []struct {
	method, path string
	writes       bool
}{
	{"POST", "/events", true}, {"POST", "/insert?form=a", true}, {"POST", "/query/radius", false},
	{"POST", "/query/polygon", false}, {"POST", "/query/latest", false}, {"POST", "/entities/batch", false},
	{"DELETE", "/entities", true}, {"POST", "/delete?form=a", true}, {"POST", "/cleanup/expired", true},
	{"POST", "/ttl/set", true}, {"POST", "/ttl/extend", true}, {"POST", "/ttl/clear", true},
	{"GET", "/entity/", false}, {"GET", "/entity/history", false},
	{"POST", "/query/bbox", false}, {"POST", "/query/nearest", false},
	{"PUT", "/fences/f", true}, {"GET", "/fences/", false}, {"GET", "/feed?wait_ms=0&", false},
	{"PUT", "/hooks/h", true}, {"GET", "/hooks/", false},
	{"PUT", "/feed/retention", true},
}

// FuzzRequests sends arbitrary bodies (and path segments) to every
// endpoint of a real gateway and replica: the gateway never answers 5xx or
// anything but JSON, and a rejected request never changes the state
// (GET /stats before and after).
func FuzzRequests(f *testing.F) {
	id := "6ba7b810-9dad-11d1-80b4-00c04fd430c8"
	for _, s := range []string{
		`{"events":[{"entity_id":"` + id + `","lat_nano":1,"lon_nano":2}]}`,
		`{"events":[{"entity_id":"` + id + `","lat_nano":1e3,"lon_nano":2}],"mode":"upsert"}`,
		`{"events":[{"entity_id":"0","lat_nano":"1","lon_nano":2,"id":"x"}]}`,
		`{"center_lat":38.1,"center_lon":13.3,"radius_m":1000,"limit":5}`,
		`{"center_lat_nano":38100000000,"center_lon_nano":13300000000,"radius_mm":"1000","cursor":null}`,
		`{"vertices":[{"lat":0,"lon":0},{"lat":1,"lon":0},{"lat":1,"lon":1}],"holes":[[]]}`,
		`{"vertices":[{"lat_nano":0,"lon_nano":0},{"lat":1,"lon":0}]}`,
		`{"vertices":[{"lat":0,"lon":0},{"lat":1,"lon":0},{"lat":1,"lon":1}],"edges":"planar","flags_any":1}`,
		`{"geometry":{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,0]]]},"edges":"geodesic"}`,
		`{"entity_ids":["` + id + `","42"]}`, `{"entity_ids":[]}`, `{"max_entries":1}`,
		`{"entity_id":"` + id + `","ttl_seconds":5}`, `{"entity_id":"` + id + `","extend_by_seconds":5}`,
		`{"limit":1,"since_ns":"5"}`,
		`{"min_lat":1,"min_lon":179,"max_lat":2,"max_lon":-179,"flags_all":1,"flags_any":"2","since_ns":3}`,
		`{"min_lat_nano":1,"min_lon_nano":2,"max_lat_nano":0,"max_lon_nano":1,"limit":2}`,
		`{"center_lat":38.1,"center_lon":13.3,"k":3,"max_distance_m":1000,"group_id":-1}`,
		`{"center_lat_nano":1,"center_lon_nano":2,"k":"10000","max_distance_mm":1,"cursor":"AQUAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}`, `{"a":{"b":[[[[[[1]]]]]]}}`, `[`, `"\ud800"`, "{\"\xff\":1}", ``, `null`,
		`{"events":[{"entity_id":"` + id + `","lat_nano":1,"lon_nano":2,"entity_id":"1"}]}`,
		`{"events":[{"entity_id":"` + id + `","lat":38.1155,"lon":-1e-9},{"entity_id":"42","lat":1,"lat_nano":1,"lon":0}]}`,
		`{"events":[{"entity_id":"` + id + `","lat_nano":1,"lon_nano":2,"timestamp_ns":1795815268}]}`,
		`{"shape":"circle","center":{"lat_nano":1,"lon_nano":2},"radius_mm":5000,"report":["enter","inside"]}`,
		`{"shape":"bbox","min":{"lat_nano":1,"lon_nano":2},"max":{"lat_nano":0,"lon_nano":3},"group_id":7}`,
		`{"shape":"polygon","vertices":[{"lat":0,"lon":0},{"lat":1,"lon":0},{"lat":1,"lon":1}],"report":["sideways"]}`,
		`after=5&fences=a,b&types=enter,exit&limit=3`, `types=&fences=a%2Cb`,
		`{"url":"https://example.com/geo","fences":["depot"],"types":["enter","exit"]}`,
		`{"url":"ftp://x","fences":["a,b"],"types":["sideways"],"extra":1}`,
	} {
		for i := range fuzzRoutes {
			f.Add(uint8(i), []byte(s))
		}
	}
	e := newEnv(f)
	e.insert(ev(id, 1, 2)) // something for TTL and deletes to act on
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		rt := fuzzRoutes[int(route)%len(fuzzRoutes)]
		path := rt.path
		var payload any = body
		if rt.method == "GET" {
			seg := url.PathEscape(string(body))
			if seg == "" {
				seg = "x"
			}
			if path == "/entity/history" {
				path = "/entity/" + seg + "/history"
			} else {
				path += seg
			}
			payload = nil
		}
		before := statsOf(t, e.base)
		start := time.Now()
		r := request(t, e.base, rt.method, path, payload)
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("%s %s %q took %v: %d %s", rt.method, path, body, d, r.status, r.raw)
		}
		if r.status >= 500 {
			t.Fatalf("%s %s %q: %d %s", rt.method, path, body, r.status, r.raw)
		}
		accepted := r.status == 200 && rt.writes && str(get(r.body, "committed")) != "false"
		if !accepted {
			if after := statsOf(t, e.base); after != before {
				t.Fatalf("%s %s %q answered %d %s and changed the state:\n%s\n%s", rt.method, path, body, r.status, r.raw, before, after)
			}
		}
	})
}
