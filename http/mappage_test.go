package http_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	stdhttp "net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	ghttp "github.com/geoevent/geoevent/http"

	"github.com/geoevent/geoevent/internal/testproc"
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
	gw := testproc.ServeGateway(t, ghttp.Config{Backend: e.backend, MapTiles: tiles})
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

// browser is headless Chromium driven over the DevTools protocol on a
// pipe (--remote-debugging-pipe: JSON messages ending in a NUL byte, on
// the child's fds 3 and 4), so that the test needs no WebSocket client
// and no dependency.
type browser struct {
	t       *testing.T
	cmd     *exec.Cmd
	w       *os.File
	r       *bufio.Reader
	id      int
	session string
}

// startBrowser starts Chromium with a page target attached.
func startBrowser(t *testing.T, bin string) *browser {
	t.Helper()
	toChrome, chromeIn, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	chromeOut, fromChrome, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--user-data-dir="+t.TempDir(), "--window-size=1200,800",
		"--remote-debugging-pipe", "about:blank")
	cmd.ExtraFiles = []*os.File{toChrome, fromChrome} // fds 3 (its input) and 4 (its output)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	toChrome.Close()
	fromChrome.Close()
	b := &browser{t: t, cmd: cmd, w: chromeIn, r: bufio.NewReader(chromeOut)}
	done := make(chan struct{})
	t.Cleanup(func() {
		close(done)
		chromeIn.Close() // Chromium exits when its pipe closes
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		chromeOut.Close()
	})
	go func() { // a hung browser fails the test rather than hanging it
		select {
		case <-done:
		case <-time.After(90 * time.Second):
			cmd.Process.Kill()
		}
	}()
	var targets struct {
		TargetInfos []struct {
			TargetID string `json:"targetId"`
			Type     string `json:"type"`
		} `json:"targetInfos"`
	}
	b.call("Target.getTargets", nil, &targets)
	for _, ti := range targets.TargetInfos {
		if ti.Type == "page" {
			var att struct {
				SessionID string `json:"sessionId"`
			}
			b.call("Target.attachToTarget", map[string]any{"targetId": ti.TargetID, "flatten": true}, &att)
			b.session = att.SessionID
			break
		}
	}
	if b.session == "" {
		t.Fatalf("no page target in %+v; stderr:\n%s", targets, stderr.String())
	}
	return b
}

// use makes t the test that the browser's failures fail (a subtest's),
// until the function it returns is called.
func (b *browser) use(t *testing.T) (restore func()) {
	saved := b.t
	b.t = t
	return func() { b.t = saved }
}

// call sends a command (to the page once attached) and decodes its result.
func (b *browser) call(method string, params any, result any) {
	b.t.Helper()
	b.id++
	msg := map[string]any{"id": b.id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if b.session != "" {
		msg["sessionId"] = b.session
	}
	data, err := json.Marshal(msg)
	if err != nil {
		b.t.Fatal(err)
	}
	if _, err := b.w.Write(append(data, 0)); err != nil {
		b.t.Fatalf("%s: %v", method, err)
	}
	for {
		line, err := b.r.ReadBytes(0)
		if err != nil {
			b.t.Fatalf("%s: reading the answer: %v", method, err)
		}
		var ans struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(line[:len(line)-1], &ans); err != nil {
			b.t.Fatalf("%s: %v: %s", method, err, line)
		}
		if ans.ID != b.id {
			continue // an event, or an answer to another session
		}
		if ans.Error != nil {
			b.t.Fatalf("%s: %s", method, ans.Error.Message)
		}
		if result != nil {
			if err := json.Unmarshal(ans.Result, result); err != nil {
				b.t.Fatalf("%s: %v: %s", method, err, ans.Result)
			}
		}
		return
	}
}

// eval evaluates a JavaScript expression in the page and decodes its value.
func (b *browser) eval(expr string, v any) {
	b.t.Helper()
	var res struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	b.call("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &res)
	if res.Exception != nil {
		b.t.Fatalf("%s: %s", expr, res.Exception.Text)
	}
	if v != nil {
		if err := json.Unmarshal(res.Result.Value, v); err != nil {
			b.t.Fatalf("%s: %v: %s", expr, err, res.Result.Value)
		}
	}
}

// waitFor polls a JavaScript condition until it is true.
func (b *browser) waitFor(cond string) {
	b.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var ok bool
		b.eval("!!("+cond+")", &ok)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			var html string
			b.eval("document.body.outerHTML", &html)
			b.t.Fatalf("waited 20 s for %s; the page:\n%s", cond, html)
		}
	}
}

