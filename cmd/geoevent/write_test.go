package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestPutGetDeleteTTL(t *testing.T) {
	url := startDev(t)
	out := ok(t, url, "put", "42", "38.115", "13.361", "--group", "7", "--velocity-mms", "12500")
	mustContain(t, "put", out, "inserted 00000000-0000-0000-0000-00000000002a at ")

	out = ok(t, url, "get", "42")
	mustContain(t, "get", out, "00000000-0000-0000-0000-00000000002a  38.115  13.361", "1 event")

	// --upsert without --time replaces the latest event.
	mustContain(t, "put --upsert", ok(t, url, "put", "42", "38.2", "13.4", "--upsert"), "updated ")
	var ans struct {
		Events []event `json:"events"`
	}
	if err := json.Unmarshal([]byte(ok(t, url, "--json", "get", "42")), &ans); err != nil || len(ans.Events) != 1 {
		t.Fatalf("get --json: %v %+v", err, ans)
	}
	if ev := ans.Events[0]; ev.GroupID != "0" || ev.EntityID != "00000000-0000-0000-0000-00000000002a" {
		t.Errorf("after the upsert: %+v", ev)
	}

	// A refused event: the code, its name and what to change; exit 1.
	r := cli(t, url, "", "put", "43", "95", "1")
	if r.code != 1 || !strings.Contains(r.stderr, "9 LAT_OUT_OF_RANGE: lat must be -90 to 90 degrees") {
		t.Errorf("put lat 95: exit %d, stderr %q", r.code, r.stderr)
	}
	r = cli(t, url, "", "get", "42", "43")
	if r.code != 1 || !strings.Contains(r.stderr, "3 ENTITY_NOT_FOUND") || !strings.Contains(r.stdout, "38.2") {
		t.Errorf("get of one found and one not: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}

	mustContain(t, "ttl set", ok(t, url, "ttl", "set", "42", "600"), "expires at ")
	mustContain(t, "ttl extend", ok(t, url, "ttl", "extend", "42", "60"), "expires at ", "(was ")
	mustContain(t, "ttl clear", ok(t, url, "ttl", "clear", "42"), "never expires")
	r = cli(t, url, "", "ttl", "extend", "42", "60")
	if r.code != 1 || !strings.Contains(r.stderr, "106 NO_TTL_SET") {
		t.Errorf("ttl extend without a TTL: exit %d, stderr %q", r.code, r.stderr)
	}

	mustContain(t, "delete", ok(t, url, "delete", "42", "44"), "deleted 1 entity, 1 not found")
	if r := cli(t, url, "", "get", "42"); r.code != 1 {
		t.Errorf("get after delete: exit %d", r.code)
	}
}

func TestPutTimeAndBadArguments(t *testing.T) {
	url := startDev(t)
	ok(t, url, "put", "7", "1", "2", "--time", "2026-01-02T03:04:05Z")
	out := ok(t, url, "history", "7")
	mustContain(t, "history", out, "2026-01-02T03:04:05.000Z")
	// The same key again is EVENT_EXISTS, with what to do.
	r := cli(t, url, "", "put", "7", "1", "2", "--time", "2026-01-02T03:04:05Z")
	if r.code != 1 || !strings.Contains(r.stderr, "8 EVENT_EXISTS") || !strings.Contains(r.stderr, "--upsert") {
		t.Errorf("put of an existing key: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, args := range [][]string{
		{"put", "7", "north", "2"},
		{"put", "not-an-id", "1", "2"},
		{"put", "7", "1"},
		{"put", "7", "1", "2", "--time", "yesterday"},
		{"ttl", "set", "7"},
		{"ttl", "bump", "7", "1"},
		{"near", "1", "2", "far"},
		{"within", "1,2", "3,4"},
		{"within", "1,2", "3;4", "5,6"},
		{"nosuchcommand"},
	} {
		if r := cli(t, url, "", args...); r.code != 2 {
			t.Errorf("geoevent %v: exit %d, want 2 (usage); stderr %q", args, r.code, r.stderr)
		}
	}
}
