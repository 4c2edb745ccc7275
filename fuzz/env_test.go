package fuzz

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	stdhttp "net/http"
	"strconv"
	"testing"
	"time"

	"github.com/geoevent/geoevent/core"

	"github.com/geoevent/geoevent/internal/testproc"
)

var testCluster = core.Uint128{Hi: 0xf022, Lo: 0x7e57_0001}

// env is a one-replica cluster in a temporary directory with the gateway
// in front of it, both on 127.0.0.1.
type env struct {
	addr   string // host:port of the gateway
	base   string // http://host:port
	client *stdhttp.Client
}

// newEnv starts the replica and the gateway and stops them when tb ends.
func newEnv(tb testing.TB) *env {
	tb.Helper()
	l := testproc.StartLocal(tb, testproc.LocalOptions{Cluster: testCluster})
	tr := &stdhttp.Transport{MaxIdleConnsPerHost: 4}
	tb.Cleanup(tr.CloseIdleConnections)
	return &env{addr: l.Gateway.Addr().String(), base: l.URL,
		client: &stdhttp.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// answer is a decoded response.
type answer struct {
	status int
	raw    []byte
	body   any // decoded with UseNumber; nil when the body is not JSON
}

// do sends method path with a JSON body (nil: none) through the gateway.
func (e *env) do(t testing.TB, method, path string, body any) answer {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := stdhttp.NewRequest(method, e.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := e.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: reading: %v", method, path, err)
	}
	a := answer{status: res.StatusCode, raw: raw}
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s %s: %d with Content-Type %q: %s", method, path, res.StatusCode, ct, raw)
	}
	if a.body, err = decodeJSON(raw); err != nil {
		t.Fatalf("%s %s: %d, not JSON (%v): %s", method, path, res.StatusCode, err, raw)
	}
	return a
}

// stats is GET /stats's body.
func (e *env) stats(t testing.TB) string {
	t.Helper()
	a := e.do(t, "GET", "/stats", nil)
	if a.status != 200 {
		t.Fatalf("GET /stats: %d %s", a.status, a.raw)
	}
	return string(a.raw)
}

// decodeJSON decodes exactly one JSON value.
func decodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("more than one value")
	}
	return v, nil
}

// get returns the value at a path of keys and indexes; nil when absent.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			a, ok := v.([]any)
			if !ok || k < 0 || k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

// u64 reads an unsigned integer rendered as a JSON number or a decimal
// string (64-bit fields beyond 2^53-1 are strings).
func u64(v any) (uint64, bool) {
	return integer(v, func(s string) (uint64, error) { return strconv.ParseUint(s, 10, 64) })
}

// i64 is u64 for signed values.
func i64(v any) (int64, bool) {
	return integer(v, func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) })
}

// integer parses v, a json.Number or a string, with parse.
func integer[T any](v any, parse func(string) (T, error)) (T, bool) {
	var s string
	switch x := v.(type) {
	case json.Number:
		s = string(x)
	case string:
		s = x
	default:
		var zero T
		return zero, false
	}
	n, err := parse(s)
	return n, err == nil
}
