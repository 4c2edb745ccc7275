package http_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/geoevent/geoevent/client"
	"github.com/geoevent/geoevent/core"
	ghttp "github.com/geoevent/geoevent/http"

	"github.com/geoevent/geoevent/internal/testproc"
)

// sseEvent is one Server-Sent Event.
type sseEvent struct{ id, event, data string }

// positionReader reads a position stream's events.
func positionReader(t *testing.T, ctx context.Context, url string) <-chan sseEvent {
	t.Helper()
	raw := sseLines(t, ctx, url)
	out := make(chan sseEvent, 1024)
	go func() {
		defer close(out)
		var e sseEvent
		for l := range raw {
			switch {
			case l == "":
				if e.event != "" {
					out <- e
				}
				e = sseEvent{}
			case len(l) > 4 && l[:4] == "id: ":
				e.id = l[4:]
			case len(l) > 7 && l[:7] == "event: ":
				e.event = l[7:]
			case len(l) > 6 && l[:6] == "data: ":
				e.data = l[6:]
			}
		}
	}()
	return out
}

// next takes the next event, failing the test after a while.
func next(t *testing.T, ch <-chan sseEvent, what string) sseEvent {
	t.Helper()
	select {
	case e, ok := <-ch:
		if !ok {
			t.Fatalf("%s: the stream ended", what)
		}
		return e
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: nothing came", what)
	}
	return sseEvent{}
}

// TestPositionStream: a box's stream shows the events inside it, in
// order with their entries' log indexes, the last position of an entity
// that leaves, and the deletion of one it showed; a fence's stream and a
// group filter select likewise; bad parameters are refused with the
// spec's codes.
func TestPositionStream(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	expectOK(t, e.req("PUT", "/fences/north", map[string]any{"shape": "circle",
		"center": map[string]any{"lat_nano": 10_000_000_000, "lon_nano": 0}, "radius_mm": 100_000_000}), "put north")

	box := positionReader(t, ctx, e.base+"/feed/positions?bbox=0,0,1,1")
	fence := positionReader(t, ctx, e.base+"/feed/positions?fence=north")
	group := positionReader(t, ctx, e.base+"/feed/positions?bbox=-1,-1,1,1&group_id=7&form=a")
	time.Sleep(50 * time.Millisecond) // the streams listen before the writes

	a, b, c := newID(), newID(), newID()
	e.insert(ev(a, 500_000_000, 500_000_000), ev(b, 5_000_000_000, 5_000_000_000)) // a inside the box, b outside all
	e.insert(ev(c, 10_000_000_000, 100_000, "group_id", 7))                        // c in north
	e.insert(ev(b, 100_000_000, 200_000_000, "group_id", 7))                       // b enters the box, group 7
	e.insert(ev(a, 2_000_000_000, 500_000_000))                                    // a leaves the box
	e.insert(ev(a, 3_000_000_000, 500_000_000))                                    // outside: nothing
	e.req("DELETE", "/entities", map[string]any{"entity_ids": []string{b, c}})

	var ids []string
	for i, want := range []struct{ event, entity string }{{"position", a}, {"position", b}, {"position", a}, {"delete", b}} {
		got := next(t, box, "box event")
		var v map[string]any
		if err := json.Unmarshal([]byte(got.data), &v); err != nil {
			t.Fatalf("box event %d: %q: %v", i, got.data, err)
		}
		if got.event != want.event || v["entity_id"] != want.entity {
			t.Fatalf("box event %d: %+v, want %s of %s", i, got, want.event, want.entity)
		}
		if want.event == "position" && (v["id"] == nil || v["lat_nano"] == nil || v["lat"] != nil) {
			t.Fatalf("box event %d is not an event of Form B: %s", i, got.data)
		}
		ids = append(ids, got.id)
	}
	for i := 1; i < len(ids); i++ {
		x, err1 := strconv.ParseUint(ids[i-1], 10, 64)
		y, err2 := strconv.ParseUint(ids[i], 10, 64)
		if err1 != nil || err2 != nil || x >= y {
			t.Fatalf("log indexes not growing: %v", ids)
		}
	}
	if got := next(t, fence, "fence event"); got.event != "position" || !json.Valid([]byte(got.data)) {
		t.Fatalf("fence event: %+v", got)
	} else if next(t, fence, "fence delete").event != "delete" {
		t.Fatal("the fence's stream did not see c deleted")
	}
	got := next(t, group, "group event")
	var v map[string]any
	json.Unmarshal([]byte(got.data), &v)
	if v["entity_id"] != b || v["lat"] == nil {
		t.Fatalf("group stream (Form A): %+v", got)
	}
	if got := next(t, group, "group delete"); got.event != "delete" {
		t.Fatalf("group stream: %+v", got)
	}
	select {
	case got := <-box:
		t.Fatalf("box: one more event %+v", got)
	case <-time.After(50 * time.Millisecond):
	}

	for _, tc := range []struct {
		query  string
		status int
		code   core.Code
		name   string
	}{
		{"", 400, core.MalformedRequest.Code, "MALFORMED_REQUEST"},
		{"?bbox=1,2,3", 400, core.MalformedRequest.Code, "MALFORMED_REQUEST"},
		{"?bbox=1,2,x,4", 400, core.MalformedRequest.Code, "MALFORMED_REQUEST"},
		{"?bbox=91,0,92,0", 400, core.InvalidCoordinates.Code, "INVALID_COORDINATES"},
		{"?bbox=3,0,1,0", 400, core.InvalidPolygon.Code, "INVALID_POLYGON"},
		{"?bbox=0,0,1,1&fence=north", 400, core.MalformedRequest.Code, "MALFORMED_REQUEST"},
		{"?fence=a*b", 400, core.InvalidFence.Code, "INVALID_FENCE"},
		{"?fence=nope", 404, core.FenceNotFound.Code, "FENCE_NOT_FOUND"},
		{"?bbox=0,0,1,1&group_id=x", 400, core.MalformedRequest.Code, "MALFORMED_REQUEST"},
		{"?bbox=0,0,1,1&after=3", 400, core.MalformedRequest.Code, "MALFORMED_REQUEST"},
	} {
		expectErr(t, e.req("GET", "/feed/positions"+tc.query, nil), tc.query, "b", tc.status, tc.code, tc.name)
	}
}

