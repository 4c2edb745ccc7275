package http

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	stdhttp "net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"go.uber.org/zap"

	"github.com/geoevent/geoevent/core"
)

// DefaultMaxBodyBytes is the request body limit: 16 MiB. A larger body is
// answered 413 with a JSON error body.
const DefaultMaxBodyBytes = 16 << 20

// DefaultBodyBudget bounds the bytes of request bodies the gateway holds
// at once, over all requests: 128 MiB (8 bodies at the 16 MiB limit, a
// hundred batches of 10,000 events). A request whose body would take more
// waits up to bodyBudgetWait for others to end, and is answered 503 with
// 212 CLUSTER_BUSY (retryable) if none does. The heap a full budget takes
// is about twice it (buffers outgrown and not yet collected, the
// collector's headroom).
const DefaultBodyBudget = 128 << 20

// bodyBudgetWait is how long a body waits for room in the budget.
const bodyBudgetWait = time.Second

// DefaultRequestTimeout bounds each request's operation; past it the answer
// is 504 with 216 REPLICATION_TIMEOUT.
const DefaultRequestTimeout = 30 * time.Second

// Config configures a Gateway. Only Backend is required.
type Config struct {
	Backend        Backend
	Logger         *zap.Logger   // nil: none
	MaxBodyBytes   int64         // 0: DefaultMaxBodyBytes
	RequestTimeout time.Duration // 0: DefaultRequestTimeout
	// BodyBudget bounds the bytes of request bodies in flight, over all
	// requests (0: DefaultBodyBudget).
	BodyBudget int64
	// CORSOrigins are the origins (scheme://host[:port]) whose browser
	// pages may call the API cross-origin; "*" allows any origin (for
	// development). None by default: browsers keep other sites' pages
	// from reading answers, and a preflight is refused (403). New refuses
	// an entry that is neither (see CheckCORSOrigin).
	CORSOrigins []string
	// Metrics receives the gateway's metrics, and GET /metrics serves all
	// the set holds (nil: a set of the gateway's own). See metrics.go.
	Metrics *metrics.Set
	// Health, when set, reports the local replica's state: GET /healthz,
	// /readyz and /ping answer from it at once, without the backend
	// (health.go). The server sets it; a gateway with a remote backend
	// has none.
	Health func() Health
	// Feed, when set, is the local replica's news for the feed's readers
	// (io.Server implements it; feedtail.go): GET /feed waits for the
	// feed to move instead of polling it, and GET /feed/positions is
	// served. The server sets it; a gateway with a remote backend has
	// none (its feed readers poll; it has no position stream).
	Feed LocalFeed
	// MaxPositionStreams bounds the GET /feed/positions streams open at
	// once (0: DefaultMaxPositionStreams); one more is 503 CLUSTER_BUSY.
	MaxPositionStreams int
	// MapTiles is the base-map tile URL template of the map page at GET /
	// (see CheckMapTiles); "" draws the map on a plain background.
	MapTiles string
}

//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the OpenAPI 3.1 document of the API (GET /openapi.json).
func OpenAPI() []byte { return append([]byte(nil), openAPI...) }

// Route is one method and path pattern of the API, in net/http ServeMux
// syntax (and OpenAPI's: the same {name} wildcards).
type Route struct {
	Method, Path string
}

// Gateway is the JSON API as an http.Handler.
type Gateway struct {
	cfg        Config
	log        *zap.Logger
	mux        *stdhttp.ServeMux
	routes     []Route
	cors       corsPolicy
	budget     *byteBudget // of request body bytes in flight
	metrics    *gatewayMetrics
	streams    streamsEnd      // closed when the server shuts down: feed.go
	tail       feedTail        // the feed's newest notifications, shared by its readers: feedtail.go
	posStreams positionStreams // GET /feed/positions streams open: positions.go
	posHub     positionHub     // their reader of the applied writes: positionhub.go
	readers    feedReaders     // GET /feed streams and long polls open (metrics.go)
}

