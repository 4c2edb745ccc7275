package fuzz

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"net"
	stdhttp "net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Framing modes of FuzzHTTPRequest (the low bits of its mode byte).
const (
	frameLength   = iota // a Content-Length of the body's size, and Content-Type: application/json
	frameNoType          // a Content-Length, no Content-Type of our own
	frameBare            // neither: the headers given are the only ones
	frameVerbatim        // the body alone is the whole request (method, target and headers ignored)
	frameModes
)

// FuzzHTTPRequest sends arbitrary request bytes to a real gateway and
// replica (see the package documentation for what it checks).
func FuzzHTTPRequest(f *testing.F) {
	id := "6ba7b810-9dad-11d1-80b4-00c04fd430c8"
	ins := `{"events":[{"entity_id":"` + id + `","lat_nano":1,"lon_nano":2}]}`
	for _, s := range []struct {
		method, target, headers, body string
		mode                          uint8
	}{
		{"POST", "/events", "", ins, frameLength},
		{"POST", "/events?form=a", "", `{"events":[{"entity_id":"0","lat":91,"lon":0}]}`, frameLength},
		{"POST", "/insert", "Content-Type: text/plain", ins, frameNoType},
		{"POST", "/events", "Content-Type: application/json\nTransfer-Encoding: chunked", "4\r\n{\"ev\r\n0\r\n\r\n", frameNoType},
		{"POST", "/events", "Content-Type: application/json\nContent-Length: 3", ins, frameNoType},
		{"POST", "/events", "Content-Type: application/json\nTransfer-Encoding: chunked", "3b\r\n" + ins[:59] + "\r\n0\r\n\r\n", frameBare},
		{"POST", "/events", "Content-Type: application/json\nContent-Length: 1000", ins, frameBare},
		{"POST", "/query/radius", "", `{"center_lat":38.1,"center_lon":13.3,"radius_m":1000}`, frameLength},
		{"POST", "/query/polygon", "", `{"vertices":[{"lat_nano":0,"lon_nano":0},{"lat_nano":1,"lon_nano":0},{"lat_nano":0,"lon_nano":1}]}`, frameLength},
		{"POST", "/query/latest", "", `{"limit":"2"}`, frameLength},
		{"POST", "/query/bbox?format=geojson", "", `{"min_lat":38,"min_lon":13,"max_lat":39,"max_lon":14,"flags_any":1}`, frameLength},
		{"POST", "/query/nearest", "Accept: application/geo+json", `{"center_lat":38.1,"center_lon":13.3,"k":3,"max_distance_m":1000}`, frameLength},
		{"GET", "/entity/" + id, "", "", frameBare},
		{"GET", "/entity/" + id + "/history?limit=1&cursor=AAAA", "", "", frameBare},
		{"GET", "/entity/%36ba7b810-9dad-11d1-80b4-00c04fd430c8", "", "", frameBare},
		{"GET", "/entity/../stats", "", "", frameBare},
		{"HEAD", "/stats", "", "", frameBare},
		{"OPTIONS", "/events", "Origin: http://evil.example\nAccess-Control-Request-Method: POST", "", frameBare},
		{"DELETE", "/entities", "", `{"entity_ids":["` + id + `"]}`, frameLength},
		{"POST", "/ttl/set", "", `{"entity_id":"` + id + `","ttl_seconds":4294967296}`, frameLength},
		{"POST", "/cleanup/expired", "", "", frameBare},
		{"PUT", "/events", "", ins, frameLength},
		{"GET", "/nope", "Expect: 100-continue", "", frameBare},
		{"POST", "/events", "Expect: 100-continue", ins, frameLength},
		{"GET", "http://127.0.0.1/stats", "", "", frameBare},
		{"GET", "*", "", "", frameBare},
		{"", "", "", "GET /stats HTTP/1.0\r\n\r\n", frameVerbatim},
		{"", "", "", "GET /stats HTTP/1.1\nHost: x\n\n", frameVerbatim},
		{"", "", "", "GET /ping HTTP/1.1\r\nHost: a\r\n\r\nGET /status HTTP/1.1\r\nHost: a\r\n\r\n", frameVerbatim},
		{"", "", "", "GET /stats HTTP/9.9\r\nHost: a\r\n\r\n", frameVerbatim},
		{"", "", "", "\x00\xff garbage\r\n\r\n", frameVerbatim},
		// Request smuggling: bodies framed two ways, bad chunk sizes,
		// obs-fold and bare LF around the framing headers, each with a
		// request after it.
		{"", "", "", "POST /events HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nDELETE /entities HTTP/1.1\r\nHost: a\r\n\r\n", frameVerbatim},
		{"", "", "", "POST /events HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 40\r\n\r\n{}GET /stats HTTP/1.1\r\nHost: a\r\n\r\n", frameVerbatim},
		{"", "", "", "POST /events HTTP/1.0\r\nConnection: keep-alive\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /stats HTTP/1.1\r\nHost: a\r\n\r\n", frameVerbatim},
		{"", "", "", "POST /events HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n{}\r\n0\r\n\r\nGET /stats HTTP/1.1\r\nHost: a\r\n\r\n", frameVerbatim},
		{"", "", "", "POST /events HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffff\r\n{}\r\n0\r\n\r\n", frameVerbatim},
		{"", "", "", "POST /events HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: 2\r\nX: a\r\n Transfer-Encoding: chunked\r\n\r\n{}GET /stats HTTP/1.1\r\nHost: a\r\n\r\n", frameVerbatim},
		{"", "", "", "POST /events HTTP/1.1\nHost: a\nContent-Type: application/json\nContent-Length: 2\nTransfer-Encoding: chunked\n\n0\n\nGET /stats HTTP/1.1\nHost: a\n\n", frameVerbatim},
		{"POST", "/events", "Content-Type: application/json; charset=utf-8\nHost: other", ins, frameNoType},
	} {
		f.Add(s.method, s.target, s.headers, []byte(s.body), s.mode)
	}
	e := newEnv(f)
	// Something for deletes and TTLs to act on.
	if a := e.do(f, "POST", "/events", map[string]any{"events": []any{
		map[string]any{"entity_id": id, "lat_nano": 1, "lon_nano": 2}}}); a.status != 200 {
		f.Fatalf("seed insert: %d %s", a.status, a.raw)
	}
	page := mapFiles(f, e)
	f.Fuzz(func(t *testing.T, method, target, headers string, body []byte, mode uint8) {
		req := frame(method, target, headers, body, mode)
		before := e.stats(t)
		answers, err := roundTrip(e.addr, req, method)
		if err != nil {
			t.Fatalf("%q: %v", req, err)
		}
		succeeded := false
		for _, a := range answers {
			if msg := checkAnswer(a, page); msg != "" {
				t.Fatalf("%q: %s: %d %v %q", req, msg, a.status, a.header, a.body)
			}
			if a.status < 400 {
				succeeded = true
			}
			if a.status == 503 || a.status == 504 {
				// The request may still commit after its answer (a write
				// already submitted goes on past a timeout). Let it land
				// before the next input's "before".
				succeeded = true
				e.settle(t)
			}
		}
		if !succeeded {
			if after := e.stats(t); after != before {
				t.Fatalf("%q was refused (%d answers) and changed the state:\n%s\n%s", req, len(answers), before, after)
			}
		}
	})
}