// fakeFeed is a LocalFeed whose readers are always behind.
type fakeFeed struct{}

func (fakeFeed) FeedNews() (uint64, <-chan struct{}) { return 0, make(chan struct{}) }
func (fakeFeed) PositionsListen() uint64             { return 0 }
func (fakeFeed) PositionsUnlisten()                  {}
func (fakeFeed) PositionsAfter(cursor uint64, dst []core.AppliedWrites) ([]core.AppliedWrites, uint64, <-chan struct{}, bool) {
	return dst, cursor, nil, true
}

// TestPositionStreamLimits: a reader that fell behind gets an error
// event with 245 STREAM_FELL_BEHIND and the stream ends; streams beyond
// the limit are 503 CLUSTER_BUSY, and the slot is free again once one
// ends.
func TestPositionStreamLimits(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	behind := testproc.ServeGateway(t, ghttp.Config{Backend: e.backend, Feed: fakeFeed{}})
	ch := positionReader(t, ctx, "http://"+behind.Addr().String()+"/feed/positions?bbox=0,0,1,1")
	got := next(t, ch, "behind")
	var v map[string]any
	json.Unmarshal([]byte(got.data), &v)
	if got.event != "error" || get(v, "error", "message") != "STREAM_FELL_BEHIND" {
		t.Fatalf("behind: %+v", got)
	}
	if e, ok := <-ch; ok {
		t.Fatalf("the stream went on after falling behind: %+v", e)
	}

	gw := testproc.ServeGateway(t, ghttp.Config{Backend: e.backend, Feed: e.replica, MaxPositionStreams: 2})
	base := "http://" + gw.Addr().String()
	ctx1, cancel1 := context.WithCancel(ctx)
	positionReader(t, ctx1, base+"/feed/positions?bbox=0,0,1,1")
	positionReader(t, ctx, base+"/feed/positions?bbox=0,0,1,1")
	expectErr(t, request(t, base, "GET", "/feed/positions?bbox=0,0,1,1", nil), "third", "b", 503, core.ClusterBusy.Code, "CLUSTER_BUSY")
	if m := metricLine(t, base, "geoevent_http_position_streams"); m != "geoevent_http_position_streams 2" {
		t.Fatalf("metrics: %q", m)
	}
	cancel1()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := request(t, base, "HEAD", "/feed/positions?bbox=0,0,1,1", nil)
		if r.status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no slot after a stream ended: %d", r.status)
		}
		time.Sleep(10 * time.Millisecond)
	}
	noFeed := testproc.ServeGateway(t, ghttp.Config{Backend: e.backend})
	expectErr(t, request(t, "http://"+noFeed.Addr().String(), "GET", "/feed/positions?bbox=0,0,1,1", nil), "no feed", "b", 400, core.InvalidArgument.Code, "INVALID_ARGUMENT")
}

