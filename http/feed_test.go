package http_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	stdhttp "net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/geoevent/geoevent/core"
	ghttp "github.com/geoevent/geoevent/http"

	"github.com/geoevent/geoevent/internal/testproc"
)

// TestFencesAndFeed defines fences over HTTP, moves entities through them
// and reads the transitions back: as a long-poll page, as Server-Sent
// Events, and resumed by Last-Event-ID.
func TestFencesAndFeed(t *testing.T) {
	e := newEnv(t)
	box := map[string]any{"shape": "bbox",
		"min": map[string]any{"lat_nano": 0, "lon_nano": 0}, "max": map[string]any{"lat_nano": 1_000_000_000, "lon_nano": 1_000_000_000},
		"report": []string{"enter", "exit"}}
	r := e.req("PUT", "/fences/depot", box)
	expectOK(t, r, "put depot")
	if str(get(r.body, "created")) != "true" {
		t.Fatalf("put depot: %s", r.raw)
	}
	expectOK(t, e.req("PUT", "/fences/ring", map[string]any{"shape": "circle",
		"center": map[string]any{"lat_nano": 500_000_000, "lon_nano": 500_000_000}, "radius_mm": 1_000_000}), "put ring")
	expectOK(t, e.req("PUT", "/fences/tri", map[string]any{"shape": "polygon", "vertices": []map[string]any{
		{"lat_nano": 0, "lon_nano": 0}, {"lat_nano": 0, "lon_nano": 2_000_000_000}, {"lat_nano": 2_000_000_000, "lon_nano": 0}}}), "put tri")

	r = e.req("GET", "/fences/depot", nil)
	expectOK(t, r, "get depot")
	if str(get(r.body, "shape")) != `"bbox"` || str(get(r.body, "max", "lat_nano")) != "1000000000" {
		t.Fatalf("get depot: %s", r.raw)
	}
	r = e.req("GET", "/fences?limit=2", nil)
	if str(get(r.body, "fences", 0, "name")) != `"depot"` || str(get(r.body, "has_more")) != "true" || str(get(r.body, "total")) != "3" {
		t.Fatalf("list: %s", r.raw)
	}
	expectErr(t, e.req("GET", "/fences/nope", nil), "get unknown", "b", 404, core.FenceNotFound.Code, "FENCE_NOT_FOUND")
	expectErr(t, e.req("PUT", "/fences/x", map[string]any{"shape": "hexagon"}), "bad shape", "b", 400, core.InvalidFence.Code, "INVALID_FENCE")
	expectErr(t, e.req("PUT", "/fences/x", map[string]any{"shape": "polygon", "vertices": []map[string]any{
		{"lat_nano": 0, "lon_nano": 0}, {"lat_nano": 0, "lon_nano": 1}}}), "two vertices", "b", 400, core.InvalidPolygon.Code, "INVALID_POLYGON")
	expectErr(t, e.req("PUT", "/fences/a%20b", box), "bad name", "b", 400, core.InvalidFence.Code, "INVALID_FENCE")

	id := newID()
	e.insert(ev(id, 500_000_000, 500_000_000))                               // enters depot, ring, tri
	e.insert(ev(id, 1_500_000_000, 100_000_000))                             // exits depot and ring, stays in tri (not reported)
	e.req("DELETE", "/entities", map[string]any{"entity_ids": []string{id}}) // exits tri

	r = e.req("GET", "/feed?wait_ms=0", nil)
	expectOK(t, r, "feed page")
	want := []string{"enter depot", "enter ring", "enter tri", "exit depot", "exit ring", "exit tri"}
	var seqs []string
	for i, w := range want {
		n := get(r.body, "notifications", i)
		if got := strings.Trim(str(get(n, "type")), `"`) + " " + strings.Trim(str(get(n, "fence")), `"`); got != w {
			t.Fatalf("notification %d is %s, want %s: %s", i, got, w, r.raw)
		}
		if str(get(n, "entity_id")) != `"`+id+`"` {
			t.Fatalf("notification %d: %s", i, r.raw)
		}
		seqs = append(seqs, strings.Trim(str(get(n, "seq")), `"`))
	}
	if n := len(get(r.body, "notifications").([]any)); n != len(want) {
		t.Fatalf("more notifications than %d: %s", len(want), r.raw)
	}
	if get(r.body, "notifications", 0, "previous") != nil || str(get(r.body, "notifications", 3, "previous", "lat_nano")) != "500000000" {
		t.Fatalf("previous positions: %s", r.raw)
	}
	r = e.req("GET", "/feed?wait_ms=0&fences=ring&types=exit", nil)
	if str(get(r.body, "notifications", 0, "seq")) != `"`+seqs[4]+`"` || len(get(r.body, "notifications").([]any)) != 1 {
		t.Fatalf("filtered page: %s", r.raw)
	}

	// A long poll from the end waits for the next notification.
	done := make(chan resp, 1)
	go func() {
		r, _ := tryRequest(e.base, "GET", "/feed?wait_ms=5000&after="+seqs[5], nil)
		done <- r
	}()
	time.Sleep(100 * time.Millisecond)
	id2 := newID()
	e.insert(ev(id2, 100_000_000, 100_000_000))
	r = <-done
	if str(get(r.body, "notifications", 0, "entity_id")) != `"`+id2+`"` {
		t.Fatalf("long poll: %s", r.raw)
	}

	// Server-Sent Events, resumed by Last-Event-ID after the third.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := stdhttp.NewRequestWithContext(ctx, "GET", e.base+"/feed?fences=depot", nil)
	req.Header.Set("Last-Event-ID", seqs[2])
	res, err := stdhttp.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	sc := bufio.NewScanner(res.Body)
	var ids, events []string
	for len(events) < 2 && sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "data: "); ok && !json.Valid([]byte(v)) {
			t.Fatalf("data is not JSON: %.200s", line)
		}
		if v, ok := strings.CutPrefix(line, "id: "); ok {
			ids = append(ids, v)
		}
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			events = append(events, v)
		}
	}
	// depot: exit (seqs[3]), then the second entity's enter.
	if len(ids) != 2 || len(events) != 2 || ids[0] != seqs[3] || events[0] != "exit" || events[1] != "enter" {
		t.Fatalf("stream: ids %v events %v (want %s first)", ids, events, seqs[3])
	}

	expectOK(t, e.req("DELETE", "/fences/depot", nil), "delete depot")
	expectErr(t, e.req("DELETE", "/fences/depot", nil), "delete again", "b", 404, core.FenceNotFound.Code, "FENCE_NOT_FOUND")
	expectErr(t, e.req("GET", "/feed?wait_ms=0&types=sideways", nil), "bad type", "b", 400, core.InvalidFence.Code, "INVALID_FENCE")
}

