package client

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"net"
	"reflect"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/geoevent/geoevent/client/internal/testserver"
	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/replica"
)

const (
	lat0 = 38_100_000_000
	lon0 = 13_360_000_000
)

func TestRoundTripEveryMethod(t *testing.T) {
	s := startServer(t, testserver.Config{})
	c := newClient(t, []string{s.Addr()}, testOptions(s))
	ctx := context.Background()

	ins, err := c.Insert(ctx, []core.GeoEvent{ev(1, lat0, lon0), ev(2, lat0+1_000_000, lon0)})
	if err != nil || !ins.Committed || len(ins.Results) != 2 || ins.Results[1].Index != 1 || ins.Results[0].TimestampNS == 0 {
		t.Fatalf("Insert: %+v %v", ins, err)
	}
	up, err := c.Upsert(ctx, []core.GeoEvent{ev(1, lat0, lon0+1_000_000)})
	if err != nil || !up.Committed || !up.Results[0].Updated {
		t.Fatalf("Upsert: %+v %v", up, err)
	}
	lr, err := c.GetLatest(ctx, id(1))
	if err != nil || !lr.Found || lr.Event.LonNano != lon0+1_000_000 {
		t.Fatalf("GetLatest: %+v %v", lr, err)
	}
	batch, err := c.GetLatestBatch(ctx, []core.Uint128{id(2), id(99), id(1)})
	if err != nil || len(batch) != 3 || !batch[0].Found || batch[1].Found || !batch[2].Found {
		t.Fatalf("GetLatestBatch: %+v %v", batch, err)
	}
	rq, err := c.QueryRadius(ctx, &core.RadiusQuery{Center: core.Coordinate{LatNano: lat0, LonNano: lon0}, RadiusMM: 500_000_000})
	if err != nil || len(rq.Events) != 2 || len(rq.DistancesMM) != 2 {
		t.Fatalf("QueryRadius: %+v %v", rq, err)
	}
	const d = 500_000_000 // half a degree
	pq, err := c.QueryPolygon(ctx, &core.PolygonQuery{Vertices: []core.Coordinate{
		{LatNano: lat0 - d, LonNano: lon0 - d}, {LatNano: lat0 - d, LonNano: lon0 + 2*d},
		{LatNano: lat0 + d, LonNano: lon0 + 2*d}, {LatNano: lat0 + d, LonNano: lon0 - d},
	}})
	if err != nil || len(pq.Events) != 2 {
		t.Fatalf("QueryPolygon: %+v %v", pq, err)
	}
	bq, err := c.QueryBBox(ctx, &core.BBoxQuery{MinLatNano: lat0 - d, MinLonNano: lon0 - d, MaxLatNano: lat0 + d, MaxLonNano: lon0 + 2*d})
	if err != nil || len(bq.Events) != 2 {
		t.Fatalf("QueryBBox: %+v %v", bq, err)
	}
	nq, err := c.QueryNearest(ctx, &core.NearestQuery{Center: core.Coordinate{LatNano: lat0 + 1_000_000, LonNano: lon0}, Page: core.Page{Limit: 1}})
	if err != nil || len(nq.Events) != 1 || nq.Events[0].EntityID != id(2) || nq.DistancesMM[0] != 0 || !nq.HasMore {
		t.Fatalf("QueryNearest: %+v %v", nq, err)
	}
	lq, err := c.QueryLatest(ctx, &core.LatestQuery{Page: core.Page{Limit: 1}})
	if err != nil || len(lq.Events) != 1 || !lq.HasMore || lq.Cursor == "" || lq.Events[0].EntityID != id(1) {
		t.Fatalf("QueryLatest: %+v %v", lq, err)
	}
	lq2, err := c.QueryLatest(ctx, &core.LatestQuery{Page: core.Page{Limit: 1, Cursor: lq.Cursor}})
	if err != nil || len(lq2.Events) != 1 || lq2.Events[0].EntityID != id(2) {
		t.Fatalf("QueryLatest page 2: %+v %v", lq2, err)
	}
	h, err := c.History(ctx, &core.HistoryQuery{EntityID: id(2)})
	if err != nil || len(h.Events) != 1 {
		t.Fatalf("History: %+v %v", h, err)
	}
	ts, err := c.TTLSet(ctx, &core.TTLSetRequest{EntityID: id(1), TTLSeconds: 3600})
	if err != nil || ts.ExpiresAtNS == 0 {
		t.Fatalf("TTLSet: %+v %v", ts, err)
	}
	te, err := c.TTLExtend(ctx, &core.TTLExtendRequest{EntityID: id(1), ExtendBySeconds: 60})
	if err != nil || te.PreviousExpiresAtNS != ts.ExpiresAtNS || te.NewExpiresAtNS != ts.ExpiresAtNS+60_000_000_000 {
		t.Fatalf("TTLExtend: %+v %v", te, err)
	}
	tc, err := c.TTLClear(ctx, &core.TTLClearRequest{EntityID: id(1)})
	if err != nil || !tc.HadTTL || tc.PreviousExpiresAtNS != te.NewExpiresAtNS {
		t.Fatalf("TTLClear: %+v %v", tc, err)
	}
	if _, err := c.CleanupExpired(ctx, nil); err != nil {
		t.Fatalf("CleanupExpired: %v", err)
	}
	if _, err := c.CleanupExpired(ctx, &core.CleanupRequest{MaxEntries: 10}); err != nil {
		t.Fatalf("CleanupExpired: %v", err)
	}
	st, err := c.Stats(ctx)
	if err != nil || st.EventCount != 2 || st.EntityCount != 2 {
		t.Fatalf("Stats: %+v %v", st, err)
	}
	status, err := c.Status(ctx)
	if err != nil || status.EventsCount != 2 || status.Version != "1.0.0" || status.ClusterState != "healthy" {
		t.Fatalf("Status: %+v %v", status, err)
	}
	topo, err := c.Topology(ctx)
	if err != nil || topo.ReplicaCount != 1 || len(topo.Nodes) != 1 || topo.Nodes[0].Address != s.Addr() {
		t.Fatalf("Topology: %+v %v", topo, err)
	}
	ping, err := c.Ping(ctx)
	if err != nil || !ping.Pong {
		t.Fatalf("Ping: %+v %v", ping, err)
	}
	del, err := c.DeleteEntities(ctx, []core.Uint128{id(1), id(3)})
	if err != nil || del.Deleted != 1 || del.NotFound != 1 {
		t.Fatalf("DeleteEntities: %+v %v", del, err)
	}
	if lr, err := c.GetLatest(ctx, id(1)); err != nil || lr.Found {
		t.Fatalf("GetLatest after delete: %+v %v", lr, err)
	}
	// One session, one registration, request numbers 1, 2, ...
	if s.Registers() != 1 || s.Accepted() != 1 {
		t.Fatalf("registers %d, connections %d; want 1 and 1", s.Registers(), s.Accepted())
	}
	if got, want := c.sessions[0].lastReq, uint32(s.Requests()); got != want {
		t.Fatalf("last request number %d, want %d (one per request, from 1)", got, want)
	}
}

