package http_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	stdhttp "net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/geoevent/geoevent/core"
	ghttp "github.com/geoevent/geoevent/http"

	"github.com/geoevent/geoevent/internal/testproc"
)

// Transport concerns: the Content-Type a body needs, CORS, bodies framed
// two ways, and the budget of body bytes in flight, in HTTP/1.1 and
// HTTP/1.0.

// countingBackend is cannedBackend counting the operations it is given.
func countingBackend(ops *atomic.Int64) fakeBackend {
	canned := cannedBackend()
	return fakeBackend{func(ctx context.Context, op core.Operation, req any) (any, error) {
		ops.Add(1)
		return canned.do(ctx, op, req)
	}}
}

// readAll reads every answer on nc until the server closes it, and
// reports whether it did close within the deadline.
func readAll(t *testing.T, nc net.Conn, method string) (answers []*stdhttp.Response, closed bool) {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(nc)
	for {
		res, err := stdhttp.ReadResponse(br, &stdhttp.Request{Method: method})
		if err != nil {
			var ne net.Error
			timeout := errorsAs(err, &ne) && ne.Timeout()
			return answers, !timeout
		}
		body, _ := io.ReadAll(res.Body)
		res.Body = io.NopCloser(bytes.NewReader(body))
		answers = append(answers, res)
	}
}

func errorsAs(err error, target *net.Error) bool {
	ne, ok := err.(net.Error)
	if ok {
		*target = ne
	}
	return ok
}

// decodeError returns a JSON error answer's code and message, in either form.
func decodeError(t *testing.T, res *stdhttp.Response) (code int, msg string, formA bool) {
	t.Helper()
	body, _ := io.ReadAll(res.Body)
	var v struct {
		ErrorCode *int   `json:"error_code"`
		Message   string `json:"message"`
		Error     *struct {
			Code    int    `json:"code"`
			Details string `json:"details"`
		} `json:"error"`
	}
	if res.Header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &v) != nil {
		t.Fatalf("not a JSON error: %d %s", res.StatusCode, body)
	}
	switch {
	case v.ErrorCode != nil:
		return *v.ErrorCode, v.Message, true
	case v.Error != nil:
		return v.Error.Code, v.Error.Details, false
	}
	t.Fatalf("not a JSON error: %s", body)
	return 0, "", false
}

// Both protocol versions the server reads.
var paths = []struct{ name, proto, host string }{
	{"HTTP/1.1", "HTTP/1.1", "Host: x\r\n"},
	{"HTTP/1.0", "HTTP/1.0", ""},
}

