package http

import (
	"testing"

	"github.com/geoevent/geoevent/core"
)

// FuzzFeedParams: the feed's query string and Last-Event-ID never panic,
// and what they accept is a request the state machine takes.
func FuzzFeedParams(f *testing.F) {
	for _, s := range []string{"", "after=5", "after=18446744073709551615&fences=a,b.c&types=enter,inside&limit=10000",
		"fences=a,,b", "types=sideways", "limit=10001", "after=-1", "fences=" + string(make([]byte, 100)), "after=now", "after=NOW"} {
		f.Add(s, "")
		f.Add(s, "42")
	}
	f.Fuzz(func(t *testing.T, raw, lastEventID string) {
		p, bad := parseParams(raw, "after", "fences", "types", "limit", "wait_ms")
		if bad != nil {
			return
		}
		req, bad := parseFeedParams(p, lastEventID)
		if bad != nil {
			return
		}
		if req.Limit > core.MaxFeedLimit || len(req.Fences) > core.MaxFeedFenceFilter || req.Types&^core.AllNotify != 0 {
			t.Fatalf("%q accepted as %+v", raw, req)
		}
		for _, n := range req.Fences {
			if !core.ValidFenceName(n) {
				t.Fatalf("%q accepted fence name %q", raw, n)
			}
		}
		if _, err := core.ReadFeed.AppendRequest(nil, req); err != nil {
			t.Fatalf("%q: the request does not encode: %v", raw, err)
		}
		// after=now is the one way to the end, and Last-Event-ID wins.
		if (req.After == core.FeedEnd) != (lastEventID == "" && p["after"] == "now") {
			t.Fatalf("%q with Last-Event-ID %q: after %d", raw, lastEventID, req.After)
		}
	})
}
