package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/geoevent/geoevent/internal/testproc"
)

// --cors-origin, repeated and comma-separated, reaches the gateway: its
// origins' preflights pass and others' are refused; a body not declared
// JSON is refused whatever the origin.
func TestDevCORSOrigin(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dev-data")
	srv := testproc.StartDev(t, testproc.DevOptions{Dir: dir, HTTP: true,
		Args: []string{"--cors-origin", "http://a.example, http://b.example:8000", "--cors-origin", "https://c.example"}})
	base := srv.URL
	hc := &http.Client{Timeout: 30 * time.Second}
	do := func(method, path, origin, ctype, body string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Origin", origin)
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		if method == "OPTIONS" {
			req.Header.Set("Access-Control-Request-Method", "POST")
		}
		res, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	for _, origin := range []string{"http://a.example", "http://b.example:8000", "https://c.example"} {
		res := do("OPTIONS", "/events", origin, "", "")
		if res.StatusCode != 204 || res.Header.Get("Access-Control-Allow-Origin") != origin || res.Header.Get("Access-Control-Allow-Methods") != "POST" {
			t.Errorf("preflight from %s: %d %v", origin, res.StatusCode, res.Header)
		}
	}
	if res := do("OPTIONS", "/events", "http://evil.example", "", ""); res.StatusCode != 403 || res.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight from another origin: %d %v", res.StatusCode, res.Header)
	}
	event := `{"events":[{"entity_id":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","lat_nano":1,"lon_nano":2}]}`
	if res := do("POST", "/events", "http://evil.example", "text/plain", event); res.StatusCode != 415 {
		t.Errorf("text/plain POST: %d", res.StatusCode)
	}
	if res := do("POST", "/events", "http://a.example", "application/json", event); res.StatusCode != 200 || res.Header.Get("Access-Control-Allow-Origin") != "http://a.example" {
		t.Errorf("JSON POST from an allowed origin: %d %v", res.StatusCode, res.Header)
	}
	srv.Stop(syscall.SIGTERM)
}

func TestCORSOriginFlagErrors(t *testing.T) {
	for _, bad := range []string{"app.example", "http://app.example/path", "http://a.example,,http://b.example"} {
		code, _, errs := runCmd(t, "dev", "--data", filepath.Join(t.TempDir(), "d"), "--cors-origin", bad)
		if code != exitUsage || !strings.Contains(errs, "cors-origin") || !strings.Contains(errs, "scheme://host") {
			t.Errorf("--cors-origin %q: exit %d: %s", bad, code, errs)
		}
	}
}