// TestFeedStreamEndsOnShutdown: an open stream does not hold the
// gateway's Shutdown to its deadline.
func TestFeedStreamEndsOnShutdown(t *testing.T) {
	e := newEnv(t)
	gw := testproc.ServeGateway(t, ghttp.Config{Backend: e.backend})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := stdhttp.NewRequestWithContext(ctx, "GET", "http://"+gw.Addr().String()+"/feed", nil)
	res, err := stdhttp.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	start := time.Now()
	sctx, scancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer scancel()
	if err := gw.Shutdown(sctx); err != nil {
		t.Fatalf("shutdown with a stream open: %v after %v", err, time.Since(start))
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("shutdown took %v", d)
	}
	if _, err := io.ReadAll(res.Body); err != nil {
		t.Fatalf("the stream did not end cleanly: %v", err)
	}
}

// feedReadCounter counts the feed reads that reach the replica.
type feedReadCounter struct {
	ghttp.Backend
	reads atomic.Int64
}

func (b *feedReadCounter) Do(ctx context.Context, call ghttp.Call) error {
	if call.Operation() == core.OpReadFeed {
		b.reads.Add(1)
	}
	return b.Backend.Do(ctx, call)
}

// sseReader reads a feed stream's events (id and data) into a channel.
func sseReader(t *testing.T, ctx context.Context, url string) <-chan [2]string {
	t.Helper()
	lines := sseLines(t, ctx, url)
	out := make(chan [2]string, 1024)
	go func() {
		defer close(out)
		var id string
		for line := range lines {
			if v, ok := strings.CutPrefix(line, "id: "); ok {
				id = v
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				out <- [2]string{id, v}
			}
		}
	}()
	return out
}

