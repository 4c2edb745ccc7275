package http_test

import (
	"context"
	"fmt"
	"io"
	stdhttp "net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	ghttp "github.com/geoevent/geoevent/http"
)

func TestMapPageFiles(t *testing.T) {
	e := newEnv(t)
	get := func(base, method, path string) (*stdhttp.Response, string) {
		t.Helper()
		req, err := stdhttp.NewRequest(method, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := stdhttp.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for _, c := range []struct {
		path, ctype, holds string
	}{
		{"/", "text/html; charset=utf-8", `<meta name="geoevent-tiles" content="">`},
		{"/map/map.js", "text/javascript; charset=utf-8", "query/radius?form=a"},
		{"/map/map.css", "text/css; charset=utf-8", "#map"},
		{"/map/leaflet/leaflet.js", "text/javascript; charset=utf-8", "Leaflet 1.9.4"},
		{"/map/leaflet/leaflet.css", "text/css; charset=utf-8", ".leaflet-container"},
		{"/map/leaflet/images/layers.png", "image/png", "PNG"},
		{"/map/leaflet/LICENSE", "text/plain; charset=utf-8", "BSD 2-Clause"},
	} {
		resp, body := get(e.base, "GET", c.path)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != c.ctype || !strings.Contains(body, c.holds) {
			t.Errorf("GET %s: %d %q, holds %q: %v", c.path, resp.StatusCode, resp.Header.Get("Content-Type"), c.holds, strings.Contains(body, c.holds))
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no nosniff", c.path)
		}
	}
	resp, _ := get(e.base, "GET", "/")
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("the page's CSP: %q", csp)
	}
	if resp, body := get(e.base, "HEAD", "/"); resp.StatusCode != 200 || body != "" || resp.ContentLength <= 0 {
		t.Errorf("HEAD /: %d, %d bytes, Content-Length %d", resp.StatusCode, len(body), resp.ContentLength)
	}
	if resp, body := get(e.base, "POST", "/"); resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET, HEAD" || !strings.Contains(body, "UNKNOWN_OPERATION") {
		t.Errorf("POST /: %d %q %s", resp.StatusCode, resp.Header.Get("Allow"), body)
	}
	// Other paths stay the API's 404, the template among them.
	for _, p := range []string{"/map/", "/map/nope.js", "/map/map.html", "/index.html"} {
		if resp, body := get(e.base, "GET", p); resp.StatusCode != 404 || !strings.Contains(body, "UNKNOWN_OPERATION") {
			t.Errorf("GET %s: %d %s", p, resp.StatusCode, body)
		}
	}

	// With tiles: the URL reaches the page as an attribute's text, and
	// the page may load images from the tiles' host.
	tiles := `https://{s}.tile.example.org/{z}/{x}/{y}.png?key="<x>"`
	gw := serveGateway(t, ghttp.Config{Backend: e.backend, MapTiles: tiles})
	resp, body := get("http://"+gw.Addr().String(), "GET", "/")
	if !strings.Contains(body, `content="https://{s}.tile.example.org/{z}/{x}/{y}.png?key=&#34;&lt;x&gt;&#34;"`) {
		t.Errorf("the tiles URL in the page: %s", body)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "img-src 'self' data: https://*.tile.example.org;") {
		t.Errorf("CSP with tiles: %q", csp)
	}
	for _, bad := range []string{"tile.example.org/{z}/{x}/{y}.png", "https://tile.example.org/{z}/{x}.png", "javascript:{z}{x}{y}", "ftp://h/{z}/{x}/{y}"} {
		if ghttp.CheckMapTiles(bad) == nil {
			t.Errorf("CheckMapTiles(%q) accepted it", bad)
		}
	}
}

// chromium finds a Chromium to run the page in. Without one the test is
// skipped, but not in CI (CI=true), whose .ci/run installs it.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no chromium in PATH: CI must run the map page's test (.ci/run installs Debian's chromium)")
	}
	t.Skip("no chromium in PATH: the map page's browser test needs it (apt-get install chromium); CI runs it")
	return ""
}