// A request with a body must declare it application/json: any other type,
// or none, is 415 in the request's form and reaches no operation; an
// empty body needs no type.
func TestContentTypeRequiredForBodies(t *testing.T) {
	var ops atomic.Int64
	addr := testproc.ServeGateway(t, ghttp.Config{Backend: countingBackend(&ops)}).Addr().String()
	event := `{"events":[{"entity_id":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","lat_nano":1,"lon_nano":2}]}`
	for _, p := range paths {
		for _, c := range []struct {
			target, ctype string // ctype "": no header
			want          string // the message names it
		}{
			{"/events", "text/plain", `"text/plain"`},
			{"/events?form=a", "text/plain;charset=UTF-8", `"text/plain;charset=UTF-8"`},
			{"/delete", "application/x-www-form-urlencoded", "x-www-form-urlencoded"},
			{"/events", "multipart/form-data; boundary=x", "multipart/form-data"},
			{"/events", "", "no Content-Type"},
			{"/events", "application/json-seq", "application/json-seq"},
		} {
			h := p.host
			if c.ctype != "" {
				h += "Content-Type: " + c.ctype + "\r\n"
			}
			req := fmt.Sprintf("POST %s %s\r\n%sContent-Length: %d\r\n\r\n%s", c.target, p.proto, h, len(event), event)
			res := rawRoundTrip(t, addr, req, 1)[0]
			if res.StatusCode != 415 {
				t.Errorf("%s: %q: status %d", p.name, c.ctype, res.StatusCode)
				continue
			}
			code, msg, formA := decodeError(t, res)
			if code != 1 || formA != strings.Contains(c.target, "form=a") || !strings.Contains(msg, c.want) || !strings.Contains(msg, "application/json") {
				t.Errorf("%s: %q: code %d, Form A %v, message %q", p.name, c.ctype, code, formA, msg)
			}
		}
		for _, ctype := range []string{"application/json", "Application/JSON; charset=utf-8", " application/json ;charset=utf-8"} {
			req := fmt.Sprintf("POST /events %s\r\n%sContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s", p.proto, p.host, ctype, len(event), event)
			if res := rawRoundTrip(t, addr, req, 1)[0]; res.StatusCode != 200 {
				t.Errorf("%s: %q: %s", p.name, ctype, describe(res))
			}
		}
		// No body, no type needed.
		req := fmt.Sprintf("POST /cleanup/expired %s\r\n%sContent-Length: 0\r\n\r\n", p.proto, p.host)
		if res := rawRoundTrip(t, addr, req, 1)[0]; res.StatusCode == 415 {
			t.Errorf("%s: an empty body needs a type: %s", p.name, describe(res))
		}
	}
	// A chunked body needs the type too.
	req := "POST /events HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n" +
		fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(event), event)
	if res := rawRoundTrip(t, addr, req, 1)[0]; res.StatusCode != 415 {
		t.Errorf("chunked text/plain: %s", describe(res))
	}
	// 6 accepted JSON posts (3 types, 2 paths) and 2 cleanups.
	if n := ops.Load(); n != 8 {
		t.Errorf("%d operations reached the backend, want 8 (the refused requests must reach none)", n)
	}
}

// A cross-site text/plain POST -- what a web page can make a browser send
// without a preflight -- writes nothing to a real replica.
func TestCrossSitePlainPostWritesNothing(t *testing.T) {
	e := newEnv(t)
	id := newID()
	body := fmt.Sprintf(`{"events":[{"entity_id":%q,"lat_nano":1,"lon_nano":2}]}`, id)
	req, err := stdhttp.NewRequest("POST", e.base+"/events", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("Origin", "http://evil.example")
	res, err := stdhttp.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 415 || res.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("text/plain POST: %d %v", res.StatusCode, res.Header)
	}
	if r := e.req("GET", "/entity/"+id+"?form=a", nil); r.status != 404 {
		t.Fatalf("the refused event was written: %d %s", r.status, r.raw)
	}
}

