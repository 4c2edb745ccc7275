package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// eventCount is the server's event_count.
func eventCount(t *testing.T, url string) int {
	t.Helper()
	var s struct {
		Events int `json:"event_count"`
	}
	if err := json.Unmarshal([]byte(ok(t, url, "--json", "stats")), &s); err != nil {
		t.Fatal(err)
	}
	return s.Events
}

func writeFile(t *testing.T, name, data string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestImportNDJSON(t *testing.T) {
	url := startDev(t)
	lines := []string{
		`{"entity_id": "1", "lat": 1, "lon": 1, "timestamp_ns": "1767225600000000000"}`,
		`{"entity_id": "2", "lat": 95, "lon": 1}`, // line 2: LAT_OUT_OF_RANGE, in the first batch
		``,
		`{"entity_id": "3", "lat": 1, "lon": 1`, // line 4: not JSON
		`{"entity_id": "4", "lat": 1, "lon": 1, "group_id": "x"}`, // line 5: a field of the wrong type
		`{"entity_id": "5", "lat": 1, "lon": 2}`,
		`{"entity_id": "1", "lat": 1, "lon": 1, "timestamp_ns": "1767225600000000000"}`, // line 7: EVENT_EXISTS
		`{"entity_id": "6", "lat": 1, "lon": 3}`,
		`{"entity_id": "7", "lat": 1, "lon": 4, "colour": "red"}`,        // line 9: an unknown field
		`{"entity_id": "8", "lat": 1, "lat_nano": 1000000000, "lon": 4}`, // line 10: the server refuses the request
		`{"entity_id": "9", "lat": 1, "lat": 2, "lon": 4}`,               // line 11: a field twice
		`{"entity_id": "10", "lat": 1, "lon": 5}`,
	}
	file := writeFile(t, "events.ndjson", strings.Join(lines, "\n")+"\n")
	r := cli(t, url, "", "import", file, "--batch", "2")
	if r.code != 1 {
		t.Errorf("import with failed rows: exit %d, want 1", r.code)
	}
	mustContain(t, "import", r.stdout, "imported 4 events from "+file,
		"7 rows not imported", "line 2: 9 LAT_OUT_OF_RANGE", "line 4: not valid JSON",
		`line 5: group_id "x" is not an integer`, "line 7: 8 EVENT_EXISTS", `line 9: unknown field "colour"`,
		"line 10: 1 MALFORMED_REQUEST: lat_nano: lat is given too", `line 11: field "lat" is given twice`)
	if n := eventCount(t, url); n != 4 {
		t.Errorf("the server holds %d events, want 4", n)
	}
	if ids := queryIDs(t, url, "near", "1", "2", "500000", "--limit", "0"); len(ids) != 4 {
		t.Errorf("imported entities: %v", ids)
	}

	// --json: the tally for scripts; stdin with --format.
	r = cli(t, url, `{"entity_id": "8", "lat": 1, "lon": 1}`+"\n", "--json", "import", "-", "--format", "ndjson")
	var tally struct {
		Imported int       `json:"imported"`
		Failed   []failure `json:"failed"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &tally); err != nil || r.code != 0 || tally.Imported != 1 || len(tally.Failed) != 0 {
		t.Errorf("import - --json: exit %d, %v, %+v\n%s", r.code, err, tally, r.stderr)
	}
}

func TestImportCSVAndProgress(t *testing.T) {
	url := startDev(t)
	var b strings.Builder
	b.WriteString("entity_id,lat,lon,timestamp_ns,group_id,note\n")
	for i := 0; i < 250; i++ {
		fmt.Fprintf(&b, "1%03d,52.5,13.4,,3,hello\n", i)
	}
	b.WriteString("99,91,13,,,bad lat\n") // line 252
	b.WriteString("98,52,13\n")           // line 253: too few cells
	b.WriteString("97,52,13,soon,,,\n")   // line 254: seven cells
	b.WriteString("96,52,13,noon,1,x\n")  // line 255: a timestamp that is no number
	file := writeFile(t, "events.csv", b.String())
	var out, errOut bytes.Buffer
	code := run([]string{"--url", url, "import", file, "--batch", "100"}, strings.NewReader(""), &out, &errOut, "", true)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	mustContain(t, "import csv", out.String(), "imported 250 events", "4 rows not imported",
		"line 252: 9 LAT_OUT_OF_RANGE", "line 253: 3 cells where the header names 6",
		"line 254: 7 cells", "line 255: timestamp_ns \"noon\" is not a whole number")
	// On a terminal: the ignored column, and a progress line with its rate and ETA.
	mustContain(t, "import csv stderr", errOut.String(), `ignoring column(s) "note"`, "100%", "events,", "/s", "ETA")
	if n := eventCount(t, url); n != 250 {
		t.Errorf("the server holds %d events, want 250", n)
	}
	// Not a terminal: no progress.
	r := cli(t, url, "", "import", writeFile(t, "one.csv", "entity_id,lat,lon\n5000,1,1\n"))
	if r.code != 0 || strings.Contains(r.stderr, "ETA") {
		t.Errorf("import one row: exit %d, stderr %q", r.code, r.stderr)
	}
	// A header without lat: refused before anything is sent.
	r = cli(t, url, "", "import", writeFile(t, "bad.csv", "entity_id,latitude,lon\n1,2,3\n"))
	if r.code != 1 || !strings.Contains(r.stderr, "no lat column") {
		t.Errorf("import without lat: exit %d, stderr %q", r.code, r.stderr)
	}
}

func itoa(i int) string {
	return strings.TrimSpace(strings.Repeat(" ", 0) + string(rune('0'+i/100)) + string(rune('0'+i/10%10)) + string(rune('0'+i%10)))
}

func TestImportGeoJSON(t *testing.T) {
	url := startDev(t)
	geo := `{"type": "FeatureCollection", "features": [
		{"type": "Feature", "id": "11", "properties": {"group_id": 4, "name": "van"}, "geometry": {"type": "Point", "coordinates": [13.4, 52.5]}},
		{"type": "Feature", "properties": {"entity_id": "6ba7b810-9dad-11d1-80b4-00c04fd430c8", "timestamp_ns": 1767225600123456789}, "geometry": {"type": "Point", "coordinates": [13.5, 52.6]}},
		{"type": "Feature", "properties": {"entity_id": "12"}, "geometry": {"type": "LineString", "coordinates": [[1, 2], [3, 4]]}},
		{"type": "Feature", "properties": {}, "geometry": {"type": "Point", "coordinates": [1, 2]}}
	]}`
	r := cli(t, url, "", "import", writeFile(t, "fleet.geojson", geo))
	mustContain(t, "import geojson", r.stdout, "imported 2 events", "feature 2: a LineString, not a Point", "feature 3: no entity_id")
	// The timestamp kept every digit.
	mustContain(t, "history", ok(t, url, "--json", "history", "6ba7b810-9dad-11d1-80b4-00c04fd430c8"), `"timestamp_ns":"1767225600123456789"`)
	mustContain(t, "get 11", ok(t, url, "get", "11"), "52.5 13.4")
}
