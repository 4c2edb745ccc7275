package http_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// errMessage is an error answer's message in either form.
func errMessage(r resp) string {
	if has(r.body, "message") {
		m, _ := get(r.body, "message").(string)
		return m
	}
	m, _ := get(r.body, "error", "details").(string)
	return m
}

// expectMissing checks that none of the entities is stored.
func (e *env) expectMissing(what string, ids ...string) {
	e.t.Helper()
	for _, id := range ids {
		if r := e.req("GET", "/entity/"+id, nil); str(get(r.body, "found")) != "false" {
			e.t.Errorf("%s: entity %s was written: %s", what, id, r.raw)
		}
	}
}

// TestEventDegrees: an event gives each coordinate in nanodegrees
// (lat_nano, lon_nano) or in degrees (lat, lon), converted exactly from
// the decimal text, in any form and mixed within a batch; both forms of one
// coordinate, or neither, is 400.
func TestEventDegrees(t *testing.T) {
	e := newEnv(t)
	a, b, c, d := newID(), newID(), newID(), newID()
	// Written as text so that the decimals reach the server as they are.
	r := e.req("POST", "/events", `{"events":[
		{"entity_id":"`+a+`","lat":38.1155,"lon":-13.000000001},
		{"entity_id":"`+b+`","lat_nano":1,"lon":179.9999999995},
		{"entity_id":"`+c+`","lat":0.1234567895,"lon_nano":-2},
		{"entity_id":"`+d+`","lat":-4E1,"lon":-0.0000000004}]}`)
	expectOK(t, r, "degrees")
	eq(t, "committed", get(r.body, "committed"), "true")
	// The answer is Form B (code, not result) unless ?form=a.
	checkKeys(t, "degrees result", get(r.body, "results", 0), "index", "code", "id", "timestamp_ns")
	for _, w := range []struct{ id, lat, lon, latDeg, lonDeg string }{
		{a, "38115500000", "-13000000001", "38.1155", "-13.000000001"},
		{b, "1", "180000000000", "0.000000001", "180"}, // half a nanodegree rounds away from zero
		{c, "123456790", "-2", "0.12345679", "-0.000000002"},
		{d, "-40000000000", "0", "-40", "0"}, // an exponent; below half a nanodegree is 0
	} {
		r = e.req("GET", "/entity/"+w.id, nil)
		eq(t, w.id+" lat_nano", get(r.body, "event", "lat_nano"), w.lat)
		eq(t, w.id+" lon_nano", get(r.body, "event", "lon_nano"), w.lon)
		if has(get(r.body, "event"), "lat") {
			t.Errorf("Form B event has lat: %s", r.raw)
		}
		r = e.req("GET", "/entity/"+w.id+"?form=a", nil)
		eq(t, w.id+" lat", get(r.body, "event", "lat"), w.latDeg)
		eq(t, w.id+" lon", get(r.body, "event", "lon"), w.lonDeg)
		eq(t, w.id+" lat_nano A", get(r.body, "event", "lat_nano"), w.lat)
	}
	// /insert and ?form=a take them too (the answer in Form A).
	f := newID()
	r = e.req("POST", "/insert?form=a", `{"events":[{"entity_id":"`+f+`","lat":-90,"lon":180}]}`)
	expectOK(t, r, "insert A")
	checkKeys(t, "insert A result", get(r.body, "results", 0), "index", "result", "id", "timestamp_ns")

	// Out of range: the per-event codes of nanodegrees (9, 10), batch not
	// committed; in Form A 400 with 100.
	g := newID()
	for _, c := range []struct{ body, field string }{
		{`"lat":90.0000000005,"lon":0`, "9"},
		{`"lat":-1e300,"lon":0`, "9"},
		{`"lat":0,"lon":180.000000001`, "10"},
		{`"lat_nano":0,"lon":-1e20`, "10"},
	} {
		body := `{"events":[{"entity_id":"` + newID() + `","lat":1,"lon":1},{"entity_id":"` + g + `",` + c.body + `}]}`
		r = e.req("POST", "/events", body)
		expectOK(t, r, c.body)
		eq(t, c.body+" committed", get(r.body, "committed"), "false")
		eq(t, c.body+" code", get(r.body, "results", 1, "code"), c.field)
		r = e.req("POST", "/events?form=a", body)
		expectErr(t, r, c.body+" A", "a", 400, 100, "INVALID_COORDINATES")
	}
	e.expectMissing("out of range", g)

	// Malformed: both forms of a coordinate, neither, a string, null.
	ok := `{"entity_id":"` + newID() + `","lat":1,"lon":1}`
	for _, c := range []struct{ event, msg string }{
		{`"lat":1,"lat_nano":1000000000,"lon":1`, "events[1].lat_nano: lat is given too: send lat (degrees) or lat_nano (nanodegrees), not both"},
		{`"lat_nano":1,"lat":1,"lon":1`, "events[1].lat: lat_nano is given too"},
		{`"lat":1,"lon":1,"lon_nano":1`, "events[1].lon_nano: lon is given too: send lon (degrees) or lon_nano (nanodegrees), not both"},
		{`"lon":1`, "events[1].lat_nano is required (or lat, in degrees)"},
		{`"lat":1`, "events[1].lon_nano is required (or lon, in degrees)"},
		{`"lat":"38.1","lon":1`, "events[1].lat: want a number of degrees"},
		{`"lat":null,"lon":1`, "events[1].lat is required, got null"},
	} {
		r = e.req("POST", "/events", `{"events":[`+ok+`,{"entity_id":"`+g+`",`+c.event+`}]}`)
		expectErr(t, r, c.event, "b", 400, 1, "MALFORMED_REQUEST")
		if m := errMessage(r); !strings.Contains(m, c.msg) {
			t.Errorf("%s: message %q does not say %q", c.event, m, c.msg)
		}
	}
	e.expectMissing("malformed", g)
}

