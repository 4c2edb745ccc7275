// Package http is GeoEvent's JSON gateway: every endpoint of SPEC.md in
// both of its documented shapes (Form A, degrees; Form B, nanodegrees),
// translated to the operations of package core and submitted through a
// [Backend]: in the server, a [ClientBackend] made by [NewLocalBackend],
// the Go client's sessions over in-process connections to the replica of
// the same process (io.Server.DialLocal: the replica sees ordinary client
// frames and sessions, without sockets), or over TCP with
// [NewClientBackend]. The gateway holds no state beyond requests in
// flight. The whole API is described by the OpenAPI 3.1 document in
// openapi.json, served at GET /openapi.json.
//
// # Endpoints
//
//	POST   /events                      createBatch (alias POST /insert)
//	POST   /query/radius                queryRadius
//	POST   /query/polygon               queryPolygon
//	POST   /query/bbox                  a box between two parallels and two meridians (across the antimeridian when min_lon > max_lon)
//	POST   /query/nearest               the k nearest entities, by distance then entity id
//	POST   /query/latest                latest events across entities; with entity_ids a latest-position lookup
//	GET    /entity/{entity_id}          getLatest
//	GET    /entity/{entity_id}/history  one entity's events by time (?since_ns=&until_ns=&limit=&cursor=)
//	POST   /entities/batch              getLatestBatch
//	DELETE /entities                    deleteEntities (alias POST /delete)
//	POST   /cleanup/expired             cleanupExpired (body optional)
//	POST   /ttl/set, /ttl/extend, /ttl/clear
//	GET    /stats, /status, /topology, /ping, /openapi.json
//	GET    /healthz, /readyz            liveness and readiness probes
//	GET    /metrics                     Prometheus's text format
//	PUT    /fences/{name}               define or replace a fence (GET and DELETE it too; GET /fences lists)
//	GET    /feed                        fence transitions: Server-Sent Events, or with wait_ms a long-poll page;
//	                                    after=now starts at the end, and Last-Event-ID wins over after
//	PUT    /hooks/{name}                define or replace a webhook: a URL and a feed filter (GET and DELETE it too; GET /hooks lists)
//	GET    /feed/positions              every event this replica applies inside a box or fence, as Server-Sent Events
//	PUT    /feed/retention              set how long and how many notifications the feed keeps (replicated; GET reads it)
//
// # Forms
//
// A request is Form A or Form B by its field names: center_lat, center_lon,
// radius_m, max_distance_m, min_lat (and the other box corners) and
// vertices {lat, lon} are Form A; center_lat_nano, center_lon_nano,
// radius_mm, max_distance_mm, min_lat_nano (...) and vertices {lat_nano,
// lon_nano} are Form B; mixing them in one body is 400. The spatial
// queries (radius, polygon, bbox, nearest) also take since_ns, flags_all
// and flags_any, alike in both forms (see core.Filter). The response has the request's form.
// Where the body does not tell (no body, GET requests, and the bodies both
// forms share: /events, /entities/batch, /entities, /query/latest, /ttl/*,
// /cleanup/expired) the response is Form B unless the URL says ?form=a
// (?form=b is accepted too). Where the body tells, its fields decide and
// ?form is ignored. Errors are in the form known when they are found: a body
// that is not JSON is answered in the ?form form.
//
//   - Form A: degrees; radius_m in metres (an int32, 1 to 40,000,000);
//     events show lat and lon in degrees beside lat_nano and lon_nano;
//     radius and nearest results carry distance_mm; EventResult {index, result};
//     errors {error_code, error_name, message}; GET /entity/{id} of an
//     unknown entity is 404 with {event: null, found: false} and the
//     error fields (code 3 ENTITY_NOT_FOUND); /entities/batch omits
//     missing entities; a batch that did not commit is 400 with the first
//     failing event's code mapped by core.BatchCode (100
//     INVALID_COORDINATES, 101 INVALID_ENTITY_ID, 105 INVALID_EVENT);
//     entity ids are UUID strings only.
//   - Form B: nanodegrees; radius_mm (1 to 40,000,000,000); EventResult
//     {index, code, message (the code's name) when code is not 0, updated
//     in upsert results}; errors {"error": {code, message (the code's
//     name), details}}; radius and nearest results carry distance_mm; /entities/batch
//     has null in place of a missing entity; a batch that did not commit
//     is 200 with committed false and every event's code; entity ids are
//     UUID strings or decimal strings.
//
// # GeoJSON
//
// The queries (radius, polygon, bbox, nearest, latest, history) answer as
// a GeoJSON FeatureCollection (Content-Type application/geo+json) when
// the request's Accept header names application/geo+json or its URL says
// ?format=geojson (?format=json is the default; other endpoints ignore
// it, and errors are always JSON): one Point Feature an event, its
// properties the event's fields in the request's form, has_more and
// cursor as foreign members; a history adds a LineString of its events.
// A polygon query takes a GeoJSON Polygon, or a MultiPolygon of one
// polygon, as "geometry" in place of vertices and holes. See geojson.go.
// A polygon's "edges" is "geodesic" (great-circle arcs, the default) or
// "planar" (straight in longitude and latitude, as GeoJSON reads them; see
// core.EdgesPlanar).
//
// Events (/events, /insert) take each coordinate in nanodegrees (lat_nano,
// lon_nano) or in degrees (lat, lon), in either form and mixed within a
// batch: one of each pair, both is 400 with 1 MALFORMED_REQUEST. Their units
// do not make the request Form A: the answer stays Form B unless ?form=a,
// so that an answer's shape (code or result; 200 or 400 for a batch that
// did not commit) does not turn on the unit of a coordinate.
//
// Both forms render a GeoEvent with every field of SPEC.md plus id
// ("<entity_id>:<timestamp_ns>") and timestamp_ns; Form A adds lat and lon
// in degrees (after lon_nano). EventResults of a committed batch also carry
// the event's id and timestamp_ns, so a client learns the key the server
// assigned.
//
// # JSON rules
//
//   - Numbers: every integer field accepts a JSON number without fraction
//     or exponent, or a string holding a decimal integer ("123", "-5").
//     64-bit fields (timestamp_ns, group_id, lat_nano, lon_nano,
//     expires_at_ns, distance_mm, counts) are rendered as JSON numbers when
//     their magnitude is at most 2^53-1 (JavaScript's
//     Number.MAX_SAFE_INTEGER) and as decimal strings otherwise, so no
//     client loses precision: today's timestamps are strings
//     ("1767225600000000000"), small group ids are numbers. 32- and 16-bit
//     fields are always numbers.
//   - group_id is a uint64, and Form A shows it as an int64, its two's
//     complement (18446744073709551615 is -1 in Form A): a request takes
//     0 to 2^64-1 in Form B and -2^63 to 2^63-1 in Form A (108
//     INVALID_ARGUMENT outside), and a response shows it in the
//     response's form.
//   - Degrees (Form A's coordinates, and events' lat and lon in either
//     form) are JSON numbers converted exactly from their decimal text: the
//     value times 10^9, rounded half away from zero to an integer number of
//     nanodegrees, with no binary floating point on the way; the range check
//     (±90, ±180 degrees) applies to the rounded value. So 90.0000000004 is
//     90,000,000,000 nanodegrees (valid) and 90.0000000005 is
//     90,000,000,001 (100 INVALID_COORDINATES; an event's per-event 9).
//     Degrees are rendered exactly too: the nanodegrees as a decimal with
//     at most nine fraction digits and no trailing zeros (38115500000 is
//     38.1155, -5 is -0.000000005, 0 is 0); at most 12 significant digits,
//     which a float64 reads and prints back unchanged, and which read back
//     as the same nanodegrees.
//   - An event's timestamp_ns is nanoseconds since the Unix epoch; 0 or no
//     timestamp_ns lets the server assign the time. A value before
//     2000-01-01T00:00:00Z (946684800000000000) is taken for a unit
//     mistake: 108 INVALID_ARGUMENT, the whole request refused, with a
//     message naming the field and, when the value read as seconds,
//     milliseconds or microseconds lands between 2000 and 2100, that value
//     in nanoseconds and RFC 3339 ("timestamp_ns": 1795815268 suggests
//     1795815268000000000, 2026-11-27T21:34:28Z). The bounds of reads
//     (since_ns, until_ns of history and latest) are not checked so: 0 and
//     small values are meaningful bounds there. The rule is the gateway's:
//     the binary protocol takes any timestamp.
//   - Cursors are opaque: 35 characters of URL-safe base64 (A-Z, a-z, 0-9,
//     '-', '_'; RFC 4648 section 5, unpadded), which go into ?cursor= as
//     they are. Cursors in standard base64 ('+', '/', padded with '=' or
//     not) are accepted too, and in ?cursor= a '+' that the query's
//     decoding turned into a space is read back as '+'.
//   - Ids (entity_id, correlation_id, user_data) are strings: a UUID in any
//     form google/uuid parses (rendered canonical, lowercase), or in Form B
//     also an unsigned decimal integer. id is read-only: a request that
//     sets it is 400.
//   - Field names are exact and case-sensitive. An unknown field, a
//     duplicate field, nesting deeper than 64 levels, a value of the wrong
//     JSON type, invalid UTF-8, a
//     missing required field, an unknown or repeated query parameter, and a
//     body that is not one JSON object are 400 with 1 MALFORMED_REQUEST and
//     a message naming the field (events[3].lat_nano). null counts as an
//     absent optional field.
//   - A well-formed value outside its range gets the spec's code for that
//     field: 100 coordinates, 101 entity ids, radius and empty lists, 102
//     more than 1,000 vertices or 100 holes, 104 cursors, 300 more than
//     10,000 events or ids or a limit above 10,000; other fields 108
//     INVALID_ARGUMENT (limit 0, ttl_seconds above 2^32-1, mode, ...).
//     In /events, fields the state machine checks per event (entity_id
//     zero, lat_nano or lat, lon_nano or lon, altitude_mm, velocity_mms,
//     heading_cdeg, timestamp_ns in the future, an existing key) are
//     reported per event (codes 7-14), the batch uncommitted.
//   - A POST or DELETE with a body (Content-Length above 0, or chunked)
//     must send Content-Type: application/json (in any case; parameters such
//     as charset=utf-8 are ignored). Any other type, or none, is 415 with
//     1 MALFORMED_REQUEST, naming what was sent, before the request is
//     read further: so a web page cannot make a browser post a "simple"
//     cross-site request (a form or text/plain, sent without a preflight)
//     that writes. A request without a body (POST /cleanup/expired with
//     none) needs no type. The body limit is 16 MiB (DefaultMaxBodyBytes):
//     a larger body is 413 with code 300 and a JSON error body.
//
// # Status and topology
//
// GET /status, /topology, /ping and /feed are answered by the replica the
// gateway reaches (in the server, its own), not forwarded to the leader;
// /stats is the leader's. /status and /topology carry cluster_id, the cluster id
// clients register with (the UUID replica dev prints). /topology's nodes
// carry status (healthy, recovering, unreachable or unknown: package
// replica's health.go defines them, with the election timeout, 500 ms, as
// the bound), last_contact_ms and lag_ms, as the answering replica knows
// them: a follower knows the other followers from the health report its
// leader sends with each heartbeat round, and reports unknown (null
// contact and lag) once it has none fresher than the election timeout.
//
// # Probes and metrics
//
// With Config.Health (the server sets it from its replica, io.Server.Health),
// GET /healthz, /readyz and /ping answer from the state the replica's
// event loop publishes on every tick, without a request to the backend:
// they never wait for the loop, a leader or a free session. /healthz is
// 200 while the loop runs and ticked within LivenessTimeout (5 s);
// /readyz 200 while the replica knows a leader and has applied what it
// knew committed a tick before; /ping 200 while it leads or heard its
// leader. Each is 503 with a reason otherwise. GET /status waits at most
// 50 ms for the replica, then answers from the published state. Without
// Config.Health, /healthz is 200 while the process answers, and /readyz
// and /ping ask the backend for a ping.
//
// GET /metrics serves Config.Metrics (a set of the gateway's own when nil:
// the server puts the replica's there too) and Go's runtime and process
// metrics, in Prometheus's text format: requests by route, method and
// status class, latency histograms by route and method, and errors by
// code (metrics.go; docs/operations.md lists every metric).
// replication_lag_ms (/stats) is the furthest-behind follower's lag: how
// long ago the leader's log last ended at an entry that follower now
// holds, to a heartbeat interval; a follower that is down holds nothing
// new, so it counts from its last answer (a leader elected since: from
// its election) as soon as anything is written.
//
// [ClientBackend] keeps DefaultPoolSize (64) sessions, so concurrent HTTP
// requests do not queue behind one session; each session registers once,
// numbers its requests and retries as the Go client does (the replica
// deduplicates a resent write). Each request is a log entry of its own,
// with its own results, but concurrent requests share their writes to the
// log and their fsyncs: storage makes one fsync serve every Sync queued
// while the one before it ran (group commit, package io).
//
// # Serving
//
// [Listen] and [Serve] serve the [Gateway] with net/http's server, keeping
// connections alive (pipelined requests are answered in order). Timeouts:
// 10 s for a request's header block, 2 minutes for the whole request and
// for an idle connection. The request headers the gateway reads are
// Content-Type, Origin and Access-Control-Request-Method. A request's
// operation runs to its end or the request timeout: a client that goes
// away does not cancel it.
//
// An event stream (GET /feed without wait_ms, GET /feed/positions) over
// HTTP/1.x takes its connection over from net/http: its answer says
// Connection: close and is not chunked (the body ends with the
// connection), and what a wake-up finds goes out in one write (feed.go).
// The stream ends when the client closes the connection, or at
// Shutdown, which waits for these streams too.
//
// A request that may frame its body two ways is answered once and its
// connection closes, so the bytes after it are never taken for another
// request (request smuggling, RFC 9112 sections 6.1 and 6.3): net/http
// reads Content-Length with Transfer-Encoding as chunked (dropping the
// Content-Length before the gateway sees it), so every chunked request
// closes its connection; it ignores Transfer-Encoding in HTTP/1.0, so
// every HTTP/1.0 request closes its connection; and it refuses two
// different Content-Lengths (400, in plain text).
//
// Request bodies are read into buffers that grow as bytes arrive (a
// declared length reserves nothing up front). Every body holds its
// buffer's bytes from one budget for the whole gateway (Config.BodyBudget,
// DefaultBodyBudget 128 MiB) until its request ends; a body that would
// exceed it waits up to a second for room and is otherwise answered 503
// with 212 CLUSTER_BUSY (retryable).
//
// # Cross-origin requests (CORS)
//
// By default no other origin is allowed: answers carry no CORS header, so
// browsers keep other sites' pages from reading them, and a preflight
// (OPTIONS with Origin and Access-Control-Request-Method) is 403 with a
// JSON error. Config.CORSOrigins (replica's --cors-origin) lists the
// origins allowed, as scheme://host[:port], or "*" for any (for
// development). For an allowed origin every answer carries
// Access-Control-Allow-Origin (the request's origin) and Vary: Origin, and
// a preflight to an API path is 204 with Access-Control-Allow-Methods (the
// path's methods), Access-Control-Allow-Headers: Content-Type and
// Access-Control-Max-Age: 600.
//
// Nothing is written by a rejected request: a request is decoded and
// validated completely before it is submitted, and a batch with an invalid
// event is not committed at all.
//
// # Errors and statuses
//
// Every code keeps the HTTP status of core's code table (400, 500, 503,
// 504); 3 ENTITY_NOT_FOUND is 400 there (from /ttl/*), as SPEC.md keeps
// 404 for the entity lookup, which answers it itself. Backend failures
// map as follows: a *core.Error keeps its code (101 is named
// INVALID_RADIUS for radius and nearest queries, 300 QUERY_RESULT_TOO_LARGE for
// queries: the binary protocol carries only the number); the request
// timeout (DefaultRequestTimeout, 30 s) or the client's deadline is 504
// with 216 REPLICATION_TIMEOUT (retryable; a write may have committed); a backend that cannot be reached is 503 with 211
// CLUSTER_UNAVAILABLE (retryable); codes of the binary session protocol
// (2, 4, 16, 201-205) mean the gateway itself failed and are 500 with 500
// INTERNAL_ERROR. HTTP-level errors outside the table: 404 for an unknown
// path and 405 (with Allow) for a method a path does not take, both with
// code 4 UNKNOWN_OPERATION; 413 for a body over the limit; 415 for a
// body not declared JSON (code 1); 403
// for a preflight from an origin not allowed (code 1); 503 with 212
// CLUSTER_BUSY when the body budget is full.
// GET /ping is 503 {pong: false, reason} when the cluster does not answer.
//
// # The map page
//
// GET / is a map of the entities (mappage.go): an HTML page and its
// files under /map/ (its script, and Leaflet 1.9.4 with its licence,
// embedded from static/), served where no endpoint is and not part of the
// API (not in Routes, nor in openapi.json). It polls /query/radius for the
// entities in view, runs /query/radius, /query/bbox or /query/polygon
// (with planar edges, as the map draws them) for a drawn circle, box or
// polygon and lists the results, and draws an entity's
// history from /entity/{id}/history; it needs no network beyond this
// origin unless Config.MapTiles names base-map tiles.
package http
