package http_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	stdhttp "net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/geoevent/geoevent/core"
	ghttp "github.com/geoevent/geoevent/http"

	"github.com/geoevent/geoevent/internal/testproc"
)

// The server over loopback connections: pipelining, shutdown, and the
// requests of one connection answered as each alone.

// cannedBackend answers from fixed data, so that two servers answer alike.
func cannedBackend() fakeBackend {
	e := core.GeoEvent{EntityID: core.Uint128{Hi: 0x6ba7b8109dad11d1, Lo: 0x80b400c04fd430c8}, TimestampNS: 1795325413644827789,
		LatNano: 38_115_000_000, LonNano: 13_361_000_000, GroupID: 1 << 60}
	return fakeBackend{func(_ context.Context, op core.Operation, req any) (any, error) {
		switch op {
		case core.OpGetLatest:
			if *req.(*core.Uint128) == e.EntityID {
				return &core.LatestResult{Found: true, Event: e}, nil
			}
			return &core.LatestResult{}, nil
		case core.OpQueryRadius, core.OpEntityHistory:
			return &core.QueryResult{Events: []core.GeoEvent{e, e}, DistancesMM: []uint64{1, 2}}, nil
		case core.OpInsert, core.OpUpsert:
			evs := req.(*core.InsertRequest).Events
			r := &core.InsertReply{Committed: true}
			for i := range evs {
				r.Results = append(r.Results, core.EventResult{Index: uint32(i), TimestampNS: 1795325413644827789 + uint64(i)})
			}
			return r, nil
		case core.OpPing:
			return &core.PingReply{Pong: true}, nil
		}
		return nil, core.Errorf(core.InternalError, "canned: %s", op)
	}}
}

// rawRoundTrip writes req (one or more requests) on a new connection to
// addr and reads n answers.
func rawRoundTrip(t *testing.T, addr, req string, n int) []*stdhttp.Response {
	t.Helper()
	nc := dialFor(t, addr, 20*time.Second)
	defer nc.Close()
	if _, err := io.WriteString(nc, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(nc)
	var out []*stdhttp.Response
	for range n {
		method := "GET"
		if strings.HasPrefix(req, "HEAD ") {
			method = "HEAD"
		}
		res, err := stdhttp.ReadResponse(br, &stdhttp.Request{Method: method})
		if err != nil {
			t.Fatalf("%q: %v", req, err)
		}
		body, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatalf("%q: reading the body: %v", req, err)
		}
		res.Body = io.NopCloser(bytes.NewReader(body))
		out = append(out, res)
	}
	return out
}

// dialFor opens a connection to addr that gives up after d.
func dialFor(t *testing.T, addr string, d time.Duration) net.Conn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	nc.SetDeadline(time.Now().Add(d))
	return nc
}

// describe renders an answer without its Date, for comparisons.
func describe(res *stdhttp.Response) string {
	body, _ := io.ReadAll(res.Body)
	res.Body = io.NopCloser(bytes.NewReader(body))
	var b strings.Builder
	fmt.Fprintf(&b, "%s %d\n", res.Proto, res.StatusCode)
	for _, h := range []string{"Content-Type", "Content-Length", "Cache-Control", "Allow", "Location", "Connection"} {
		if v := res.Header.Values(h); len(v) > 0 {
			fmt.Fprintf(&b, "%s: %s\n", h, strings.Join(v, ","))
		}
	}
	if res.Close {
		b.WriteString("(closes)\n")
	}
	fmt.Fprintf(&b, "\n%s", body)
	return b.String()
}

// Requests sent back to back on one connection are answered in order, a
// body the handler does not read is skipped, and the connection stays
// open; Connection: close closes it after the answer.
func TestPipelining(t *testing.T) {
	addr := testproc.ServeGateway(t, ghttp.Config{Backend: cannedBackend()}).Addr().String()
	const id = "6ba7b810-9dad-11d1-80b4-00c04fd430c8"
	reqs := "GET /entity/" + id + " HTTP/1.1\r\nHost: x\r\n\r\n" +
		"GET /ping HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n0123456789" + // a body GET /ping does not read
		"POST /query/radius HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}" +
		"GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
	res := rawRoundTrip(t, addr, reqs, 4)
	for i, want := range []int{200, 200, 400, 200} {
		if res[i].StatusCode != want {
			t.Errorf("answer %d: %s", i, describe(res[i]))
		}
	}
	if !res[3].Close {
		t.Errorf("the last answer does not say Connection: close")
	}
}

// blockingBackend holds every operation until release is closed.
type blockingBackend struct {
	started chan struct{}
	release chan struct{}
}

