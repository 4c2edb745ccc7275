package http

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	stdhttp "net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/geoevent/geoevent/core"
)

// The server's connection loop. On the project's 2-core VM net/http's
// server spends about 22 µs of CPU per keep-alive request that answers a
// fixed 600 bytes, a plain read-parse-write loop 11 µs (a goroutine and a
// background read per request, header maps, deadlines and buffered writers
// make the difference, and a large answer costs net/http two or three
// writes); the gateway's own work for GET /entity/{id} is a few µs. So the
// server reads requests itself when they are the plain HTTP/1.1 the API's
// clients send: a request line with an origin-form target whose path is
// clean, one Host, a Content-Length body or none, a header block that fits
// the read buffer. It answers them with one write (writev for a large
// body) and keeps the connection.
//
// Anything else -- HTTP/1.0, Transfer-Encoding, Expect, Upgrade, an
// unclean or escaped path, repeated or odd headers, a header block over
// the buffer -- hands the connection, with the bytes read so far, to a
// net/http server over the same Gateway, which serves it from then on; but
// a body framed two ways is refused first (see parse). Both paths call
// the same handlers, so the answers are the same; the fast path passes
// the handlers the three request headers the gateway reads (Content-Type,
// Origin, Access-Control-Request-Method; see call) and no others, and its
// requests' contexts are not cancelled when the client goes away (the
// operation runs to its end or its timeout).
//
// A connection serves one request at a time, so what a request needs is
// made once per connection and reused: the http.Request the handlers see,
// the call, the context (requestContext: the request timeout without a
// context and timer per request) and the buffers of the body, its JSON
// and the answer (scratch). An answer goes out before its handler returns,
// so nothing of a request is left in them when the next one starts.

const (
	fastReadBuffer = 16 << 10  // the read buffer: a larger header block is handed over
	maxUnreadBody  = 256 << 10 // a larger unread body closes the connection (as net/http does)
	fastInlineBody = 8 << 10   // larger answers go out with writev instead of a copy
)

// Timeouts, as the net/http server's were.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 2 * time.Minute // the whole request, its body included
	idleTimeout       = 2 * time.Minute
)

type connState int32

const (
	connActive connState = iota
	connIdle
	connClosed
)

// fastServer accepts connections and serves them (see above).
type fastServer struct {
	g   *Gateway
	log *zap.Logger
	ln  net.Listener
	std *stdhttp.Server // serves the connections handed over
	// handoff is std's listener: it accepts the connections handed over.
	handoff *handoffListener

	inShutdown atomic.Bool
	mu         sync.Mutex
	conns      map[*fastConn]struct{}
}

func newFastServer(g *Gateway, ln net.Listener) *fastServer {
	s := &fastServer{g: g, log: g.log, ln: ln, conns: map[*fastConn]struct{}{}}
	s.handoff = newHandoffListener(ln.Addr())
	s.std = &stdhttp.Server{
		Handler: stdhttp.HandlerFunc(s.serveHandedOver),
		ConnContext: func(ctx context.Context, _ net.Conn) context.Context {
			return context.WithValue(ctx, handedRequestsKey{}, new(atomic.Int64))
		},
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          zap.NewStdLog(g.log),
	}
	s.std.RegisterOnShutdown(g.endStreams) // feed streams never go idle: end them
	return s
}

// serve accepts until the listener fails or is closed; it returns the
// failure (nil after shutdown).
func (s *fastServer) serve() error {
	stdDone := make(chan struct{})
	go func() {
		defer close(stdDone)
		_ = s.std.Serve(s.handoff)
	}()
	defer func() {
		s.handoff.Close() // a listener failure: stop the handed-over side too
		<-stdDone
	}()
	var delay time.Duration
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if s.inShutdown.Load() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.log.Warn("http: accept failed; retrying", zap.Error(err), zap.Duration("delay", delay))
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		c := &fastConn{s: s, nc: nc, remote: nc.RemoteAddr().String(), br: bufio.NewReaderSize(nc, fastReadBuffer)}
		c.state.Store(int32(connActive))
		if !s.track(c) {
			nc.Close()
			continue
		}
		go c.serve()
	}
}

