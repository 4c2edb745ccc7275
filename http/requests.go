package http

import (
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"

	"github.com/geoevent/geoevent/core"
)

// form is a request's and its response's shape: Form B (nanodegrees,
// radius_mm, the default) or Form A (degrees, radius_m).
type form uint8

const (
	formB       form = iota
	formA                  // degrees
	formUnknown form = 255 // detect: the fields do not tell
)

func (f form) String() string {
	if f == formA {
		return "Form A"
	}
	return "Form B"
}

// keyName returns the decoded name of key node k.
func (d *doc) keyName(k int32) string {
	if !d.nodes[k].esc {
		return string(d.raw(k))
	}
	return d.str(k)
}

// name returns the key's text for switching on it: the raw bytes when the
// key has no escapes (switch string(b) does not allocate).
func (d *doc) name(k int32) []byte {
	if !d.nodes[k].esc {
		return d.raw(k)
	}
	return []byte(d.str(k))
}

func unknownField(d *doc, k int32, path string, allowed string) *failure {
	where := ""
	if path != "" {
		where = " in " + path
	}
	name := d.keyName(k)
	if len(name) > 64 {
		name = name[:61] + "..."
	}
	return malformed("unknown field %q%s (the fields are %s)", name, where, allowed)
}

func required(path string) *failure { return malformed("%s is required", path) }

// object checks that node i is an object.
func (d *doc) object(i int32, path string) *failure {
	if d.nodes[i].kind != kObject {
		if path == "" {
			return malformed("the body must be a JSON object, got %s", d.nodes[i].kind)
		}
		return d.wrongType(i, path, "an object")
	}
	return nil
}

// ---- POST /events, /insert ----

const eventFieldList = "entity_id, correlation_id, user_data, timestamp_ns, lat_nano or lat, lon_nano or lon, group_id, altitude_mm, velocity_mms, ttl_seconds, accuracy_mm, heading_cdeg, flags"

// parseInsert decodes a createBatch body: {events, mode}.
func parseInsert(d *doc, fm form) (core.Operation, *core.InsertRequest, *failure) {
	if f := d.object(0, ""); f != nil {
		return 0, nil, f
	}
	op := core.OpInsert
	events := int32(-1)
	var f *failure
	d.members(0, func(k, v int32) bool {
		switch string(d.name(k)) {
		case "events":
			if !d.isNull(v) {
				events = v
			}
		case "mode":
			if d.isNull(v) {
				break
			}
			var s string
			if s, f = d.stringOf(v, "mode"); f != nil {
				break
			}
			switch s {
			case "insert":
				op = core.OpInsert
			case "upsert":
				op = core.OpUpsert
			default:
				f = fail(core.InvalidArgument, "mode: %s is neither \"insert\" nor \"upsert\"", d.textOf(v))
			}
		default:
			f = unknownField(d, k, "", "events, mode")
		}
		return f == nil
	})
	if f != nil {
		return 0, nil, f
	}
	if events < 0 {
		return 0, nil, required("events")
	}
	if d.nodes[events].kind != kArray {
		return 0, nil, d.wrongType(events, "events", "an array of events")
	}
	switch n := int(d.nodes[events].n); {
	case n == 0:
		return 0, nil, fail(core.EmptyRequest, "events is empty: send 1 to %d events", core.MaxBatchEvents)
	case n > core.MaxBatchEvents:
		return 0, nil, fail(core.BatchTooLarge, "events: the batch has %d events; at most %d are allowed", n, core.MaxBatchEvents)
	}
	req := &core.InsertRequest{Events: make([]core.GeoEvent, d.nodes[events].n)}
	k := events + 1
	for i := range req.Events {
		if f := parseEvent(d, k, i, fm, &req.Events[i]); f != nil {
			return 0, nil, f
		}
		k = d.nodes[k].next
	}
	return op, req, nil
}