// open loads a page and waits until it has run its first queries.
func (b *browser) open(url string) {
	b.t.Helper()
	b.call("Page.navigate", map[string]any{"url": url}, nil)
	b.waitFor(`document.body && document.body.dataset.ready === "true"`)
}

// pixel is where a place is on the page.
func (b *browser) pixel(lat, lon float64) (x, y float64) {
	b.t.Helper()
	var p struct{ X, Y float64 }
	b.eval(fmt.Sprintf(`(() => { const m = window.geoeventMap, r = m.getContainer().getBoundingClientRect(),
		p = m.latLngToContainerPoint([%v, %v]); return {X: r.left + p.x, Y: r.top + p.y}; })()`, lat, lon), &p)
	return p.X, p.Y
}

// mouse sends one mouse event at a place (typ: mousePressed,
// mouseMoved, mouseReleased), with the left button.
func (b *browser) mouse(typ string, lat, lon float64) {
	b.t.Helper()
	x, y := b.pixel(lat, lon)
	p := map[string]any{"type": typ, "x": x, "y": y, "button": "left", "clickCount": 1}
	if typ == "mouseMoved" {
		p["buttons"] = 1
	}
	b.call("Input.dispatchMouseEvent", p, nil)
}

// click presses and releases the left button at a place.
func (b *browser) click(lat, lon float64) {
	b.t.Helper()
	b.mouse("mousePressed", lat, lon)
	b.mouse("mouseReleased", lat, lon)
}

// drag presses at one place, moves to the other and releases there.
func (b *browser) drag(lat0, lon0, lat1, lon1 float64) {
	b.t.Helper()
	b.mouse("mousePressed", lat0, lon0)
	b.mouse("mouseMoved", (lat0+lat1)/2, (lon0+lon1)/2)
	b.mouse("mouseMoved", lat1, lon1)
	b.mouse("mouseReleased", lat1, lon1)
}

// listed waits for a drawn shape's query and returns the entities it
// listed, sorted.
func (b *browser) listed() []string {
	b.t.Helper()
	b.waitFor(`document.getElementById("query-title").dataset.count !== undefined`)
	var ids []string
	b.eval(`[...document.querySelectorAll("#results .ge-result")].map(li => li.dataset.entity)`, &ids)
	slices.Sort(ids)
	return ids
}

// TestMapPageInChromium loads the map page in headless Chromium against a
// one-replica cluster holding known entities, and works it with the
// mouse: it counts the markers in view, draws a polygon (clicks), a box
// and a circle (drags) and reads each one's list, clicks an entity for
// its track, loads a page whose URL names a polygon and an entity, and
// keeps a screenshot.
func TestMapPageInChromium(t *testing.T) {
	bin := chromium(t)
	e := newEnv(t)
	// Six entities in Berlin, two in Sydney; b3 has a track of three points.
	type place struct {
		id       string
		lat, lon float64
	}
	berlin := []place{
		{"b1", 52.510, 13.410}, {"b2", 52.520, 13.420}, {"b3", 52.509, 13.395},
		{"b4", 52.540, 13.440}, {"b5", 52.550, 13.450}, {"b6", 52.480, 13.500},
	}
	ids := map[string]string{}
	nano := func(deg float64) int64 { return int64(math.Round(deg * 1e9)) }
	var events []map[string]any
	for i, p := range berlin {
		ids[p.id] = fmt.Sprintf("00000000-0000-0000-0000-0000000000%02d", i+1)
		if p.id == "b3" {
			e.insert(ev(ids[p.id], nano(52.505), nano(13.380)))
			e.insert(ev(ids[p.id], nano(52.507), nano(13.385)))
		}
		events = append(events, ev(ids[p.id], nano(p.lat), nano(p.lon)))
	}
	events = append(events, ev(newID(), nano(-33.9), nano(151.2)), ev(newID(), nano(-33.91), nano(151.21)))
	e.insert(events...)
	want := func(names ...string) []string {
		var out []string
		for _, n := range names {
			out = append(out, ids[n])
		}
		slices.Sort(out)
		return out
	}

	b := startBrowser(t, bin)
	b.open(e.base + "/?poll=0&view=52.52,13.43,12")
	var markers int
	b.eval(`document.querySelectorAll("path.ge-entity").length`, &markers)
	var inView string
	b.eval(`document.getElementById("status").dataset.entities`, &inView)
	if markers != 6 || inView != "6" {
		t.Errorf("%d markers, %s entities in view; want 6", markers, inView)
	}

	// A polygon by clicks, finished with its button: b1, b2, b3.
	b.eval(`document.querySelector("[data-mode=polygon]").click()`, nil)
	for _, v := range [][2]float64{{52.500, 13.370}, {52.500, 13.430}, {52.530, 13.430}, {52.530, 13.370}} {
		b.click(v[0], v[1])
	}
	b.eval(`document.getElementById("finish").click()`, nil)
	if got := b.listed(); !slices.Equal(got, want("b1", "b2", "b3")) {
		t.Errorf("the drawn polygon lists %v, want b1, b2, b3 %v", got, want("b1", "b2", "b3"))
	}

	// A box by a drag: b2, b4 and b5.
	b.eval(`document.querySelector("[data-mode=box]").click()`, nil)
	b.drag(52.515, 13.415, 52.555, 13.455)
	if got := b.listed(); !slices.Equal(got, want("b2", "b4", "b5")) {
		t.Errorf("the drawn box lists %v, want b2, b4, b5 %v", got, want("b2", "b4", "b5"))
	}

	// A circle by a drag from its centre: b6 alone (about 1.4 km).
	b.eval(`document.querySelector("[data-mode=circle]").click()`, nil)
	b.drag(52.480, 13.500, 52.490, 13.500)
	if got := b.listed(); !slices.Equal(got, want("b6")) {
		t.Errorf("the drawn circle lists %v, want b6 %v", got, want("b6"))
	}

	// A click on b3's marker draws its track.
	b.click(52.509, 13.395)
	b.waitFor(`document.getElementById("track-info").dataset.points`)
	var points string
	b.eval(`document.getElementById("track-info").dataset.points + "/" + document.querySelectorAll("path.ge-track-point").length`, &points)
	if points != "3/3" {
		t.Errorf("b3's track: %s points, want 3", points)
	}

	// The URL can name a shape and an entity (links to a view).
	b.open(e.base + "/?poll=0&view=52.52,13.43,12&entity=3&polygon=52.5,13.3;52.5,13.45;52.545,13.45;52.545,13.3")
	if got := b.listed(); !slices.Equal(got, want("b1", "b2", "b3", "b4")) {
		t.Errorf("?polygon= lists %v, want b1 to b4", got)
	}
	b.waitFor(`document.getElementById("track-info").dataset.points === "3"`)

	b.screenshot("map-page.png")
}