func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

func (s *fastServer) track(c *fastConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inShutdown.Load() {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *fastServer) untrack(c *fastConn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// shutdown stops accepting, closes idle connections and waits for the
// others to finish their request, until ctx ends; then it closes them.
func (s *fastServer) shutdown(ctx context.Context) error {
	s.inShutdown.Store(true)
	s.ln.Close()
	stdErr := make(chan error, 1)
	go func() { stdErr <- s.std.Shutdown(ctx) }()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if s.closeIdle() {
			return <-stdErr
		}
		select {
		case <-ctx.Done():
			s.closeAll()
			s.std.Close()
			<-stdErr
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// closeIdle closes the idle connections and reports whether none is left.
func (s *fastServer) closeIdle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.state.CompareAndSwap(int32(connIdle), int32(connClosed)) {
			c.nc.Close()
		}
	}
	return len(s.conns) == 0
}

func (s *fastServer) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.state.Store(int32(connClosed))
		c.nc.Close()
	}
}

// fastConn is one connection served by the fast path.
type fastConn struct {
	s      *fastServer
	nc     net.Conn
	remote string // nc.RemoteAddr().String(), once per connection
	br     *bufio.Reader
	state  atomic.Int32 // a connState
	out    []byte       // the answer's head (and a small body), reused
	w      fastResponse
	body   fastBody
	host   string // the last request's Host, kept while it repeats
	// What one request needs, reused by the next (requests on a
	// connection are served one at a time): the handlers' view of it, its
	// call and context, and its buffers.
	req  stdhttp.Request
	url  url.URL
	call call
	ctx  requestContext
	sc   scratch
}

// serve serves c's requests until it closes or is handed over.
func (c *fastConn) serve() {
	handedOver := false
	defer func() {
		if p := recover(); p != nil && p != stdhttp.ErrAbortHandler {
			c.s.log.Error("http: connection panicked", zap.Any("panic", p))
		}
		if !handedOver {
			c.nc.Close()
		}
		c.ctx.close()
		c.s.untrack(c)
	}()
	for {
		if c.br.Buffered() == 0 {
			// Idle until the next request's first byte.
			c.state.Store(int32(connIdle))
			if c.s.inShutdown.Load() {
				return
			}
			if !c.awaitRequest() {
				return
			}
			if !c.state.CompareAndSwap(int32(connIdle), int32(connActive)) {
				return // shutdown closed it
			}
		}
		start := time.Now()
		head, err := c.readHead(start)
		if err != nil {
			return
		}
		req := fastRequest{host: c.host}
		verdict := parseHandOver
		if head != nil {
			verdict = req.parse(head)
		}
		switch verdict {
		case parseHandOver:
			c.handOver()
			handedOver = true
			return
		case parseReject:
			c.refuse(&req, len(head))
			return
		}
		if !c.serveRequest(&req, len(head), start) {
			return
		}
	}
}

// awaitRequest waits, up to idleTimeout, for the next request's first
// byte; false: the connection is to close. A connection whose buffers
// grew past idleScratch keeps them for the next request only while it
// follows within scratchIdle: an idle connection holds little memory
// (about the 16 KiB of its read buffer), however large its last request.
func (c *fastConn) awaitRequest() bool {
	now := time.Now()
	if c.sc.size() > idleScratch {
		if c.nc.SetReadDeadline(now.Add(scratchIdle)) != nil {
			return false
		}
		_, err := c.br.Peek(1)
		if err == nil {
			return true
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return false
		}
		c.sc = scratch{}
		c.out = nil
	}
	if c.nc.SetReadDeadline(now.Add(idleTimeout)) != nil {
		return false
	}
	_, err := c.br.Peek(1)
	return err == nil
}

// What an idle connection keeps of its buffers (see awaitRequest).
const (
	idleScratch = 64 << 10
	scratchIdle = time.Second
)

