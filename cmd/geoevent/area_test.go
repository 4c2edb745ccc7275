package main

import (
	"strings"
	"testing"
)

func TestBBoxAndNearest(t *testing.T) {
	url := startDev(t)
	ok(t, url, "put", "1", "52.0", "13.0", "--group", "5")
	ok(t, url, "put", "2", "52.001", "13.0")
	ok(t, url, "put", "3", "52.1", "13.0")
	ok(t, url, "put", "4", "0.0", "179.9")

	if ids := queryIDs(t, url, "bbox", "51.9", "12.9", "52.05", "13.1"); len(ids) != 2 {
		t.Errorf("bbox: %v, want entities 1 and 2", ids)
	}
	if ids := queryIDs(t, url, "bbox", "51.9", "12.9", "52.05", "13.1", "--group", "5"); strings.Join(ids, ",") != "1" {
		t.Errorf("bbox --group 5: %v", ids)
	}
	// MIN_LON above MAX_LON crosses the antimeridian.
	if ids := queryIDs(t, url, "bbox", "-1", "179", "1", "-179"); strings.Join(ids, ",") != "4" {
		t.Errorf("bbox across the antimeridian: %v", ids)
	}
	r := cli(t, url, "", "bbox", "53", "13", "52", "14")
	if r.code != 1 || !strings.Contains(r.stderr, "103 INVALID_POLYGON") {
		t.Errorf("bbox with inverted latitudes: exit %d, stderr %q", r.code, r.stderr)
	}

	if ids := queryIDs(t, url, "nearest", "52.0009", "13", "2"); strings.Join(ids, ",") != "2,1" {
		t.Errorf("nearest 2: %v, want 2 then 1", ids)
	}
	if ids := queryIDs(t, url, "nearest", "52", "13", "10", "--max-distance", "1000"); len(ids) != 2 {
		t.Errorf("nearest within 1 km: %v", ids)
	}
	out := ok(t, url, "nearest", "52", "13", "1")
	mustContain(t, "nearest", out, "DISTANCE_M", "1 event")
	r = cli(t, url, "", "nearest", "52", "13", "many")
	if r.code != 2 || !strings.Contains(r.stderr, "K \"many\" is not a whole number") {
		t.Errorf("nearest with a bad K: exit %d, stderr %q", r.code, r.stderr)
	}
}