// endpoint is one path of the API and its handler for each method it takes.
type endpoint struct {
	path     string
	allow    string // the Allow header of a 405
	byMethod map[string]handlerFunc
}

type handlerFunc func(c *call) *failure

// New makes a Gateway.
func New(cfg Config) (*Gateway, error) {
	if cfg.Backend == nil {
		return nil, errors.New("http: Config.Backend is required")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.BodyBudget <= 0 {
		cfg.BodyBudget = DefaultBodyBudget
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	cors, err := newCORSPolicy(cfg.CORSOrigins)
	if err != nil {
		return nil, err
	}
	set := cfg.Metrics
	if set == nil {
		set = metrics.NewSet()
	}
	g := &Gateway{cfg: cfg, log: cfg.Logger, mux: stdhttp.NewServeMux(),
		cors: cors, budget: newByteBudget(cfg.BodyBudget), metrics: newGatewayMetrics(set)}
	g.feedGauges()
	byPath := map[string]*endpoint{}
	var paths []string
	add := func(method, path string, h handlerFunc) {
		if byPath[path] == nil {
			byPath[path] = &endpoint{path: path, byMethod: map[string]handlerFunc{}}
			paths = append(paths, path)
		}
		byPath[path].byMethod[method] = h
		g.routes = append(g.routes, Route{method, path})
	}
	add("POST", "/events", g.insert)
	add("POST", "/insert", g.insert)
	add("POST", "/query/radius", g.radius)
	add("POST", "/query/polygon", g.polygon)
	add("POST", "/query/latest", g.latest)
	add("POST", "/query/bbox", g.bbox)
	add("POST", "/query/nearest", g.nearest)
	add("GET", "/entity/{entity_id}", g.getLatest)
	add("GET", "/entity/{entity_id}/history", g.history)
	add("POST", "/entities/batch", g.getLatestBatch)
	add("DELETE", "/entities", g.delete)
	add("POST", "/delete", g.delete)
	add("POST", "/cleanup/expired", g.cleanup)
	add("GET", "/stats", g.stats)
	add("GET", "/ping", g.ping)
	add("GET", "/status", g.status)
	add("GET", "/topology", g.topology)
	add("POST", "/ttl/set", g.ttlSet)
	add("POST", "/ttl/extend", g.ttlExtend)
	add("POST", "/ttl/clear", g.ttlClear)
	add("GET", "/openapi.json", g.openAPI)
	add("GET", "/metrics", g.metricsPage)
	add("GET", "/healthz", g.healthz)
	add("GET", "/readyz", g.readyz)
	add("PUT", "/fences/{name}", g.putFence)
	add("GET", "/fences/{name}", g.getFence)
	add("DELETE", "/fences/{name}", g.deleteFence)
	add("GET", "/fences", g.listFences)
	add("GET", "/feed", g.feed)
	add("PUT", "/hooks/{name}", g.putHook)
	add("GET", "/hooks/{name}", g.getHook)
	add("DELETE", "/hooks/{name}", g.deleteHook)
	add("GET", "/hooks", g.listHooks)
	add("GET", "/feed/positions", g.positions)
	add("PUT", "/feed/retention", g.putFeedRetention)
	add("GET", "/feed/retention", g.getFeedRetention)
	for _, path := range paths {
		e := byPath[path]
		for _, m := range []string{"GET", "POST", "PUT", "DELETE"} {
			if e.byMethod[m] != nil {
				g.metrics.add(e, m)
				if e.allow != "" {
					e.allow += ", "
				}
				e.allow += m
				if m == "GET" {
					e.allow += ", HEAD"
				}
			}
		}
		g.mux.HandleFunc(path, func(w stdhttp.ResponseWriter, r *stdhttp.Request) {
			// A path has at most one wildcard: {entity_id}, or a fence's or hook's {name}.
			g.serveEndpoint(&call{g: g, w: w, r: r, pathID: r.PathValue("entity_id") + r.PathValue("name")}, e)
		})
	}
	g.mux.HandleFunc("/", func(w stdhttp.ResponseWriter, r *stdhttp.Request) {
		g.serveEndpoint(&call{g: g, w: w, r: r}, nil)
	})
	return g, nil
}

// serveEndpoint serves c (whose g, w, r and pathID are set) with e's
// handler for its method: 405 for a method e does not take, 404 when e is
// nil. It answers CORS preflights, adds the CORS headers of an allowed
// origin to every answer, and refuses a body that is not declared JSON
// (415) before the handler runs.
func (g *Gateway) serveEndpoint(c *call, e *endpoint) {
	r := c.r
	start := time.Now()
	defer func() { g.metrics.route(e, r.Method).done(start, c.status) }()
	c.headersFrom(r.Header)
	if c.origin != "" {
		if g.cors.allows(c.origin) {
			h := c.w.Header()
			h["Access-Control-Allow-Origin"] = []string{c.origin}
			h["Vary"] = varyOrigin
			if r.Method == "OPTIONS" && c.preflight != "" && e != nil {
				g.answerPreflight(c, e)
				return
			}
		} else if r.Method == "OPTIONS" && c.preflight != "" {
			g.serve(c, func(c *call) *failure {
				c.form = lenientForm(r)
				return &failure{info: core.MalformedRequest, status: stdhttp.StatusForbidden,
					msg: fmt.Sprintf("cross-origin requests from %s are not allowed: the server's allowed origins are set by Config.CORSOrigins (replica --cors-origin)",
						truncate(c.origin, 200))}
			})
			return
		}
	}
	if e == nil && g.serveMap(c) {
		return
	}
	if e == nil {
		g.serve(c, func(c *call) *failure {
			c.form = lenientForm(r)
			return &failure{info: core.UnknownOperation, status: stdhttp.StatusNotFound,
				msg: fmt.Sprintf("no such path: %s (see GET /openapi.json)", truncate(r.URL.Path, 200))}
		})
		return
	}
	method := r.Method
	if method == "HEAD" {
		method = "GET"
	}
	h := e.byMethod[method]
	if h == nil {
		c.w.Header().Set("Allow", e.allow)
		g.serve(c, func(c *call) *failure {
			c.form = lenientForm(r)
			return &failure{info: core.UnknownOperation, status: stdhttp.StatusMethodNotAllowed,
				msg: fmt.Sprintf("%s %s is not an operation of this API; %s takes %s", r.Method, e.path, e.path, e.allow)}
		})
		return
	}
	if method != "GET" && (r.ContentLength != 0 || c.contentTypes > 1) {
		if msg := c.checkContentType(); msg != "" {
			g.serve(c, func(c *call) *failure {
				c.form = lenientForm(r)
				return &failure{info: core.MalformedRequest, status: stdhttp.StatusUnsupportedMediaType, msg: msg}
			})
			return
		}
	}
	g.serve(c, h)
}

// checkContentType is "" when the request's body is declared JSON (see
// isJSONType), and otherwise what is wrong. A POST or DELETE with a body
// must say so: browsers send a cross-site form or text/plain POST without
// asking the server first (no preflight), and such a request must not
// write. (GET and HEAD handlers read no body.)
func (c *call) checkContentType() string {
	switch {
	case c.contentTypes > 1:
		return "the request has more than one Content-Type header: send one, Content-Type: application/json"
	case c.contentTypes == 0:
		return "the request has a body but no Content-Type: send it as JSON with Content-Type: application/json"
	case !isJSONType(c.contentType):
		return fmt.Sprintf("Content-Type %q is not accepted: the body must be JSON, sent with Content-Type: application/json",
			truncate(c.contentType, 200))
	}
	return ""
}

// isJSONType reports whether a Content-Type value's media type is
// application/json, in any case, its parameters (charset=utf-8) aside.
func isJSONType[T string | []byte](v T) bool {
	i := 0
	for i < len(v) && v[i] != ';' {
		i++
	}
	for i > 0 && (v[i-1] == ' ' || v[i-1] == '\t') {
		i--
	}
	j := 0
	for j < i && (v[j] == ' ' || v[j] == '\t') {
		j++
	}
	const want = "application/json"
	if i-j != len(want) {
		return false
	}
	for k := 0; k < len(want); k++ {
		b := v[j+k]
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if b != want[k] {
			return false
		}
	}
	return true
}

// headersFrom sets the call's header fields from a net/http request's.
func (c *call) headersFrom(h stdhttp.Header) {
	if v := h["Content-Type"]; len(v) > 0 {
		c.contentType, c.contentTypes = v[0], len(v)
	}
	if v := h["Origin"]; len(v) == 1 {
		c.origin = v[0]
	}
	if v := h["Access-Control-Request-Method"]; len(v) > 0 {
		c.preflight = v[0]
	}
	for _, v := range h["Accept"] {
		c.geo = c.geo || acceptsGeoJSON(v)
	}
}

// lenientForm is the ?form of a request that is refused before its
// parameters are checked.
func lenientForm(r *stdhttp.Request) form {
	if p, err := url.ParseQuery(r.URL.RawQuery); err == nil && strings.EqualFold(p.Get("form"), "a") {
		return formA
	}
	return formB
}

// Routes lists every method and path the gateway serves.
func (g *Gateway) Routes() []Route { return append([]Route(nil), g.routes...) }

// ServeHTTP serves the API. The connection closes after the answer to a
// request that may have framed its body two ways (RFC 9112 sections 6.1
// and 6.3: a request smuggling attempt), so that the bytes after it are
// never read as another request: net/http reads a chunked body by
// Transfer-Encoding alone, removing a Content-Length sent beside it before
// the handler sees the request, so any chunked request closes it; and it
// ignores Transfer-Encoding in HTTP/1.0 (reading the body by
// Content-Length, or as empty), so any HTTP/1.0 request closes it too.
func (g *Gateway) ServeHTTP(w stdhttp.ResponseWriter, r *stdhttp.Request) {
	if len(r.TransferEncoding) > 0 || !r.ProtoAtLeast(1, 1) {
		w.Header().Set("Connection", "close")
	}
	if r.RequestURI == "*" {
		// The mux answers the asterisk-form target (RFC 9112 section
		// 3.2.4) with a bare 400 of its own; it names no resource here:
		// 404 with the JSON error of any unknown path. (net/http answers
		// OPTIONS * itself, before the gateway.)
		g.serveEndpoint(&call{g: g, w: w, r: r}, nil)
		return
	}
	g.mux.ServeHTTP(w, r)
}

// call is one request in flight.
type call struct {
	g      *Gateway
	w      stdhttp.ResponseWriter
	r      *stdhttp.Request
	form   form // the response's form
	ctx    context.Context
	pathID string // the path's {entity_id} or {name}
	// From the request's headers: the first Content-Type and how many
	// there are, the Origin (one) and Access-Control-Request-Method.
	contentType  string
	contentTypes int
	origin       string
	preflight    string
	held         int64 // bytes of the body budget the request holds
	// GeoJSON: geo, the request asks for it (Accept naming
	// application/geo+json, or ?format=geojson); geoOut, the answer is
	// GeoJSON (a query's success, see geojson.go).
	geo, geoOut bool
	status      int // the answer's status, once written by writeLine (for the metrics)
}

// minBodyBuffer is a body buffer's first capacity (less for a shorter
// declared length).
const minBodyBuffer = 4 << 10

var bufPool = sync.Pool{New: func() any { return &jw{b: make([]byte, 0, 4096)} }}

// serve runs h on c and writes its failure, if any, in the call's form.
// c.ctx, when not set, is made here: it ends at the request timeout, and
// not when the client goes away (net/http cancels a request's context
// then, a half-close included): an operation runs to its end, as a write
// already submitted would anyway, and the backend's session is not handed
// to the next request while its last one is still in flight (which that
// request would find busy, 202 REQUEST_IN_FLIGHT).
func (g *Gateway) serve(c *call, h handlerFunc) {
	if c.ctx == nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(c.r.Context()), g.cfg.RequestTimeout)
		defer cancel()
		c.ctx = ctx
	}
	defer func() {
		if c.held > 0 {
			g.budget.release(c.held)
			c.held = 0
		}
		if p := recover(); p != nil {
			if p == stdhttp.ErrAbortHandler {
				panic(p)
			}
			g.log.Error("http: handler panicked", zap.Any("panic", p), zap.String("path", c.r.URL.Path))
			c.fail(fail(core.InternalError, "the gateway failed on this request"))
		}
	}()
	if f := h(c); f != nil {
		c.fail(f)
	}
}