// parseEvent decodes events[i] at node n into ev. Fields whose ranges the
// state machine checks with a per-event code (lat_nano or lat 9, lon_nano
// or lon 10, altitude_mm 11, velocity_mms 12, heading_cdeg 13, a zero
// entity_id 7) are passed on even when out of range, clamped to their
// record type, so that the batch reports them per event; other values
// outside their type are refused here, and so is a timestamp_ns before
// 2000 (see clientTimestamp). Each coordinate comes in nanodegrees
// (lat_nano, lon_nano) or in degrees (lat, lon, converted exactly as Form
// A's coordinates are), in either form: one of each pair, not both.
func parseEvent(d *doc, n int32, i int, fm form, ev *core.GeoEvent) *failure {
	if d.nodes[n].kind != kObject {
		return d.wrongType(n, index("events", i), "an event object")
	}
	// The value decoders name the field alone in their messages (which
	// begin with the path); the event's path is put in front only on
	// failure, so that a valid event costs no string building.
	var hasID bool
	var lat, lon string // the field that gave each coordinate: "" (none yet), lat_nano or lat, lon_nano or lon
	var f *failure
	named := false // f names its whole path already
	d.members(n, func(k, v int32) bool {
		name := d.name(k)
		if string(name) == "id" {
			f, named = malformed("%s is read-only: the service builds it as \"<entity_id>:<timestamp_ns>\"; to name an existing event send its timestamp_ns", join(index("events", i), "id")), true
			return false
		}
		if d.isNull(v) {
			switch string(name) {
			case "entity_id", "lat_nano", "lon_nano", "lat", "lon":
				f, named = malformed("%s is required, got null", join(index("events", i), string(name))), true
			case "correlation_id", "user_data", "timestamp_ns", "group_id", "altitude_mm", "velocity_mms",
				"ttl_seconds", "accuracy_mm", "heading_cdeg", "flags":
			default:
				f, named = unknownField(d, k, index("events", i), eventFieldList), true
			}
			return f == nil
		}
		var x integer
		switch string(name) {
		case "entity_id":
			ev.EntityID, f = d.idOf(v, "entity_id", fm, core.InvalidEntityID)
			hasID = true
		case "correlation_id":
			ev.CorrelationID, f = d.idOf(v, "correlation_id", fm, core.MalformedRequest)
		case "user_data":
			ev.UserData, f = d.idOf(v, "user_data", fm, core.MalformedRequest)
		case "timestamp_ns":
			if ev.TimestampNS, f = d.uintIn(v, "timestamp_ns", 0, math.MaxUint64, core.InvalidArgument); f == nil {
				f = clientTimestamp(ev.TimestampNS, "timestamp_ns")
			}
		case "lat_nano", "lat":
			ev.LatNano, f, named = d.eventAxis(i, v, name, "lat_nano", "lat", &lat)
		case "lon_nano", "lon":
			ev.LonNano, f, named = d.eventAxis(i, v, name, "lon_nano", "lon", &lon)
		case "group_id":
			ev.GroupID, f = d.groupID(v, "group_id", fm)
		case "altitude_mm":
			if x, f = d.integerOf(v, "altitude_mm"); f == nil {
				ev.AltitudeMM = int32(max(math.MinInt32, min(math.MaxInt32, x.clampI64())))
			}
		case "velocity_mms":
			if x, f = d.integerOf(v, "velocity_mms"); f == nil {
				ev.VelocityMMS = math.MaxUint32 // out of range: 12 VELOCITY_OUT_OF_RANGE
				if u, ok := x.u64(); ok && u <= math.MaxUint32 {
					ev.VelocityMMS = uint32(u)
				}
			}
		case "heading_cdeg":
			if x, f = d.integerOf(v, "heading_cdeg"); f == nil {
				ev.HeadingCdeg = math.MaxUint16 // out of range: 13 HEADING_OUT_OF_RANGE
				if u, ok := x.u64(); ok && u <= math.MaxUint16 {
					ev.HeadingCdeg = uint16(u)
				}
			}
		case "ttl_seconds":
			var u uint64
			u, f = d.uintIn(v, "ttl_seconds", 0, math.MaxUint32, core.InvalidArgument)
			ev.TTLSeconds = uint32(u)
		case "accuracy_mm":
			var u uint64
			u, f = d.uintIn(v, "accuracy_mm", 0, math.MaxUint32, core.InvalidArgument)
			ev.AccuracyMM = uint32(u)
		case "flags":
			var u uint64
			u, f = d.uintIn(v, "flags", 0, math.MaxUint16, core.InvalidArgument)
			ev.Flags = uint16(u)
		default:
			f, named = unknownField(d, k, index("events", i), eventFieldList), true
		}
		return f == nil
	})
	switch {
	case f != nil:
		if !named {
			f.msg = index("events", i) + "." + f.msg
		}
		return f
	case !hasID:
		return required(join(index("events", i), "entity_id"))
	case lat == "":
		return malformed("%s is required (or lat, in degrees)", join(index("events", i), "lat_nano"))
	case lon == "":
		return malformed("%s is required (or lon, in degrees)", join(index("events", i), "lon_nano"))
	}
	return nil
}