func (b blockingBackend) Do(ctx context.Context, call ghttp.Call) error {
	b.started <- struct{}{}
	<-b.release
	return call.SetReply(&core.PingReply{Pong: true})
}

// Shutdown closes idle connections at once and lets a request in flight
// finish and be answered.
func TestShutdownWaitsForRequestsInFlight(t *testing.T) {
	b := blockingBackend{started: make(chan struct{}, 1), release: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gw, err := ghttp.Serve(ln, ghttp.Config{Backend: b})
	if err != nil {
		t.Fatal(err)
	}
	addr := gw.Addr().String()
	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	var got *stdhttp.Response
	go func() {
		defer wg.Done()
		got = rawRoundTrip(t, addr, "GET /ping HTTP/1.1\r\nHost: x\r\n\r\n", 1)[0]
	}()
	<-b.started
	shut := make(chan error, 1)
	go func() { shut <- gw.Shutdown(context.Background()) }()
	// The idle connection is closed.
	idle.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := idle.Read(make([]byte, 1)); err == nil {
		t.Fatalf("the idle connection got %d bytes", n)
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned with a request in flight: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(b.release)
	wg.Wait()
	if got.StatusCode != 200 || !got.Close {
		t.Fatalf("the request in flight: %s", describe(got))
	}
	select {
	case err := <-shut:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown hangs")
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Fatal("still accepting after Shutdown")
	}
}

// Long requests and answers followed by short ones, on one connection,
// are answered exactly as each is alone on a connection of its own.
func TestRequestsOfOneConnectionAnsweredAsAlone(t *testing.T) {
	addr := testproc.ServeGateway(t, ghttp.Config{Backend: cannedBackend()}).Addr().String()
	const id = "6ba7b810-9dad-11d1-80b4-00c04fd430c8"
	post := func(target, body string) string {
		return "POST " + target + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body)
	}
	event := `{"entity_id":"` + id + `","lat_nano":1,"lon_nano":2}`
	many := `{"events":[` + strings.Repeat(event+",", 40) + event + `]}`
	reqs := []string{
		post("/events", many),
		post("/events", `{"events":[`+event+`]}`),
		post("/events", `{"events":[`+event+`]`), // the earlier body's "}" must not complete it
		post("/query/radius", `{"center_lat_nano":38110000000,"center_lon_nano":13360000000,"radius_mm":1000000}`),
		"GET /entity/" + id + " HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /entity/00000000-0000-0000-0000-000000000001 HTTP/1.1\r\nHost: y\r\n\r\n",
		post("/events", ``),
		post("/query/radius?form=a", `{"center_lat":1,"center_lon":1,"radius_m":5}`),
		"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n",
	}
	together := rawRoundTrip(t, addr, strings.Join(reqs, ""), len(reqs))
	for i, req := range reqs {
		alone := describe(rawRoundTrip(t, addr, req, 1)[0])
		if got := describe(together[i]); got != alone {
			t.Errorf("request %d on a shared connection:\n%s\nalone:\n%s", i, got, alone)
		}
	}
}

// A request that timed out leaves the connection's next request a live
// context with a deadline of its own.
func TestTimeoutThenNextRequest(t *testing.T) {
	slow := core.Uint128{Hi: 1}
	var deadlines []time.Time
	var mu sync.Mutex
	b := fakeBackend{func(ctx context.Context, op core.Operation, req any) (any, error) {
		dl, ok := ctx.Deadline()
		if !ok {
			return nil, core.Errorf(core.InternalError, "no deadline")
		}
		mu.Lock()
		deadlines = append(deadlines, dl)
		mu.Unlock()
		if err := ctx.Err(); err != nil {
			return nil, core.Errorf(core.InternalError, "context done at the start: %v", err)
		}
		if op == core.OpGetLatest && *req.(*core.Uint128) == slow {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return &core.PingReply{Pong: true}, nil
	}}
	addr := testproc.ServeGateway(t, ghttp.Config{Backend: b, RequestTimeout: 100 * time.Millisecond}).Addr().String()
	res := rawRoundTrip(t, addr, "GET /entity/"+slow.String()+" HTTP/1.1\r\nHost: x\r\n\r\n"+
		"GET /ping HTTP/1.1\r\nHost: x\r\n\r\nGET /ping HTTP/1.1\r\nHost: x\r\n\r\n", 3)
	for i, want := range []int{504, 200, 200} {
		if res[i].StatusCode != want {
			t.Errorf("answer %d: %s", i, describe(res[i]))
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(deadlines) != 3 || !deadlines[1].After(deadlines[0]) || !deadlines[2].After(deadlines[1]) {
		t.Errorf("deadlines %v", deadlines)
	}
}