func (c *call) fail(f *failure) {
	c.g.metrics.failed(f.info)
	status := f.httpStatus()
	if status >= 500 {
		c.g.log.Warn("http: request failed", zap.String("method", c.r.Method), zap.String("path", c.r.URL.Path),
			zap.Int("status", status), zap.Uint16("code", uint16(f.info.Code)), zap.String("message", f.msg))
	}
	if status == stdhttp.StatusServiceUnavailable && f.info.Retryable {
		// RFC 9110: how long to wait; the clients' first backoff is shorter
		// (SPEC's 100 ms), and 1 s is the header's least.
		c.w.Header()["Retry-After"] = retryAfter
	}
	c.write(status, errorBody(c.form, f.info, f.msg))
}

// Header values shared by every response (net/http only reads them).
var (
	jsonContentType = []string{"application/json"}
	noStore         = []string{"no-store"}
	retryAfter      = []string{"1"}
)

// write sends a response whose body is body and a newline, with one Write:
// it appends the newline to body (whose capacity the caller gives up).
func (c *call) write(status int, body []byte) {
	c.writeLine(status, append(body, '\n'))
}

// writeLine sends a response whose body is body, which ends with its
// newline.
func (c *call) writeLine(status int, body []byte) {
	c.status = status
	h := c.w.Header()
	h["Content-Type"] = jsonContentType
	if c.geoOut {
		h["Content-Type"] = geoJSONContentType
	}
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	h["Cache-Control"] = noStore
	c.w.WriteHeader(status)
	if c.r.Method != "HEAD" {
		c.w.Write(body)
	}
}