func TestOperationErrorsAreCoreErrors(t *testing.T) {
	s := startServer(t, testserver.Config{})
	c := newClient(t, []string{s.Addr()}, testOptions(s))
	ctx := context.Background()

	_, err := c.QueryRadius(ctx, &core.RadiusQuery{Center: core.Coordinate{LatNano: lat0, LonNano: lon0}})
	if code := codeOf(t, err); code != core.InvalidRadius.Code {
		t.Fatalf("radius 0: code %d", code)
	}
	_, err = c.TTLExtend(ctx, &core.TTLExtendRequest{EntityID: id(5), ExtendBySeconds: 1})
	if code := codeOf(t, err); code != core.EntityNotFound.Code {
		t.Fatalf("ttl extend of an unknown entity: code %d", code)
	}
	// A rejected batch is a reply, not an error.
	r, err := c.Insert(ctx, []core.GeoEvent{ev(1, lat0, lon0), ev(2, 91_000_000_000, 0)})
	if err != nil || r.Committed || r.Results[1].Code != core.LatOutOfRange.Code {
		t.Fatalf("invalid batch: %+v %v", r, err)
	}
	// A nil request is the caller's error and sends nothing.
	before := s.Requests()
	if _, err := c.QueryRadius(ctx, nil); err == nil {
		t.Fatal("nil query accepted")
	}
	if s.Requests() != before {
		t.Fatal("a request that cannot be encoded was sent")
	}
	if s.Requests() != 3 {
		t.Fatalf("%d requests for 3 calls with final errors: a final error was retried", s.Requests())
	}
}

// A reply lost after the write was applied: the retry (after RequestTimeout,
// on a new connection) gets the cached reply and the write is applied once.
func TestRetryAfterDroppedReplyIsDeduplicated(t *testing.T) {
	s := startServer(t, testserver.Config{})
	opts := testOptions(s)
	opts.RequestTimeout = 500 * time.Millisecond
	c := newClient(t, []string{s.Addr()}, opts)
	ctx := context.Background()

	s.DropReplies(1)
	r, err := c.Insert(ctx, []core.GeoEvent{ev(7, lat0, lon0)})
	if err != nil || !r.Committed {
		t.Fatalf("Insert: %+v %v", r, err)
	}
	// At least 2: a loaded machine may time out another attempt.
	if n := s.RequestsFor(core.OpInsert); n < 2 {
		t.Fatalf("%d insert requests, want 2", n)
	}
	checkAppliedOnce(t, c, r)
	if s.Registers() != 1 || s.Accepted() < 2 {
		t.Fatalf("registers %d, connections %d; want 1 and 2", s.Registers(), s.Accepted())
	}
}

// checkAppliedOnce checks that entity 7 has exactly the one event r reports.
func checkAppliedOnce(t *testing.T, c *Client, r *core.InsertReply) {
	t.Helper()
	ctx := context.Background()
	st, err := c.Stats(ctx)
	if err != nil || st.EventCount != 1 {
		t.Fatalf("Stats: %+v %v; want 1 event", st, err)
	}
	h, err := c.History(ctx, &core.HistoryQuery{EntityID: id(7)})
	if err != nil || len(h.Events) != 1 {
		t.Fatalf("History: %+v %v; want 1 event", h, err)
	}
	lr, err := c.GetLatest(ctx, id(7))
	if err != nil || !lr.Found || lr.Event.TimestampNS != r.Results[0].TimestampNS {
		t.Fatalf("GetLatest: %+v %v; want the event of the reply %+v", lr, err, r.Results[0])
	}
}

