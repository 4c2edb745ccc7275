package http_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	stdhttp "net/http"
	"strings"
	"testing"
	"time"

	"github.com/geoevent/geoevent/client"
	"github.com/geoevent/geoevent/core"
	ghttp "github.com/geoevent/geoevent/http"

	"github.com/geoevent/geoevent/internal/testproc"
)

type errCase struct {
	name         string
	method, path string
	body         any
	form         string // "a" or "b": the error body's form
	status       int
	code         core.Code
	codeName     string
	contains     string // in the message
}

func runErrCases(t *testing.T, e *env, cases []errCase) {
	t.Helper()
	for _, c := range cases {
		r := e.req(c.method, c.path, c.body)
		expectErr(t, r, c.name, c.form, c.status, c.code, c.codeName)
		msg, _ := get(r.body, "message").(string)
		if c.form == "b" {
			msg, _ = get(r.body, "error", "details").(string)
		}
		if c.contains != "" && !strings.Contains(msg, c.contains) {
			t.Errorf("%s: message %s does not name %q", c.name, msg, c.contains)
		}
	}
}

func TestErrorCodes(t *testing.T) {
	e := newEnv(t)
	id := newID()
	ts := e.insert(ev(id, 10_000_000_000, 10_000_000_000))[0]
	ts = strings.Trim(ts, `"`)
	zero := "00000000-0000-0000-0000-000000000000"
	before := e.stats()

	events := func(evs ...any) map[string]any { return map[string]any{"events": evs} }
	bowtie := []any{
		map[string]any{"lat_nano": 0, "lon_nano": 0}, map[string]any{"lat_nano": 1_000_000_000, "lon_nano": 1_000_000_000},
		map[string]any{"lat_nano": 0, "lon_nano": 1_000_000_000}, map[string]any{"lat_nano": 1_000_000_000, "lon_nano": 0}}
	bowtieA := []any{
		map[string]any{"lat": 0, "lon": 0}, map[string]any{"lat": 1, "lon": 1},
		map[string]any{"lat": 0, "lon": 1}, map[string]any{"lat": 1, "lon": 0}}
	radiusB := `{"center_lat_nano":0,"center_lon_nano":0,"radius_mm":1000`
	radiusA := `{"center_lat":0,"center_lon":0,"radius_m":1`
	// A radius cursor, to hand to a polygon query.
	e.insert(ev(newID(), 10_000_000_000, 10_000_000_001))
	r := e.req("POST", "/query/radius", map[string]any{"center_lat_nano": 10_000_000_000, "center_lon_nano": 10_000_000_000, "radius_mm": 1000, "limit": 1})
	radiusCursor, _ := get(r.body, "cursor").(string)
	if radiusCursor == "" {
		t.Fatalf("no cursor: %s", r.raw)
	}
	before = e.stats()

	cases := []errCase{
		// 1 MALFORMED_REQUEST: syntax, types, unknown/missing/read-only fields, forms.
		{"not JSON", "POST", "/events", "not json", "b", 400, 1, "MALFORMED_REQUEST", "not valid JSON"},
		{"not JSON, Form A", "POST", "/events?form=a", "{", "a", 400, 1, "MALFORMED_REQUEST", "not valid JSON"},
		{"trailing data", "POST", "/events", `{"events":[]} x`, "b", 400, 1, "MALFORMED_REQUEST", "after the top-level value"},
		{"empty body", "POST", "/events", "", "b", 400, 1, "MALFORMED_REQUEST", "empty"},
		{"array body", "POST", "/query/radius", "[]", "b", 400, 1, "MALFORMED_REQUEST", "JSON object"},
		{"invalid UTF-8", "POST", "/events", "{\"events\":[{\"entity_id\":\"\xff\"}]}", "b", 400, 1, "MALFORMED_REQUEST", "UTF-8"},
		{"duplicate field", "POST", "/query/radius", radiusB + `,"radius_mm":5}`, "b", 400, 1, "MALFORMED_REQUEST", `duplicate field "radius_mm"`},
		{"events missing", "POST", "/events", `{}`, "b", 400, 1, "MALFORMED_REQUEST", "events is required"},
		{"events not an array", "POST", "/events", `{"events":{}}`, "b", 400, 1, "MALFORMED_REQUEST", "events"},
		{"unknown top field", "POST", "/events", `{"events":[],"foo":1}`, "b", 400, 1, "MALFORMED_REQUEST", `"foo"`},
		{"case matters", "POST", "/events", `{"Events":[]}`, "b", 400, 1, "MALFORMED_REQUEST", `"Events"`},
		{"unknown event field", "POST", "/events", events(ev(id, 1, 1, "latitude", 1.5)), "b", 400, 1, "MALFORMED_REQUEST", `"latitude" in events[0]`},
		{"id is read-only", "POST", "/events", events(ev(id, 1, 1, "id", id+":1")), "b", 400, 1, "MALFORMED_REQUEST", "events[0].id is read-only"},
		{"id is read-only, Form A", "POST", "/events?form=a", events(ev(id, 1, 1, "id", id+":1")), "a", 400, 1, "MALFORMED_REQUEST", "read-only"},
		{"lat_nano missing", "POST", "/events", events(map[string]any{"entity_id": id, "lon_nano": 1}), "b", 400, 1, "MALFORMED_REQUEST", "events[0].lat_nano is required"},
		{"entity_id missing", "POST", "/events", events(ev(id, 1, 1), map[string]any{"lat_nano": 1, "lon_nano": 1}), "b", 400, 1, "MALFORMED_REQUEST", "events[1].entity_id is required"},
		{"lat_nano null", "POST", "/events", events(ev(id, 1, 1, "lat_nano", nil)), "b", 400, 1, "MALFORMED_REQUEST", "events[0].lat_nano is required"},
		{"lat_nano a boolean", "POST", "/events", events(ev(id, 1, 1, "lat_nano", true)), "b", 400, 1, "MALFORMED_REQUEST", "events[0].lat_nano"},
		{"lat_nano a fraction", "POST", "/events", events(ev(id, 1, 1, "lat_nano", 1.5)), "b", 400, 1, "MALFORMED_REQUEST", "events[0].lat_nano"},
		{"lat_nano an exponent", "POST", "/events", events(ev(id, 1, 1, "lat_nano", json1e3{})), "b", 400, 1, "MALFORMED_REQUEST", "events[0].lat_nano"},
		{"lat_nano a bad string", "POST", "/events", events(ev(id, 1, 1, "lat_nano", "12a")), "b", 400, 1, "MALFORMED_REQUEST", "events[0].lat_nano"},
		{"entity_id a number", "POST", "/events", events(ev(id, 1, 1, "entity_id", 5)), "b", 400, 1, "MALFORMED_REQUEST", "events[0].entity_id"},
		{"correlation_id not an id", "POST", "/events", events(ev(id, 1, 1, "correlation_id", "x")), "b", 400, 1, "MALFORMED_REQUEST", "events[0].correlation_id"},
		{"event not an object", "POST", "/events", events(5), "b", 400, 1, "MALFORMED_REQUEST", "events[0]"},
		{"mixed forms", "POST", "/query/radius", `{"center_lat":1,"center_lon_nano":1,"radius_m":1}`, "b", 400, 1, "MALFORMED_REQUEST", "mixed"},
		{"radius_mm missing", "POST", "/query/radius", `{"center_lat_nano":0,"center_lon_nano":0}`, "b", 400, 1, "MALFORMED_REQUEST", "radius_mm is required"},
		{"radius_m missing", "POST", "/query/radius", `{"center_lat":0,"center_lon":0}`, "a", 400, 1, "MALFORMED_REQUEST", "radius_m is required"},
		{"radius_m a fraction", "POST", "/query/radius", radiusA + `.5}`, "a", 400, 1, "MALFORMED_REQUEST", "radius_m"},
		{"center_lat a string", "POST", "/query/radius", `{"center_lat":"1","center_lon":0,"radius_m":1}`, "a", 400, 1, "MALFORMED_REQUEST", "center_lat"},
		{"unknown radius field, Form A", "POST", "/query/radius", radiusA + `,"radius_mm_x":1}`, "a", 400, 1, "MALFORMED_REQUEST", `"radius_mm_x"`},
		{"vertices mixed", "POST", "/query/polygon", map[string]any{"vertices": []any{bowtie[0], bowtieA[1], bowtie[2]}}, "b", 400, 1, "MALFORMED_REQUEST", "vertices[1] is in Form A"},
		{"vertex field unknown", "POST", "/query/polygon", map[string]any{"vertices": []any{map[string]any{"lat": 1, "lon": 1, "alt": 1}}}, "a", 400, 1, "MALFORMED_REQUEST", `"alt" in vertices[0]`},
		{"vertex lon missing", "POST", "/query/polygon", map[string]any{"vertices": []any{map[string]any{"lat_nano": 1}}}, "b", 400, 1, "MALFORMED_REQUEST", "vertices[0].lon_nano is required"},
		{"vertices missing", "POST", "/query/polygon", `{}`, "b", 400, 1, "MALFORMED_REQUEST", "vertices is required"},
		{"latest clash", "POST", "/query/latest", map[string]any{"entity_ids": []any{id}, "limit": 5}, "b", 400, 1, "MALFORMED_REQUEST", "entity_ids"},
		{"unknown parameter", "GET", "/stats?foo=1", nil, "b", 400, 1, "MALFORMED_REQUEST", `"foo"`},
		{"repeated parameter", "GET", "/entity/" + id + "/history?limit=1&limit=2", nil, "b", 400, 1, "MALFORMED_REQUEST", "limit"},
		{"bad form", "GET", "/stats?form=c", nil, "b", 400, 1, "MALFORMED_REQUEST", "form"},
		{"since_ns not a number", "GET", "/entity/" + id + "/history?since_ns=x&form=a", nil, "a", 400, 1, "MALFORMED_REQUEST", "since_ns"},
		{"ttl_seconds missing", "POST", "/ttl/set", map[string]any{"entity_id": id}, "b", 400, 1, "MALFORMED_REQUEST", "ttl_seconds is required"},
		{"entity_id missing", "POST", "/ttl/clear?form=a", `{}`, "a", 400, 1, "MALFORMED_REQUEST", "entity_id is required"},
		{"max_entries a string of letters", "POST", "/cleanup/expired", `{"max_entries":"ten"}`, "b", 400, 1, "MALFORMED_REQUEST", "max_entries"},
		{"cursor a number", "POST", "/query/radius", radiusB + `,"cursor":5}`, "b", 400, 1, "MALFORMED_REQUEST", "cursor"},
		{"entity_ids a string", "POST", "/entities/batch", `{"entity_ids":"x"}`, "b", 400, 1, "MALFORMED_REQUEST", "entity_ids"},

		// 3 ENTITY_NOT_FOUND (404).
		{"ttl set unknown", "POST", "/ttl/set", map[string]any{"entity_id": newID(), "ttl_seconds": 5}, "b", 400, 3, "ENTITY_NOT_FOUND", "not found"},
		{"ttl extend unknown", "POST", "/ttl/extend", map[string]any{"entity_id": newID(), "extend_by_seconds": 5}, "b", 400, 3, "ENTITY_NOT_FOUND", ""},
		{"ttl clear unknown, Form A", "POST", "/ttl/clear?form=a", map[string]any{"entity_id": newID()}, "a", 400, 3, "ENTITY_NOT_FOUND", ""},

		// Form A batch failures: 100, 101, 105 for per-event codes 7-14.
		{"A: zero entity id", "POST", "/events?form=a", events(ev(id, 1, 1), ev(zero, 1, 1)), "a", 400, 101, "INVALID_ENTITY_ID", "events[1] failed with ENTITY_ID_MUST_NOT_BE_ZERO (7)"},
		{"A: lat out of range", "POST", "/events?form=a", events(ev(id, 90_000_000_001, 1)), "a", 400, 100, "INVALID_COORDINATES", "LAT_OUT_OF_RANGE (9)"},
		{"A: lon out of range", "POST", "/events?form=a", events(ev(id, 1, -180_000_000_001)), "a", 400, 100, "INVALID_COORDINATES", "LON_OUT_OF_RANGE (10)"},
		{"A: lat beyond int64", "POST", "/events?form=a", events(ev(id, 1, 1, "lat_nano", json1e30{})), "a", 400, 100, "INVALID_COORDINATES", "LAT_OUT_OF_RANGE (9)"},
		{"A: event exists", "POST", "/events?form=a", events(ev(id, 1, 1, "timestamp_ns", ts)), "a", 400, 105, "INVALID_EVENT", "EVENT_EXISTS (8)"},
		{"A: altitude", "POST", "/events?form=a", events(ev(id, 1, 1, "altitude_mm", 100_000_001)), "a", 400, 105, "INVALID_EVENT", "ALTITUDE_OUT_OF_RANGE (11)"},
		{"A: altitude beyond int32", "POST", "/events?form=a", events(ev(id, 1, 1, "altitude_mm", "-99999999999")), "a", 400, 105, "INVALID_EVENT", "ALTITUDE_OUT_OF_RANGE (11)"},
		{"A: velocity", "POST", "/events?form=a", events(ev(id, 1, 1, "velocity_mms", 1_000_000_001)), "a", 400, 105, "INVALID_EVENT", "VELOCITY_OUT_OF_RANGE (12)"},
		{"A: negative velocity", "POST", "/events?form=a", events(ev(id, 1, 1, "velocity_mms", -1)), "a", 400, 105, "INVALID_EVENT", "VELOCITY_OUT_OF_RANGE (12)"},
		{"A: heading", "POST", "/events?form=a", events(ev(id, 1, 1, "heading_cdeg", 36_000)), "a", 400, 105, "INVALID_EVENT", "HEADING_OUT_OF_RANGE (13)"},
		{"A: heading beyond uint16", "POST", "/events?form=a", events(ev(id, 1, 1, "heading_cdeg", 70_000)), "a", 400, 105, "INVALID_EVENT", "HEADING_OUT_OF_RANGE (13)"},
		{"A: future", "POST", "/events?form=a", events(ev(id, 1, 1, "timestamp_ns", "18000000000000000000")), "a", 400, 105, "INVALID_EVENT", "TIMESTAMP_IN_FUTURE (14)"},
		{"A: several failures", "POST", "/events?form=a", events(ev(id, 1, 1), ev(id, 1, 1, "heading_cdeg", 36_000), ev(zero, 1, 1)), "a", 400, 105, "INVALID_EVENT", "events[1] failed with HEADING_OUT_OF_RANGE (13) (and 1 more events failed)"},
		{"A: unparsable entity id", "POST", "/events?form=a", events(ev("42", 1, 1)), "a", 400, 101, "INVALID_ENTITY_ID", "events[0].entity_id"},
		{"B: unparsable entity id", "POST", "/events", events(ev("not-an-id", 1, 1)), "b", 400, 101, "INVALID_ENTITY_ID", "events[0].entity_id"},

		// 100 INVALID_COORDINATES.
		{"center lat B", "POST", "/query/radius", `{"center_lat_nano":90000000001,"center_lon_nano":0,"radius_mm":1}`, "b", 400, 100, "INVALID_COORDINATES", "center_lat_nano"},
		{"center lon A", "POST", "/query/radius", `{"center_lat":0,"center_lon":-180.0000000006,"radius_m":1}`, "a", 400, 100, "INVALID_COORDINATES", "center_lon"},
		{"center lat A huge", "POST", "/query/radius", `{"center_lat":1e300,"center_lon":0,"radius_m":1}`, "a", 400, 100, "INVALID_COORDINATES", "center_lat"},
		{"vertex A", "POST", "/query/polygon", map[string]any{"vertices": []any{bowtieA[0], bowtieA[1], map[string]any{"lat": 91, "lon": 0}}}, "a", 400, 100, "INVALID_COORDINATES", "vertices[2].lat"},
		{"vertex B in a hole", "POST", "/query/polygon", map[string]any{"vertices": bowtie[:3], "holes": []any{[]any{map[string]any{"lat_nano": 0, "lon_nano": 180_000_000_001}}}}, "b", 400, 100, "INVALID_COORDINATES", "holes[0][0].lon_nano"},

		// 101: INVALID_ENTITY_ID, INVALID_RADIUS, EMPTY_REQUEST.
		{"zero id path", "GET", "/entity/" + zero, nil, "b", 400, 101, "INVALID_ENTITY_ID", "zero"},
		{"bad id path", "GET", "/entity/xyz?form=a", nil, "a", 400, 101, "INVALID_ENTITY_ID", "xyz"},
		{"bad id history", "GET", "/entity/xyz/history", nil, "b", 400, 101, "INVALID_ENTITY_ID", "xyz"},
		{"zero id in a list", "POST", "/entities/batch", map[string]any{"entity_ids": []any{id, zero}}, "b", 400, 101, "INVALID_ENTITY_ID", "entity_ids[1]"},
		{"bad id in a list, A", "DELETE", "/entities?form=a", map[string]any{"entity_ids": []any{"1"}}, "a", 400, 101, "INVALID_ENTITY_ID", "entity_ids[0]"},
		{"zero id ttl", "POST", "/ttl/set", map[string]any{"entity_id": "0", "ttl_seconds": 1}, "b", 400, 101, "INVALID_ENTITY_ID", "entity_id"},
		{"radius 0 mm", "POST", "/query/radius", `{"center_lat_nano":0,"center_lon_nano":0,"radius_mm":0}`, "b", 400, 101, "INVALID_RADIUS", "radius_mm"},
		{"radius -1 m", "POST", "/query/radius", `{"center_lat":0,"center_lon":0,"radius_m":-1}`, "a", 400, 101, "INVALID_RADIUS", "radius_m"},
		{"events empty", "POST", "/events", `{"events":[]}`, "b", 400, 101, "EMPTY_REQUEST", "events"},
		{"events empty, A", "POST", "/insert?form=a", `{"events":[]}`, "a", 400, 101, "EMPTY_REQUEST", "events"},
		{"ids empty", "DELETE", "/entities", `{"entity_ids":[]}`, "b", 400, 101, "EMPTY_REQUEST", "entity_ids"},
		{"ids empty batch", "POST", "/entities/batch?form=a", `{"entity_ids":[]}`, "a", 400, 101, "EMPTY_REQUEST", "entity_ids"},
		{"ids empty latest", "POST", "/query/latest", `{"entity_ids":[]}`, "b", 400, 101, "EMPTY_REQUEST", "entity_ids"},

		// 103 INVALID_POLYGON, 104 INVALID_CURSOR, 106, 107, 108.
		{"bowtie", "POST", "/query/polygon", map[string]any{"vertices": bowtie}, "b", 400, 103, "INVALID_POLYGON", ""},
		{"bowtie A", "POST", "/query/polygon", map[string]any{"vertices": bowtieA}, "a", 400, 103, "INVALID_POLYGON", ""},
		{"no vertices", "POST", "/query/polygon", `{"vertices":[]}`, "b", 400, 103, "INVALID_POLYGON", ""},
		{"bad cursor", "POST", "/query/radius", radiusB + `,"cursor":"abc"}`, "b", 400, 104, "INVALID_CURSOR", "cursor"},
		{"long cursor", "POST", "/query/radius", radiusA + `,"cursor":"` + strings.Repeat("A", 300) + `"}`, "a", 400, 104, "INVALID_CURSOR", "cursor"},
		{"cursor of another query", "POST", "/query/polygon", map[string]any{"vertices": bowtie[:3], "cursor": radiusCursor}, "b", 400, 104, "INVALID_CURSOR", "another kind"},
		{"bad history cursor", "GET", "/entity/" + id + "/history?cursor=zz", nil, "b", 400, 104, "INVALID_CURSOR", ""},
		{"no ttl", "POST", "/ttl/extend", map[string]any{"entity_id": id, "extend_by_seconds": 5}, "b", 400, 106, "NO_TTL_SET", ""},
		{"time range", "GET", "/entity/" + id + "/history?since_ns=5&until_ns=4", nil, "b", 400, 107, "INVALID_TIME_RANGE", ""},
		{"limit 0", "POST", "/query/radius", radiusB + `,"limit":0}`, "b", 400, 108, "INVALID_ARGUMENT", "limit"},
		{"limit -1 A", "POST", "/query/radius", radiusA + `,"limit":-1}`, "a", 400, 108, "INVALID_ARGUMENT", "limit"},
		{"history limit 0", "GET", "/entity/" + id + "/history?limit=0", nil, "b", 400, 108, "INVALID_ARGUMENT", "limit"},
		{"mode", "POST", "/events", map[string]any{"mode": "merge", "events": []any{ev(id, 1, 1)}}, "b", 400, 108, "INVALID_ARGUMENT", "mode"},
		{"ttl_seconds above uint32", "POST", "/events", events(ev(id, 1, 1, "ttl_seconds", 4_294_967_296)), "b", 400, 108, "INVALID_ARGUMENT", "events[0].ttl_seconds"},
		{"flags above uint16", "POST", "/events", events(ev(id, 1, 1, "flags", 65_536)), "b", 400, 108, "INVALID_ARGUMENT", "events[0].flags"},
		{"accuracy negative", "POST", "/events", events(ev(id, 1, 1, "accuracy_mm", -1)), "b", 400, 108, "INVALID_ARGUMENT", "events[0].accuracy_mm"},
		{"group beyond uint64", "POST", "/events", events(ev(id, 1, 1, "group_id", "18446744073709551616")), "b", 400, 108, "INVALID_ARGUMENT", "events[0].group_id"},
		{"timestamp negative", "POST", "/events", events(ev(id, 1, 1, "timestamp_ns", -1)), "b", 400, 108, "INVALID_ARGUMENT", "events[0].timestamp_ns"},
		{"ttl set beyond uint32", "POST", "/ttl/set", map[string]any{"entity_id": id, "ttl_seconds": 4_294_967_296}, "b", 400, 108, "INVALID_ARGUMENT", "ttl_seconds"},
		{"max_entries 0", "POST", "/cleanup/expired", `{"max_entries":0}`, "b", 400, 108, "INVALID_ARGUMENT", "max_entries"},
		{"since_ns negative", "POST", "/query/latest", `{"since_ns":-1}`, "b", 400, 108, "INVALID_ARGUMENT", "since_ns"},

		// Unknown paths and methods.
		{"no such path", "GET", "/nowhere", nil, "b", 404, 4, "UNKNOWN_OPERATION", "/nowhere"},
		{"no such path, A", "POST", "/events/extra?form=a", "{}", "a", 404, 4, "UNKNOWN_OPERATION", ""},
		{"wrong method", "PUT", "/ttl/set", "{}", "b", 405, 4, "UNKNOWN_OPERATION", "POST"},
		{"wrong method, A", "POST", "/stats?form=a", "{}", "a", 405, 4, "UNKNOWN_OPERATION", "GET"},
	}
	runErrCases(t, e, cases)

	// Form B: per-event codes with 200 and committed false.
	for _, c := range []struct {
		event any
		code  core.CodeInfo
	}{
		{ev(zero, 1, 1), core.EntityIDZero},
		{ev(id, 1, 1, "timestamp_ns", ts), core.EventExists},
		{ev(id, -90_000_000_001, 1), core.LatOutOfRange},
		{ev(id, 1, 1, "lat_nano", "9223372036854775808"), core.LatOutOfRange},
		{ev(id, 1, 180_000_000_001), core.LonOutOfRange},
		{ev(id, 1, 1, "altitude_mm", -10_000_001), core.AltitudeOutOfRange},
		{ev(id, 1, 1, "velocity_mms", "99999999999999999999999"), core.VelocityOutOfRange},
		{ev(id, 1, 1, "heading_cdeg", -1), core.HeadingOutOfRange},
		{ev(id, 1, 1, "timestamp_ns", "18000000000000000000"), core.TimestampInFuture},
	} {
		for _, mode := range []string{"insert", "upsert"} {
			if mode == "upsert" && c.code == core.EventExists {
				continue
			}
			r := e.req("POST", "/events", map[string]any{"mode": mode, "events": []any{ev(id, 2, 2), c.event}})
			what := fmt.Sprintf("%s %s", mode, c.code.Name)
			expectOK(t, r, what)
			eq(t, what+" committed", get(r.body, "committed"), "false")
			eq(t, what+" results[0].code", get(r.body, "results", 0, "code"), "0")
			eq(t, what+" results[1].code", get(r.body, "results", 1, "code"), fmt.Sprint(c.code.Code))
			eq(t, what+" results[1].message", get(r.body, "results", 1, "message"), `"`+c.code.Name+`"`)
			if has(get(r.body, "results", 0), "id") || has(get(r.body, "results", 0), "message") {
				t.Errorf("%s: an uncommitted result has an id or a message: %s", what, r.raw)
			}
		}
	}

	// Not one of these requests wrote anything.
	if after := e.stats(); after != before {
		t.Fatalf("rejected requests changed the state:\nbefore %s\nafter  %s", before, after)
	}
}