// readHead returns the request's head (request line to empty line) without
// consuming it, reading more as needed under the header timeout; nil when
// the head does not fit the buffer or uses bare LF line ends (the request
// is handed over).
func (c *fastConn) readHead(start time.Time) ([]byte, error) {
	deadlineSet := false
	for {
		buf, _ := c.br.Peek(c.br.Buffered())
		if i := bytes.Index(buf, []byte("\n\r\n")); i >= 0 {
			head := buf[:i+3]
			if bytes.Count(head, []byte("\n")) != bytes.Count(head, []byte("\r\n")) {
				return nil, nil
			}
			return head, nil
		}
		if bytes.Contains(buf, []byte("\n\n")) || len(buf) >= c.br.Size() {
			return nil, nil
		}
		if !deadlineSet {
			if err := c.nc.SetReadDeadline(start.Add(readHeaderTimeout)); err != nil {
				return nil, err
			}
			deadlineSet = true
		}
		if _, err := c.br.Peek(len(buf) + 1); err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				return nil, nil
			}
			return nil, err
		}
	}
}

// handOver passes the connection, the bytes read but not consumed
// included, to the net/http server.
func (c *fastConn) handOver() {
	handovers.Add(1)
	c.state.Store(int32(connActive))
	_ = c.nc.SetReadDeadline(time.Time{})
	if !c.s.handoff.push(&handedConn{Conn: c.nc, r: c.br}) {
		c.nc.Close()
	}
}

// refuse answers a request whose head (n bytes) parse rejected: 400, in
// the ?form's form, and the connection closes without reading on -- what
// follows the head cannot be told apart from its body.
func (c *fastConn) refuse(req *fastRequest, n int) {
	if _, err := c.br.Discard(n); err != nil {
		return
	}
	c.url = url.URL{Path: req.path, RawQuery: req.query}
	c.req = stdhttp.Request{Method: req.method, URL: &c.url, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Host: req.host, RequestURI: req.target, RemoteAddr: c.remote, Body: stdhttp.NoBody}
	c.body = fastBody{c: c}
	c.w.reset(c, req.method == "HEAD", true)
	c.ctx.begin(c.s.g.cfg.RequestTimeout)
	c.call = call{g: c.s.g, w: &c.w, r: &c.req, ctx: &c.ctx, sc: &c.sc}
	msg := req.reject
	c.s.g.serve(&c.call, func(cl *call) *failure {
		cl.form = lenientForm(cl.r)
		return &failure{info: core.MalformedRequest, status: stdhttp.StatusBadRequest, msg: msg}
	})
	c.ctx.end()
	c.call = call{}
	if c.w.finish() == nil {
		c.lingerClose()
	}
}

// lingerClose closes our side of the connection and reads what the client
// still sends, for up to rstAvoidanceDelay: closing a socket with unread
// data resets it, and the client could lose the answer.
func (c *fastConn) lingerClose() {
	cw, ok := c.nc.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	if c.nc.SetReadDeadline(time.Now().Add(rstAvoidanceDelay)) != nil {
		return
	}
	_, _ = io.CopyN(io.Discard, c.nc, maxUnreadBody)
}