func TestConnectionClosedAfterApplyIsDeduplicated(t *testing.T) {
	s := startServer(t, testserver.Config{})
	c := newClient(t, []string{s.Addr()}, testOptions(s))
	s.CloseAfterApply(1)
	r, err := c.Insert(context.Background(), []core.GeoEvent{ev(7, lat0, lon0)})
	if err != nil || !r.Committed {
		t.Fatalf("Insert: %+v %v", r, err)
	}
	if n := s.RequestsFor(core.OpInsert); n != 2 {
		t.Fatalf("%d insert requests, want 2", n)
	}
	if s.Accepted() != 2 || s.Registers() != 1 {
		t.Fatalf("connections %d, registers %d; want 2 and 1 (same session on a new connection)", s.Accepted(), s.Registers())
	}
	checkAppliedOnce(t, c, r)
}

func TestCorruptReplyIsAConnectionErrorAndDeduplicated(t *testing.T) {
	s := startServer(t, testserver.Config{})
	c := newClient(t, []string{s.Addr()}, testOptions(s))
	s.RewriteReplies(1, func(f []byte) []byte { f[len(f)-1] ^= 0xff; return f })
	r, err := c.Insert(context.Background(), []core.GeoEvent{ev(7, lat0, lon0)})
	if err != nil || !r.Committed {
		t.Fatalf("Insert: %+v %v", r, err)
	}
	if s.Accepted() != 2 {
		t.Fatalf("%d connections; the corrupt frame should have closed the first", s.Accepted())
	}
	checkAppliedOnce(t, c, r)
}

// reframe builds a frame with a valid checksum around any header bytes and
// payload.
func reframe(header16 []byte, payload []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(header16)+len(payload)+4))
	b = append(b, header16...)
	b = append(b, payload...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[4:], crc32.MakeTable(crc32.Castagnoli)))
}

// Frames the client must refuse without panicking: each closes the
// connection, and the retry succeeds.
func TestMalformedRepliesNeverPanic(t *testing.T) {
	withPayload := func(p []byte) func([]byte) []byte {
		return func(f []byte) []byte { return reframe(f[4:20], p) }
	}
	withHeader := func(edit func(h []byte)) func([]byte) []byte {
		return func(f []byte) []byte {
			h := append([]byte(nil), f[4:20]...)
			edit(h)
			return reframe(h, f[20:len(f)-4])
		}
	}
	cases := map[string]func([]byte) []byte{
		"empty payload":       withPayload(nil),
		"unknown operation":   withPayload([]byte{99, 0, 0}),
		"other operation":     withPayload([]byte{byte(core.OpStats), 0, 0}),
		"truncated reply":     withPayload([]byte{byte(core.OpPing), 0, 0, 1}),
		"bad bool":            withPayload([]byte{byte(core.OpPing), 0, 0, 7, 0, 0}),
		"trailing bytes":      withPayload([]byte{byte(core.OpPing), 0, 0, 1, 0, 0, 9}),
		"bad error message":   withPayload([]byte{byte(core.OpPing), 212, 0, 200, 0}),
		"wrong request":       withHeader(func(h []byte) { h[8]++ }),
		"wrong session":       withHeader(func(h []byte) { h[0]++ }),
		"register reply type": withHeader(func(h []byte) { h[12] = byte(core.MsgRegisterReply) }),
		"replica type":        withHeader(func(h []byte) { h[12] = 70 }),
		"unknown type":        withHeader(func(h []byte) { h[12] = 200 }),
		"bad version":         withHeader(func(h []byte) { h[13] = 2 }),
		"reserved bytes":      withHeader(func(h []byte) { h[14] = 1 }),
		"short length":        func(f []byte) []byte { binary.LittleEndian.PutUint32(f, 3); return f },
		"huge length":         func(f []byte) []byte { binary.LittleEndian.PutUint32(f, 1<<31); return f },
		"bad checksum":        func(f []byte) []byte { f[len(f)-2] ^= 1; return f },
		"truncated frame":     func(f []byte) []byte { return f[:len(f)-3] },
		"garbage":             func([]byte) []byte { return []byte("HTTP/1.1 400 Bad Request\r\n\r\n........") },
		"error with code 0":   func(f []byte) []byte { return reframe(errHeader(f), []byte{0, 0, 0, 0}) },
		"error truncated":     func(f []byte) []byte { return reframe(errHeader(f), []byte{212}) },
	}
	s := startServer(t, testserver.Config{})
	opts := testOptions(s)
	opts.RequestTimeout = time.Second // "truncated frame" waits for it
	c := newClient(t, []string{s.Addr()}, opts)
	if _, err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			before, conns := s.RequestsFor(core.OpPing), s.Accepted()
			s.RewriteReplies(1, f)
			r, err := c.Ping(context.Background())
			if err != nil || !r.Pong {
				t.Fatalf("Ping: %+v %v", r, err)
			}
			if n := s.RequestsFor(core.OpPing) - before; n != 2 {
				t.Fatalf("%d attempts, want 2", n)
			}
			if s.Accepted() != conns+1 {
				t.Fatalf("the connection was not replaced")
			}
		})
	}
	// With retries disabled the connection error comes back.
	opts.DisableRetries = true
	c2 := newClient(t, []string{s.Addr()}, opts)
	if _, err := c2.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.RewriteReplies(1, cases["bad checksum"])
	_, err := c2.Ping(context.Background())
	var ce *connError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T), want a connection error", err, err)
	}
}

