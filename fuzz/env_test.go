package fuzz

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	stdhttp "net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/geoevent/geoevent/client"
	"github.com/geoevent/geoevent/core"
	ghttp "github.com/geoevent/geoevent/http"
	geoio "github.com/geoevent/geoevent/io"
	"github.com/geoevent/geoevent/replica"
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
	dir := filepath.Join(tb.TempDir(), "data")
	if err := geoio.Format(dir, geoio.ClusterInfo{Cluster: testCluster, ReplicaIndex: 0, ReplicaCount: 1}); err != nil {
		tb.Fatal(err)
	}
	srv, err := geoio.Open(dir, geoio.Options{
		Addresses: []string{"127.0.0.1:0"},
		Logger:    zap.NewNop(),
		// No background cleanup: /stats changes only by requests.
		Replica: replica.Config{CleanupEveryNS: 1 << 62},
	})
	if err != nil {
		tb.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- srv.Run(context.Background()) }()
	backend, err := ghttp.NewLocalBackend(func(ctx context.Context) (client.Conn, error) {
		lc, err := srv.DialLocal(ctx)
		if err != nil {
			return nil, err
		}
		return lc, nil
	}, client.Options{Cluster: testCluster})
	if err != nil {
		srv.Close()
		<-runErr
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	gw, err := ghttp.Serve(ln, ghttp.Config{Backend: backend, Logger: zap.NewNop()})
	if err != nil {
		tb.Fatal(err)
	}
	tr := &stdhttp.Transport{MaxIdleConnsPerHost: 4}
	e := &env{addr: ln.Addr().String(), base: "http://" + ln.Addr().String(),
		client: &stdhttp.Client{Transport: tr, Timeout: 30 * time.Second}}
	tb.Cleanup(func() {
		tr.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := gw.Shutdown(ctx); err != nil {
			tb.Errorf("gateway shutdown: %v", err)
		}
		srv.Close()
		if err := <-runErr; err != nil {
			tb.Errorf("replica Run: %v", err)
		}
		backend.Close()
	})
	return e
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
