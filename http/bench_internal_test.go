package http

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	stdhttp "net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/geoevent/geoevent/core"
)

// The gateway's own costs per request, without sockets: parsing, rendering
// and the handler path through ServeHTTP with a backend that answers at
// once. (cmd/bench --http measures the whole server.)

func benchEvents(n int) []core.GeoEvent {
	evs := make([]core.GeoEvent, n)
	for i := range evs {
		evs[i] = core.GeoEvent{
			EntityID: core.Uint128{Hi: 1, Lo: uint64(1000 + i)}, TimestampNS: 1795325413644827789 + uint64(i),
			LatNano: 38_100_000_000 + int64(i)*1000, LonNano: 13_360_000_000 - int64(i)*1000,
		}
	}
	return evs
}

// benchInsertBody is cmd/bench's /events body.
func benchInsertBody(n int) []byte {
	b := []byte(`{"mode":"upsert","events":[`)
	for i, e := range benchEvents(n) {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"entity_id":"`...)
		b = append(b, e.EntityID.String()...)
		b = append(b, `","lat_nano":`...)
		b = strconv.AppendInt(b, e.LatNano, 10)
		b = append(b, `,"lon_nano":`...)
		b = strconv.AppendInt(b, e.LonNano, 10)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

func benchParseInsert(b *testing.B, n int) {
	body := benchInsertBody(n)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		d, err := parseJSON(body)
		if err != nil {
			b.Fatal(err)
		}
		if _, _, f := parseInsert(d, formB); f != nil {
			b.Fatal(f)
		}
	}
}

func BenchmarkParseInsert1(b *testing.B)   { benchParseInsert(b, 1) }
func BenchmarkParseInsert10k(b *testing.B) { benchParseInsert(b, 10_000) }

func BenchmarkRenderQuery80(b *testing.B) {
	r := &core.QueryResult{Events: benchEvents(80), DistancesMM: make([]uint64, 80)}
	w := &jw{}
	b.ReportAllocs()
	for b.Loop() {
		w.b = w.b[:0]
		w.queryResult(r, true)
	}
	b.SetBytes(int64(len(w.b)))
}

// BenchmarkRenderQuery80FormA: Form A events add lat and lon in degrees.
func BenchmarkRenderQuery80FormA(b *testing.B) {
	r := &core.QueryResult{Events: benchEvents(80), DistancesMM: make([]uint64, 80)}
	w := &jw{formA: true}
	b.ReportAllocs()
	for b.Loop() {
		w.b = w.b[:0]
		w.queryResult(r, true)
	}
	b.SetBytes(int64(len(w.b)))
}

func BenchmarkRenderInsert10k(b *testing.B) {
	evs := benchEvents(10_000)
	req := &core.InsertRequest{Events: evs}
	rep := &core.InsertReply{Committed: true, Results: make([]core.EventResult, len(evs))}
	for i := range rep.Results {
		rep.Results[i] = core.EventResult{Index: uint32(i), TimestampNS: evs[i].TimestampNS}
	}
	w := &jw{}
	b.ReportAllocs()
	for b.Loop() {
		w.b = w.b[:0]
		w.insertResults(rep, req, core.OpUpsert, formB)
	}
	b.SetBytes(int64(len(w.b)))
}

// instantBackend answers every operation at once with canned replies.
type instantBackend struct {
	latest *core.LatestResult
	query  *core.QueryResult
}

func (f instantBackend) Do(_ context.Context, call Call) error {
	switch op := call.Operation(); op {
	case core.OpGetLatest:
		return call.SetReply(f.latest)
	case core.OpQueryRadius:
		return call.SetReply(f.query)
	case core.OpInsert, core.OpUpsert:
		evs := call.Request().(*core.InsertRequest).Events
		rep := &core.InsertReply{Committed: true, Results: make([]core.EventResult, len(evs))}
		for i := range rep.Results {
			rep.Results[i] = core.EventResult{Index: uint32(i), TimestampNS: 1795325413644827789 + uint64(i)}
		}
		return call.SetReply(rep)
	default:
		return fmt.Errorf("instantBackend: %s", op)
	}
}

// discardWriter is a ResponseWriter that keeps only the status.
type discardWriter struct {
	h      stdhttp.Header
	status int
	n      int
}

func (w *discardWriter) Header() stdhttp.Header { return w.h }
func (w *discardWriter) WriteHeader(s int)      { w.status = s }
func (w *discardWriter) Write(p []byte) (int, error) {
	w.n += len(p)
	return len(p), nil
}

func benchServe(b *testing.B, method, target string, body []byte) {
	evs := benchEvents(80)
	g, err := New(Config{Backend: instantBackend{
		latest: &core.LatestResult{Found: true, Event: evs[0]},
		query:  &core.QueryResult{Events: evs, DistancesMM: make([]uint64, 80)},
	}})
	if err != nil {
		b.Fatal(err)
	}
	w := &discardWriter{h: stdhttp.Header{}}
	rd := strings.NewReader("")
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(string(body))
		r, _ := stdhttp.NewRequest(method, target, io.NopCloser(rd))
		r.ContentLength = int64(len(body))
		if len(body) > 0 {
			r.Header.Set("Content-Type", "application/json")
		}
		clear(w.h)
		w.status = 0
		g.ServeHTTP(w, r)
		if w.status != 200 {
			b.Fatalf("status %d", w.status)
		}
	}
}

func BenchmarkServeGetLatest(b *testing.B) {
	benchServe(b, "GET", "/entity/00000000-0000-0001-0000-0000000135b4", nil)
}

func BenchmarkServeRadius(b *testing.B) {
	benchServe(b, "POST", "/query/radius", []byte(`{"center_lat_nano":38110000000,"center_lon_nano":13360000000,"radius_mm":1000000}`))
}

func BenchmarkServeInsert1(b *testing.B) {
	benchServe(b, "POST", "/events", benchInsertBody(1))
}

// benchLoopback drives the server over a loopback connection, one request
// at a time: the server's whole cost per request (its socket calls
// included) with a backend that answers at once.
func benchLoopback(b *testing.B, method, target string, body []byte) {
	evs := benchEvents(80)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s, err := Serve(ln, Config{Backend: instantBackend{
		latest: &core.LatestResult{Found: true, Event: evs[0]},
		query:  &core.QueryResult{Events: evs, DistancesMM: make([]uint64, 80)},
	}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	ctype := ""
	if len(body) > 0 {
		ctype = "Content-Type: application/json\r\n"
	}
	req := fmt.Appendf(nil, "%s %s HTTP/1.1\r\nHost: bench\r\n%sContent-Length: %d\r\n\r\n%s", method, target, ctype, len(body), body)
	br := bufio.NewReaderSize(nc, 64<<10)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := nc.Write(req); err != nil {
			b.Fatal(err)
		}
		res, err := stdhttp.ReadResponse(br, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, res.Body); err != nil || res.StatusCode != 200 {
			b.Fatalf("status %d, %v", res.StatusCode, err)
		}
	}
}

func BenchmarkLoopbackGetLatest(b *testing.B) {
	benchLoopback(b, "GET", "/entity/00000000-0000-0001-0000-0000000135b4", nil)
}

func BenchmarkLoopbackRadius(b *testing.B) {
	benchLoopback(b, "POST", "/query/radius", []byte(`{"center_lat_nano":38110000000,"center_lon_nano":13360000000,"radius_mm":1000000}`))
}

func BenchmarkLoopbackInsert1(b *testing.B) {
	benchLoopback(b, "POST", "/events", benchInsertBody(1))
}