// eventCoordinate decodes an event's lat_nano or lon_nano (an integer of
// nanodegrees) or lat or lon (a JSON number of degrees, see
// degreesToNano), clamped to int64 and not range-checked: the state
// machine reports a coordinate out of range per event.
func (d *doc) eventCoordinate(v int32, name string) (int64, *failure) {
	if name == "lat_nano" || name == "lon_nano" {
		x, f := d.integerOf(v, name)
		return x.clampI64(), f
	}
	if d.nodes[v].kind != kNumber {
		return 0, d.wrongType(v, name, "a number of degrees")
	}
	text := d.raw(v)
	nano, ok := degreesToNano(text)
	switch {
	case ok:
		return nano, nil
	case text[0] == '-':
		return math.MinInt64, nil
	}
	return math.MaxInt64, nil
}

// bothCoordinates is the failure of an event that gives a coordinate twice,
// in degrees and in nanodegrees.
// eventAxis decodes events[i]'s coordinate on one axis from the member
// name at node v: nano (nanodegrees) or deg (degrees), whichever name is.
// given is the field that gave the axis already ("" none; set here): a
// second one is malformed, and then named reports that the failure names
// its whole path.
func (d *doc) eventAxis(i int, v int32, name []byte, nano, deg string, given *string) (x int64, f *failure, named bool) {
	field := nano // a literal: string(name) would allocate per event
	if len(name) == len(deg) {
		field = deg
	}
	if *given != "" {
		return 0, bothCoordinates(i, *given, field), true
	}
	*given = field
	x, f = d.eventCoordinate(v, field)
	return x, f, false
}

func bothCoordinates(i int, first, second string) *failure {
	deg, nano := first, second
	if len(deg) > len(nano) {
		deg, nano = nano, deg
	}
	return malformed("%s: %s is given too: send %s (degrees) or %s (nanodegrees), not both",
		join(index("events", i), second), first, deg, nano)
}

// The client timestamps an event may carry: 0 (the server assigns the
// time), or nanoseconds since the Unix epoch from 2000-01-01T00:00:00Z on.
// Earlier instants are refused as a unit mistake: 1795815268 is a time in
// seconds, not 1.8 seconds after 1970. The state machine accepts any
// timestamp (its tests and the binary protocol use small ones); the rule
// is the gateway's, for JSON clients.
const (
	minClientTimestampNS = 946_684_800_000_000_000   // 2000-01-01T00:00:00Z
	maxGuessTimestampNS  = 4_102_444_800_000_000_000 // 2100-01-01T00:00:00Z
)

// clientTimestamp checks a client-given timestamp_ns (see
// minClientTimestampNS): one before 2000 is 108 INVALID_ARGUMENT with a
// message that says the unit and shows what the value probably meant, the
// value in seconds, milliseconds or microseconds scaled to nanoseconds
// (the one landing between 2000 and 2100; the three ranges are disjoint).
func clientTimestamp(ns uint64, path string) *failure {
	if ns == 0 || ns >= minClientTimestampNS {
		return nil
	}
	guess := ""
	for _, u := range []struct {
		scale uint64
		unit  string
	}{{1e9, "seconds"}, {1e6, "milliseconds"}, {1e3, "microseconds"}} {
		if ns >= maxGuessTimestampNS/u.scale {
			continue // past 2100 (and so ns*scale below stays under 2^63)
		}
		if t := ns * u.scale; t >= minClientTimestampNS {
			guess = fmt.Sprintf("; if %d is in %s, send %d (%s)", ns, u.unit, t,
				time.Unix(0, int64(t)).UTC().Format(time.RFC3339Nano))
			break
		}
	}
	return fail(core.InvalidArgument, "%s: %d is %s, before 2000-01-01T00:00:00Z: timestamp_ns is nanoseconds since the Unix epoch, or 0 for the time the server assigns%s",
		path, ns, time.Unix(0, int64(ns)).UTC().Format(time.RFC3339Nano), guess)
}

// ---- paging and filters shared by the queries ----

