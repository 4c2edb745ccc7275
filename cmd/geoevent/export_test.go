package main

import (
	"strings"
	"testing"
)

func TestExportRoundTrip(t *testing.T) {
	src := startDev(t)
	ok(t, src, "put", "1", "52.5", "13.4", "--group", "3", "--time", "2026-01-01T00:00:00Z", "--ttl", "86400000")
	ok(t, src, "put", "1", "52.6", "13.5", "--time", "2026-01-01T00:01:00Z", "--heading-cdeg", "9000")
	ok(t, src, "put", "2", "-33.9", "151.2", "--altitude-mm", "-5000")

	for _, format := range []string{"ndjson", "csv", "geojson"} {
		latest := ok(t, src, "export", "--format", format)
		history := ok(t, src, "export", "--entity", "1", "--format", format)
		dst := startDev(t)
		r := cli(t, dst, latest, "import", "-", "--format", format)
		if r.code != 0 {
			t.Fatalf("%s: importing the latest: exit %d\n%s%s\n%s", format, r.code, r.stdout, r.stderr, latest)
		}
		// The latest of entity 1 is in the dst already: its history
		// imported again is EVENT_EXISTS for it and new for the first.
		r = cli(t, dst, history, "import", "-", "--format", format)
		mustContain(t, format+" history import", r.stdout, "imported 1 event", "1 row not imported", "8 EVENT_EXISTS")
		if got := ok(t, dst, "export", "--format", format); got != latest {
			t.Errorf("%s: the latest after a round trip:\n%s\nwant:\n%s", format, got, latest)
		}
		if got := ok(t, dst, "export", "--entity", "1", "--format", format); got != history {
			t.Errorf("%s: the history after a round trip:\n%s\nwant:\n%s", format, got, history)
		}
	}
	mustContain(t, "ndjson", ok(t, src, "export", "--entity", "1"),
		`{"entity_id":"00000000-0000-0000-0000-000000000001","timestamp_ns":"1767225600000000000","lat":52.5,"lon":13.4,"group_id":3,"ttl_seconds":86400000}`)
	csv := ok(t, src, "export", "--format", "csv", "--group", "3")
	if lines := strings.Split(strings.TrimSpace(csv), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "entity_id,timestamp_ns,lat,lon,group_id") {
		// entity 1's latest has group 0: none of group 3.
		t.Errorf("export --group 3: %q", csv)
	}
	mustContain(t, "geojson", ok(t, src, "export", "--format", "geojson"), `"geometry":{"type":"Point","coordinates":[151.2,-33.9]}`)
	r := cli(t, src, "", "export", "--format", "xml")
	if r.code != 2 {
		t.Errorf("export --format xml: exit %d", r.code)
	}
}