func errHeader(f []byte) []byte {
	h := append([]byte(nil), f[4:20]...)
	h[12] = byte(core.MsgError)
	return h
}

func TestRetryableCodeIsRetriedWithBackoff(t *testing.T) {
	s := startServer(t, testserver.Config{})
	opts := testOptions(s)
	opts.BaseBackoff, opts.MaxBackoff = 40*time.Millisecond, time.Second
	var retried []core.Code // OnRetry's, on the calling goroutine
	opts.OnRetry = func(err error) { retried = append(retried, codeOf(t, err)) }
	c := newClient(t, []string{s.Addr()}, opts)
	if _, err := c.Ping(context.Background()); err != nil { // connect and register first
		t.Fatal(err)
	}
	s.FailNext(2, core.ClusterBusy)
	start := time.Now()
	r, err := c.Upsert(context.Background(), []core.GeoEvent{ev(7, lat0, lon0)})
	elapsed := time.Since(start)
	if err != nil || !r.Committed {
		t.Fatalf("Upsert: %+v %v", r, err)
	}
	if n := s.RequestsFor(core.OpUpsert); n != 3 {
		t.Fatalf("%d upsert requests, want 3 (2 retries)", n)
	}
	if want := []core.Code{core.ClusterBusy.Code, core.ClusterBusy.Code}; !slices.Equal(retried, want) {
		t.Fatalf("OnRetry was told of %v, want %v", retried, want)
	}
	// Backoffs 40 ms and 80 ms, plus jitter up to 20 ms each.
	if elapsed < 120*time.Millisecond || elapsed > 5*time.Second {
		t.Fatalf("took %v; want the backoffs 40 ms + 80 ms (+ jitter)", elapsed)
	}
	if s.Accepted() != 1 {
		t.Fatalf("%d connections; a retryable code must not reconnect", s.Accepted())
	}
}

func TestRequestInFlightIsRetried(t *testing.T) {
	s := startServer(t, testserver.Config{})
	c := newClient(t, []string{s.Addr()}, testOptions(s))
	s.FailNext(1, core.RequestInFlight)
	if _, err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := s.RequestsFor(core.OpPing); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
}

func TestFinalCodesAreNotRetried(t *testing.T) {
	for _, info := range []core.CodeInfo{core.InvalidCoordinates, core.InvalidPolygon, core.BatchTooLarge, core.MalformedRequest, core.StaleRequest, core.FollowerReadOnly} {
		t.Run(info.Name, func(t *testing.T) {
			s := startServer(t, testserver.Config{})
			c := newClient(t, []string{s.Addr()}, testOptions(s))
			s.FailNext(1, info)
			_, err := c.Upsert(context.Background(), []core.GeoEvent{ev(7, lat0, lon0)})
			var ce *core.Error
			if !errors.As(err, &ce) || ce.Code != info.Code {
				t.Fatalf("error %v, want code %d", err, info.Code)
			}
			var re *RetryError
			if errors.As(err, &re) {
				t.Fatalf("a final code came back as a RetryError: %v", err)
			}
			if n := s.Requests(); n != 1 {
				t.Fatalf("%d attempts, want 1", n)
			}
			if st, _ := c.Stats(context.Background()); st.EventCount != 0 {
				t.Fatalf("%d events written", st.EventCount)
			}
		})
	}
}

func TestRetriesRunOut(t *testing.T) {
	s := startServer(t, testserver.Config{})
	opts := testOptions(s)
	opts.MaxRetries = 3
	c := newClient(t, []string{s.Addr()}, opts)
	s.FailNext(100, core.ClusterBusy)
	_, err := c.Ping(context.Background())
	var re *RetryError
	if !errors.As(err, &re) || re.Attempts != 4 || re.Reason != nil {
		t.Fatalf("error %v, want a RetryError after 4 attempts", err)
	}
	if code := codeOf(t, err); code != core.ClusterBusy.Code {
		t.Fatalf("last error code %d", code)
	}
	mustContain(t, err.Error(), "4 attempt")
	if n := s.Requests(); n != 4 {
		t.Fatalf("%d requests, want 4", n)
	}
}

func TestDisableRetries(t *testing.T) {
	s := startServer(t, testserver.Config{})
	opts := testOptions(s)
	opts.DisableRetries = true
	c := newClient(t, []string{s.Addr()}, opts)
	s.FailNext(1, core.ClusterBusy)
	_, err := c.Ping(context.Background())
	if code := codeOf(t, err); code != core.ClusterBusy.Code || s.Requests() != 1 {
		t.Fatalf("error %v after %d requests", err, s.Requests())
	}
}