// json1e3 and json1e30 marshal as numbers with an exponent.
type json1e3 struct{}

func (json1e3) MarshalJSON() ([]byte, error) { return []byte("1e3"), nil }

type json1e30 struct{}

func (json1e30) MarshalJSON() ([]byte, error) { return []byte("100000000000000000000000000000"), nil }

// fakeBackend answers every operation with do.
type fakeBackend struct {
	do func(ctx context.Context, op core.Operation, req any) (any, error)
}

func (f fakeBackend) Do(ctx context.Context, call ghttp.Call) error {
	v, err := f.do(ctx, call.Operation(), call.Request())
	if err != nil {
		return err
	}
	return call.SetReply(v)
}

// TestEveryCodeKeepsItsStatus sends every code of the table through the
// gateway: each keeps its HTTP status and appears in the request's form,
// except the session protocol's codes, which are the gateway's failure.
func TestEveryCodeKeepsItsStatus(t *testing.T) {
	var code core.CodeInfo
	gw := testproc.ServeGateway(t, ghttp.Config{Backend: fakeBackend{func(ctx context.Context, op core.Operation, req any) (any, error) {
		return nil, &core.Error{CodeInfo: code, Message: "from the backend"}
	}}})
	base := "http://" + gw.Addr().String()
	id := newID()
	for _, info := range append(core.Codes[1:], core.CodeInfo{Code: 599, Name: "UNKNOWN", HTTPStatus: 500}) {
		code = info
		want := info
		switch info.Code {
		case 2, 4, 16, 201, 202, 203, 204, 205:
			want = core.InternalError
		}
		for _, form := range []string{"a", "b"} {
			r := request(t, base, "GET", "/entity/"+id+"?form="+form, nil)
			expectErr(t, r, fmt.Sprintf("%s via getLatest, Form %s", info.Name, form), form, want.HTTPStatus, want.Code, want.Name)
		}
		// Radius queries name 101 INVALID_RADIUS and 300 QUERY_RESULT_TOO_LARGE
		// (the binary protocol carries the number only).
		radiusWant := want
		switch info.Code {
		case 101:
			radiusWant = core.InvalidRadius
		case 300:
			radiusWant = core.QueryResultTooLarge
		}
		r := request(t, base, "POST", "/query/radius", `{"center_lat":1,"center_lon":1,"radius_m":5}`)
		expectErr(t, r, info.Name+" via queryRadius, Form A", "a", radiusWant.HTTPStatus, radiusWant.Code, radiusWant.Name)
	}
}

