package client

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/geoevent/geoevent/client/internal/testserver"
	"github.com/geoevent/geoevent/core"
)

// TestMain fails the run when tests leave goroutines behind (servers,
// connections, timers of the client).
func TestMain(m *testing.M) {
	base := runtime.NumGoroutine()
	code := m.Run()
	if code == 0 {
		deadline := time.Now().Add(3 * time.Second)
		for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > base {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			fmt.Fprintf(os.Stderr, "leaked goroutines: %d at start, %d at end\n%s\n", base, n, buf)
			code = 1
		}
	}
	os.Exit(code)
}

func startServer(t *testing.T, cfg testserver.Config) *testserver.Server {
	t.Helper()
	s, err := testserver.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Stop()
		if err := s.Err(); err != nil {
			t.Errorf("replica failed: %v", err)
		}
	})
	return s
}

// testOptions are fast defaults for tests.
func testOptions(s *testserver.Server) Options {
	return Options{
		Cluster:        s.Cluster(),
		BaseBackoff:    5 * time.Millisecond,
		MaxBackoff:     20 * time.Millisecond,
		TotalTimeout:   30 * time.Second,
		ConnectTimeout: 5 * time.Second,
		RequestTimeout: 10 * time.Second, // generous: the machine may be loaded
	}
}

func newClient(t *testing.T, addrs []string, opts Options) *Client {
	t.Helper()
	c, err := New(addrs, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func id(n uint64) core.Uint128 { return core.Uint128{Lo: n} }

func ev(n uint64, lat, lon int64) core.GeoEvent {
	return core.GeoEvent{EntityID: id(n), LatNano: lat, LonNano: lon}
}

// deadAddr is an address where nothing listens.
func deadAddr(t *testing.T) string {
	t.Helper()
	s, err := testserver.Start(testserver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	a := s.Addr()
	s.Stop()
	return a
}

func codeOf(t *testing.T, err error) core.Code {
	t.Helper()
	var ce *core.Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T) carries no *core.Error", err, err)
	}
	return ce.Code
}

func mustContain(t *testing.T, s, sub string) {
	t.Helper()
	if !strings.Contains(s, sub) {
		t.Fatalf("%q does not contain %q", s, sub)
	}
}