func TestTotalTimeout(t *testing.T) {
	s := startServer(t, testserver.Config{})

	t.Run("retrying", func(t *testing.T) {
		opts := testOptions(s)
		opts.MaxRetries = 1000
		opts.BaseBackoff, opts.MaxBackoff = 30*time.Millisecond, 30*time.Millisecond
		opts.TotalTimeout = 300 * time.Millisecond
		c := newClient(t, []string{s.Addr()}, opts)
		s.FailNext(1_000_000, core.ClusterBusy)
		defer s.FailNext(0, core.ClusterBusy)
		start := time.Now()
		_, err := c.Ping(context.Background())
		elapsed := time.Since(start)
		if !errors.Is(err, ErrTotalTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("error %v, want the total timeout", err)
		}
		if elapsed > 300*time.Millisecond+700*time.Millisecond {
			t.Fatalf("gave up after %v, TotalTimeout is 300 ms", elapsed)
		}
		var re *RetryError
		if !errors.As(err, &re) || re.Attempts < 3 {
			t.Fatalf("error %v: want several attempts", err)
		}
	})
	t.Run("slow reply", func(t *testing.T) {
		opts := testOptions(s)
		opts.TotalTimeout = 200 * time.Millisecond
		opts.RequestTimeout = 10 * time.Second
		c := newClient(t, []string{s.Addr()}, opts)
		s.SetReplyDelay(5 * time.Second)
		defer s.SetReplyDelay(0)
		start := time.Now()
		_, err := c.Ping(context.Background())
		if elapsed := time.Since(start); elapsed > 2*time.Second {
			t.Fatalf("gave up after %v, TotalTimeout is 200 ms", elapsed)
		}
		if !errors.Is(err, ErrTotalTimeout) {
			t.Fatalf("error %v, want the total timeout", err)
		}
	})
	t.Run("request timeout", func(t *testing.T) {
		opts := testOptions(s)
		opts.RequestTimeout = 50 * time.Millisecond
		opts.MaxRetries = 2
		c := newClient(t, []string{s.Addr()}, opts)
		if _, err := c.Ping(context.Background()); err != nil {
			t.Fatal(err)
		}
		s.SetReplyDelay(5 * time.Second)
		defer s.SetReplyDelay(0)
		_, err := c.Ping(context.Background())
		var re *RetryError
		var ne net.Error
		if !errors.As(err, &re) || re.Attempts != 3 || !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("error %v, want 3 timed-out attempts", err)
		}
	})
}

func TestContextCancellation(t *testing.T) {
	s := startServer(t, testserver.Config{})
	c := newClient(t, []string{s.Addr()}, testOptions(s))
	if _, err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.SetReplyDelay(5 * time.Second)
	defer s.SetReplyDelay(0)

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := c.Ping(ctx)
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Fatalf("returned %v after the cancel", elapsed)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}

	// A caller's deadline.
	ctx, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	if _, err := c.Ping(ctx); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrTotalTimeout) {
		t.Fatalf("error %v, want the caller's deadline", err)
	}

	// An already cancelled context sends nothing. (The call above may
	// have sent its request just before its deadline: wait until the
	// server has read everything sent so far.)
	before := s.Requests()
	for {
		time.Sleep(50 * time.Millisecond)
		n := s.Requests()
		if n == before {
			break
		}
		before = n
	}
	if _, err := c.Ping(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v", err)
	}
	if s.Requests() != before {
		t.Fatal("a request was sent with a dead context")
	}
}

