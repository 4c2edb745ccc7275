// Package fuzz holds GeoEvent's end-to-end fuzz targets: inputs that
// cross packages, from HTTP request bytes through the gateway (package
// http), the Go client's sessions, the replica and its state machine, and
// back. The per-package targets (wire decoding in core and replica, JSON
// parsing in http, polygons in geom, the B-tree, storage records) stay
// beside the code they test; the targets here check what only the whole
// path can show.
//
// Each target starts, once per fuzzing process, a one-replica cluster
// formatted in a temporary directory (io.Format, io.Open, io.Server.Run)
// with the gateway in front of it on 127.0.0.1:0 (http.Serve over
// http.NewLocalBackend), and stops both when the test ends.
//
//   - FuzzHTTPRequest writes arbitrary request bytes -- a method, a target,
//     header lines and a body, with a Content-Length of the body's size
//     and a JSON Content-Type, or either left out, or the body alone taken
//     verbatim as the whole request -- on a fresh connection, closes its
//     write side and reads every answer. No answer is 5xx other than 503
//     and 504 (availability). Every answer of 400 or above is JSON in one
//     of the spec's error shapes (Form A {error_code, error_name, message}
//     or Form B {"error": {code, message, details}}) and every other
//     answer with a body is JSON, except a redirect of an unclean path
//     and the refusals net/http's server writes itself, before any
//     handler, to bytes that are not a request it accepts (400, 431, 501
//     and 505 in plain text; 417 for an unknown Expect). When no answer
//     was a success, GET /stats is the same before and after: a refused
//     request changed nothing. (After a 503 or 504, which may precede a
//     late commit, it waits for /stats to settle.)
//   - FuzzOperationsAgainstModel decodes its input into a short sequence
//     of operations on a few entities in a 0.1-degree box -- inserts and
//     upserts (server-assigned timestamps, with or without a TTL), deletes,
//     TTL set and clear, radius and polygon queries, GET /entity/{id},
//     its history and POST /entities/batch -- sends each through the
//     gateway as JSON and compares each answer with a map-based reference
//     model kept in the test: the latest event and history of every
//     entity and its expiry. Spatial results are compared by great-circle
//     distance (radius) and by a local plane (rectangles), skipping
//     entities within a small band of the region's edge, where the
//     model's arithmetic and the state machine's may disagree. Every input
//     works on fresh entity ids and its own group_id (its queries filter
//     on it), so inputs do not see each other's data, and it deletes its
//     entities at the end.
//
// The seeds run with go test ./... (a few seconds). To fuzz for real:
//
//	go test ./fuzz -run '^$' -fuzz FuzzHTTPRequest -fuzztime 60s
//	go test ./fuzz -run '^$' -fuzz FuzzOperationsAgainstModel -fuzztime 60s
//
// Findings are written under testdata/fuzz/<target>/ and then run with
// the seeds.
package fuzz