// frame builds the request bytes.
func frame(method, target, headers string, body []byte, mode uint8) []byte {
	m := mode % frameModes
	if m == frameVerbatim {
		return body
	}
	var b bytes.Buffer
	b.WriteString(method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n")
	for _, line := range strings.Split(headers, "\n") {
		if line = strings.TrimSuffix(line, "\r"); line != "" {
			b.WriteString(line + "\r\n")
		}
	}
	if m == frameLength || m == frameNoType {
		b.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n")
	}
	if m == frameLength && len(body) > 0 {
		b.WriteString("Content-Type: application/json\r\n")
	}
	b.WriteString("\r\n")
	b.Write(body)
	return b.Bytes()
}

// reply is one response read off the connection.
type reply struct {
	status int
	header stdhttp.Header
	body   []byte
	head   bool // the answer to a HEAD request: no body
	close  bool // Connection: close
}

// roundTrip writes req on a new connection, closes the write side and
// reads every response until the server closes the connection. method is
// the first request's method (HEAD answers carry no body).
func roundTrip(addr string, req []byte, method string) ([]reply, error) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	// The server's own timeouts are longer; an answer takes milliseconds.
	if err := nc.SetDeadline(time.Now().Add(20 * time.Second)); err != nil {
		return nil, err
	}
	if _, err := nc.Write(req); err != nil && !errors.Is(err, net.ErrClosed) {
		// The server may close early (a refused head); read what it said.
		_ = err
	}
	_ = nc.(*net.TCPConn).CloseWrite()
	br := bufio.NewReader(nc)
	var out []reply
	for {
		// A HEAD answer has a Content-Length but no body; only the
		// first request's method is known.
		m := "GET"
		if len(out) == 0 && method == "HEAD" {
			m = "HEAD"
		}
		res, err := stdhttp.ReadResponse(br, &stdhttp.Request{Method: m})
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isReset(err) {
				return out, nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return out, errors.New("no answer within 20 s")
			}
			return out, nil // bytes that are not an HTTP response: the connection was torn down mid-answer
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil && !isReset(err) {
			return out, err
		}
		out = append(out, reply{status: res.StatusCode, header: res.Header, body: b, head: m == "HEAD", close: res.Close})
		if res.Close {
			return out, nil
		}
	}
}