// serveRequest runs one parsed request whose head is n bytes long and
// writes the answer; false means the connection must close.
func (c *fastConn) serveRequest(req *fastRequest, n int, start time.Time) bool {
	if _, err := c.br.Discard(n); err != nil {
		return false
	}
	c.body = fastBody{c: c, remain: req.contentLength}
	if req.contentLength > int64(c.br.Buffered()) {
		if c.nc.SetReadDeadline(start.Add(readTimeout)) != nil {
			return false
		}
	}
	c.url = url.URL{Path: req.path, RawQuery: req.query}
	c.req = stdhttp.Request{
		Method:        req.method,
		URL:           &c.url,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        nil, // the handlers read no header (see the top of this file)
		ContentLength: req.contentLength,
		Host:          req.host,
		RequestURI:    req.target,
		RemoteAddr:    c.remote,
		Body:          stdhttp.NoBody,
	}
	c.host = req.host
	r := &c.req
	if req.contentLength > 0 {
		r.Body = &c.body
	}
	e, id := c.s.g.route(req.path)
	c.w.reset(c, r.Method == "HEAD", req.close || c.s.inShutdown.Load())
	c.ctx.begin(c.s.g.cfg.RequestTimeout)
	c.call = call{g: c.s.g, w: &c.w, r: r, ctx: &c.ctx, pathID: id, sc: &c.sc,
		contentType: req.contentType, contentTypes: req.contentTypes, origin: req.origin, preflight: req.preflight}
	c.s.g.serveEndpoint(&c.call, e)
	c.ctx.end()
	c.call = call{}
	// What the handler left of the body is read and dropped, so that the
	// next request starts where it should; a large rest closes instead.
	unread := c.body.remain > maxUnreadBody // send says Connection: close then
	if c.body.remain > 0 && !unread {
		if _, err := io.Copy(io.Discard, &c.body); err != nil {
			return false
		}
	}
	if err := c.w.finish(); err != nil {
		return false
	}
	if unread {
		// Closing a socket with unread data resets it, and the client,
		// still sending, could lose the answer: close our side first and
		// give the client time to read (net/http does the same).
		if cw, ok := c.nc.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
			time.Sleep(rstAvoidanceDelay)
		}
	}
	return !c.w.closeAfter
}

// handedRequestsKey keys a handed-over connection's request count in its
// requests' contexts.
type handedRequestsKey struct{}

// serveHandedOver serves a request of a connection handed over. The
// connection's first request is the one the fast path parsed (and refused
// if it framed its body two ways). A later one was parsed by net/http
// alone, which drops a Content-Length sent beside Transfer-Encoding before
// the handler sees it: so a chunked request after the first is refused
// (400, and the connection closes), as it cannot be told from a smuggling
// attempt. (ServeHTTP closes the connection after any chunked request, so
// a chunked request is always a connection's last: this refuses only
// chunked requests that follow another request.)
func (s *fastServer) serveHandedOver(w stdhttp.ResponseWriter, r *stdhttp.Request) {
	n, _ := r.Context().Value(handedRequestsKey{}).(*atomic.Int64)
	if n != nil && n.Add(1) > 1 && len(r.TransferEncoding) > 0 {
		w.Header().Set("Connection", "close")
		s.g.serve(&call{g: s.g, w: w, r: r}, func(c *call) *failure {
			c.form = lenientForm(r)
			return &failure{info: core.MalformedRequest, status: stdhttp.StatusBadRequest,
				msg: "a chunked request must be the first on its connection here, as its Content-Length, if any, cannot be seen (RFC 9112 section 6.3): open a new connection for it"}
		})
		return
	}
	s.g.ServeHTTP(w, r)
}

// handovers counts the connections handed to net/http (for tests).
var handovers atomic.Int64

// rstAvoidanceDelay is how long a connection closed with a request body
// unread stays open for reading after its answer (net/http's value).
const rstAvoidanceDelay = 500 * time.Millisecond

// fastRequest is a parsed request head.
type fastRequest struct {
	method, target, path, query, host string
	contentLength                     int64
	close                             bool // Connection: close
	// The headers the gateway reads (see call): Content-Type (how many,
	// and the first), Origin, Access-Control-Request-Method.
	contentType  string
	contentTypes int
	origin       string
	preflight    string
	reject       string // parseReject's reason
}

// What parse makes of a request head.
type parseResult int

const (
	parseServe    parseResult = iota // the fast path serves it
	parseHandOver                    // net/http serves the connection
	parseReject                      // 400 and close: ambiguous framing
)

