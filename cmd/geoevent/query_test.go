package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// queryIDs runs a query with --json and returns the entity ids it found.
func queryIDs(t *testing.T, url string, args ...string) []string {
	t.Helper()
	var p struct {
		Events []event `json:"events"`
	}
	if err := json.Unmarshal([]byte(ok(t, url, append([]string{"--json"}, args...)...)), &p); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, ev := range p.Events {
		ids = append(ids, strings.TrimLeft(ev.EntityID[24:], "0"))
	}
	return ids
}

func TestNearAndWithin(t *testing.T) {
	url := startDev(t)
	ok(t, url, "put", "1", "52.0", "13.0", "--group", "5")
	ok(t, url, "put", "2", "52.001", "13.0")
	ok(t, url, "put", "3", "52.1", "13.0")

	out := ok(t, url, "near", "52", "13", "500")
	mustContain(t, "near", out, "DISTANCE_M", "111.", "2 events")
	if ids := queryIDs(t, url, "near", "52", "13", "500", "--group", "5"); strings.Join(ids, ",") != "1" {
		t.Errorf("near --group 5: %v", ids)
	}
	// Paging: a limit of 1 a page would still find all three with --limit 0.
	if ids := queryIDs(t, url, "near", "52", "13", "50000", "--limit", "0"); len(ids) != 3 {
		t.Errorf("near --limit 0: %v", ids)
	}
	if ids := queryIDs(t, url, "near", "52", "13", "50000", "--limit", "2"); len(ids) != 2 {
		t.Errorf("near --limit 2: %v", ids)
	}

	out = ok(t, url, "within", "51.99,12.99", "51.99,13.01", "52.05,13.01", "52.05,12.99")
	mustContain(t, "within", out, "2 events")

	// A GeoJSON Polygon with a hole around entity 2, as a Feature.
	geo := `{"type": "Feature", "properties": {}, "geometry": {"type": "Polygon", "coordinates": [
		[[12.99, 51.99], [13.01, 51.99], [13.01, 52.05], [12.99, 52.05], [12.99, 51.99]],
		[[12.999, 52.0005], [13.001, 52.0005], [13.001, 52.0015], [12.999, 52.0015], [12.999, 52.0005]]]}}`
	file := filepath.Join(t.TempDir(), "zone.geojson")
	if err := os.WriteFile(file, []byte(geo), 0o644); err != nil {
		t.Fatal(err)
	}
	if ids := queryIDs(t, url, "within", "--file", file); strings.Join(ids, ",") != "1" {
		t.Errorf("within --file with a hole: %v", ids)
	}
	r := cli(t, url, geo, "within", "--file", "-")
	mustContain(t, "within --file -", r.stdout, "1 event")

	// Not a polygon: the file's problem is named.
	if err := os.WriteFile(file, []byte(`{"type": "Point", "coordinates": [1, 2]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r = cli(t, url, "", "within", "--file", file)
	if r.code != 1 || !strings.Contains(r.stderr, "want a GeoJSON Polygon, found a Point") {
		t.Errorf("within of a Point: exit %d, stderr %q", r.code, r.stderr)
	}
	// The server's validation comes back with its code.
	r = cli(t, url, "", "near", "91", "0", "10")
	if r.code != 1 || !strings.Contains(r.stderr, "100 INVALID_COORDINATES: center_lat: 91 degrees is outside -90 to 90") {
		t.Errorf("near lat 91: exit %d, stderr %q", r.code, r.stderr)
	}
}