func TestWaitingForASessionHonoursContext(t *testing.T) {
	s := startServer(t, testserver.Config{})
	c := newClient(t, []string{s.Addr()}, testOptions(s))
	s.SetReplyDelay(500 * time.Millisecond)
	defer s.SetReplyDelay(0)
	done := make(chan error)
	go func() { _, err := c.Ping(context.Background()); done <- err }()
	time.Sleep(50 * time.Millisecond) // let it take the only session
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Ping(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want the deadline while waiting for a session", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Calls one after another use the most recently used session: one
// registration, not one per session of the pool. Reads register none.
func TestPoolReusesTheLastSession(t *testing.T) {
	s := startServer(t, testserver.Config{})
	opts := testOptions(s)
	opts.PoolSize = 8
	c := newClient(t, []string{s.Addr()}, opts)
	for i := range 20 {
		if _, err := c.Ping(context.Background()); err != nil {
			t.Fatalf("ping %d: %v", i, err)
		}
	}
	if s.Registers() != 0 {
		t.Fatalf("%d registers for 20 pings, want none (a read needs no session)", s.Registers())
	}
	for i := range 20 {
		if _, err := c.Upsert(context.Background(), []core.GeoEvent{ev(uint64(i+1), lat0, lon0)}); err != nil {
			t.Fatalf("upsert %d: %v", i, err)
		}
	}
	if s.Registers() != 1 {
		t.Fatalf("%d registers for 20 writes one after another, want 1", s.Registers())
	}
}

func TestPoolRunsCallsInParallel(t *testing.T) {
	s := startServer(t, testserver.Config{})
	opts := testOptions(s)
	opts.PoolSize = 4
	c := newClient(t, []string{s.Addr()}, opts)
	const workers, perWorker = 16, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers*perWorker)
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				e := ev(uint64(w*perWorker+i+1), lat0+int64(i), lon0)
				if r, err := c.Upsert(context.Background(), []core.GeoEvent{e}); err != nil || !r.Committed {
					errs <- err
					continue
				}
				if lr, err := c.GetLatest(context.Background(), e.EntityID); err != nil || !lr.Found {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if s.Registers() != 4 || s.Accepted() != 1 {
		t.Fatalf("%d registers, %d connections; want 4 sessions over one connection", s.Registers(), s.Accepted())
	}
	st, err := c.Stats(context.Background())
	if err != nil || st.EventCount != workers*perWorker {
		t.Fatalf("Stats: %+v %v", st, err)
	}

	// At most 4 calls at a time: 16 calls with 100 ms replies take 4 rounds.
	s.SetReplyDelay(100 * time.Millisecond)
	defer s.SetReplyDelay(0)
	start := time.Now()
	for range workers {
		wg.Go(func() {
			if _, err := c.Ping(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if elapsed := time.Since(start); elapsed < 400*time.Millisecond || elapsed > 5*time.Second {
		t.Fatalf("16 calls of 100 ms over 4 sessions took %v, want about 400 ms", elapsed)
	}
}

func TestLargeBatchIsSplit(t *testing.T) {
	s := startServer(t, testserver.Config{})
	c := newClient(t, []string{s.Addr()}, testOptions(s))
	events := make([]core.GeoEvent, 25_000)
	for i := range events {
		events[i] = ev(uint64(i+1), lat0+int64(i)*1000, lon0)
	}
	r, err := c.Insert(context.Background(), events)
	if err != nil || !r.Committed || len(r.Results) != len(events) {
		t.Fatalf("Insert: committed %v, %d results, %v", r != nil && r.Committed, len(r.Results), err)
	}
	for i, res := range r.Results {
		if res.Index != uint32(i) || res.Code != 0 || res.TimestampNS == 0 {
			t.Fatalf("result %d: %+v", i, res)
		}
	}
	if n := s.RequestsFor(core.OpInsert); n != 3 {
		t.Fatalf("%d insert requests, want 3 chunks", n)
	}
	st, err := c.Stats(context.Background())
	if err != nil || st.EventCount != 25_000 {
		t.Fatalf("Stats: %+v %v", st, err)
	}
	lr, err := c.GetLatest(context.Background(), id(25_000))
	if err != nil || !lr.Found || lr.Event.TimestampNS != r.Results[24_999].TimestampNS {
		t.Fatalf("GetLatest: %+v %v", lr, err)
	}
}

func TestFailingChunkStopsTheBatch(t *testing.T) {
	s := startServer(t, testserver.Config{})
	opts := testOptions(s)
	opts.MaxBatchEvents = 100
	c := newClient(t, []string{s.Addr()}, opts)
	events := make([]core.GeoEvent, 250)
	for i := range events {
		events[i] = ev(uint64(i+1), lat0, lon0)
	}
	events[150].LonNano = 181_000_000_000
	r, err := c.Upsert(context.Background(), events)
	var be *BatchError
	if !errors.As(err, &be) || be.Chunk != 1 || be.Start != 100 || be.End != 200 || be.Committed != 100 {
		t.Fatalf("error %v, want a BatchError for chunk 1", err)
	}
	if code := codeOf(t, err); code != core.InvalidCoordinates.Code {
		t.Fatalf("code %d", code)
	}
	mustContain(t, err.Error(), "event 150")
	if r == nil || r.Committed || len(r.Results) != 200 || r.Results[150].Index != 150 || r.Results[150].Code != core.LonOutOfRange.Code {
		t.Fatalf("reply: %+v", r)
	}
	if n := s.RequestsFor(core.OpUpsert); n != 2 {
		t.Fatalf("%d requests, want 2 (the third chunk is not sent)", n)
	}
	if st, _ := c.Stats(context.Background()); st.EventCount != 100 {
		t.Fatalf("%d events stored, want the first chunk's 100", st.EventCount)
	}

	// A chunk that fails with an error.
	s.FailNext(1, core.InvalidArgument)
	for i := range events {
		events[i] = ev(uint64(1000+i), lat0, lon0)
	}
	r, err = c.Upsert(context.Background(), events)
	if !errors.As(err, &be) || be.Chunk != 0 || be.Committed != 0 || r.Committed || len(r.Results) != 0 {
		t.Fatalf("reply %+v, error %v", r, err)
	}
	if code := codeOf(t, err); code != core.InvalidArgument.Code {
		t.Fatalf("code %d", code)
	}
}

// The server evicts the session (MaxSessions 1): the client registers again
// and resends.
func TestSessionReregistersAfterEviction(t *testing.T) {
	s := startServer(t, testserver.Config{Replica: replica.Config{MaxSessions: 1}})
	a := newClient(t, []string{s.Addr()}, testOptions(s))
	b := newClient(t, []string{s.Addr()}, testOptions(s))
	ctx := context.Background()
	if _, err := a.Upsert(ctx, []core.GeoEvent{ev(1, lat0, lon0)}); err != nil {
		t.Fatal(err)
	}
	oldID := a.sessions[0].id
	if _, err := b.Upsert(ctx, []core.GeoEvent{ev(3, lat0, lon0)}); err != nil { // evicts a's session
		t.Fatal(err)
	}
	r, err := a.Upsert(ctx, []core.GeoEvent{ev(2, lat0, lon0)})
	if err != nil || !r.Committed {
		t.Fatalf("Upsert after eviction: %+v %v", r, err)
	}
	if s.Registers() != 3 {
		t.Fatalf("%d registers, want 3", s.Registers())
	}
	if sess := a.sessions[0]; sess.id == oldID || sess.lastReq != 1 {
		t.Fatalf("session %d request %d; want a new session whose numbers restart at 1", sess.id, sess.lastReq)
	}
	if st, err := a.Stats(ctx); err != nil || st.EventCount != 3 {
		t.Fatalf("Stats: %+v %v", st, err)
	}

	// A second SESSION_EXPIRED in the same call is returned.
	s.FailNext(2, core.SessionExpired)
	_, err = a.Upsert(ctx, []core.GeoEvent{ev(4, lat0, lon0)})
	if code := codeOf(t, err); code != core.SessionExpired.Code {
		t.Fatalf("error %v", err)
	}
	if s.Registers() != 4 {
		t.Fatalf("%d registers, want 4", s.Registers())
	}
}

func TestWrongClusterIsFinal(t *testing.T) {
	s := startServer(t, testserver.Config{})
	opts := testOptions(s)
	opts.Cluster = core.Uint128{Lo: 12345}
	c := newClient(t, []string{s.Addr()}, opts)
	// A read, without a session, carries the cluster id too.
	_, err := c.Ping(context.Background())
	if code := codeOf(t, err); code != core.WrongCluster.Code {
		t.Fatalf("error %v", err)
	}
	if s.Registers() != 0 || s.Requests() != 1 {
		t.Fatalf("%d registers, %d requests", s.Registers(), s.Requests())
	}
	_, err = c.Upsert(context.Background(), []core.GeoEvent{ev(1, lat0, lon0)})
	if code := codeOf(t, err); code != core.WrongCluster.Code {
		t.Fatalf("error %v", err)
	}
	if s.Registers() != 1 || s.Requests() != 1 {
		t.Fatalf("%d registers, %d requests", s.Registers(), s.Requests())
	}
}

func TestFailoverToNextAddress(t *testing.T) {
	s := startServer(t, testserver.Config{})
	dead := deadAddr(t)
	c := newClient(t, []string{dead, s.Addr()}, testOptions(s))
	if _, err := c.Ping(context.Background()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if s.Accepted() != 1 {
		t.Fatalf("%d connections", s.Accepted())
	}

	// 211 moves the session to the next address (here: the dead one, then
	// back), keeping its session id. The connection to the live replica,
	// which answered, stays open and carries the retry.
	s.FailNext(1, core.ClusterUnavailable)
	if _, err := c.Ping(context.Background()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if s.Accepted() != 1 || s.Registers() != 0 || s.RequestsFor(core.OpPing) != 3 {
		t.Fatalf("%d connections, %d registers, %d pings; want 1, 0 and 3", s.Accepted(), s.Registers(), s.RequestsFor(core.OpPing))
	}

	// Nothing reachable: connection errors until the retries run out.
	c2 := newClient(t, []string{dead}, testOptions(s))
	_, err := c2.Ping(context.Background())
	var re *RetryError
	var ce *connError
	if !errors.As(err, &re) || re.Attempts != 6 || !errors.As(err, &ce) {
		t.Fatalf("error %v, want a RetryError of 6 connection errors", err)
	}
}

func TestClose(t *testing.T) {
	s := startServer(t, testserver.Config{})
	c := newClient(t, []string{s.Addr()}, testOptions(s))
	if _, err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.SetReplyDelay(5 * time.Second)
	defer s.SetReplyDelay(0)
	done := make(chan error)
	go func() { _, err := c.Ping(context.Background()); done <- err }()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("interrupted call: %v", err)
	}
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Fatalf("Close took %v", elapsed)
	}
	if _, err := c.Ping(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("call after Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Second)
	for s.OpenConns() != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := s.OpenConns(); n != 0 {
		t.Fatalf("%d connections left open", n)
	}
}

func TestNewValidates(t *testing.T) {
	good := Options{Cluster: core.Uint128{Lo: 1}}
	if _, err := New(nil, good); err == nil {
		t.Fatal("no addresses accepted")
	}
	if _, err := New([]string{""}, good); err == nil {
		t.Fatal("empty address accepted")
	}
	if _, err := New([]string{"x:1"}, Options{}); err == nil {
		t.Fatal("zero cluster accepted")
	}
	if _, err := New([]string{"x:1"}, Options{Cluster: good.Cluster, PoolSize: -1}); err == nil {
		t.Fatal("negative pool size accepted")
	}
	c, err := New([]string{"x:1"}, good)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := Options{
		Cluster: good.Cluster, PoolSize: 1, MaxRetries: 5, BaseBackoff: 100 * time.Millisecond,
		MaxBackoff: 1600 * time.Millisecond, TotalTimeout: 30 * time.Second, ConnectTimeout: 5 * time.Second,
		RequestTimeout: 30 * time.Second, MaxBatchEvents: 10_000,
	}
	if got := c.opts; got.Dial != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("defaults %+v, want %+v", c.opts, want)
	}
}

func TestBackoff(t *testing.T) {
	c := &Client{opts: Options{BaseBackoff: 100 * time.Millisecond, MaxBackoff: 1600 * time.Millisecond}}
	for retry, base := range []time.Duration{100, 200, 400, 800, 1600, 1600, 1600} {
		base *= time.Millisecond
		for range 50 {
			d := c.backoff(retry)
			if d < base || d > base+50*time.Millisecond {
				t.Fatalf("retry %d: backoff %v outside [%v, %v]", retry, d, base, base+50*time.Millisecond)
			}
		}
	}
	if d := c.backoff(1000); d < 1600*time.Millisecond || d > 1650*time.Millisecond {
		t.Fatalf("retry 1000: %v", d)
	}
}

// TestCallsReuseRequestBuffers checks the request buffers' rule (see
// Client.requests): on the client's own connections the next call encodes
// its request into the buffer of the call before it, and both calls'
// events are stored; with Options.Dial no buffer is ever kept.
func TestCallsReuseRequestBuffers(t *testing.T) {
	// A collection may empty the pool, and a buffer put back on one
	// processor is not always found from another.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	s := startServer(t, testserver.Config{})
	c := newClient(t, []string{s.Addr()}, testOptions(s))
	batch := func(first uint64) []core.GeoEvent {
		evs := make([]core.GeoEvent, 1000)
		for i := range evs {
			evs[i] = ev(first+uint64(i), 38_100_000_000+int64(i), 13_360_000_000)
		}
		return evs
	}
	pooled := func(c *Client) *[]byte {
		bp, _ := c.requests.Get().(*[]byte)
		if bp != nil {
			c.requests.Put(bp)
		}
		return bp
	}
	if _, err := c.Insert(context.Background(), batch(1)); err != nil {
		t.Fatal(err)
	}
	bp := pooled(c)
	if bp == nil || cap(*bp) < 1000*core.RecordSize {
		t.Fatalf("after a 1,000-event insert the pool holds %v", bp)
	}
	first := &(*bp)[:1][0]
	r, err := c.Insert(context.Background(), batch(1001))
	if err != nil || len(r.Results) != 1000 {
		t.Fatalf("second insert: %v, %+v", err, r)
	}
	if bp2 := pooled(c); bp2 != bp || &(*bp2)[:1][0] != first {
		t.Fatal("the second insert did not encode into the first one's buffer")
	}
	for i := uint64(1); i <= 2000; i += 999 {
		if got, err := c.GetLatest(context.Background(), id(i)); err != nil || !got.Found {
			t.Fatalf("entity %d after both inserts: %v, %+v", i, err, got)
		}
	}

	// With a Conn of the caller's, nothing is pooled, whatever becomes of
	// the call.
	opts := testOptions(s)
	opts.TotalTimeout = 50 * time.Millisecond
	opts.Dial = func(ctx context.Context, addr string) (Conn, error) { return nil, errors.New("no connection here") }
	d := newClient(t, []string{s.Addr()}, opts)
	if _, err := d.Insert(context.Background(), batch(5000)); err == nil {
		t.Fatal("an insert without a connection succeeded")
	}
	if bp := pooled(d); bp != nil {
		t.Fatal("a client with Options.Dial pooled a request buffer")
	}
}

// Dead addresses and replicas that say "try another" are passed over at
// once: a call reaches the live replica behind two dead ones and one that
// answers 211 without a single backoff wait, and waits only once every
// address has failed since the last wait.
func TestDeadAddressesCostNoBackoff(t *testing.T) {
	s := startServer(t, testserver.Config{})
	opts := testOptions(s)
	opts.BaseBackoff, opts.MaxBackoff = time.Second, time.Second // a wait would show
	opts.PoolSize = 1
	c := newClient(t, []string{deadAddr(t), deadAddr(t), s.Addr()}, opts)
	start := time.Now()
	if _, err := c.Upsert(context.Background(), []core.GeoEvent{ev(1, lat0, lon0)}); err != nil {
		t.Fatalf("Upsert: %v", err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("the call took %v past two dead addresses: it waited", d)
	}
	// The live replica answers 211 once: the call moves on at once to the
	// two dead ones and back, a full round, and then waits once.
	s.FailNext(1, core.ClusterUnavailable)
	start = time.Now()
	if _, err := c.Upsert(context.Background(), []core.GeoEvent{ev(2, lat0, lon0)}); err != nil {
		t.Fatalf("Upsert: %v", err)
	}
	if d := time.Since(start); d < time.Second || d > 2500*time.Millisecond {
		t.Fatalf("the call took %v; want one backoff wait (1 s to 1.5 s) after a round of three addresses", d)
	}
}