// pageField decodes limit, cursor and group_id (in form fm); handled is
// false for any other key.
func pageField(d *doc, k, v int32, fm form, page *core.Page, group *core.GroupFilter) (handled bool, f *failure) {
	switch string(d.name(k)) {
	case "limit":
		if !d.isNull(v) {
			page.Limit, f = limitOf(d, v, "limit")
		}
	case "cursor":
		if !d.isNull(v) {
			var s string
			if s, f = d.stringOf(v, "cursor"); f == nil {
				page.Cursor, f = cursorOf(s, "cursor")
			}
		}
	case "group_id":
		if !d.isNull(v) {
			group.Set = true
			group.ID, f = d.groupID(v, "group_id", fm)
		}
	default:
		return false, nil
	}
	return true, f
}

// limitOf decodes a page limit: 1 to 10,000; above is 300
// QUERY_RESULT_TOO_LARGE (the state machine's code), below 108.
func limitOf(d *doc, v int32, path string) (uint32, *failure) {
	x, f := d.integerOf(v, path)
	if f != nil {
		return 0, f
	}
	return limitValue(x, d.textOf(v), path)
}

func limitValue(x integer, text, path string) (uint32, *failure) {
	switch u, ok := x.u64(); {
	case ok && u >= 1 && u <= core.MaxQueryLimit:
		return uint32(u), nil
	case !x.neg && x.mag != 0:
		return 0, fail(core.QueryResultTooLarge, "%s %s exceeds %d", path, text, core.MaxQueryLimit)
	}
	return 0, fail(core.InvalidArgument, "%s: %s is outside 1 to %d", path, text, core.MaxQueryLimit)
}

func cursorOf(s, path string) (string, *failure) {
	if len(s) > core.MaxCodecString {
		return "", fail(core.InvalidCursor, "%s: malformed cursor (pass back the cursor a previous page returned)", path)
	}
	return s, nil
}

// ---- POST /query/radius ----

var (
	radiusA = []string{"center_lat", "center_lon", "radius_m"}
	radiusB = []string{"center_lat_nano", "center_lon_nano", "radius_mm"}
)

// detect decides the form of an object by its keys: any of a's names makes
// it Form A, any of b's Form B, both are a failure; neither leaves fm.
func detect(d *doc, obj int32, path string, a, b []string, fm form) (form, *failure) {
	var sawA, sawB string
	d.members(obj, func(k, _ int32) bool {
		name := d.keyName(k)
		for _, s := range a {
			if name == s && sawA == "" {
				sawA = s
			}
		}
		for _, s := range b {
			if name == s && sawB == "" {
				sawB = s
			}
		}
		return true
	})
	switch {
	case sawA != "" && sawB != "":
		where := ""
		if path != "" {
			where = " in " + path
		}
		return fm, malformed("Form A field %q and Form B field %q are mixed%s: use %s (degrees) or %s (nanodegrees)",
			sawA, sawB, where, strings.Join(a, ", "), strings.Join(b, ", "))
	case sawA != "":
		return formA, nil
	case sawB != "":
		return formB, nil
	}
	return fm, nil
}

// parseQuery decodes the body of a spatial query whose own fields are a
// in Form A and b in Form B: it decides the form (fm when the fields show
// none), gives each member to own (with the form's names), and decodes
// the members own does not handle as the page, group and filter fields
// every spatial query takes. own runs first, so that it may refuse one of
// those; any other member is an unknown field, listed with a's or b's
// names and more.
func parseQuery(d *doc, fm form, a, b []string, more string, page *core.Page, group *core.GroupFilter, filter *core.Filter,
	own func(name string, v int32, names []string, fm form) (bool, *failure)) (form, []string, *failure) {
	if f := d.object(0, ""); f != nil {
		return fm, b, f
	}
	fm, f := detect(d, 0, "", a, b, fm)
	if f != nil {
		return fm, b, f
	}
	names := b
	if fm == formA {
		names = a
	}
	d.members(0, func(k, v int32) bool {
		var ok bool
		if ok, f = own(d.keyName(k), v, names, fm); ok || f != nil {
			return f == nil
		}
		if ok, f = queryField(d, k, v, fm, page, group, filter); ok || f != nil {
			return f == nil
		}
		f = unknownField(d, k, "", strings.Join(names, ", ")+more+filterFields)
		return false
	})
	return fm, names, f
}