// screenshot keeps a PNG of the page as a test artifact, in
// $GEOEVENT_TEST_ARTIFACTS or a folder of the temp directory.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	var shot struct {
		Data []byte `json:"data"` // base64 in JSON: decoded into bytes
	}
	b.call("Page.captureScreenshot", map[string]any{"format": "png"}, &shot)
	dir := os.Getenv("GEOEVENT_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "geoevent-test-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if len(shot.Data) < 1000 || os.WriteFile(path, shot.Data, 0o644) != nil {
		b.t.Fatalf("no screenshot (%d bytes) at %s", len(shot.Data), path)
	}
	b.t.Logf("screenshot: %s", path)
}

// TestMapPageLive loads the map page against a server holding fences and
// moves entities through them: it counts the fence shapes drawn (those in
// view), hides and shows them, waits for an enter and an exit event in
// the list (and not for one from before the page opened), and checks how
// the entities in view are kept up to date: by the position stream where
// the server has one, else by polling.
func TestMapPageLive(t *testing.T) {
	bin := chromium(t)
	e := newEnv(t)
	pt := func(lat, lon float64) map[string]any { return map[string]any{"lat": lat, "lon": lon} }
	for _, f := range []struct {
		name string
		body map[string]any
	}{
		{"park", map[string]any{"shape": "polygon",
			"vertices": []any{pt(52.50, 13.36), pt(52.50, 13.40), pt(52.53, 13.40), pt(52.53, 13.36)},
			"holes":    []any{[]any{pt(52.51, 13.37), pt(52.51, 13.38), pt(52.52, 13.38), pt(52.52, 13.37)}}}},
		{"zoo", map[string]any{"shape": "circle", "center": pt(52.49, 13.47), "radius_m": 800}},
		{"depot", map[string]any{"shape": "bbox", "min": pt(52.535, 13.43), "max": pt(52.56, 13.46)}},
		{"harbour", map[string]any{"shape": "bbox", "min": pt(-33.9, 151.2), "max": pt(-33.8, 151.3)}},
		{"dateline", map[string]any{"shape": "bbox", "min": pt(10, 179), "max": pt(11, -179)}},
	} {
		expectOK(t, e.req("PUT", "/fences/"+f.name+"?form=a", f.body), "put "+f.name)
	}
	// A thousand more out of view, so that the page reads two pages of
	// GET /fences (by 8 writers: a one-replica cluster commits them
	// together).
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < 1000; i += 8 {
				lat := -30 - float64(i)/100
				r, err := tryRequest(e.base, "PUT", fmt.Sprintf("/fences/sydney%03d?form=a", i),
					map[string]any{"shape": "bbox", "min": pt(lat, 151), "max": pt(lat+0.005, 151.005)})
				if err == nil && r.status != 200 {
					err = fmt.Errorf("PUT sydney%03d: %d %s", i, r.status, r.raw)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	nano := func(deg float64) int64 { return int64(math.Round(deg * 1e9)) }
	walker, early, mover := newID(), newID(), newID()
	e.insert(ev(walker, nano(52.545), nano(13.40)), ev(early, nano(52.40), nano(13.47)), ev(mover, nano(52.47), nano(13.33)))
	e.insert(ev(early, nano(52.49), nano(13.47))) // enters the zoo before the page opens: not listed

	b := startBrowser(t, bin)
	b.open(e.base + "/?poll=300&view=52.52,13.43,12")
	b.waitFor(`document.getElementById("fence-info").dataset.drawn === "3"`)
	type fencesDrawn struct {
		Names                []string
		Classes, Total, Read string
		HoleSubpaths         int
		Info                 string
	}
	drawn := func() (d fencesDrawn) {
		b.eval(`(() => { const ps = [...document.querySelectorAll("path.ge-fence")], info = document.getElementById("fence-info");
			return {Names: ps.map(p => p.dataset.fence).sort(),
				Classes: ps.map(p => p.getAttribute("class").match(/ge-fence-\w+/)[0]).sort().join(" "),
				Total: info.dataset.total, Read: info.dataset.read, Info: info.textContent,
				HoleSubpaths: (document.querySelector("path.ge-fence-polygon").getAttribute("d").match(/M/g) || []).length}; })()`, &d)
		return d
	}
	if d := drawn(); !slices.Equal(d.Names, []string{"depot", "park", "zoo"}) || d.Classes != "ge-fence-bbox ge-fence-circle ge-fence-polygon" ||
		d.Total != "1005" || d.Read != "1005" || d.HoleSubpaths != 2 || d.Info != "1005 fences; 3 in view" {
		t.Errorf("fences drawn: %+v; want depot, park (with its hole: 2 subpaths) and zoo of 1005", d)
	}
	b.eval(`document.getElementById("fences-toggle").click()`, nil)
	b.waitFor(`document.querySelectorAll("path.ge-fence").length === 0`)
	b.eval(`document.getElementById("fences-toggle").click()`, nil)
	b.waitFor(`document.querySelectorAll("path.ge-fence").length === 3`)

	// ?fences=2 draws two of the three in view (the first by name), and
	// says so.
	b.open(e.base + "/?poll=300&view=52.52,13.43,12&fences=2")
	b.waitFor(`document.getElementById("fence-info").dataset.drawn === "2"`)
	if d := drawn(); !slices.Equal(d.Names, []string{"depot", "park"}) || d.Info != "1005 fences; the first 2 of 3 in view drawn" {
		t.Errorf("fences drawn with ?fences=2: %+v; want depot and park, the first 2 of 3", d)
	}

	// The walker enters the depot, then leaves it: both events are listed,
	// the newest first.
	e.insert(ev(walker, nano(52.545), nano(13.445)))
	b.waitFor(`document.querySelector("#events li[data-type=enter][data-fence=depot]")`)
	e.insert(ev(walker, nano(52.545), nano(13.48)))
	b.waitFor(`document.querySelector("#events li[data-type=exit][data-fence=depot]")`)
	var listed []string
	b.eval(`[...document.querySelectorAll("#events li")].map(li => li.dataset.type + " " + li.dataset.fence + " " + li.dataset.entity)`, &listed)
	if want := []string{"exit depot " + walker, "enter depot " + walker}; !slices.Equal(listed, want) {
		t.Errorf("events listed %q, want %q", listed, want)
	}
	b.screenshot("map-page-live.png")

	t.Run("positions", func(t *testing.T) {
		defer b.use(t)()
		// The stream's contract: GET /feed/positions?bbox=S,W,N,E. Where
		// the server lacks it (404) the page polls; where it has it, a
		// move shows without polling.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := stdhttp.NewRequestWithContext(ctx, "GET", e.base+"/feed/positions?bbox=52.4,13.2,52.6,13.7", nil)
		resp, err := stdhttp.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		b.waitFor(`document.getElementById("status").dataset.live !== "starting"`)
		var live string
		b.eval(`document.getElementById("status").dataset.live`, &live)
		if resp.StatusCode == stdhttp.StatusNotFound {
			if live != "polling" {
				t.Fatalf("no position stream, and the page's live mode is %q, not polling", live)
			}
			newcomer := newID()
			e.insert(ev(newcomer, nano(52.47), nano(13.36)))
			b.waitFor(fmt.Sprintf(`window.geoeventMarkers.has(%q)`, newcomer))
			return
		}
		if live != "stream" {
			t.Fatalf("GET /feed/positions answers %d, and the page's live mode is %q, not stream", resp.StatusCode, live)
		}
		e.insert(ev(mover, nano(52.475), nano(13.34)))
		b.waitFor(fmt.Sprintf(`Math.abs(window.geoeventMarkers.get(%q).getLatLng().lat - 52.475) < 1e-9`, mover))
	})
	t.Run("positions-contract", func(t *testing.T) {
		defer b.use(t)()
		// The page against the stream's contract, served by a stand-in in
		// front of the gateway: it opens the view's box, moves a marker
		// as a position arrives, removes it on a delete, and opens the
		// new box when the map moves.
		stub := newPositionsStub(t, e.base)
		b.open(stub.url + "/?poll=0&view=52.52,13.43,12")
		var live string
		b.eval(`document.getElementById("status").dataset.live`, &live)
		if live != "stream" {
			t.Fatalf("live mode %q with a position stream, want stream", live)
		}
		box := stub.box(0)
		if box[0] >= 52.52 || box[2] <= 52.52 || box[1] >= 13.43 || box[3] <= 13.43 {
			t.Errorf("bbox %v does not hold the view's centre 52.52, 13.43", box)
		}
		e.insert(ev(mover, nano(52.48), nano(13.35)))
		r := e.req("GET", "/entity/"+mover, nil)
		expectOK(t, r, "get mover")
		event, _ := json.Marshal(get(r.body, "event"))
		stub.send("event: position\nid: 7\ndata: " + string(event) + "\n\n")
		b.waitFor(fmt.Sprintf(`Math.abs(window.geoeventMarkers.get(%q).getLatLng().lat - 52.48) < 1e-9`, mover))
		stub.send(fmt.Sprintf("event: delete\nid: 8\ndata: {\"entity_id\": %q}\n\n", mover))
		b.waitFor(fmt.Sprintf(`!window.geoeventMarkers.has(%q)`, mover))
		b.eval(`void window.geoeventMap.panBy([300, 0], {animate: false})`, nil)
		if moved := stub.box(1); moved[1] <= box[1] {
			t.Errorf("after panning east the bbox is %v, was %v", moved, box)
		}
	})
}

// positionsStub serves GET /feed/positions by the position stream's
// contract, and passes every other request to the gateway.
type positionsStub struct {
	t     *testing.T
	url   string
	mu    sync.Mutex
	boxes [][4]float64
	conns []chan string // the open streams, oldest first
	added chan struct{}
}

func newPositionsStub(t *testing.T, gateway string) *positionsStub {
	target, err := url.Parse(gateway)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	s := &positionsStub{t: t, added: make(chan struct{}, 16)}
	srv := httptest.NewServer(stdhttp.HandlerFunc(func(w stdhttp.ResponseWriter, r *stdhttp.Request) {
		if r.URL.Path != "/feed/positions" {
			proxy.ServeHTTP(w, r)
			return
		}
		var box [4]float64
		parts := strings.Split(r.URL.Query().Get("bbox"), ",")
		for i := range box {
			if len(parts) != 4 {
				break
			}
			box[i], _ = strconv.ParseFloat(parts[i], 64)
		}
		ch := make(chan string, 8)
		s.mu.Lock()
		s.boxes = append(s.boxes, box)
		s.conns = append(s.conns, ch)
		s.mu.Unlock()
		s.added <- struct{}{}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(stdhttp.Flusher).Flush()
		for {
			select {
			case msg := <-ch:
				io.WriteString(w, msg)
				w.(stdhttp.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections() // the page's streams end only so
		srv.Close()
	})
	s.url = srv.URL
	return s
}

// box waits for the i-th stream to open and returns the bbox it asked for.
func (s *positionsStub) box(i int) [4]float64 {
	s.t.Helper()
	for {
		s.mu.Lock()
		n := len(s.boxes)
		s.mu.Unlock()
		if n > i {
			break
		}
		select {
		case <-s.added:
		case <-time.After(20 * time.Second):
			s.t.Fatalf("waited 20 s for stream %d of the positions", i)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.boxes[i]
}

// send writes an event to the newest stream.
func (s *positionsStub) send(msg string) {
	s.mu.Lock()
	ch := s.conns[len(s.conns)-1]
	s.mu.Unlock()
	ch <- msg
}