// ok writes a 200 response built by f.
func (c *call) ok(f func(w *jw)) *failure { return c.respond(stdhttp.StatusOK, f) }

func (c *call) respond(status int, f func(w *jw)) *failure {
	w := bufPool.Get().(*jw)
	w.b, w.formA = w.b[:0], c.form == formA
	f(w)
	w.b = append(w.b, '\n')
	c.writeLine(status, w.b)
	if cap(w.b) <= 1<<20 {
		bufPool.Put(w)
	}
	return nil
}

// params reads the query string (allowing the given names and form) and
// sets the call's form from ?form.
func (c *call) params(allowed ...string) (params, *failure) {
	p, f := parseParams(c.r.URL.RawQuery, allowed...)
	if f != nil {
		return nil, f
	}
	if c.form, f = p.form(); f != nil {
		return p, f
	}
	geo, f := p.format()
	c.geo = c.geo || geo
	return p, f
}

// body reads and parses the request body; an empty body gives a nil doc
// when optional, and a failure otherwise.
// bodyNoParams is body for a route that takes no query parameters but form.
func (c *call) bodyNoParams(optional bool) (*doc, *failure) {
	if _, f := c.params(); f != nil {
		return nil, f
	}
	return c.body(optional)
}

// ttlRequest reads the body of /ttl/set, /ttl/extend or /ttl/clear: the
// entity id and, unless secondsField is "", its seconds field.
func (c *call) ttlRequest(secondsField string) (core.Uint128, uint32, *failure) {
	d, f := c.bodyNoParams(false)
	if f != nil {
		return core.Uint128{}, 0, f
	}
	return parseTTL(d, c.form, secondsField)
}