// parseRadius decodes a queryRadius body in either form; the form its
// fields show is returned (fm when they show none).
func parseRadius(d *doc, fm form) (form, *core.RadiusQuery, *failure) {
	q := &core.RadiusQuery{}
	var hasLat, hasLon, hasRadius bool
	fm, names, f := parseQuery(d, fm, radiusA, radiusB, ", limit, cursor, group_id", &q.Page, &q.Group, &q.Filter,
		func(name string, v int32, names []string, fm form) (ok bool, f *failure) {
			if ok, f = centerField(d, v, name, names, fm, &q.Center, &hasLat, &hasLon); ok || name != names[2] {
				return ok, f
			}
			if !d.isNull(v) {
				hasRadius = true
				q.RadiusMM, f = radiusOf(d, v, name, fm)
			}
			return true, f
		})
	switch {
	case f != nil:
	case !hasLat:
		f = required(names[0])
	case !hasLon:
		f = required(names[1])
	case !hasRadius:
		f = required(names[2])
	}
	return fm, q, f
}

// centerField decodes a center's latitude (the member names[0]) or
// longitude (names[1]) into c, noting which it has; handled is false for
// any other member.
func centerField(d *doc, v int32, name string, names []string, fm form, c *core.Coordinate, hasLat, hasLon *bool) (handled bool, f *failure) {
	switch {
	case name == names[0]:
		if !d.isNull(v) {
			*hasLat = true
			c.LatNano, f = coordinate(d, v, name, fm, core.MaxLatNano)
		}
	case name == names[1]:
		if !d.isNull(v) {
			*hasLon = true
			c.LonNano, f = coordinate(d, v, name, fm, core.MaxLonNano)
		}
	default:
		return false, nil
	}
	return true, f
}

func coordinate(d *doc, v int32, path string, fm form, limit int64) (int64, *failure) {
	if fm == formA {
		return d.degrees(v, path, limit)
	}
	return d.nanodegrees(v, path, limit)
}

// radiusOf decodes radius_m (Form A: an int32 of metres, 1 to 40,000,000)
// or radius_mm (Form B: 1 to 40,000,000,000 millimetres) to millimetres.
func radiusOf(d *doc, v int32, path string, fm form) (uint64, *failure) {
	x, f := d.integerOf(v, path)
	if f != nil {
		return 0, f
	}
	u, ok := x.u64()
	if fm == formA {
		if !ok || u < 1 || u > core.MaxRadiusMM/1000 {
			return 0, fail(core.InvalidRadius, "%s: %s is outside 1 to %d metres", path, d.textOf(v), core.MaxRadiusMM/1000)
		}
		return u * 1000, nil
	}
	if !ok || u < core.MinRadiusMM || u > core.MaxRadiusMM {
		return 0, fail(core.InvalidRadius, "%s: %s is outside %d to %d millimetres", path, d.textOf(v), core.MinRadiusMM, uint64(core.MaxRadiusMM))
	}
	return u, nil
}

// ---- POST /query/polygon ----

var (
	vertexA = []string{"lat", "lon"}
	vertexB = []string{"lat_nano", "lon_nano"}
)

