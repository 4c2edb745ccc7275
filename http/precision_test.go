package http_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
)

// jsSafe reports the first number in a JSON document that a JavaScript
// client (float64) could not hold exactly, or "". A number with a fraction
// (degrees) is safe with at most 15 significant digits: a float64 reads
// such a decimal and prints it back the same (DBL_DIG is 15).
func jsSafe(raw []byte) string {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return ""
	}
	var bad string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case json.Number:
			if strings.ContainsAny(x.String(), ".eE") {
				if significantDigits(x.String()) > 15 {
					bad = x.String()
				}
			} else if i, err := x.Int64(); err != nil || i > 1<<53-1 || i < -(1<<53-1) {
				if f, err := x.Float64(); err != nil || math.Abs(f) >= 1<<53 || f != math.Trunc(f) {
					bad = x.String()
				}
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return bad
}

// significantDigits counts the digits of a JSON number's mantissa from its
// first non-zero one.
func significantDigits(num string) int {
	mant, _, _ := strings.Cut(strings.ToLower(num), "e")
	digits := strings.TrimLeft(strings.NewReplacer("-", "", ".", "").Replace(mant), "0")
	return len(digits)
}

func TestPrecision(t *testing.T) {
	e := newEnv(t)
	big, safe, unsafe, neg := newID(), newID(), newID(), newID()
	// group_id 2^63+1 as a JSON number, 2^53-1 and 2^53 as strings, 2^64-2
	// (-2 as an int64) as a number.
	body := `{"events":[
		{"entity_id":"` + big + `","lat_nano":1,"lon_nano":1,"group_id":9223372036854775809},
		{"entity_id":"` + safe + `","lat_nano":1,"lon_nano":2,"group_id":"9007199254740991","timestamp_ns":946684800000000000},
		{"entity_id":"` + unsafe + `","lat_nano":1,"lon_nano":3,"group_id":"9007199254740992"},
		{"entity_id":"` + neg + `","lat_nano":1,"lon_nano":4,"group_id":18446744073709551614}]}`
	r := e.req("POST", "/events", body)
	expectOK(t, r, "insert")
	// A client's timestamp (2000-01-01, the earliest accepted) is kept, and
	// rendered as a string: it is above 2^53.
	eq(t, "client timestamp id", get(r.body, "results", 1, "id"), `"`+safe+`:946684800000000000"`)
	eq(t, "client timestamp", get(r.body, "results", 1, "timestamp_ns"), `"946684800000000000"`)
	if _, ok := get(r.body, "results", 0, "timestamp_ns").(string); !ok {
		t.Errorf("a server timestamp (> 2^53) is not rendered as a string: %s", r.raw)
	}
	// Form B shows group_id as a uint64, Form A as an int64.
	for id, want := range map[string][2]string{
		big:    {`"-9223372036854775807"`, `"9223372036854775809"`},
		safe:   {"9007199254740991", "9007199254740991"},
		unsafe: {`"9007199254740992"`, `"9007199254740992"`},
		neg:    {"-2", `"18446744073709551614"`},
	} {
		for i, form := range []string{"a", "b"} {
			r = e.req("GET", "/entity/"+id+"?form="+form, nil)
			eq(t, "group_id Form "+form, get(r.body, "event", "group_id"), want[i])
		}
	}
	// The group filter finds 2^63+1 given as a number or a string: in
	// Form B as itself, in Form A as the int64 -(2^63-1).
	for _, q := range []string{
		`{"center_lat_nano":1,"center_lon_nano":1,"radius_mm":100000,"group_id":9223372036854775809}`,
		`{"center_lat_nano":1,"center_lon_nano":1,"radius_mm":100000,"group_id":"9223372036854775809"}`,
		`{"center_lat":0.000000001,"center_lon":0.000000001,"radius_m":100,"group_id":"-9223372036854775807"}`,
		`{"center_lat":0,"center_lon":0,"radius_m":100,"group_id":-9223372036854775807}`,
	} {
		r = e.req("POST", "/query/radius", q)
		if evs, _ := get(r.body, "events").([]any); len(evs) != 1 || get(evs[0], "entity_id") != big {
			t.Errorf("%s: %s", q, r.raw)
		}
	}
	// Outside each form's type: 108 INVALID_ARGUMENT, at both edges.
	for _, c := range []struct {
		path, body string
		ok         bool
	}{
		{"/query/radius", `{"center_lat":0,"center_lon":0,"radius_m":100,"group_id":9223372036854775807}`, true},
		{"/query/radius", `{"center_lat":0,"center_lon":0,"radius_m":100,"group_id":9223372036854775808}`, false},
		{"/query/radius", `{"center_lat":0,"center_lon":0,"radius_m":100,"group_id":-9223372036854775808}`, true},
		{"/query/radius", `{"center_lat":0,"center_lon":0,"radius_m":100,"group_id":-9223372036854775809}`, false},
		{"/query/radius", `{"center_lat_nano":0,"center_lon_nano":0,"radius_mm":100,"group_id":18446744073709551615}`, true},
		{"/query/radius", `{"center_lat_nano":0,"center_lon_nano":0,"radius_mm":100,"group_id":18446744073709551616}`, false},
		{"/query/radius", `{"center_lat_nano":0,"center_lon_nano":0,"radius_mm":100,"group_id":-1}`, false},
		{"/events?form=a", `{"events":[{"entity_id":"` + newID() + `","lat_nano":1,"lon_nano":1,"group_id":"18446744073709551615"}]}`, false},
		{"/events", `{"events":[{"entity_id":"` + newID() + `","lat_nano":1,"lon_nano":1,"group_id":-1}]}`, false},
	} {
		r = e.req("POST", c.path, c.body)
		if c.ok {
			expectOK(t, r, c.body)
		} else if code := fmt.Sprint(get(r.body, "error", "code"), get(r.body, "error_code")); r.status != 400 || !strings.Contains(code, "108") {
			t.Errorf("%s %s: %d %s, want 400 with code 108", c.path, c.body, r.status, r.raw)
		}
	}
	r = e.req("POST", "/query/latest", `{"group_id":"18446744073709551614"}`)
	if evs, _ := get(r.body, "events").([]any); len(evs) != 1 || get(evs[0], "entity_id") != neg {
		t.Errorf("latest group 2^64-2: %s", r.raw)
	}
	// since_ns as a string above 2^53.
	ts := get(e.req("GET", "/entity/"+big, nil).body, "event", "timestamp_ns").(string)
	r = e.req("POST", "/query/latest", `{"since_ns":"`+ts+`"}`)
	if evs, _ := get(r.body, "events").([]any); len(evs) != 2 {
		t.Errorf("latest since %s: %s", ts, r.raw)
	}
	// A 128-bit decimal id round-trips to its UUID.
	r = e.req("POST", "/events", `{"events":[{"entity_id":"340282366920938463463374607431768211455","lat_nano":0,"lon_nano":0,"user_data":"18446744073709551616"}]}`)
	expectOK(t, r, "max id")
	r = e.req("GET", "/entity/ffffffff-ffff-ffff-ffff-ffffffffffff", nil)
	eq(t, "user_data 2^64", get(r.body, "event", "user_data"), `"00000000-0000-0001-0000-000000000000"`)
	r = e.req("GET", "/entity/340282366920938463463374607431768211455", nil)
	eq(t, "decimal path id", get(r.body, "found"), "true")
}