// parse parses head, the request line and headers up to the empty line,
// and tells whether the fast path serves it (see the top of this file),
// hands it over, or refuses it: a body framed two ways -- Content-Length
// and Transfer-Encoding, or two Content-Length headers, or
// Transfer-Encoding in HTTP/1.0 -- is a request smuggling attempt (RFC
// 9112 sections 6.1 and 6.3), answered 400 with the connection closed. So
// the headers are read to the end even for a request handed over.
// q.host may hold a likely Host (the connection's last): it is kept,
// rather than copied again, when the request's is the same.
func (q *fastRequest) parse(head []byte) parseResult {
	line, rest, _ := bytes.Cut(head, []byte("\r\n"))
	method, line, ok1 := bytes.Cut(line, []byte(" "))
	target, version, ok2 := bytes.Cut(line, []byte(" "))
	if !ok1 || !ok2 || len(method) == 0 || !isToken(method) {
		return parseHandOver
	}
	http10 := string(version) == "HTTP/1.0"
	fast := string(version) == "HTTP/1.1" && cleanTarget(target)
	q.method = methodString(method)
	q.target = string(target)
	q.path, q.query, _ = cutByte(q.target, '?')
	fast = fast && q.path != "/feed" // a stream: net/http's writer flushes, this path's buffers the answer
	hosts, lengths, encodings, origins, preflights := 0, 0, 0, 0, 0
	for {
		line, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok || len(name) == 0 || !isToken(name) {
			fast = false // obs-fold (a leading space) included
			continue
		}
		value = bytes.Trim(value, " \t")
		for _, b := range value {
			if b < 0x20 && b != '\t' || b == 0x7f {
				fast = false
			}
		}
		// By length first: most headers are none of these.
		switch len(name) {
		case 4:
			if asciiEqualFold(name, "Host") {
				hosts++
				if string(value) != q.host {
					q.host = string(value)
				}
			}
		case 14:
			if asciiEqualFold(name, "Content-Length") {
				lengths++
				if len(value) == 0 || len(value) > 15 {
					fast = false
					continue
				}
				for _, b := range value {
					if b < '0' || b > '9' {
						fast = false
					}
				}
				q.contentLength, _ = strconv.ParseInt(string(value), 10, 64)
			}
		case 12:
			if asciiEqualFold(name, "Content-Type") {
				q.contentTypes++
				if string(value) == "application/json" {
					q.contentType = "application/json" // no copy
				} else {
					q.contentType = string(value)
				}
			}
		case 6:
			if asciiEqualFold(name, "Origin") {
				origins++
				q.origin = string(value)
			} else if asciiEqualFold(name, "Expect") {
				fast = false
			}
		case 10:
			if asciiEqualFold(name, "Connection") {
				for _, tok := range bytes.Split(value, []byte(",")) {
					tok = bytes.Trim(tok, " \t")
					switch {
					case asciiEqualFold(tok, "close"):
						q.close = true
					case asciiEqualFold(tok, "keep-alive"), len(tok) == 0:
					default:
						fast = false // upgrade and the like
					}
				}
			}
		case 17:
			if asciiEqualFold(name, "Transfer-Encoding") {
				encodings++
			}
		case 7:
			if asciiEqualFold(name, "Upgrade") || asciiEqualFold(name, "Trailer") {
				fast = false
			}
		case 29:
			if asciiEqualFold(name, "Access-Control-Request-Method") {
				preflights++
				q.preflight = string(value)
			}
		}
	}
	switch {
	case encodings > 0 && lengths > 0:
		q.reject = "the request has both Content-Length and Transfer-Encoding, which frame its body two ways (RFC 9112 section 6.3): send one of them"
		return parseReject
	case lengths > 1:
		q.reject = "the request has more than one Content-Length header (RFC 9112 section 6.3): send one"
		return parseReject
	case encodings > 0 && http10:
		q.reject = "an HTTP/1.0 request cannot use Transfer-Encoding (RFC 9112 section 6.1): send Content-Length"
		return parseReject
	}
	if !fast || hosts != 1 || encodings > 0 || q.contentTypes > 1 || origins > 1 || preflights > 1 {
		return parseHandOver
	}
	return parseServe
}

