package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/geoevent/geoevent/internal/testproc"
)

// TestOperationsDocAgrees: docs/operations.md lists every flag of replica
// format, start, dev, backup and restore with its environment variable, as -h lists them,
// and every geoevent_ metric a running server serves at /metrics, and
// nothing else; the Grafana dashboard uses only documented metrics and
// Go's that the server serves. (Every OpenAPI route against the gateway's:
// package http's TestOpenAPIMatchesRoutes and TestOpenAPIServed.)
func TestOperationsDocAgrees(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)

	// Flags: -h against the table.
	helpLine := regexp.MustCompile(`(?m)^  --([a-z-]+)(?: \S+)?\s+(GEOEVENT_[A-Z_]+)$`)
	helped := map[string]string{}
	for _, cmd := range []string{"format", "start", "dev", "backup", "restore"} {
		code, _, stderr := runCmd(t, cmd, "-h")
		if code != 0 {
			t.Fatalf("replica %s -h: exit %d", cmd, code)
		}
		ms := helpLine.FindAllStringSubmatch(stderr, -1)
		if len(ms) == 0 {
			t.Fatalf("replica %s -h lists no flag:\n%s", cmd, stderr)
		}
		for _, m := range ms {
			if m[2] != envName(m[1]) {
				t.Errorf("replica %s -h: --%s beside %s", cmd, m[1], m[2])
			}
			helped[m[1]] = m[2]
		}
	}
	documented := map[string]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `--([a-z-]+)[^`]*` \\| `(GEOEVENT_[A-Z_]+)` \\|").FindAllStringSubmatch(doc, -1) {
		documented[m[1]] = m[2]
	}
	compare(t, "flag", helped, documented)

	// Metrics: a dev server's /metrics against the table.
	srv := testproc.StartDev(t, testproc.DevOptions{Dir: filepath.Join(t.TempDir(), "d"), HTTP: true})
	base := srv.URL
	send(t, "GET", base+"/no/such/path", "") // an error code, for geoevent_http_errors_total
	getJSON(t, base+"/ping")
	send(t, "PUT", base+"/hooks/ops", `{"url":"http://127.0.0.1:9/"}`) // a hook, for the per-hook metrics
	var body []byte
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		res, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(res.Body)
		res.Body.Close()
		if strings.Contains(string(body), `hook="ops"`) || time.Now().After(deadline) {
			break // the leader delivers the hook
		}
	}
	served := map[string]string{}
	all := map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		name, _, _ := strings.Cut(line, " ")
		name, _, _ = strings.Cut(name, "{")
		all[name] = true
		if strings.HasPrefix(name, "geoevent_") {
			served[histogramName(name)] = "served"
		}
	}
	docMetrics := map[string]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(geoevent_[a-z_]+)` \\|").FindAllStringSubmatch(doc, -1) {
		docMetrics[m[1]] = "served"
	}
	compare(t, "metric", served, docMetrics)

	// The dashboard's metrics.
	raw, err = os.ReadFile(filepath.Join("..", "..", "docs", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	name := regexp.MustCompile(`\b(geoevent|go|process)_[a-z_]+`)
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, n := range name.FindAllString(tg.Expr, -1) {
				if strings.HasPrefix(n, "geoevent_") && docMetrics[histogramName(n)] == "" || !strings.HasPrefix(n, "geoevent_") && !all[n] {
					t.Errorf("the dashboard uses %s, which is not documented or not served", n)
				}
			}
		}
	}
}

// histogramName is a histogram's name for one of its series' names.
func histogramName(n string) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(n, suffix); ok && (strings.HasSuffix(base, "_seconds") || strings.HasSuffix(base, "_per_fsync")) {
			return base
		}
	}
	return n
}

// compare reports the names in one of got and want but not the other.
func compare(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	var names []string
	for n := range got {
		names = append(names, n)
	}
	for n := range want {
		if _, ok := got[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		g, inGot := got[n]
		w, inWant := want[n]
		switch {
		case !inWant:
			t.Errorf("%s %s is not in docs/operations.md", what, n)
		case !inGot:
			t.Errorf("docs/operations.md lists %s %s, which does not exist", what, n)
		case g != w:
			t.Errorf("%s %s: %s, but docs/operations.md says %s", what, n, g, w)
		}
	}
	if len(got) == 0 {
		t.Errorf("no %s found", what)
	}
}