// TestWatchPositionsClient: the Go client's WatchPositions reads a box's
// and a fence's streams, events decoded as the gateway rendered them,
// deletions included, and reports a refused area with its code.
func TestWatchPositionsClient(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	expectOK(t, e.req("PUT", "/fences/west", map[string]any{"shape": "bbox",
		"min": map[string]any{"lat_nano": -1_000_000_000, "lon_nano": -181_000_000_000 + 1_000_000_000},
		"max": map[string]any{"lat_nano": 0, "lon_nano": -170_000_000_000}}), "put west")
	box, err := client.WatchPositions(ctx, nil, e.base, client.PositionArea{
		Min: core.Coordinate{LatNano: 0, LonNano: 0}, Max: core.Coordinate{LatNano: 1_000_000_000, LonNano: 1_500_000_001}})
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	fence, err := client.WatchPositions(ctx, nil, e.base, client.PositionArea{Fence: "west"})
	if err != nil {
		t.Fatal(err)
	}
	defer fence.Close()
	time.Sleep(50 * time.Millisecond)
	a, b := newID(), newID()
	e.insert(ev(a, 500_000_000, 1_500_000_001, "group_id", "18446744073709551615", "altitude_mm", -12, "heading_cdeg", 9000))
	e.insert(ev(b, -500_000_000, -175_000_000_000))
	e.req("DELETE", "/entities", map[string]any{"entity_ids": []string{a}})

	got, err := box.Next()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := core.ParseID(a, false)
	if got.Deleted || got.Event.EntityID != want || got.Event.LonNano != 1_500_000_001 || got.Event.GroupID != 1<<64-1 ||
		got.Event.AltitudeMM != -12 || got.Event.HeadingCdeg != 9000 || got.Event.TimestampNS == 0 || got.Index == 0 {
		t.Fatalf("box: %+v", got)
	}
	if got, err := box.Next(); err != nil || !got.Deleted || got.Event.EntityID != want {
		t.Fatalf("box delete: %+v %v", got, err)
	}
	if got, err := fence.Next(); err != nil || got.Event.LonNano != -175_000_000_000 {
		t.Fatalf("fence: %+v %v", got, err)
	}
	_, err = client.WatchPositions(ctx, nil, e.base, client.PositionArea{Fence: "nope"})
	var ce *core.Error
	if !errors.As(err, &ce) || ce.Code != core.FenceNotFound.Code {
		t.Fatalf("unknown fence: %v", err)
	}
}