// methodString is string(m), without a copy for the API's methods.
func methodString(m []byte) string {
	switch string(m) {
	case "GET":
		return "GET"
	case "POST":
		return "POST"
	case "DELETE":
		return "DELETE"
	case "HEAD":
		return "HEAD"
	}
	return string(m)
}

func cutByte(s string, c byte) (before, after string, found bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// cleanTarget reports whether target is an origin-form request target
// whose path the mux takes as it is: it starts with '/', has no
// percent-escapes, no empty, "." or ".." segments (nothing the mux would
// clean or redirect) and only the path characters of RFC 3986 that need
// no escaping; the query may hold any visible ASCII but '#'.
func cleanTarget(t []byte) bool {
	if len(t) == 0 || t[0] != '/' {
		return false
	}
	i := 0
	for ; i < len(t) && t[i] != '?'; i++ {
		if !pathByte[t[i]] {
			return false
		}
	}
	path := t[:i]
	if bytes.Contains(path, []byte("//")) || bytes.Contains(path, []byte("/./")) || bytes.Contains(path, []byte("/../")) ||
		bytes.HasSuffix(path, []byte("/.")) || bytes.HasSuffix(path, []byte("/..")) {
		return false
	}
	for _, b := range t[i:] {
		if b <= 0x20 || b >= 0x7f || b == '#' {
			return false
		}
	}
	return true
}

// pathByte: unreserved, sub-delims, ':', '@' and '/' (RFC 3986).
var pathByte = func() (t [256]bool) {
	for _, c := range []byte("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:@/") {
		t[c] = true
	}
	return t
}()

// tokenByte: the characters of an HTTP token (RFC 9110).
var tokenByte = func() (t [256]bool) {
	for _, c := range []byte("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-.^_`|~") {
		t[c] = true
	}
	return t
}()

func isToken(b []byte) bool {
	for _, c := range b {
		if !tokenByte[c] {
			return false
		}
	}
	return true
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// fastBody is a request body of Content-Length bytes, read from the
// connection's buffer.
type fastBody struct {
	c      *fastConn
	remain int64
}

func (b *fastBody) Read(p []byte) (int, error) {
	if b.remain <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.remain {
		p = p[:b.remain]
	}
	n, err := b.c.br.Read(p)
	b.remain -= int64(n)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func (b *fastBody) Close() error { return nil }

// fastResponse is the ResponseWriter of the fast path. A Write of the
// whole body announced by Content-Length goes out at once with the head;
// anything else is buffered until the handler returns.
type fastResponse struct {
	c           *fastConn
	header      stdhttp.Header
	head        bool // a HEAD request: no body
	closeAfter  bool // the connection closes after this answer
	status      int
	wroteHeader bool
	sent        bool
	json        bool   // sent by sendJSON: its headers, not header's
	err         error  // sendJSON's write failure
	buf         []byte // the body so far, when not sent at once
}

func (w *fastResponse) reset(c *fastConn, head, closeAfter bool) {
	if w.header == nil {
		w.header = stdhttp.Header{}
	}
	clear(w.header)
	if cap(w.buf) > 1<<20 {
		w.buf = nil // not kept for the next answer
	}
	w.c, w.head, w.closeAfter = c, head, closeAfter
	w.status, w.wroteHeader, w.sent, w.json, w.err, w.buf = 0, false, false, false, nil, w.buf[:0]
}

// plain reports whether nothing of the answer is set yet: no header, no
// status, no body.
func (w *fastResponse) plain() bool {
	return len(w.header) == 0 && !w.wroteHeader && len(w.buf) == 0
}

// sendJSON sends the whole answer, as call.write does through Header,
// WriteHeader and Write, but with its three headers written directly:
// Content-Type application/json, Content-Length and Cache-Control
// no-store. w must be plain.
func (w *fastResponse) sendJSON(status int, body []byte) {
	w.wroteHeader, w.status, w.sent, w.json = true, status, true, true
	w.err = w.send(body) // finish reports it: the connection closes
}

func (w *fastResponse) Header() stdhttp.Header { return w.header }

func (w *fastResponse) WriteHeader(status int) {
	if !w.wroteHeader {
		w.wroteHeader, w.status = true, status
	}
}

func (w *fastResponse) Write(p []byte) (int, error) {
	w.WriteHeader(stdhttp.StatusOK)
	switch {
	case w.sent:
		return 0, errors.New("http: write after the whole body was sent")
	case w.head:
		return len(p), nil
	case len(w.buf) == 0 && w.declaredLength() == int64(len(p)):
		w.sent = true
		if err := w.send(p); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

// declaredLength is the Content-Length header's value, or -1.
func (w *fastResponse) declaredLength() int64 {
	v := w.header["Content-Length"]
	if len(v) != 1 {
		return -1
	}
	n, err := strconv.ParseInt(v[0], 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// finish sends the answer unless Write did.
func (w *fastResponse) finish() error {
	w.WriteHeader(stdhttp.StatusOK)
	if w.sent {
		return w.err
	}
	if w.header["Content-Length"] == nil && w.status != stdhttp.StatusNoContent {
		w.header["Content-Length"] = []string{strconv.Itoa(len(w.buf))}
	}
	return w.send(w.buf)
}

// send writes the head and body with one write.
func (w *fastResponse) send(body []byte) error {
	c := w.c
	if c.body.remain > maxUnreadBody || c.s.inShutdown.Load() {
		w.closeAfter = true // the rest of the body will not be read, or the server stops
	}
	b := append(c.out[:0], "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(w.status), 10)
	b = append(b, ' ')
	b = append(b, stdhttp.StatusText(w.status)...)
	b = append(b, "\r\n"...)
	if w.json {
		b = append(b, "Cache-Control: no-store\r\nContent-Length: "...)
		b = strconv.AppendInt(b, int64(len(body)), 10)
		b = append(b, "\r\nContent-Type: application/json\r\n"...)
	}
	for name, values := range w.header {
		for _, v := range values {
			if !validHeaderValue(name) || !validHeaderValue(v) {
				continue
			}
			b = append(b, name...)
			b = append(b, ": "...)
			b = append(b, v...)
			b = append(b, "\r\n"...)
		}
	}
	b = append(b, "Date: "...)
	b = appendDate(b)
	b = append(b, "\r\n"...)
	if w.closeAfter {
		b = append(b, "Connection: close\r\n"...)
	}
	b = append(b, "\r\n"...)
	var err error
	if w.head {
		body = nil
	}
	if len(body) <= fastInlineBody {
		b = append(b, body...)
		_, err = c.nc.Write(b)
	} else {
		bufs := net.Buffers{b, body}
		_, err = bufs.WriteTo(c.nc)
	}
	if cap(b) <= 64<<10 {
		c.out = b[:0]
	}
	return err
}

func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '\r' || s[i] == '\n' {
			return false
		}
	}
	return true
}

// appendDate appends the current time in HTTP's format, from a copy made
// once a second.
func appendDate(b []byte) []byte {
	now := time.Now()
	sec := now.Unix()
	d := dateCache.Load()
	if d == nil || d.sec != sec {
		d = &cachedDate{sec: sec, text: now.UTC().AppendFormat(nil, stdhttp.TimeFormat)}
		dateCache.Store(d)
	}
	return append(b, d.text...)
}

type cachedDate struct {
	sec  int64
	text []byte
}

var dateCache atomic.Pointer[cachedDate]

// handedConn is a connection handed to net/http: its reads start with what
// the fast path buffered.
type handedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *handedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// handoffListener is a net.Listener whose connections are pushed to it.
type handoffListener struct {
	addr   net.Addr
	conns  chan net.Conn
	done   chan struct{}
	closed sync.Once
}

func newHandoffListener(addr net.Addr) *handoffListener {
	return &handoffListener{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

// push hands c to the listener's Accept; false once it is closed.
func (l *handoffListener) push(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *handoffListener) Close() error {
	l.closed.Do(func() { close(l.done) })
	return nil
}

func (l *handoffListener) Addr() net.Addr { return l.addr }