func (c *call) body(optional bool) (*doc, *failure) {
	limit := c.g.cfg.MaxBodyBytes
	tooLarge := func() *failure {
		return &failure{info: core.BatchTooLarge, status: stdhttp.StatusRequestEntityTooLarge,
			msg: fmt.Sprintf("the request body exceeds %d bytes", limit)}
	}
	if c.r.ContentLength > limit {
		return nil, tooLarge()
	}
	// The buffer grows as bytes arrive, doubling, to at most the declared
	// length and a byte to see the end (limit+1 for a body of unknown
	// length): a declared length allocates nothing up front. The request
	// holds its usable capacity from the gateway's body budget until it
	// ends (serve releases it).
	end := limit + 1
	if c.r.ContentLength > 0 {
		end = c.r.ContentLength + 1
	}
	busy := func() *failure {
		return fail(core.ClusterBusy, "the gateway holds its limit of request bodies in flight (%d bytes, Config.BodyBudget) and no room came free within %v: retry with backoff",
			c.g.cfg.BodyBudget, bodyBudgetWait)
	}
	if c.r.ContentLength >= c.g.cfg.BodyBudget {
		return nil, busy() // it would never fit
	}
	var buf []byte
	// A body of known length is not longer than it (net/http's reader
	// stops there), which is within the limit; only a body of unknown
	// length needs the limit's reader.
	body := c.r.Body
	if c.r.ContentLength <= 0 {
		body = stdhttp.MaxBytesReader(c.w, c.r.Body, limit)
	}
	usable := int64(0) // buf's capacity the request holds from the budget
	for {
		if int64(len(buf)) == usable {
			next := min(max(2*usable, minBodyBuffer), end)
			if next == usable { // not reached: the readers stop before end
				return nil, tooLarge()
			}
			if !c.g.budget.acquire(c.ctx, next-usable, bodyBudgetWait) {
				return nil, busy()
			}
			c.held += next - usable
			usable = next
			if int64(cap(buf)) < usable {
				nb := make([]byte, len(buf), usable)
				copy(nb, buf)
				buf = nb
			}
		}
		n, err := body.Read(buf[len(buf):usable])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			var mbe *stdhttp.MaxBytesError
			if errors.As(err, &mbe) {
				return nil, tooLarge()
			}
			return nil, malformed("reading the request body: %v", err)
		}
	}
	if isBlank(buf) {
		if optional {
			return nil, nil
		}
		return nil, malformed("the request body is empty: send a JSON object")
	}
	d, err := parseJSON(buf)
	if err != nil {
		return nil, malformed("the request body is not valid JSON: %v", err)
	}
	return d, nil
}

