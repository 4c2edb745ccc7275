package http_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	stdhttp "net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ghttp "github.com/geoevent/geoevent/http"
)

// FuzzFastPathAgainstNetHTTP sends the same bytes -- one request or several
// back to back, well formed or not -- to the server, whose fast path reads
// plain requests and hands any other connection to net/http, and to a
// net/http server over a gateway of the same backend, each on a connection
// of its own, and compares what comes back: the answers' status, the
// headers the API sets and body, whether the connection closes, and how
// many operations reached the backend.
//
// The one difference allowed is the fast path's refusal of a request whose
// body is framed two ways (Content-Length with Transfer-Encoding, two
// Content-Lengths, Transfer-Encoding in HTTP/1.0, or a chunked request
// after the first on a connection handed over), which net/http reads by
// Transfer-Encoding alone: 400 citing RFC 9112, the connection closed, and
// nothing after it served.
func FuzzFastPathAgainstNetHTTP(f *testing.F) {
	var fastOps, stdOps atomic.Int64
	fast := serveGateway(f, ghttp.Config{Backend: countingBackend(&fastOps)}).Addr().String()
	g, err := ghttp.New(ghttp.Config{Backend: countingBackend(&stdOps)})
	if err != nil {
		f.Fatal(err)
	}
	std := httptest.NewServer(g)
	f.Cleanup(std.Close)
	stdAddr := strings.TrimPrefix(std.URL, "http://")

	for _, s := range fastPathSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		methods, malformed := requestsIn(in)
		want := len(methods)
		if malformed {
			want++ // an error answer, or none
		}
		f0, s0 := fastOps.Load(), stdOps.Load()
		fa, fClosed := exchange(t, fast, in, methods, want)
		sa, sClosed := exchange(t, stdAddr, in, methods, want)
		fn, sn := fastOps.Load()-f0, stdOps.Load()-s0
		for i, a := range fa {
			if isRefusal(a) {
				if i != len(fa)-1 || !fClosed {
					t.Fatalf("%q: the fast path's refusal (answer %d of %d) did not end the connection", in, i+1, len(fa))
				}
				if fn > sn {
					t.Fatalf("%q: %d operations on the fast path, %d on net/http, which served the refused request", in, fn, sn)
				}
				return
			}
			if i >= len(sa) {
				t.Fatalf("%q: answer %d from the fast path only:\n%s", in, i+1, describe(a))
			}
			if d, s := describe(a), describe(sa[i]); d != s {
				t.Fatalf("%q: answer %d:\nfast path:\n%s\nnet/http:\n%s", in, i+1, d, s)
			}
		}
		if len(fa) != len(sa) || fClosed != sClosed || fn != sn {
			t.Fatalf("%q: fast path %d answers (closed %v, %d operations), net/http %d (closed %v, %d operations)",
				in, len(fa), fClosed, fn, len(sa), sClosed, sn)
		}
	})
}

// isRefusal reports whether a is the fast path's answer to a body framed
// two ways.
func isRefusal(a *stdhttp.Response) bool {
	if a.StatusCode != stdhttp.StatusBadRequest {
		return false
	}
	body, _ := io.ReadAll(a.Body)
	a.Body = io.NopCloser(bytes.NewReader(body))
	return bytes.Contains(body, []byte("RFC 9112"))
}

// requestsIn returns the methods of the whole requests net/http's parser
// finds at the start of in, up to one that closes the connection, and
// whether a malformed one follows them (which the servers answer with an
// error, or by closing); a request cut short, or a rest without a line
// end (which the servers wait to see more of), is not counted.
func requestsIn(in []byte) (methods []string, malformed bool) {
	rd := bytes.NewReader(in)
	br := bufio.NewReader(rd)
	for {
		rest := in[len(in)-rd.Len()-br.Buffered():]
		req, err := stdhttp.ReadRequest(br)
		switch {
		case err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF):
			return methods, false
		case err != nil:
			return methods, bytes.IndexByte(rest, '\n') >= 0
		}
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			return methods, !errors.Is(err, io.ErrUnexpectedEOF)
		}
		methods = append(methods, req.Method)
		if req.Close {
			return methods, false
		}
	}
}

