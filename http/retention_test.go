package http_test

import (
	"bufio"
	"context"
	"encoding/json"
	stdhttp "net/http"
	"strings"
	"testing"
	"time"

	"github.com/geoevent/geoevent/core"
)

// putBox defines a bbox fence "box" over (0..1, 0..1) degrees.
func putBox(e *env) {
	expectOK(e.t, e.req("PUT", "/fences/box", map[string]any{"shape": "bbox",
		"min": map[string]any{"lat_nano": 0, "lon_nano": 0}, "max": map[string]any{"lat_nano": 1_000_000_000, "lon_nano": 1_000_000_000}}), "put box")
}

// TestFeedRetentionHTTP: GET and PUT /feed/retention, their errors, and
// a put that trims the feed at once, after which a read from before its
// start is 241 FEED_TRIMMED naming the start.
func TestFeedRetentionHTTP(t *testing.T) {
	e := newEnv(t)
	r := e.req("GET", "/feed/retention", nil)
	expectOK(t, r, "get defaults")
	if str(get(r.body, "max_age_s")) != "86400" || str(get(r.body, "max_notifications")) != "10000000" || str(get(r.body, "last")) != `"0"` {
		t.Fatalf("defaults: %s", r.raw)
	}
	for _, bad := range []map[string]any{{"max_age_s": 59, "max_notifications": 1000}, {"max_age_s": 60, "max_notifications": 999},
		{"max_age_s": 365*86400 + 1, "max_notifications": 1000}, {"max_age_s": 60, "max_notifications": 100_000_001}} {
		expectErr(t, e.req("PUT", "/feed/retention", bad), "out of range", "b", 400, core.InvalidArgument.Code, "INVALID_ARGUMENT")
	}
	expectErr(t, e.req("PUT", "/feed/retention", map[string]any{"max_age_s": 60}), "no count", "b", 400, core.MalformedRequest.Code, "MALFORMED_REQUEST")
	expectErr(t, e.req("PUT", "/feed/retention", map[string]any{"max_age_s": 60, "max_notifications": 1000, "x": 1}), "unknown field", "b", 400, core.MalformedRequest.Code, "MALFORMED_REQUEST")

	// 1,200 entities enter the box in one write: 1,200 notifications.
	putBox(e)
	evs := make([]map[string]any, 1200)
	for i := range evs {
		evs[i] = ev(newID(), 500_000_000, 500_000_000)
	}
	e.insert(evs...)
	r = e.req("PUT", "/feed/retention", map[string]any{"max_age_s": 3600, "max_notifications": "1000"})
	expectOK(t, r, "put")
	last := strings.Trim(str(get(r.body, "last")), `"`)
	start := strings.Trim(str(get(r.body, "start")), `"`)
	if str(get(r.body, "max_age_s")) != "3600" || str(get(r.body, "max_notifications")) != "1000" || start == "0" || last == "0" {
		t.Fatalf("put: %s", r.raw)
	}
	r = e.req("GET", "/feed/retention", nil)
	if str(get(r.body, "max_notifications")) != "1000" || str(get(r.body, "start")) != `"`+start+`"` {
		t.Fatalf("get after put: %s", r.raw)
	}
	r = e.req("GET", "/feed?wait_ms=0&limit=10000&after=0", nil)
	expectErr(t, r, "read from 0", "b", 400, core.FeedTrimmed.Code, "FEED_TRIMMED")
	r = e.req("GET", "/feed?wait_ms=0&limit=10000&after="+start, nil)
	expectOK(t, r, "read from the start")
	if n := len(get(r.body, "notifications").([]any)); n != 999 || str(get(r.body, "last")) != `"`+last+`"` {
		t.Fatalf("after the start: %d notifications: %.300s", n, r.raw)
	}
}

// TestFeedFromEnd: after=now reads only what comes after the serving
// replica's newest notification, as a long poll and as a stream (which
// names its start as the last event id), and Last-Event-ID wins over
// after, as when an EventSource opened with after= reconnects.
func TestFeedFromEnd(t *testing.T) {
	e := newEnv(t)
	putBox(e)
	id := newID()
	e.insert(ev(id, 500_000_000, 500_000_000))   // enter
	e.insert(ev(id, 2_000_000_000, 500_000_000)) // exit
	r := e.req("GET", "/feed?wait_ms=0", nil)
	first := strings.Trim(str(get(r.body, "notifications", 0, "seq")), `"`)
	last := strings.Trim(str(get(r.body, "last")), `"`)
	if last != strings.Trim(str(get(r.body, "notifications", 1, "seq")), `"`) {
		t.Fatalf("last of a page: %s", r.raw)
	}
	r = e.req("GET", "/feed?wait_ms=0&after=now", nil)
	expectOK(t, r, "after=now")
	if len(get(r.body, "notifications").([]any)) != 0 || str(get(r.body, "next")) != `"`+last+`"` || str(get(r.body, "last")) != `"`+last+`"` {
		t.Fatalf("after=now: %s", r.raw)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := stdhttp.NewRequestWithContext(ctx, "GET", e.base+"/feed?after=now", nil)
	res, err := stdhttp.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	if !sc.Scan() || sc.Text() != "id: "+last {
		t.Fatalf("the stream begins %q, want id: %s", sc.Text(), last)
	}
	done := make(chan resp, 1)
	go func() {
		r, _ := tryRequest(e.base, "GET", "/feed?wait_ms=5000&after=now", nil)
		done <- r
	}()
	time.Sleep(200 * time.Millisecond)
	e.insert(ev(id, 500_000_000, 500_000_000)) // enters again
	r = <-done
	if n := len(get(r.body, "notifications").([]any)); n != 1 || str(get(r.body, "notifications", 0, "type")) != `"enter"` {
		t.Fatalf("long poll from the end: %s", r.raw)
	}
	var ids []string
	for len(ids) < 1 && sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			ids = append(ids, v)
		}
	}
	if len(ids) != 1 || ids[0] == last || ids[0] != strings.Trim(str(get(r.body, "notifications", 0, "seq")), `"`) {
		t.Fatalf("stream from the end: ids %v", ids)
	}

	// Last-Event-ID outranks after.
	req, _ = stdhttp.NewRequestWithContext(ctx, "GET", e.base+"/feed?wait_ms=0&after=now", nil)
	req.Header.Set("Last-Event-ID", first)
	res2, err := stdhttp.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res2.Body.Close()
	var page map[string]any
	if err := json.NewDecoder(res2.Body).Decode(&page); err != nil {
		t.Fatal(err)
	}
	if n := len(get(page, "notifications").([]any)); n != 2 {
		t.Fatalf("Last-Event-ID %s with after=now: %d notifications, want 2: %v", first, n, page)
	}
	expectErr(t, e.req("GET", "/feed?wait_ms=0&after=18446744073709551615", nil), "after 2^64-1", "b", 400, core.InvalidArgument.Code, "INVALID_ARGUMENT")
}