// runChromium loads url in headless Chromium for a few seconds of the
// page's (virtual) time and returns what it printed.
func runChromium(t *testing.T, bin, url string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--user-data-dir=" + t.TempDir(), "--window-size=1200,800",
		"--virtual-time-budget=5000"}, args...)
	cmd := exec.CommandContext(ctx, bin, append(all, url)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return string(out)
}

// TestMapPageInChromium loads the map page in headless Chromium against a
// one-replica cluster holding known entities: it counts the markers in
// view, reads the list a drawn polygon returns and the points of a
// track, and keeps a screenshot.
func TestMapPageInChromium(t *testing.T) {
	bin := chromium(t)
	e := newEnv(t)
	// Six entities in Berlin, two in Sydney; entity b3 has a track of
	// three points.
	berlin := []struct {
		id       string
		lat, lon int64 // microdegrees
	}{
		{"b1", 52_510_000, 13_410_000}, {"b2", 52_520_000, 13_420_000}, {"b3", 52_505_000, 13_380_000},
		{"b4", 52_540_000, 13_440_000}, {"b5", 52_550_000, 13_450_000}, {"b6", 52_480_000, 13_500_000},
	}
	ids := map[string]string{}
	var events []map[string]any
	for i, b := range berlin {
		ids[b.id] = fmt.Sprintf("00000000-0000-0000-0000-0000000000%02d", i+1)
		events = append(events, ev(ids[b.id], b.lat*1000, b.lon*1000))
	}
	events = append(events, ev(newID(), -33_900_000_000, 151_200_000_000), ev(newID(), -33_910_000_000, 151_210_000_000))
	e.insert(events...)
	e.insert(ev(ids["b3"], 52_507_000_000, 13_385_000_000))
	e.insert(ev(ids["b3"], 52_509_000_000, 13_395_000_000))

	// The polygon holds b1, b2, b3 and b4 (b4 on its north edge's inside).
	page := e.base + "/?poll=0&view=52.52,13.43,11&entity=3&polygon=52.5,13.3;52.5,13.45;52.545,13.45;52.545,13.3"
	dom := runChromium(t, bin, page, "--dump-dom")
	if !strings.Contains(dom, `data-ready="true"`) {
		t.Fatalf("the page did not finish loading:\n%s", dom)
	}
	if m := regexp.MustCompile(`id="status" data-entities="(\d+)"`).FindStringSubmatch(dom); m == nil || m[1] != "6" {
		t.Errorf("entities in view: %v, want 6\n%s", m, dom)
	}
	if n := strings.Count(dom, "ge-entity"); n != 6 {
		t.Errorf("%d markers, want 6", n)
	}
	var listed []string
	for _, m := range regexp.MustCompile(`class="ge-result" data-entity="([^"]+)"`).FindAllStringSubmatch(dom, -1) {
		listed = append(listed, m[1])
	}
	want := []string{ids["b1"], ids["b2"], ids["b3"], ids["b4"]}
	slices.Sort(listed)
	if !slices.Equal(listed, want) {
		t.Errorf("the polygon lists %v, want %v", listed, want)
	}
	if !strings.Contains(dom, `id="track-info" data-points="3"`) || strings.Count(dom, "ge-track-point") != 3 {
		t.Errorf("entity 3's track: want 3 points\n%s", dom)
	}

	dir := os.Getenv("GEOEVENT_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "geoevent-test-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "map-page.png")
	os.Remove(shot)
	runChromium(t, bin, page, "--screenshot="+shot)
	if st, err := os.Stat(shot); err != nil || st.Size() < 1000 {
		t.Fatalf("no screenshot at %s: %v", shot, err)
	}
	t.Logf("screenshot: %s", shot)
}