func TestCORS(t *testing.T) {
	const app = "http://app.example:3000"
	allowing := testproc.ServeGateway(t, ghttp.Config{Backend: cannedBackend(), CORSOrigins: []string{"https://other.example", app + "/"}}).Addr().String()
	closed := testproc.ServeGateway(t, ghttp.Config{Backend: cannedBackend()}).Addr().String()
	anyOrigin := testproc.ServeGateway(t, ghttp.Config{Backend: cannedBackend(), CORSOrigins: []string{"*"}}).Addr().String()
	corsHeaders := func(res *stdhttp.Response) string {
		var b strings.Builder
		for _, h := range []string{"Access-Control-Allow-Origin", "Vary", "Access-Control-Allow-Methods", "Access-Control-Allow-Headers", "Access-Control-Max-Age"} {
			if v := res.Header.Values(h); len(v) > 0 {
				fmt.Fprintf(&b, "%s: %s\n", h, strings.Join(v, ","))
			}
		}
		return b.String()
	}
	radius := `{"center_lat_nano":38110000000,"center_lon_nano":13360000000,"radius_mm":1000000}`
	for _, p := range paths {
		post := func(origin string) string {
			return fmt.Sprintf("POST /query/radius %s\r\n%sOrigin: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", p.proto, p.host, origin, len(radius), radius)
		}
		preflight := func(target, origin string) string {
			return fmt.Sprintf("OPTIONS %s %s\r\n%sOrigin: %s\r\nAccess-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: content-type\r\n\r\n", target, p.proto, p.host, origin)
		}
		get := func(target, origin string) string {
			return fmt.Sprintf("GET %s %s\r\n%sOrigin: %s\r\n\r\n", target, p.proto, p.host, origin)
		}
		allowed := "Access-Control-Allow-Origin: " + app + "\nVary: Origin\n"
		for _, c := range []struct {
			addr, req string
			status    int
			headers   string
		}{
			// An allowed origin: the answers carry it, as do errors.
			{allowing, post(app), 200, allowed},
			{allowing, post("HTTP://APP.example:3000"), 200, "Access-Control-Allow-Origin: HTTP://APP.example:3000\nVary: Origin\n"},
			{allowing, get("/entity/6ba7b810-9dad-11d1-80b4-00c04fd430c8", app), 200, allowed},
			{allowing, get("/nope", app), 404, allowed},
			{allowing, preflight("/events", app), 204, allowed + "Access-Control-Allow-Methods: POST\nAccess-Control-Allow-Headers: Content-Type\nAccess-Control-Max-Age: 600\n"},
			{allowing, preflight("/entity/x?form=a", app), 204, allowed + "Access-Control-Allow-Methods: GET, HEAD\nAccess-Control-Allow-Headers: Content-Type\nAccess-Control-Max-Age: 600\n"},
			// Another origin: nothing, and its preflight is refused.
			{allowing, post("http://evil.example"), 200, ""},
			{allowing, post("http://app.example:3001"), 200, ""},
			{allowing, preflight("/events", "http://evil.example"), 403, ""},
			// By default no origin is allowed.
			{closed, post(app), 200, ""},
			{closed, preflight("/events", app), 403, ""},
			{closed, preflight("/nope", app), 403, ""},
			// "*" allows any.
			{anyOrigin, preflight("/delete", "http://evil.example"), 204, "Access-Control-Allow-Origin: http://evil.example\nVary: Origin\nAccess-Control-Allow-Methods: POST\nAccess-Control-Allow-Headers: Content-Type\nAccess-Control-Max-Age: 600\n"},
			{anyOrigin, post("http://evil.example"), 200, "Access-Control-Allow-Origin: http://evil.example\nVary: Origin\n"},
		} {
			res := rawRoundTrip(t, c.addr, c.req, 1)[0]
			if res.StatusCode != c.status || corsHeaders(res) != c.headers {
				t.Errorf("%s: %.100q:\n%d\n%s\nwant %d\n%s", p.name, c.req, res.StatusCode, corsHeaders(res), c.status, c.headers)
				continue
			}
			switch res.StatusCode {
			case 204:
				if res.Header.Get("Content-Length") != "" || res.ContentLength > 0 {
					t.Errorf("%s: a 204 with a body: %s", p.name, describe(res))
				}
			case 403:
				if code, msg, _ := decodeError(t, res); code != 1 || !strings.Contains(msg, "not allowed") {
					t.Errorf("%s: preflight refused with %d %q", p.name, code, msg)
				}
			}
		}
	}
	for _, bad := range []string{"app.example", "http://app.example/path", "", "http://a.example,http://b.example"} {
		if _, err := ghttp.New(ghttp.Config{Backend: cannedBackend(), CORSOrigins: []string{bad}}); err == nil {
			t.Errorf("CORS origin %q accepted", bad)
		}
	}
}

