package http

import (
	"math/bits"
	"slices"
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
type jw struct {
	b     []byte
	formA bool // events show group_id as an int64 (SPEC.md, GeoEvent)
}

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
	w.b = appendU64(w.b, v)
}

// i64 writes v as a number when |v| <= 2^53-1, else as a decimal string.
func (w *jw) i64(v int64) {
	w.sep()
	w.b = appendI64(w.b, v)
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

// known writes v, or null when it is core.Unknown.
func (w *jw) known(v uint64) {
	if v == core.Unknown {
		w.null()
		return
	}
	w.u64(v)
}

// id writes a 128-bit id as a canonical lowercase UUID string.
func (w *jw) id(u core.Uint128) {
	w.sep()
	w.b = append(w.b, '"')
	w.b = appendUUID(w.b, u)
	w.b = append(w.b, '"')
}

// appendUUID appends u as a canonical lowercase UUID (36 bytes).
func appendUUID(b []byte, u core.Uint128) []byte {
	if u.Hi == 0 && u.Lo == 0 {
		return append(b, "00000000-0000-0000-0000-000000000000"...)
	}
	n := len(b)
	b = slices.Grow(b, 36)[:n+36]
	t := b[n : n+36]
	putHex(t[0:8], u.Hi>>32)
	t[8] = '-'
	putHex(t[9:13], u.Hi>>16)
	t[13] = '-'
	putHex(t[14:18], u.Hi)
	t[18] = '-'
	putHex(t[19:23], u.Lo>>48)
	t[23] = '-'
	putHex(t[24:36], u.Lo)
	return b
}

// putHex fills dst with the len(dst) lowest hex digits of v, most
// significant first, two at a time.
func putHex(dst []byte, v uint64) {
	for i := len(dst) - 2; i >= 0; i -= 2 {
		x := v & 0xff
		dst[i], dst[i+1] = hexPairs[2*x], hexPairs[2*x+1]
		v >>= 8
	}
}

// hexPairs holds every byte's two lowercase hex digits.
const hexPairs = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f" +
	"202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f" +
	"404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f" +
	"606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f" +
	"808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f" +
	"a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf" +
	"c0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedf" +
	"e0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfcfdfeff"

// appendU64 appends v as a JSON number when it is at most 2^53-1, else as
// a decimal string (see jw.u64).
func appendU64(b []byte, v uint64) []byte {
	if v <= maxSafeInteger {
		return appendUint(b, v)
	}
	b = append(b, '"')
	b = appendUint(b, v)
	return append(b, '"')
}

// appendI64 is appendU64 for a signed value.
func appendI64(b []byte, v int64) []byte {
	if v >= -maxSafeInteger && v <= maxSafeInteger {
		return appendInt(b, v)
	}
	b = append(b, '"')
	b = appendInt(b, v)
	return append(b, '"')
}

// appendDegrees appends nanodegrees as a JSON number of degrees, exactly:
// the integer part, then the fraction's nine digits without their
// trailing zeros (no fraction when it is zero), with no binary floating
// point on the way. 38115500000 is 38.1155, -5 is -0.000000005, 0 is 0.
// Read back as a Form A coordinate it is the same number of nanodegrees.
func appendDegrees(b []byte, nano int64) []byte {
	u := uint64(nano)
	if nano < 0 {
		b = append(b, '-')
		u = -u
	}
	b = appendUint(b, u/1e9)
	frac := u % 1e9
	if frac == 0 {
		return b
	}
	var d [10]byte // '.' and nine digits, two at a time
	d[0] = '.'
	for i := 8; i >= 2; i -= 2 {
		q := frac / 100
		x := (frac - 100*q) * 2
		d[i], d[i+1] = decimalPairs[x], decimalPairs[x+1]
		frac = q
	}
	d[1] = byte('0' + frac)
	n := 10
	for d[n-1] == '0' {
		n--
	}
	return append(b, d[:n]...)
}

// appendInt is strconv.AppendInt(b, v, 10).
func appendInt(b []byte, v int64) []byte {
	if v < 0 {
		return appendUint(append(b, '-'), -uint64(v))
	}
	return appendUint(b, uint64(v))
}

// appendUint is strconv.AppendUint(b, v, 10), with the digits written in
// place rather than copied from a buffer of their own: it is most of a
// rendered event's work.
func appendUint(b []byte, v uint64) []byte {
	if v < 10 {
		return append(b, byte('0'+v))
	}
	n := decimalLen(v)
	i := len(b) + n
	b = slices.Grow(b, n)[:i]
	for v >= 100 {
		q := v / 100
		x := (v - 100*q) * 2
		i -= 2
		b[i], b[i+1] = decimalPairs[x], decimalPairs[x+1]
		v = q
	}
	if v >= 10 {
		b[i-2], b[i-1] = decimalPairs[2*v], decimalPairs[2*v+1]
	} else {
		b[i-1] = byte('0' + v)
	}
	return b
}

// decimalLen is the number of decimal digits of v, which is at least 10.
func decimalLen(v uint64) int {
	t := bits.Len64(v) * 1233 >> 12 // about log10(2) * bits: the digits, or one less
	if v < pow10[t] {
		return t
	}
	return t + 1
}

var pow10 = [20]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19}

