package http

import (
	"strconv"
	"unicode/utf8"

	"github.com/geoevent/geoevent/core"
)

// maxSafeInteger is the largest integer a JavaScript number holds exactly
// (Number.MAX_SAFE_INTEGER, 2^53-1). 64-bit values above it are rendered as
// decimal strings.
const maxSafeInteger = 1<<53 - 1

// jw appends compact JSON. Commas are placed by looking at the last byte:
// a key or an array element that follows a value gets one.
type jw struct{ b []byte }

func (w *jw) sep() {
	if n := len(w.b); n > 0 {
		switch w.b[n-1] {
		case '{', '[', ':':
		default:
			w.b = append(w.b, ',')
		}
	}
}

func (w *jw) open()     { w.sep(); w.b = append(w.b, '{') }
func (w *jw) close()    { w.b = append(w.b, '}') }
func (w *jw) openArr()  { w.sep(); w.b = append(w.b, '[') }
func (w *jw) closeArr() { w.b = append(w.b, ']') }

// key writes "name": (name is a plain ASCII literal).
func (w *jw) key(name string) {
	w.sep()
	w.b = append(w.b, '"')
	w.b = append(w.b, name...)
	w.b = append(w.b, '"', ':')
}

// u64 writes v as a number when it is at most 2^53-1, else as a decimal
// string.
func (w *jw) u64(v uint64) {
	w.sep()
	if v <= maxSafeInteger {
		w.b = strconv.AppendUint(w.b, v, 10)
		return
	}
	w.b = append(w.b, '"')
	w.b = strconv.AppendUint(w.b, v, 10)
	w.b = append(w.b, '"')
}

// i64 writes v as a number when |v| <= 2^53-1, else as a decimal string.
func (w *jw) i64(v int64) {
	w.sep()
	if v >= -maxSafeInteger && v <= maxSafeInteger {
		w.b = strconv.AppendInt(w.b, v, 10)
		return
	}
	w.b = append(w.b, '"')
	w.b = strconv.AppendInt(w.b, v, 10)
	w.b = append(w.b, '"')
}

// num writes a 32-bit (or smaller) integer, always as a number.
func (w *jw) num(v int64) {
	w.sep()
	w.b = strconv.AppendInt(w.b, v, 10)
}

func (w *jw) boolean(v bool) {
	w.sep()
	w.b = strconv.AppendBool(w.b, v)
}

func (w *jw) null() {
	w.sep()
	w.b = append(w.b, "null"...)
}

// id writes a 128-bit id as a canonical lowercase UUID string.
func (w *jw) id(u core.Uint128) {
	w.sep()
	w.b = append(w.b, '"')
	w.b = appendUUID(w.b, u)
	w.b = append(w.b, '"')
}

func appendUUID(b []byte, u core.Uint128) []byte {
	const hex = "0123456789abcdef"
	var raw [16]byte
	for i := range 8 {
		raw[i] = byte(u.Hi >> (56 - 8*i))
		raw[8+i] = byte(u.Lo >> (56 - 8*i))
	}
	for i, c := range raw {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hex[c>>4], hex[c&15])
	}
	return b
}

// str writes s as a JSON string; invalid UTF-8 becomes U+FFFD.
func (w *jw) str(s string) {
	w.sep()
	w.b = appendString(w.b, s)
}

func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20 || c == 0x7f:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// event writes a GeoEvent: every field of SPEC.md, with id and
// timestamp_ns; distance_mm when dist is not nil.
func (w *jw) event(e *core.GeoEvent, dist *uint64) {
	w.open()
	w.key("id")
	w.b = append(w.b, '"')
	w.b = appendUUID(w.b, e.EntityID)
	w.b = append(w.b, ':')
	w.b = strconv.AppendUint(w.b, e.TimestampNS, 10)
	w.b = append(w.b, '"')
	w.key("entity_id")
	w.id(e.EntityID)
	w.key("correlation_id")
	w.id(e.CorrelationID)
	w.key("user_data")
	w.id(e.UserData)
	w.key("timestamp_ns")
	w.u64(e.TimestampNS)
	w.key("lat_nano")
	w.i64(e.LatNano)
	w.key("lon_nano")
	w.i64(e.LonNano)
	w.key("group_id")
	w.u64(e.GroupID)
	w.key("altitude_mm")
	w.num(int64(e.AltitudeMM))
	w.key("velocity_mms")
	w.num(int64(e.VelocityMMS))
	w.key("ttl_seconds")
	w.num(int64(e.TTLSeconds))
	w.key("accuracy_mm")
	w.num(int64(e.AccuracyMM))
	w.key("heading_cdeg")
	w.num(int64(e.HeadingCdeg))
	w.key("flags")
	w.num(int64(e.Flags))
	if dist != nil {
		w.key("distance_mm")
		w.u64(*dist)
	}
	w.close()
}

// errorBody writes an error in the request's form: Form A {error_code,
// error_name, message}; Form B {"error": {code, message (the name),
// details}}.
func errorBody(fm form, info core.CodeInfo, msg string) []byte {
	var w jw
	w.open()
	if fm == formA {
		w.key("error_code")
		w.num(int64(info.Code))
		w.key("error_name")
		w.str(info.Name)
		w.key("message")
		w.str(msg)
	} else {
		w.key("error")
		w.open()
		w.key("code")
		w.num(int64(info.Code))
		w.key("message")
		w.str(info.Name)
		w.key("details")
		w.str(msg)
		w.close()
	}
	w.close()
	return w.b
}

// queryResult writes {events, has_more, cursor}; distances are written
// (Form B radius results) when not nil.
func (w *jw) queryResult(r *core.QueryResult, distances bool) {
	w.open()
	w.key("events")
	w.openArr()
	for i := range r.Events {
		var d *uint64
		if distances && i < len(r.DistancesMM) {
			d = &r.DistancesMM[i]
		}
		w.event(&r.Events[i], d)
	}
	w.closeArr()
	w.key("has_more")
	w.boolean(r.HasMore)
	w.key("cursor")
	if r.HasMore {
		w.str(r.Cursor)
	} else {
		w.null()
	}
	w.close()
}

// latestResults writes {events}: Form A omits missing entities, Form B
// writes null in their place.
func (w *jw) latestResults(rs core.LatestResults, fm form) {
	w.open()
	w.key("events")
	w.openArr()
	for i := range rs {
		switch {
		case rs[i].Found:
			w.event(&rs[i].Event, nil)
		case fm == formB:
			w.null()
		}
	}
	w.closeArr()
	w.close()
}