// TestFeedReadersShareTheTail: idle streams do not read the feed, and
// many streams, some filtered, get every notification once, in order,
// as a direct read of the replica lists them.
func TestFeedReadersShareTheTail(t *testing.T) {
	e := newEnv(t)
	cb := &feedReadCounter{Backend: e.backend}
	gw := testproc.ServeGateway(t, ghttp.Config{Backend: cb, Feed: e.replica})
	base := "http://" + gw.Addr().String()
	for _, name := range []string{"west", "east"} {
		lon := 0
		if name == "east" {
			lon = 2_000_000_000
		}
		expectOK(t, e.req("PUT", "/fences/"+name, map[string]any{"shape": "bbox",
			"min": map[string]any{"lat_nano": 0, "lon_nano": lon}, "max": map[string]any{"lat_nano": 1_000_000_000, "lon_nano": lon + 1_000_000_000}}), "put "+name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const streams = 12
	var all [streams]<-chan [2]string
	for i := range all {
		url := base + "/feed"
		if i%3 == 2 {
			url += "?fences=east"
		}
		all[i] = sseReader(t, ctx, url)
	}
	time.Sleep(50 * time.Millisecond)
	before := cb.reads.Load()
	time.Sleep(500 * time.Millisecond)
	// Polling every 20 ms, 12 streams would read about 300 times.
	if idle := cb.reads.Load() - before; idle > streams {
		t.Fatalf("%d feed reads by %d idle streams in 500 ms", idle, streams)
	}
	if m := metricLine(t, base, "geoevent_http_feed_streams"); m != "geoevent_http_feed_streams 12" {
		t.Fatalf("metrics: %q", m)
	}
	const moves = 40
	for i := range moves {
		id := newID()
		lon := int64(500_000_000)
		if i%2 == 1 {
			lon += 2_000_000_000
		}
		e.insert(ev(id, 500_000_000, lon))
	}
	r := e.req("GET", "/feed?wait_ms=0", nil)
	expectOK(t, r, "feed page")
	var want, wantEast []string
	for _, n := range get(r.body, "notifications").([]any) {
		seq := strings.Trim(str(get(n, "seq")), `"`)
		want = append(want, seq)
		if str(get(n, "fence")) == `"east"` {
			wantEast = append(wantEast, seq)
		}
	}
	if len(want) != moves {
		t.Fatalf("%d notifications, want %d: %s", len(want), moves, r.raw)
	}
	for i, ch := range all {
		w := want
		if i%3 == 2 {
			w = wantEast
		}
		for j, seq := range w {
			select {
			case got, ok := <-ch:
				if !ok || got[0] != seq || !json.Valid([]byte(got[1])) {
					t.Fatalf("stream %d, notification %d: %q, want id %s", i, j, got, seq)
				}
			case <-ctx.Done():
				t.Fatalf("stream %d: notification %d (%s) never came", i, j, seq)
			}
		}
		select {
		case got := <-ch:
			t.Fatalf("stream %d: one more: %q", i, got)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// sseLines reads a stream's lines into a channel, closed when it ends.
func sseLines(t *testing.T, ctx context.Context, url string) <-chan string {
	t.Helper()
	req, _ := stdhttp.NewRequestWithContext(ctx, "GET", url, nil)
	res, err := stdhttp.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		t.Fatalf("%s: %d %s", url, res.StatusCode, b)
	}
	out := make(chan string, 1024)
	go func() {
		defer res.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			out <- sc.Text()
		}
	}()
	return out
}

// metricLine returns the line of GET /metrics that starts with name.
func metricLine(t *testing.T, base, name string) string {
	t.Helper()
	res, err := stdhttp.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, name+" ") || strings.HasPrefix(l, name+"{") {
			return l
		}
	}
	return ""
}

// TestFeedStreamOwnsItsConnection: over HTTP/1.x a stream answers with
// Connection: close and no chunked framing, sends what a commit made (here
// more than net/http's 4 KiB buffer at once) exactly once and in order,
// ends when the client goes without anything to write, and answers an
// HTTP/1.0 request as HTTP/1.0.
func TestFeedStreamOwnsItsConnection(t *testing.T) {
	e := newEnv(t)
	expectOK(t, e.req("PUT", "/fences/zone", map[string]any{"shape": "bbox",
		"min": map[string]any{"lat_nano": 0, "lon_nano": 0}, "max": map[string]any{"lat_nano": 1_000_000_000, "lon_nano": 1_000_000_000}}), "put fence")
	addr := strings.TrimPrefix(e.base, "http://")
	open := func(proto string) (net.Conn, *bufio.Reader, *stdhttp.Response) {
		t.Helper()
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(conn, "GET /feed?after=now "+proto+"\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(conn)
		res, err := stdhttp.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != 200 || res.Proto != proto || !res.Close || len(res.TransferEncoding) > 0 ||
			res.Header.Get("Content-Type") != "text/event-stream" || res.Header.Get("Date") == "" {
			t.Fatalf("%s: %s %v %v %v", proto, res.Status, res.Proto, res.TransferEncoding, res.Header)
		}
		return conn, br, res
	}
	conn, _, res := open("HTTP/1.1")
	old, _, _ := open("HTTP/1.0")
	old.Close()
	waitStreams := func(want string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for m := ""; m != "geoevent_http_feed_streams "+want; m = metricLine(t, e.base, "geoevent_http_feed_streams") {
			if time.Now().After(deadline) {
				t.Fatalf("metrics: %q, want %s streams", m, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitStreams("1") // the HTTP/1.0 stream ended when its client went
	const batches, perBatch = 3, 40
	for range batches {
		var evs []map[string]any
		for range perBatch {
			evs = append(evs, ev(newID(), 500_000_000, 500_000_000))
		}
		e.insert(evs...)
	}
	var want []string // a replica answers its feed from what it has applied, maybe behind the commit
	for deadline := time.Now().Add(5 * time.Second); len(want) < batches*perBatch; {
		if time.Now().After(deadline) {
			t.Fatalf("%d notifications, want %d", len(want), batches*perBatch)
		}
		r := e.req("GET", "/feed?wait_ms=100", nil)
		expectOK(t, r, "feed page")
		want = want[:0]
		for _, n := range get(r.body, "notifications").([]any) {
			want = append(want, strings.Trim(str(get(n, "seq")), `"`))
		}
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "id: ") { // after=now names its start first
		t.Fatalf("first line %q (%v)", sc.Text(), sc.Err())
	}
	var got []string
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			got = append(got, v)
		}
		if sc.Text() == "" && len(got) == len(want) { // the last event's end
			break
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("stream ids %v (%v), want %v", got, sc.Err(), want)
	}
	conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if sc.Scan() {
		t.Fatalf("one more line: %q", sc.Text())
	}
	conn.Close()
	waitStreams("0")
}

// TestFeedStreamKeepAlive: an idle stream that reads the shared window
// writes its keep-alive again and again, woken by the window's clock (it
// keeps no timer of its own).
func TestFeedStreamKeepAlive(t *testing.T) {
	t.Cleanup(ghttp.SetFeedKeepAlive(300 * time.Millisecond)) // after the env's cleanup: no stream is open
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lines := sseLines(t, ctx, e.base+"/feed")
	start := time.Now()
	for n := 0; n < 3; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the stream ended after %d keep-alives", n)
			}
			if l == ": keep-alive" {
				n++
			}
		case <-ctx.Done():
			t.Fatalf("%d keep-alives in %v", n, time.Since(start))
		}
	}
}