// decimalPairs holds the two digits of each number from 00 to 99.
const decimalPairs = "00010203040506070809101112131415161718192021222324252627282930313233343536373839" +
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879" +
	"8081828384858687888990919293949596979899"

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

// maxEventJSON bounds the length of one rendered event: 4 UUIDs, 7
// integers of up to 20 digits and their quotes, Form A's two coordinates
// in degrees, and the field names.
const maxEventJSON = 640

// event writes a GeoEvent: every field of SPEC.md, with id and
// timestamp_ns; in Form A also lat and lon in degrees (after lon_nano);
// distance_mm when dist is not nil. It is written straight from literals
// (this is most of the bytes of a query's answer).
func (w *jw) event(e *core.GeoEvent, dist *uint64) {
	w.sep()
	b := slices.Grow(w.b, maxEventJSON)
	b = append(b, `{"id":"`...)
	start := len(b)
	b = appendUUID(b, e.EntityID)
	b = append(b, ':')
	ts := len(b)
	b = appendUint(b, e.TimestampNS)
	tsEnd := len(b)
	b = append(b, `","entity_id":"`...)
	b = append(b, b[start:start+36]...)
	b = append(b, `","correlation_id":"`...)
	b = appendUUID(b, e.CorrelationID)
	b = append(b, `","user_data":"`...)
	b = appendUUID(b, e.UserData)
	b = append(b, `","timestamp_ns":`...)
	if e.TimestampNS <= maxSafeInteger { // the digits once more, as appendU64 writes them
		b = append(b, b[ts:tsEnd]...)
	} else {
		b = append(b, '"')
		b = append(b, b[ts:tsEnd]...)
		b = append(b, '"')
	}
	b = append(b, `,"lat_nano":`...)
	b = appendI64(b, e.LatNano)
	b = append(b, `,"lon_nano":`...)
	b = appendI64(b, e.LonNano)
	if w.formA {
		b = append(b, `,"lat":`...)
		b = appendDegrees(b, e.LatNano)
		b = append(b, `,"lon":`...)
		b = appendDegrees(b, e.LonNano)
		b = append(b, `,"group_id":`...)
		b = appendI64(b, int64(e.GroupID))
	} else {
		b = append(b, `,"group_id":`...)
		b = appendU64(b, e.GroupID)
	}
	b = append(b, `,"altitude_mm":`...)
	b = appendInt(b, int64(e.AltitudeMM))
	b = append(b, `,"velocity_mms":`...)
	b = appendUint(b, uint64(e.VelocityMMS))
	b = append(b, `,"ttl_seconds":`...)
	b = appendUint(b, uint64(e.TTLSeconds))
	b = append(b, `,"accuracy_mm":`...)
	b = appendUint(b, uint64(e.AccuracyMM))
	b = append(b, `,"heading_cdeg":`...)
	b = appendUint(b, uint64(e.HeadingCdeg))
	b = append(b, `,"flags":`...)
	b = appendUint(b, uint64(e.Flags))
	if dist != nil {
		b = append(b, `,"distance_mm":`...)
		b = appendU64(b, *dist)
	}
	w.b = append(b, '}')
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
// (radius results, both forms) when distances is set.
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
	w.pageEnd(r)
	w.close()
}

// pageEnd writes a page's has_more and cursor (null when it has no more).
func (w *jw) pageEnd(r *core.QueryResult) {
	w.key("has_more")
	w.boolean(r.HasMore)
	w.key("cursor")
	if r.HasMore {
		w.str(r.Cursor)
	} else {
		w.null()
	}
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