// TestFormAEventsShowDegrees: every Form A answer that holds events shows
// lat and lon in degrees beside lat_nano and lon_nano; radius results carry
// distance_mm in both forms; Form B shows no degrees.
func TestFormAEventsShowDegrees(t *testing.T) {
	e := newEnv(t)
	id := newID()
	e.insert(ev(id, 38_115_500_000, -5, "group_id", 3))
	check := func(what string, event any, distance bool) {
		t.Helper()
		checkEventKeysA(t, what, event, distance)
		eq(t, what+" lat", get(event, "lat"), "38.1155")
		eq(t, what+" lon", get(event, "lon"), "-0.000000005")
		eq(t, what+" lat_nano", get(event, "lat_nano"), "38115500000")
	}
	r := e.req("POST", "/query/radius", `{"center_lat":38.1155,"center_lon":0.000000005,"radius_m":1000}`)
	check("radius", get(r.body, "events", 0), true)
	eq(t, "radius distance_mm", get(r.body, "events", 0, "distance_mm"), "1") // 10 nanodegrees of longitude at 38 degrees
	r = e.req("POST", "/query/polygon", `{"vertices":[{"lat":38,"lon":-1},{"lat":38,"lon":1},{"lat":39,"lon":1},{"lat":39,"lon":-1}]}`)
	check("polygon", get(r.body, "events", 0), false)
	r = e.req("POST", "/query/latest?form=a", `{"limit":1}`)
	check("latest", get(r.body, "events", 0), false)
	r = e.req("POST", "/query/latest?form=a", `{"entity_ids":["`+id+`"]}`)
	check("latest lookup", get(r.body, "events", 0), false)
	r = e.req("GET", "/entity/"+id+"?form=a", nil)
	check("getLatest", get(r.body, "event"), false)
	r = e.req("POST", "/entities/batch?form=a", `{"entity_ids":["`+id+`"]}`)
	check("batch", get(r.body, "events", 0), false)
	r = e.req("GET", "/entity/"+id+"/history?form=a", nil)
	check("history", get(r.body, "events", 0), false)

	// Form B: no degrees; distance_mm in radius results as before.
	r = e.req("POST", "/query/radius", `{"center_lat_nano":38115500000,"center_lon_nano":5,"radius_mm":1000000}`)
	checkEventKeys(t, "radius B", get(r.body, "events", 0), true)
	r = e.req("GET", "/entity/"+id+"/history", nil)
	checkEventKeys(t, "history B", get(r.body, "events", 0), false)
}