func TestBackendFailures(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	cases := []struct {
		name     string
		do       func(ctx context.Context, op core.Operation, req any) (any, error)
		status   int
		code     core.CodeInfo
		contains string
	}{
		{"timeout", func(ctx context.Context, _ core.Operation, _ any) (any, error) {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-block:
				return nil, errors.New("unblocked")
			}
		}, 504, core.ReplicationTimeout, "timeout"},
		{"client deadline", func(context.Context, core.Operation, any) (any, error) {
			return nil, &client.RetryError{Attempts: 3, Err: errors.New("read timeout"), Reason: client.ErrTotalTimeout}
		}, 504, core.ReplicationTimeout, ""},
		{"retryable code after retries", func(context.Context, core.Operation, any) (any, error) {
			return nil, &client.RetryError{Attempts: 6, Err: core.Errorf(core.ClusterBusy, "busy")}
		}, 503, core.ClusterBusy, "busy"},
		{"unreachable", func(context.Context, core.Operation, any) (any, error) {
			return nil, &client.RetryError{Attempts: 6, Err: errors.New("dial tcp: connection refused")}
		}, 503, core.ClusterUnavailable, "connection refused"},
		{"closed", func(context.Context, core.Operation, any) (any, error) { return nil, client.ErrClosed }, 503, core.ClusterUnavailable, ""},
		{"wrong reply type", func(context.Context, core.Operation, any) (any, error) { return &core.Stats{}, nil }, 500, core.InternalError, "backend answered"},
		{"nil reply", func(context.Context, core.Operation, any) (any, error) { return nil, nil }, 500, core.InternalError, ""},
		{"panic", func(context.Context, core.Operation, any) (any, error) { panic("boom") }, 500, core.InternalError, ""},
	}
	for _, c := range cases {
		gw := testproc.ServeGateway(t, ghttp.Config{Backend: fakeBackend{c.do}, RequestTimeout: 200 * time.Millisecond})
		base := "http://" + gw.Addr().String()
		for _, form := range []string{"a", "b"} {
			r := request(t, base, "POST", "/entities/batch?form="+form, map[string]any{"entity_ids": []any{newID()}})
			expectErr(t, r, c.name+" Form "+form, form, c.status, c.code.Code, c.code.Name)
			// A retryable 503 says when to come back; nothing else does.
			if want := map[bool]string{true: "1"}[c.status == 503 && c.code.Retryable]; r.header.Get("Retry-After") != want {
				t.Errorf("%s: Retry-After %q, want %q", c.name, r.header.Get("Retry-After"), want)
			}
			msg := str(get(r.body, "message")) + str(get(r.body, "error", "details"))
			if !strings.Contains(msg, c.contains) {
				t.Errorf("%s: message %s does not say %q", c.name, msg, c.contains)
			}
		}
		// Ping answers its own shape.
		r := request(t, base, "GET", "/ping", nil)
		if c.status >= 503 && (r.status != 503 || str(get(r.body, "pong")) != "false" || !has(r.body, "reason")) {
			t.Errorf("%s: ping %d %s", c.name, r.status, r.raw)
		}
	}
}

