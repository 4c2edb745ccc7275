package main

import (
	"encoding/json"
	"strconv"
	"testing"
)

func TestHistory(t *testing.T) {
	url := startDev(t)
	times := []string{"2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z"}
	for i, at := range times {
		ok(t, url, "put", "9", strconv.Itoa(10+i), "20", "--time", at)
	}
	out := ok(t, url, "history", "9")
	mustContain(t, "history", out, "10  20  2026-01-01T00:00:00.000Z", "12  20  2026-01-01T00:02:00.000Z", "3 events")
	out = ok(t, url, "history", "9", "--since", "2026-01-01T00:00:30Z", "--until", "2026-01-01T00:01:30Z")
	mustContain(t, "history --since --until", out, "11  20", "1 event")
	out = ok(t, url, "history", "9", "--limit", "2")
	mustContain(t, "history --limit 2", out, "2 events (more match: raise --limit)")

	var p struct {
		Events  []event `json:"events"`
		HasMore bool    `json:"has_more"`
	}
	if err := json.Unmarshal([]byte(ok(t, url, "--json", "history", "9", "--limit", "0")), &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Events) != 3 || p.HasMore || p.Events[0].Lat != 10 || p.Events[2].Lat != 12 {
		t.Errorf("history --json: %+v", p)
	}
}