func isBlank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n-3] + "..."
	}
	return s
}

// run runs op with req on the backend. f is the backend's failure, mapped
// (backendFailure); bad, when f is nil, says the backend answered with a
// reply of the wrong type.
func run[Req, Rep any](c *call, op *core.Op[Req, Rep], req *Req) (reply *Rep, f, bad *failure) {
	oc := &opCall[Req, Rep]{op: op, req: req}
	err := c.g.cfg.Backend.Do(c.ctx, oc)
	reply = oc.reply
	switch {
	case oc.badOK:
		return nil, nil, fail(core.InternalError, "the backend answered %s with %T", op.Code, oc.bad)
	case err != nil:
		return nil, c.backendFailure(op.Code, err), nil
	case reply == nil:
		return nil, nil, fail(core.InternalError, "the backend answered %s with no reply", op.Code)
	}
	return reply, nil, nil
}

// submit runs op with req on the backend and returns its reply.
func submit[Req, Rep any](c *call, op *core.Op[Req, Rep], req *Req) (*Rep, *failure) {
	r, f, bad := run(c, op, req)
	if f == nil {
		f = bad
	}
	return r, f
}

// backendFailure maps a backend error: a deadline (the request's timeout or
// the client's) is 504 with 216 REPLICATION_TIMEOUT; a *core.Error keeps
// its code and the table's HTTP status, except the codes of the session
// protocol between the gateway and the replica, which are the gateway's
// own failure (500); anything else (the replica cannot be reached) is 503
// with 211 CLUSTER_UNAVAILABLE, which is retryable.
func (c *call) backendFailure(op core.Operation, err error) *failure {
	var ce *core.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return &failure{info: core.ReplicationTimeout, status: stdhttp.StatusGatewayTimeout,
			msg: fmt.Sprintf("no answer within the request timeout (%v); a write may or may not have been applied (an upsert is safe to retry)", c.g.cfg.RequestTimeout)}
	case errors.As(err, &ce):
		info := ce.CodeInfo
		switch info.Code {
		case core.ChecksumMismatch.Code, core.UnknownOperation.Code, core.SessionExpired.Code,
			core.RequestInFlight.Code, core.StaleRequest.Code, core.WrongCluster.Code,
			core.RequestMismatch.Code, core.SessionLimit.Code:
			return fail(core.InternalError, "the gateway's session with the replica failed: %s (%d): %s", info.Name, info.Code, ce.Message)
		case core.InvalidEntityID.Code:
			if op == core.OpQueryRadius || op == core.OpQueryNearest {
				info = core.InvalidRadius
			}
		case core.BatchTooLarge.Code:
			switch op {
			case core.OpQueryRadius, core.OpQueryPolygon, core.OpQueryLatest, core.OpEntityHistory,
				core.OpQueryBBox, core.OpQueryNearest:
				info = core.QueryResultTooLarge
			}
		}
		if info.HTTPStatus == 0 {
			info.HTTPStatus = stdhttp.StatusInternalServerError
		}
		return &failure{info: info, msg: ce.Message}
	case errors.Is(err, context.Canceled) && c.r.Context().Err() != nil:
		return fail(core.ClusterUnavailable, "the request was cancelled")
	}
	return fail(core.ClusterUnavailable, "the cluster cannot be reached: %v", err)
}