// parsePolygon decodes a queryPolygon body; its vertices' field names
// decide the form (the first vertex that shows one; every other must show
// the same).
func parsePolygon(d *doc, fm form) (form, *core.PolygonQuery, *failure) {
	if f := d.object(0, ""); f != nil {
		return fm, nil, f
	}
	vertices, holes, geometry := int32(-1), int32(-1), int32(-1)
	d.members(0, func(k, v int32) bool {
		switch {
		case d.keyIs(k, "vertices") && !d.isNull(v):
			vertices = v
		case d.keyIs(k, "holes") && !d.isNull(v):
			holes = v
		case d.keyIs(k, "geometry") && !d.isNull(v):
			geometry = v
		}
		return true
	})
	if geometry >= 0 && (vertices >= 0 || holes >= 0) {
		return fm, nil, malformed("geometry (GeoJSON) and vertices or holes are two ways to give the polygon: send one")
	}
	// The form first, so that every later failure is in it.
	var rings []int32
	var paths []string
	if vertices >= 0 && d.nodes[vertices].kind == kArray {
		rings, paths = append(rings, vertices), append(paths, "vertices")
	}
	if holes >= 0 && d.nodes[holes].kind == kArray {
		for i, h := range d.elems(holes) {
			if d.nodes[h].kind == kArray {
				rings, paths = append(rings, h), append(paths, index("holes", i))
			}
		}
	}
	decided := false
	var first string
	for r, ring := range rings {
		for j, v := range d.elems(ring) {
			if d.nodes[v].kind != kObject {
				continue
			}
			p := index(paths[r], j)
			got, f := detect(d, v, p, vertexA, vertexB, formUnknown)
			if f != nil {
				return fm, nil, f
			}
			switch {
			case got == formUnknown:
			case !decided:
				decided, fm, first = true, got, p
			case got != fm:
				return fm, nil, malformed("%s is in %s but %s is in %s: use one form for every vertex", p, got, first, fm)
			}
		}
	}

	q := &core.PolygonQuery{}
	var f *failure
	d.members(0, func(k, v int32) bool {
		var ok bool
		if ok, f = queryField(d, k, v, fm, &q.Page, &q.Group, &q.Filter); ok || f != nil {
			return f == nil
		}
		switch string(d.name(k)) {
		case "vertices", "holes", "geometry":
		case "edges":
			if !d.isNull(v) {
				q.Edges, f = edgesOf(d, v)
			}
		default:
			f = unknownField(d, k, "", "vertices, holes (or geometry), edges, limit, cursor, group_id"+filterFields)
		}
		return f == nil
	})
	if f != nil {
		return fm, nil, f
	}
	if geometry >= 0 {
		q.Vertices, q.Holes, f = polygonGeometry(d, geometry)
		return fm, q, f
	}
	// Shapes and counts (cheap), then the vertices.
	if vertices < 0 {
		return fm, nil, required("vertices")
	}
	if f := ringShape(d, vertices, "vertices"); f != nil {
		return fm, nil, f
	}
	var holeNodes []int32
	if holes >= 0 {
		if d.nodes[holes].kind != kArray {
			return fm, nil, d.wrongType(holes, "holes", "an array of rings")
		}
		if n := int(d.nodes[holes].n); n > core.MaxPolygonHoles {
			return fm, nil, fail(core.PolygonTooComplex, "holes: %d holes; at most %d are allowed", n, core.MaxPolygonHoles)
		}
		holeNodes = d.elems(holes)
		for i, h := range holeNodes {
			if f := ringShape(d, h, index("holes", i)); f != nil {
				return fm, nil, f
			}
		}
	}
	if q.Vertices, f = parseRing(d, vertices, "vertices", fm); f != nil {
		return fm, nil, f
	}
	if len(holeNodes) > 0 {
		q.Holes = make([][]core.Coordinate, len(holeNodes))
		for i, h := range holeNodes {
			if q.Holes[i], f = parseRing(d, h, index("holes", i), fm); f != nil {
				return fm, nil, f
			}
		}
	}
	return fm, q, nil
}

// edgesOf decodes a polygon's edges: "geodesic" (great-circle arcs, the
// default) or "planar" (straight in longitude and latitude); anything else
// is 108 INVALID_ARGUMENT.
func edgesOf(d *doc, v int32) (core.Edges, *failure) {
	s, f := d.stringOf(v, "edges")
	if f != nil {
		return 0, f
	}
	switch s {
	case "geodesic":
		return core.EdgesGeodesic, nil
	case "planar":
		return core.EdgesPlanar, nil
	}
	return 0, fail(core.InvalidArgument, "edges: %q is neither \"geodesic\" nor \"planar\"", s)
}

// ringShape checks that node r is an array of at most 1,001 elements (1,000
// vertices and a closing one); more is 102 POLYGON_TOO_COMPLEX, as the
// state machine says. Fewer than 3 is left to it (103 INVALID_POLYGON).
func ringShape(d *doc, r int32, path string) *failure {
	if d.nodes[r].kind != kArray {
		return d.wrongType(r, path, "an array of coordinates")
	}
	if n := int(d.nodes[r].n); n > core.MaxPolygonVertices+1 {
		return fail(core.PolygonTooComplex, "%s: %d vertices; at most %d are allowed (%d when the last repeats the first)",
			path, n, core.MaxPolygonVertices, core.MaxPolygonVertices+1)
	}
	return nil
}

func parseRing(d *doc, r int32, path string, fm form) ([]core.Coordinate, *failure) {
	ring := make([]core.Coordinate, 0, d.nodes[r].n)
	for j, v := range d.elems(r) {
		c, f := parsePoint(d, v, index(path, j), fm)
		if f != nil {
			return nil, f
		}
		ring = append(ring, c)
	}
	return ring, nil
}

// ---- entity id lists: /entities/batch, DELETE /entities, /query/latest ----

