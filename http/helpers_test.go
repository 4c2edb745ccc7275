package http_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	stdhttp "net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/geoevent/geoevent/core"
	ghttp "github.com/geoevent/geoevent/http"
	geoio "github.com/geoevent/geoevent/io"

	"github.com/geoevent/geoevent/internal/testproc"
)

var testCluster = core.Uint128{Hi: 0x6e0e_4444, Lo: 0x7e57_0001}

// env is a one-replica cluster (an in-process io.Server on a temp dir,
// listening on 127.0.0.1) with the gateway in front of it on 127.0.0.1.
type env struct {
	t       testing.TB
	replica *geoio.Server
	gw      *ghttp.Server
	backend *ghttp.ClientBackend
	base    string // http://127.0.0.1:port
}

func newEnv(t testing.TB) *env {
	t.Helper()
	l := testproc.StartLocal(t, testproc.LocalOptions{Cluster: testCluster, Feed: true,
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))})
	return &env{t: t, replica: l.Replica, gw: l.Gateway, backend: l.Backend, base: l.URL}
}

// resp is a decoded response.
type resp struct {
	status int
	raw    []byte
	body   any // decoded with UseNumber
	header stdhttp.Header
}

// request sends method path with body (a string, []byte or a value to
// marshal; nil for none) and decodes the JSON answer.
func request(t testing.TB, base, method, path string, body any) resp {
	t.Helper()
	r, err := tryRequest(base, method, path, body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// tryRequest is request without a testing.TB, for goroutines.
func tryRequest(base, method, path string, body any) (resp, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			return resp{}, err
		}
		rd = bytes.NewReader(enc)
	}
	req, err := stdhttp.NewRequest(method, base+path, rd)
	if err != nil {
		return resp{}, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := (&stdhttp.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		return resp{}, fmt.Errorf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return resp{}, fmt.Errorf("%s %s: reading: %v", method, path, err)
	}
	r := resp{status: res.StatusCode, raw: raw, header: res.Header}
	if method != "HEAD" && path != "/metrics" { // /metrics is Prometheus's text format
		if ct := res.Header.Get("Content-Type"); ct != "application/json" && ct != "application/geo+json" {
			return r, fmt.Errorf("%s %s: Content-Type %q; body %s", method, path, ct, raw)
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&r.body); err != nil {
			return r, fmt.Errorf("%s %s: the answer is not JSON: %v: %s", method, path, err, raw)
		}
		// Every answer is safe for JavaScript: no integer beyond 2^53-1
		// is rendered as a number.
		if n := jsSafe(raw); n != "" {
			return r, fmt.Errorf("%s %s: the answer has the number %s, which a JavaScript client cannot hold: %.300s", method, path, n, raw)
		}
	}
	return r, nil
}

func (e *env) req(method, path string, body any) resp {
	e.t.Helper()
	return request(e.t, e.base, method, path, body)
}

// get returns the value at a path of keys and indexes: get(v, "events", 0, "id").
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return fmt.Sprintf("<no %q in %T>", k, v)
			}
			x, ok := m[k]
			if !ok {
				return fmt.Sprintf("<missing %q>", k)
			}
			v = x
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				return fmt.Sprintf("<no [%d]>", k)
			}
			v = a[k]
		}
	}
	return v
}

// str renders a decoded value for comparisons: numbers as their text,
// strings quoted.
func str(v any) string {
	switch x := v.(type) {
	case json.Number:
		return x.String()
	case string:
		return fmt.Sprintf("%q", x)
	case nil:
		return "null"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// has reports whether the object v has key k.
func has(v any, k string) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	_, ok = m[k]
	return ok
}

func keys(v any) []string {
	m, _ := v.(map[string]any)
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// expectOK checks a 200.
func expectOK(t testing.TB, r resp, what string) {
	t.Helper()
	if r.status != 200 {
		t.Fatalf("%s: status %d: %s", what, r.status, r.raw)
	}
}

// expectErr checks an error answer in the given form ("a" or "b").
func expectErr(t testing.TB, r resp, what string, form string, status int, code core.Code, name string) {
	t.Helper()
	if r.status != status {
		t.Errorf("%s: status %d, want %d: %s", what, r.status, status, r.raw)
		return
	}
	if form == "a" {
		if str(get(r.body, "error_code")) != fmt.Sprint(code) || str(get(r.body, "error_name")) != fmt.Sprintf("%q", name) ||
			!has(r.body, "message") {
			t.Errorf("%s: want Form A error %d %s, got %s", what, code, name, r.raw)
		}
		if has(r.body, "error") {
			t.Errorf("%s: Form A error has a Form B field: %s", what, r.raw)
		}
		return
	}
	if str(get(r.body, "error", "code")) != fmt.Sprint(code) || str(get(r.body, "error", "message")) != fmt.Sprintf("%q", name) ||
		!has(get(r.body, "error"), "details") {
		t.Errorf("%s: want Form B error %d %s, got %s", what, code, name, r.raw)
	}
	if has(r.body, "error_code") {
		t.Errorf("%s: Form B error has a Form A field: %s", what, r.raw)
	}
}

func newID() string { return uuid.NewString() }

// decimalOf is a UUID's decimal form.
func decimalOf(t testing.TB, id string) string {
	t.Helper()
	u, err := core.ParseUUID(id)
	if err != nil {
		t.Fatal(err)
	}
	return u.Decimal()
}

// ev is an event body in nanodegrees.
func ev(id string, latNano, lonNano int64, extra ...any) map[string]any {
	m := map[string]any{"entity_id": id, "lat_nano": latNano, "lon_nano": lonNano}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	return m
}

// insert posts events (Form B) and requires a commit; it returns the
// timestamps.
func (e *env) insert(events ...map[string]any) []string {
	e.t.Helper()
	r := e.req("POST", "/events", map[string]any{"events": events})
	expectOK(e.t, r, "insert")
	if str(get(r.body, "committed")) != "true" {
		e.t.Fatalf("insert not committed: %s", r.raw)
	}
	var ts []string
	for i := range events {
		ts = append(ts, str(get(r.body, "results", i, "timestamp_ns")))
	}
	return ts
}

func (e *env) stats() string {
	e.t.Helper()
	return statsOf(e.t, e.base)
}

func statsOf(t testing.TB, base string) string {
	t.Helper()
	r := request(t, base, "GET", "/stats", nil)
	expectOK(t, r, "stats")
	return string(r.raw)
}