// Server is a Gateway on a listener, served by net/http.
type Server struct {
	std  *stdhttp.Server
	g    *Gateway
	ln   net.Listener
	done chan struct{}
	err  error
}

// The server's timeouts: a request's header block, the whole request (its
// body included) and an idle connection.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 2 * time.Minute
	idleTimeout       = 2 * time.Minute
)

// Listen makes a Gateway and serves it on addr (host:port) in the
// background until Shutdown.
func Listen(addr string, cfg Config) (*Server, error) {
	g, err := New(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("http: listen on %s: %w", addr, err)
	}
	return serveOn(ln, g), nil
}

// Serve makes a Gateway and serves it on ln in the background until
// Shutdown.
func Serve(ln net.Listener, cfg Config) (*Server, error) {
	g, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return serveOn(ln, g), nil
}

func serveOn(ln net.Listener, g *Gateway) *Server {
	s := &Server{g: g, ln: ln, done: make(chan struct{}), std: &stdhttp.Server{
		Handler:           g,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          zap.NewStdLog(g.log),
	}}
	s.std.RegisterOnShutdown(g.endStreams) // feed streams never go idle: end them
	go func() {
		defer close(s.done)
		if err := s.std.Serve(ln); !errors.Is(err, stdhttp.ErrServerClosed) {
			s.err = err
		}
	}()
	return s
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Done is closed when the server has stopped serving: after Shutdown, or
// when the listener failed (see Err).
func (s *Server) Done() <-chan struct{} { return s.done }

// Err is the listener's failure once Done is closed (nil after Shutdown).
func (s *Server) Err() error {
	<-s.done
	return s.err
}

// Shutdown stops accepting, closes idle connections, lets requests in
// flight finish until ctx ends (then closes their connections) and returns
// once the server has stopped. Event streams that took their connections
// over (feed.go), which net/http no longer counts, are waited for too.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.std.Shutdown(ctx)
	if err != nil {
		s.std.Close()
	}
	s.g.streams.wait(ctx)
	<-s.done
	return err
}