// idList decodes entity_ids: 1 to 10,000 non-zero ids.
func idList(d *doc, v int32, fm form) ([]core.Uint128, *failure) {
	if d.nodes[v].kind != kArray {
		return nil, d.wrongType(v, "entity_ids", "an array of entity ids")
	}
	switch n := int(d.nodes[v].n); {
	case n == 0:
		return nil, fail(core.EmptyRequest, "entity_ids is empty: send 1 to %d ids", core.MaxBatchIDs)
	case n > core.MaxBatchIDs:
		return nil, fail(core.BatchTooLarge, "entity_ids: %d entity ids; at most %d are allowed", n, core.MaxBatchIDs)
	}
	ids := make([]core.Uint128, 0, d.nodes[v].n)
	for i, e := range d.elems(v) {
		p := index("entity_ids", i)
		id, f := d.idOf(e, p, fm, core.InvalidEntityID)
		if f != nil {
			return nil, f
		}
		if id.IsZero() {
			return nil, fail(core.InvalidEntityID, "%s is the zero id", p)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// parseIDs decodes a body {entity_ids}.
func parseIDs(d *doc, fm form) ([]core.Uint128, *failure) {
	if f := d.object(0, ""); f != nil {
		return nil, f
	}
	node := int32(-1)
	var f *failure
	d.members(0, func(k, v int32) bool {
		if string(d.name(k)) != "entity_ids" {
			f = unknownField(d, k, "", "entity_ids")
		} else if !d.isNull(v) {
			node = v
		}
		return f == nil
	})
	if f != nil {
		return nil, f
	}
	if node < 0 {
		return nil, required("entity_ids")
	}
	return idList(d, node, fm)
}

// ---- POST /query/latest ----

// parseLatest decodes a query/latest body: either {limit, group_id,
// since_ns, cursor} (latest across all entities) or {entity_ids} (the
// tutorials' latest-position lookup). An empty or absent body is the first.
func parseLatest(d *doc, fm form) (*core.LatestQuery, []core.Uint128, *failure) {
	q := &core.LatestQuery{}
	if d == nil {
		return q, nil, nil
	}
	if f := d.object(0, ""); f != nil {
		return nil, nil, f
	}
	ids := int32(-1)
	var other string
	var f *failure
	d.members(0, func(k, v int32) bool {
		var ok bool
		if ok, f = pageField(d, k, v, fm, &q.Page, &q.Group); ok || f != nil {
			if !d.isNull(v) {
				other = d.keyName(k)
			}
			return f == nil
		}
		switch string(d.name(k)) {
		case "since_ns":
			if !d.isNull(v) {
				other = "since_ns"
				q.SinceNS, f = d.uintIn(v, "since_ns", 0, math.MaxUint64, core.InvalidArgument)
			}
		case "entity_ids":
			if !d.isNull(v) {
				ids = v
			}
		default:
			f = unknownField(d, k, "", "limit, group_id, since_ns, cursor; or entity_ids alone")
		}
		return f == nil
	})
	if f != nil {
		return nil, nil, f
	}
	if ids >= 0 {
		if other != "" {
			return nil, nil, malformed("entity_ids (a latest-position lookup) cannot be combined with %s (a query of the latest events across all entities): send one or the other", other)
		}
		list, f := idList(d, ids, fm)
		return nil, list, f
	}
	return q, nil, nil
}

// ---- POST /cleanup/expired ----

func parseCleanup(d *doc) (*core.CleanupRequest, *failure) {
	req := &core.CleanupRequest{MaxEntries: core.DefaultCleanupLimit}
	if d == nil {
		return req, nil
	}
	if f := d.object(0, ""); f != nil {
		return nil, f
	}
	var f *failure
	d.members(0, func(k, v int32) bool {
		if string(d.name(k)) != "max_entries" {
			f = unknownField(d, k, "", "max_entries")
		} else if !d.isNull(v) {
			var u uint64
			u, f = d.uintIn(v, "max_entries", 1, core.MaxCleanupLimit, core.InvalidArgument)
			req.MaxEntries = uint32(u)
		}
		return f == nil
	})
	return req, f
}

// ---- POST /ttl/set, /ttl/extend, /ttl/clear ----

// parseTTL decodes {entity_id[, secondsField]}; secondsField "" takes no
// seconds.
func parseTTL(d *doc, fm form, secondsField string) (core.Uint128, uint32, *failure) {
	if f := d.object(0, ""); f != nil {
		return core.Uint128{}, 0, f
	}
	var id core.Uint128
	var secs uint64
	var hasID, hasSecs bool
	var f *failure
	fields := "entity_id"
	if secondsField != "" {
		fields += ", " + secondsField
	}
	d.members(0, func(k, v int32) bool {
		name := d.keyName(k)
		switch {
		case name == "entity_id" && !d.isNull(v):
			hasID = true
			id, f = d.idOf(v, "entity_id", fm, core.InvalidEntityID)
		case secondsField != "" && name == secondsField && !d.isNull(v):
			hasSecs = true
			secs, f = d.uintIn(v, secondsField, 0, math.MaxUint32, core.InvalidArgument)
		case name == "entity_id" || (secondsField != "" && name == secondsField):
		default:
			f = unknownField(d, k, "", fields)
		}
		return f == nil
	})
	switch {
	case f != nil:
	case !hasID:
		f = required("entity_id")
	case id.IsZero():
		f = fail(core.InvalidEntityID, "entity_id is the zero id")
	case secondsField != "" && !hasSecs:
		f = required(secondsField)
	}
	return id, uint32(secs), f
}

// ---- query parameters ----

// params are a request's URL query parameters, each given at most once.
type params map[string]string

// parseParams decodes the query string, allowing only the given names
// (and form everywhere).
func parseParams(raw string, allowed ...string) (params, *failure) {
	if raw == "" {
		return nil, nil // none (a nil params reads as empty)
	}
	vals, err := url.ParseQuery(raw)
	if err != nil {
		return nil, malformed("the query string is malformed: %v", err)
	}
	out := params{}
	for name, vs := range vals {
		ok := name == "form" || name == "format"
		for _, a := range allowed {
			ok = ok || name == a
		}
		if !ok {
			list := append([]string{"form", "format"}, allowed...)
			if len(name) > 64 {
				name = name[:61] + "..."
			}
			return nil, malformed("unknown query parameter %q (the parameters are %s)", name, strings.Join(list, ", "))
		}
		if len(vs) > 1 {
			return nil, malformed("query parameter %s is given %d times", name, len(vs))
		}
		out[name] = vs[0]
	}
	return out, nil
}

// form reads ?form=a|b (default b).
func (p params) form() (form, *failure) {
	switch strings.ToLower(p["form"]) {
	case "", "b":
		return formB, nil
	case "a":
		return formA, nil
	}
	return formB, malformed("query parameter form: %q is neither a nor b", p["form"])
}

// format reads ?format=json|geojson (default json): geo is true for
// geojson, which the queries answer as GeoJSON (geojson.go) and the other
// endpoints ignore.
func (p params) format() (geo bool, f *failure) {
	switch strings.ToLower(p["format"]) {
	case "", "json":
		return false, nil
	case "geojson":
		return true, nil
	}
	return false, malformed("query parameter format: %q is neither json nor geojson", p["format"])
}

// u64 reads an optional decimal uint64 parameter.
func (p params) u64(name string) (uint64, *failure) {
	s := p[name]
	if s == "" {
		return 0, nil
	}
	x, ok := parseInteger([]byte(s))
	if !ok {
		return 0, malformed("query parameter %s: %q is not a decimal integer", name, s)
	}
	u, ok := x.u64()
	if !ok {
		return 0, fail(core.InvalidArgument, "query parameter %s: %s is outside 0 to 18446744073709551615", name, s)
	}
	return u, nil
}

// page reads limit and cursor parameters.
func (p params) page() (core.Page, *failure) {
	var page core.Page
	if s := p["limit"]; s != "" {
		x, ok := parseInteger([]byte(s))
		if !ok {
			return page, malformed("query parameter limit: %q is not a decimal integer", s)
		}
		var f *failure
		if page.Limit, f = limitValue(x, s, "limit"); f != nil {
			return page, f
		}
	}
	// Cursors are URL-safe base64, which a query string carries as it is;
	// a cursor in standard base64 (still accepted: cursors never expire)
	// pasted unescaped has had its '+' decoded to a space, which base64
	// never holds: it is read back as '+'.
	var f *failure
	page.Cursor, f = cursorOf(strings.ReplaceAll(p["cursor"], " ", "+"), "cursor")
	return page, f
}

// entityID decodes a path's entity id.
func entityID(s string, fm form) (core.Uint128, *failure) {
	id, f := parseID(s, "entity_id", fm, core.InvalidEntityID)
	if f == nil && id.IsZero() {
		f = fail(core.InvalidEntityID, "entity_id is the zero id")
	}
	return id, f
}