// TestUnreachableCluster runs the real ClientBackend against a port where
// nothing listens.
func TestUnreachableCluster(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	backend, err := ghttp.NewClientBackend([]string{addr}, client.Options{Cluster: testCluster, MaxRetries: 1, BaseBackoff: time.Millisecond, ConnectTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	gw := testproc.ServeGateway(t, ghttp.Config{Backend: backend})
	base := "http://" + gw.Addr().String()
	r := request(t, base, "POST", "/events", map[string]any{"events": []any{ev(newID(), 1, 1)}})
	expectErr(t, r, "insert, unreachable", "b", 503, 211, "CLUSTER_UNAVAILABLE")
	r = request(t, base, "POST", "/query/radius", `{"center_lat":1,"center_lon":1,"radius_m":5}`)
	expectErr(t, r, "radius A, unreachable", "a", 503, 211, "CLUSTER_UNAVAILABLE")
	r = request(t, base, "GET", "/ping", nil)
	if r.status != 503 || str(get(r.body, "pong")) != "false" || !strings.Contains(str(get(r.body, "reason")), "CLUSTER_UNAVAILABLE") {
		t.Errorf("ping, unreachable: %d %s", r.status, r.raw)
	}
}

// An asterisk-form target (GET * HTTP/1.1) is a
// 404 with the JSON error of an unknown path, not the mux's bare 400.
func TestAsteriskTargetIsJSONError(t *testing.T) {
	e := newEnv(t)
	nc, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Write([]byte("GET * HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	res, err := stdhttp.ReadResponse(bufio.NewReader(nc), nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != 404 || res.Header.Get("Content-Type") != "application/json" ||
		!strings.Contains(string(raw), `"code":4`) {
		t.Fatalf("GET *: %d %q %s", res.StatusCode, res.Header.Get("Content-Type"), raw)
	}
}