// TestClientTimestamps: a client's timestamp_ns before 2000 is taken for a
// unit mistake: 400 with 108, the whole request refused, and a message that
// names the field, says the unit and shows what was probably meant.
func TestClientTimestamps(t *testing.T) {
	e := newEnv(t)
	const secs int64 = 1795815268
	rfc := func(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }
	for _, c := range []struct {
		ts   string
		want []string // in the message
	}{
		{"946684799999999999", []string{"946684799999999999 is 1999-12-31T23:59:59.999999999Z, before 2000-01-01T00:00:00Z"}},
		{"1", []string{"1 is 1970-01-01T00:00:00.000000001Z, before 2000"}},
		{fmt.Sprint(secs), []string{fmt.Sprintf("if %d is in seconds, send %d000000000 (%s)", secs, secs, rfc(secs*1e9))}},
		{fmt.Sprint(secs*1e3 + 123), []string{fmt.Sprintf("if %d123 is in milliseconds, send %d123000000 (%s)", secs, secs, rfc(secs*1e9+123e6))}},
		{`"` + fmt.Sprint(secs*1e6+456) + `"`, []string{fmt.Sprintf("is in microseconds, send %d000456000 (%s)", secs, rfc(secs*1e9+456e3))}},
		{"4102444800", []string{"4102444800 is 1970-01-01T00:00:04.1024448Z, before"}}, // 2100 in seconds: past the guesses
	} {
		ids := []string{newID(), newID(), newID(), newID()}
		body := `{"events":[`
		for i, id := range ids {
			if i > 0 {
				body += ","
			}
			body += `{"entity_id":"` + id + `","lat_nano":1,"lon_nano":1`
			if i == 3 {
				body += `,"timestamp_ns":` + c.ts
			}
			body += "}"
		}
		body += "]}"
		for _, path := range []string{"/events", "/insert?form=a"} {
			fm := "b"
			if strings.Contains(path, "form=a") {
				fm = "a"
			}
			r := e.req("POST", path, body)
			expectErr(t, r, c.ts, fm, 400, 108, "INVALID_ARGUMENT")
			m := errMessage(r)
			for _, w := range append(c.want, "events[3].timestamp_ns: ", "nanoseconds since the Unix epoch") {
				if !strings.Contains(m, w) {
					t.Errorf("%s %s: message %q does not say %q", path, c.ts, m, w)
				}
			}
			if c.ts == "4102444800" && strings.Contains(m, "send") {
				t.Errorf("%s: a guess past 2100: %q", c.ts, m)
			}
		}
		e.expectMissing(c.ts, ids...)
	}
	// Upserts too.
	r := e.req("POST", "/events", `{"mode":"upsert","events":[{"entity_id":"`+newID()+`","lat_nano":1,"lon_nano":1,"timestamp_ns":5}]}`)
	expectErr(t, r, "upsert", "b", 400, 108, "INVALID_ARGUMENT")

	// 2000-01-01T00:00:00Z itself is accepted; 0 lets the server assign the
	// time, as does an absent timestamp_ns.
	id := newID()
	ts := e.insert(ev(id, 1, 1, "timestamp_ns", "946684800000000000"), ev(newID(), 1, 1, "timestamp_ns", 0), ev(newID(), 1, 1))
	if ts[0] != `"946684800000000000"` {
		t.Errorf("2000-01-01: timestamp_ns %s", ts[0])
	}
	now := time.Now().UnixNano()
	for i, s := range ts[1:] {
		var got int64
		fmt.Sscan(strings.Trim(s, `"`), &got)
		if got < now-int64(time.Hour) || got > now+int64(time.Hour) {
			t.Errorf("server-assigned timestamp %d: %s, not about %d", i, s, now)
		}
	}
	// Bounds on reads are not timestamps of events: small ones stay valid.
	r = e.req("GET", "/entity/"+id+"/history?since_ns=1&until_ns=946684800000000000", nil)
	if evs, _ := get(r.body, "events").([]any); r.status != 200 || len(evs) != 1 {
		t.Errorf("history since 1: %d %s", r.status, r.raw)
	}
	r = e.req("POST", "/query/latest", `{"since_ns":1}`)
	expectOK(t, r, "latest since 1")
}