// exchange writes in on a new connection to addr and reads up to n
// answers (answer i to methods[i]); closed reports whether the server
// closed the connection, or said it would, before a read timed out.
func exchange(t *testing.T, addr string, in []byte, methods []string, n int) (answers []*stdhttp.Response, closed bool) {
	t.Helper()
	nc := dialFor(t, addr, 5*time.Second)
	defer nc.Close()
	go nc.Write(in) // the server may close before it has read all
	br := bufio.NewReader(nc)
	for len(answers) < n {
		method := "GET"
		if len(answers) < len(methods) {
			method = methods[len(answers)]
		}
		res, err := stdhttp.ReadResponse(br, &stdhttp.Request{Method: method})
		if err != nil {
			var ne net.Error
			return answers, !(errors.As(err, &ne) && ne.Timeout())
		}
		body, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatalf("%q: reading answer %d: %v", in, len(answers)+1, err)
		}
		res.Body = io.NopCloser(bytes.NewReader(body))
		answers = append(answers, res)
		if res.Close {
			return answers, true
		}
	}
	return answers, false
}

// fastPathSeeds are requests of each kind the fast path serves, hands over
// or refuses, and the framings request smuggling plays on.
func fastPathSeeds() []string {
	const id = "6ba7b810-9dad-11d1-80b4-00c04fd430c8"
	event := `{"events":[{"entity_id":"` + id + `","lat_nano":1,"lon_nano":2}]}`
	radius := `{"center_lat_nano":38110000000,"center_lon_nano":13360000000,"radius_mm":1000000}`
	chunked := fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(event), event)
	ping := "GET /ping HTTP/1.1\r\nHost: x\r\n\r\n"
	post := func(target, headers, body string) string {
		return "POST " + target + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + headers + "\r\n" + body
	}
	cl := func(body string) string { return fmt.Sprintf("Content-Length: %d\r\n", len(body)) }
	te := "Transfer-Encoding: chunked\r\n"
	return []string{
		// Served by the fast path, alone and back to back.
		ping,
		"GET /entity/" + id + "?form=a HTTP/1.1\r\nHost: x\r\n\r\n",
		"HEAD /entity/" + id + " HTTP/1.1\r\nHost: x\r\n\r\n",
		"DELETE /events HTTP/1.1\r\nHost: x\r\n\r\n",
		post("/query/radius", cl(radius), radius),
		post("/events", cl(event), event) + ping,
		post("/events", cl(event)+"Connection: close\r\n", event) + ping,
		post("/events", "Content-Length: 3\r\n", event), // the rest is the next request
		post("/query/radius", "Content-Length: 0\r\n", ""),
		ping + "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n" + ping,
		"GET /ping HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello" + ping,
		"OPTIONS /events HTTP/1.1\r\nHost: x\r\nOrigin: http://a\r\nAccess-Control-Request-Method: POST\r\n\r\n",
		// Handed over to net/http.
		"GET /ping HTTP/1.0\r\n\r\n",
		"GET /ping HTTP/1.1\r\n\r\n",
		"GET /ping HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
		"GET /a/../ping HTTP/1.1\r\nHost: x\r\n\r\n" + ping,
		"GET http://x/ping HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /ping?q=a b HTTP/1.1\r\nHost: x\r\n\r\n",
		post("/events", te, chunked) + ping,
		post("/events", "Expect: 100-continue\r\n"+cl(event), event),
		"GET /ping HTTP/1.1\r\nHost: x\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n",
		// Bare LF line ends, alone or mixed with CRLF.
		"GET /ping HTTP/1.1\nHost: x\n\n",
		"GET /ping HTTP/1.1\r\nHost: x\n\r\n",
		"POST /events HTTP/1.1\nHost: x\nContent-Type: application/json\n" + cl(event) + "\n" + event,
		// obs-fold: a header line continued on the next, in and around the
		// framing headers.
		"GET /ping HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n b\r\n\r\n",
		post("/events", "Content-Length:\r\n "+fmt.Sprint(len(event))+"\r\n", event),
		post("/events", "Transfer-Encoding:\r\n chunked\r\n", chunked),
		post("/events", cl(event)+"X: a\r\n Transfer-Encoding: chunked\r\n", event),
		post("/events", cl(event)+" Transfer-Encoding: chunked\r\n", event),
		// Content-Length with Transfer-Encoding, either order, smuggling a
		// request after the body.
		post("/events", cl(chunked)+te, chunked+ping),
		post("/events", te+"content-length: 5\r\n", chunked+ping),
		post("/events", "Content-Length: 0\r\n"+te, chunked+ping),
		post("/events", cl(event)+"Transfer-Encoding: identity\r\n", event+ping),
		"POST /events HTTP/1.0\r\nContent-Type: application/json\r\n" + te + "\r\n" + chunked + ping,
		// A chunked request after another on a connection handed over.
		"GET /./ping HTTP/1.1\r\nHost: x\r\n\r\n" + post("/events", te, chunked) + ping,
		// Two Content-Lengths, equal or not, in one header or two.
		post("/events", cl(event)+cl(event), event+ping),
		post("/events", "Content-Length: 3\r\n"+cl(event), event+ping),
		post("/events", fmt.Sprintf("Content-Length: %d, %d\r\n", len(event), len(event)), event+ping),
		// Content-Lengths that are not plain digits.
		post("/events", fmt.Sprintf("Content-Length: +%d\r\n", len(event)), event),
		post("/events", fmt.Sprintf("Content-Length: 0%d\r\n", len(event)), event),
		post("/events", fmt.Sprintf("Content-Length: %#x\r\n", len(event)), event),
		post("/events", "Content-Length: -1\r\n", event),
		post("/events", "Content-Length: 99999999999999999999\r\n", event),
		post("/events", fmt.Sprintf("Content-Length : %d\r\n", len(event)), event),
		post("/events", fmt.Sprintf("Content-Length:\t%d \r\n", len(event)), event),
		// Transfer-Encodings other than chunked, and bad chunk sizes.
		post("/events", "Transfer-Encoding: xchunked\r\n", chunked),
		post("/events", "Transfer-Encoding: chunked, chunked\r\n", chunked),
		post("/events", "Transfer-Encoding: gzip, chunked\r\n", chunked),
		post("/events", "Transfer-Encoding: Chunked\r\n", chunked),
		post("/events", te, "zz\r\n"+event+"\r\n0\r\n\r\n"+ping),
		post("/events", te, "-1\r\n"+event+"\r\n0\r\n\r\n"+ping),
		post("/events", te, "fffffffffffffffff\r\n"+event+"\r\n0\r\n\r\n"),
		post("/events", te, fmt.Sprintf("%x;ext=1\r\n%s\r\n0\r\n\r\n", len(event), event)+ping),
		post("/events", te, fmt.Sprintf("%x \r\n%s\r\n0\r\n\r\n", len(event), event)+ping),
		post("/events", te, fmt.Sprintf("%x\r\n%sXX0\r\n\r\n", len(event), event)+ping),
		post("/events", te, fmt.Sprintf("%x\n%s\n0\n\n", len(event), event)+ping),
		post("/events", te, fmt.Sprintf("%x\r\n%s\r\n0\r\nX-Trailer: 1\r\n\r\n", len(event), event)+ping),
		// Bytes a header may not hold.
		"GET /ping HTTP/1.1\r\nHost: x\r\nX-Bad: a\x00b\r\n\r\n",
		"GET /ping HTTP/1.1\r\nHost: x\r\nX-Bad: a\rb\r\n\r\n",
		"GET /ping HTTP/1.1\r\nHost: x\r\nX Bad: a\r\n\r\n",
		"GET /ping HTTP/1.1\r\nHost: x\r\n: a\r\n\r\n",
		"GET  /ping HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /ping HTTP/1.1 \r\nHost: x\r\n\r\n",
		"get /ping HTTP/1.1\r\nHost: x\r\n\r\n",
	}
}