// Request smuggling (RFC 9112 sections 6.1 and 6.3): a request that frames
// its body two ways is answered once, and the bytes after it (here a
// smuggled GET /ping) are never served as another request. Content-Length
// with Transfer-Encoding is read as chunked and closes the connection; two
// different Content-Lengths are 400 (net/http's); Transfer-Encoding in
// HTTP/1.0 is ignored, and an HTTP/1.0 request's connection closes after
// its answer. Equal Content-Lengths are one length, and what follows is a
// request of its own.
func TestRequestSmugglingRefused(t *testing.T) {
	var ops atomic.Int64
	addr := testproc.ServeGateway(t, ghttp.Config{Backend: countingBackend(&ops)}).Addr().String()
	event := `{"events":[{"entity_id":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","lat_nano":1,"lon_nano":2}]}`
	chunked := fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(event), event)
	smuggled := "GET /ping HTTP/1.1\r\nHost: x\r\n\r\n"
	cl := func(n int) string { return "Content-Length: " + fmt.Sprint(n) + "\r\n" }
	te := "Transfer-Encoding: chunked\r\n"
	post := "POST /events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
	for _, c := range []struct {
		req     string
		answers []int
		ops     int64
		closed  bool
	}{
		{post + cl(len(chunked)) + te + "\r\n" + chunked + smuggled, []int{200}, 1, true},
		{post + te + "content-length: 5\r\n\r\n" + chunked + smuggled, []int{200}, 1, true},
		{post + cl(0) + te + "\r\n" + chunked + smuggled, []int{200}, 1, true},
		{post + cl(3) + cl(len(event)) + "\r\n" + event + smuggled, []int{400}, 0, true},
		{"POST /events HTTP/1.0\r\nContent-Type: application/json\r\n" + te + "\r\n" + chunked + smuggled, []int{400}, 0, true},
		{"POST /events HTTP/1.0\r\nConnection: keep-alive\r\nContent-Type: application/json\r\n" + te + "\r\n" + chunked + smuggled, []int{400}, 0, true},
		{"POST /events HTTP/1.2\r\nHost: x\r\nContent-Type: application/json\r\n" + cl(5) + te + "\r\n" + chunked + smuggled, []int{200}, 1, true},
		{"POST /./events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + cl(len(chunked)) + te + "\r\n" + chunked + smuggled, []int{307}, 0, true},
		// A chunked request after another on the connection.
		{"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n" + post + cl(5) + te + "\r\n" + chunked + smuggled, []int{200, 200}, 2, true},
		// Equal lengths: one body, then the next request (which closes).
		{post + cl(len(event)) + cl(len(event)) + "\r\n" + event + "GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", []int{200, 200}, 2, true},
	} {
		before := ops.Load()
		nc := dialFor(t, addr, 5*time.Second)
		io.WriteString(nc, c.req)
		answers, closed := readAll(t, nc, "POST")
		nc.Close()
		var got []int
		for _, a := range answers {
			got = append(got, a.StatusCode)
		}
		if n := ops.Load() - before; fmt.Sprint(got) != fmt.Sprint(c.answers) || closed != c.closed || n != c.ops {
			t.Errorf("%.120q: answers %v, closed %v, %d operations; want %v, closed %v, %d", c.req, got, closed, n, c.answers, c.closed, c.ops)
		}
	}
}