func isReset(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && !oe.Timeout()
}

// mapFiles returns the bodies of the map page (GET /) and of the files
// it is served with (http/static, read from the repository): the only
// answers that are not JSON.
func mapFiles(tb testing.TB, e *env) map[string]bool {
	files := map[string]bool{}
	res, err := e.client.Get(e.base + "/")
	if err != nil {
		tb.Fatal(err)
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || res.StatusCode != 200 {
		tb.Fatalf("GET /: %d %v", res.StatusCode, err)
	}
	files[string(b)] = true
	err = filepath.WalkDir("../http/static", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		files[string(b)] = true
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return files
}

// checkAnswer returns what is wrong with an answer, or "". page holds
// the map page's files (mapFiles).
func checkAnswer(a reply, page map[string]bool) string {
	switch {
	case a.status < 200:
		return "" // 100 Continue: informational
	case protocolRefusal(a):
		return ""
	case a.status >= 500 && a.status != 503 && a.status != 504:
		return "a server error"
	case a.head || a.status == 204 || a.status == 304:
		return ""
	case a.status < 400 && len(a.body) == 0:
		return "" // OPTIONS *, answered by net/http
	case a.status >= 300 && a.status < 400:
		// The mux's redirect of an unclean path (/a/../b) to its clean
		// form: a Location, HTML body.
		if a.header.Get("Location") == "" {
			return "a redirect without Location"
		}
		return ""
	}
	if a.status == 200 && page[string(a.body)] && a.header.Get("Content-Type") != "application/json" {
		return "" // the map page or one of its files
	}
	if ct := a.header.Get("Content-Type"); ct != "application/json" && (ct != "application/geo+json" || a.status != 200) {
		return "Content-Type is not application/json (nor, for a query's answer, application/geo+json)"
	}
	v, err := decodeJSON(a.body)
	if err != nil {
		return "the body is not JSON: " + err.Error()
	}
	if a.status < 400 {
		return ""
	}
	if _, ok := v.(map[string]any); !ok {
		return "the error is not a JSON object"
	}
	// Form B: {"error": {code, message, details}}.
	if e, ok := get(v, "error").(map[string]any); ok {
		_, codeOK := u64(e["code"])
		_, msgOK := e["message"].(string)
		_, detailsOK := e["details"].(string)
		if !codeOK || !msgOK || !detailsOK {
			return "a Form B error without code, message and details"
		}
		return ""
	}
	// Form A: {error_code, error_name, message} (GET /entity/{id}'s 404
	// adds event and found).
	_, codeOK := u64(get(v, "error_code"))
	_, nameOK := get(v, "error_name").(string)
	_, msgOK := get(v, "message").(string)
	if !codeOK || !nameOK || !msgOK {
		return "an error in neither of the spec's shapes"
	}
	return ""
}

// protocolRefusal: the answer net/http's server writes itself, before any
// handler runs, to a connection whose bytes are not an HTTP/1.x
// request it accepts (net/http's conn.serve): a malformed request line or
// header, two Host headers (400), a header block too large (431), an
// unknown Transfer-Encoding (501), HTTP/2.0 or 9.9 in the request line
// (505), each in plain text, and an Expect other than 100-continue (417,
// no body); the connection closes. Outside the gateway's reach: it would
// have to parse every request itself. (The gateway never answers in plain
// text.)
func protocolRefusal(a reply) bool {
	if !a.close {
		return false
	}
	if a.status == 417 {
		return len(a.body) == 0
	}
	switch a.status {
	case 400, 431, 501, 505:
		return a.header.Get("Content-Type") == "text/plain; charset=utf-8"
	}
	return false
}

// settle waits until GET /stats has not changed for 100 ms (at most 5 s).
func (e *env) settle(t *testing.T) {
	last, same := e.stats(t), 0
	for deadline := time.Now().Add(5 * time.Second); same < 5 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		if s := e.stats(t); s == last {
			same++
		} else {
			last, same = s, 0
		}
	}
}