// The body budget: bodies in flight beyond it wait, then get 503 with 212
// CLUSTER_BUSY; their bytes come back when they end.
func TestBodyBudget(t *testing.T) {
	const budget = 1 << 20
	var ops atomic.Int64
	addr := testproc.ServeGateway(t, ghttp.Config{Backend: countingBackend(&ops), BodyBudget: budget}).Addr().String()
	body := func(n int) string {
		head := `{"center_lat_nano":38110000000,"center_lon_nano":13360000000,"radius_mm":1000000`
		return head + strings.Repeat(" ", n-len(head)-1) + "}"
	}
	// Three slow bodies of 400 KiB each, on both paths: each sends all
	// but its last byte and waits. Each holds its declared length and a
	// byte, so two fit in 1 MiB and the third does not.
	const size = 400 << 10
	var conns []net.Conn
	for i, proto := range []string{"HTTP/1.1", "HTTP/1.0", "HTTP/1.1"} {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		b := body(size)
		fmt.Fprintf(nc, "POST /query/radius %s\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", proto, len(b), b[:len(b)-1])
		conns = append(conns, nc)
		if i < 2 {
			time.Sleep(100 * time.Millisecond) // read into the budget before the next
		}
	}
	// The third waits for room (a second), then is refused.
	nc := conns[2]
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	res, err := stdhttp.ReadResponse(bufio.NewReader(nc), nil)
	if err != nil {
		t.Fatal(err)
	}
	if code, msg, _ := decodeError(t, res); res.StatusCode != 503 || code != 212 || !strings.Contains(msg, "retry") {
		t.Fatalf("the body over the budget: %d, code %d %q", res.StatusCode, code, msg)
	}
	// The first two finish and pass.
	var wg sync.WaitGroup
	for _, nc := range conns[:2] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			io.WriteString(nc, "}")
		}()
	}
	wg.Wait()
	for i, nc := range conns[:2] {
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		res, err := stdhttp.ReadResponse(bufio.NewReader(nc), nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != 200 {
			t.Errorf("slow body %d: %s", i, describe(res))
		}
	}
	// With their bytes back, new requests pass, concurrently too.
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := body(size)
			res := rawRoundTrip(t, addr, fmt.Sprintf("POST /query/radius HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(b), b), 1)[0]
			if res.StatusCode != 200 {
				t.Errorf("after the slow bodies: %s", describe(res))
			}
		}()
	}
	wg.Wait()
	// A body larger than the whole budget is refused at once.
	start := time.Now()
	b := body(budget + 10)
	res = rawRoundTrip(t, addr, fmt.Sprintf("POST /query/radius HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(b), b), 1)[0]
	if res.StatusCode != 503 || time.Since(start) > 900*time.Millisecond {
		t.Errorf("a body over the whole budget: %d after %v", res.StatusCode, time.Since(start))
	}
}

// Every operation that takes a body documents the 415 of a body not
// declared JSON.
func TestOpenAPIDocuments415(t *testing.T) {
	doc, _ := loadOpenAPI(t)
	n := 0
	for path, item := range doc.Paths {
		for m, op := range item {
			var o struct {
				RequestBody any            `json:"requestBody"`
				Responses   map[string]any `json:"responses"`
			}
			json.Unmarshal(op, &o)
			if o.RequestBody != nil {
				n++
				if o.Responses["415"] == nil {
					t.Errorf("%s %s takes a body and documents no 415", m, path)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no operation takes a body")
	}
	if doc.Components.Responses["UnsupportedMediaType"] == nil {
		t.Fatal("no UnsupportedMediaType response")
	}
}

// A connection idle for a while after a large request drops the buffers
// it grew (awaitRequest) and serves its next requests as before.
func TestIdleConnectionAfterLargeRequest(t *testing.T) {
	t.Parallel()
	addr := testproc.ServeGateway(t, ghttp.Config{Backend: cannedBackend()}).Addr().String()
	event := `{"entity_id":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","lat_nano":1,"lon_nano":2}`
	large := `{"events":[` + strings.Repeat(event+",", 999) + event + `]}`
	post := func(body string) string {
		return fmt.Sprintf("POST /events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	}
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	br := bufio.NewReader(nc)
	roundTrip := func(req string) string {
		t.Helper()
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(nc, req); err != nil {
			t.Fatal(err)
		}
		res, err := stdhttp.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		return describe(res)
	}
	first := roundTrip(post(large))
	if !strings.Contains(first, "HTTP/1.1 200") || !strings.Contains(first, `"index":999`) {
		t.Fatalf("large insert: %.300s", first)
	}
	time.Sleep(1300 * time.Millisecond)
	if again := roundTrip(post(large)); again != first {
		t.Errorf("after idling: %.300s", again)
	}
	small := roundTrip(post(`{"events":[` + event + `]}`))
	if !strings.Contains(small, "HTTP/1.1 200") || strings.Contains(small, `"index":1`) {
		t.Errorf("small insert after idling: %.300s", small)
	}
}
