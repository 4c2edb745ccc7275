package http

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"

	"github.com/geoevent/geoevent/core"
)

// failure is a request the gateway answers with an error: a row of the code
// table, a message naming the field, and the HTTP status (0: the row's).
type failure struct {
	info   core.CodeInfo
	msg    string
	status int
}

func (f *failure) Error() string { return fmt.Sprintf("%s (%d): %s", f.info.Name, f.info.Code, f.msg) }

func (f *failure) httpStatus() int {
	if f.status != 0 {
		return f.status
	}
	return f.info.HTTPStatus
}

func fail(info core.CodeInfo, format string, args ...any) *failure {
	return &failure{info: info, msg: fmt.Sprintf(format, args...)}
}

// malformed is 1 MALFORMED_REQUEST: syntax, types, unknown, missing or
// read-only fields.
func malformed(format string, args ...any) *failure {
	return fail(core.MalformedRequest, format, args...)
}

// join builds a field path: join("events[3]", "lat_nano") = "events[3].lat_nano".
func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// textOf quotes a value's source text for a message, cut to 64 bytes.
func (d *doc) textOf(i int32) string {
	nd := &d.nodes[i]
	var s []byte
	switch nd.kind {
	case kString:
		s = d.src[nd.start-1 : nd.end+1]
	case kArray, kObject:
		return nd.kind.String()
	default:
		s = d.src[nd.start:nd.end]
	}
	if len(s) > 64 {
		return string(s[:61]) + "..."
	}
	return string(s)
}

// wrongType is the failure of a value of the wrong JSON type.
func (d *doc) wrongType(i int32, path, want string) *failure {
	return malformed("%s: want %s, got %s", path, want, d.textOf(i))
}

// isNull reports whether node i is JSON null (an optional field given as
// null counts as absent).
func (d *doc) isNull(i int32) bool { return d.nodes[i].kind == kNull }

// integer is a decoded integer: its sign and magnitude; over is set when the
// magnitude is 2^64 or more.
type integer struct {
	neg  bool
	mag  uint64
	over bool
}

// u64 returns the value as a uint64 when it is one (-0 is 0).
func (x integer) u64() (uint64, bool) {
	if x.over || (x.neg && x.mag != 0) {
		return 0, false
	}
	return x.mag, true
}

// i64 returns the value as an int64 when it is one.
func (x integer) i64() (int64, bool) {
	switch {
	case x.over:
		return 0, false
	case x.neg && x.mag == 0:
		return 0, true
	case x.neg && x.mag <= 1<<63:
		return -int64(x.mag-1) - 1, true
	case !x.neg && x.mag <= math.MaxInt64:
		return int64(x.mag), true
	}
	return 0, false
}

// in reports whether lo <= x <= hi.
func (x integer) in(lo int64, hi uint64) bool {
	if x.over {
		return false
	}
	if x.neg && x.mag != 0 {
		if lo >= 0 {
			return false
		}
		return x.mag <= uint64(-(lo+1))+1
	}
	return x.mag <= hi && (lo <= 0 || x.mag >= uint64(lo))
}

// clampI64 returns x clamped to the int64 range.
func (x integer) clampI64() int64 {
	if v, ok := x.i64(); ok {
		return v
	}
	if x.neg {
		return math.MinInt64
	}
	return math.MaxInt64
}

// integerOf decodes node i as an integer: a JSON number without fraction or
// exponent, or a string holding one (an optional '-' and decimal digits).
func (d *doc) integerOf(i int32, path string) (integer, *failure) {
	nd := &d.nodes[i]
	var s []byte
	switch nd.kind {
	case kNumber:
		s = d.raw(i)
	case kString:
		if nd.esc {
			s = []byte(d.str(i))
		} else {
			s = d.raw(i)
		}
	default:
		return integer{}, d.wrongType(i, path, "an integer (a JSON number or a decimal string)")
	}
	x, ok := parseInteger(s)
	if !ok {
		if nd.kind == kNumber {
			return integer{}, malformed("%s: want an integer, got %s (no fraction or exponent)", path, d.textOf(i))
		}
		return integer{}, malformed("%s: want an integer, got %s (a decimal string holds an optional '-' and digits only)", path, d.textOf(i))
	}
	return x, nil
}

// parseInteger parses -?[0-9]+ (leading zeros allowed in strings; the JSON
// grammar has already refused them in numbers).
func parseInteger(s []byte) (integer, bool) {
	var x integer
	if len(s) > 0 && s[0] == '-' {
		x.neg = true
		s = s[1:]
	}
	if len(s) == 0 {
		return x, false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return x, false
		}
		if x.over {
			continue
		}
		hi, lo := bits.Mul64(x.mag, 10)
		sum, carry := bits.Add64(lo, uint64(c-'0'), 0)
		if hi != 0 || carry != 0 {
			x.over = true
			continue
		}
		x.mag = sum
	}
	return x, true
}

// uintIn decodes an unsigned field within [lo, hi]; a value outside is a
// failure with code info.
func (d *doc) uintIn(i int32, path string, lo, hi uint64, info core.CodeInfo) (uint64, *failure) {
	x, f := d.integerOf(i, path)
	if f != nil {
		return 0, f
	}
	if v, ok := x.u64(); ok && v >= lo && v <= hi {
		return v, nil
	}
	return 0, fail(info, "%s: %s is outside %d to %d", path, d.textOf(i), lo, hi)
}

// groupID decodes a group_id: in Form B a uint64 (0 to 2^64-1); in Form A,
// which shows group_id as an int64, an int64, read as its two's complement
// (-1 is 18446744073709551615).
func (d *doc) groupID(i int32, path string, fm form) (uint64, *failure) {
	x, f := d.integerOf(i, path)
	if f != nil {
		return 0, f
	}
	if fm == formA {
		if v, ok := x.i64(); ok {
			return uint64(v), nil
		}
		return 0, fail(core.InvalidArgument, "%s: %s is outside -9223372036854775808 to 9223372036854775807 (Form A's int64)", path, d.textOf(i))
	}
	if v, ok := x.u64(); ok {
		return v, nil
	}
	return 0, fail(core.InvalidArgument, "%s: %s is outside 0 to 18446744073709551615 (Form B's uint64)", path, d.textOf(i))
}

// stringOf decodes a string node.
func (d *doc) stringOf(i int32, path string) (string, *failure) {
	if d.nodes[i].kind != kString {
		return "", d.wrongType(i, path, "a string")
	}
	return d.str(i), nil
}

// idOf decodes a 128-bit id string: a UUID, or in Form B also a decimal
// string. A string that is neither is a failure with code info.
func (d *doc) idOf(i int32, path string, fm form, info core.CodeInfo) (core.Uint128, *failure) {
	if nd := &d.nodes[i]; nd.kind == kString && !nd.esc {
		if id, ok := parseCanonicalUUID(d.raw(i)); ok {
			return id, nil
		}
	}
	s, f := d.stringOf(i, path)
	if f != nil {
		return core.Uint128{}, f
	}
	return parseID(s, path, fm, info)
}

// parseCanonicalUUID parses the canonical UUID text (8-4-4-4-12 hex digits,
// either case) without allocating; ok is false for anything else, which
// core.ParseID then decides (it accepts the same canonical text with the
// same result, and other forms too).
func parseCanonicalUUID(b []byte) (id core.Uint128, ok bool) {
	if len(b) != 36 || b[8] != '-' || b[13] != '-' || b[18] != '-' || b[23] != '-' {
		return core.Uint128{}, false
	}
	// A digit's value is below 16; anything else maps to 255, whose high
	// bits survive the OR into bad.
	var hi, lo uint64
	var bad byte
	for i, c := range b {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			continue // the dashes, checked above
		}
		x := unhex[c]
		bad |= x
		if i < 18 { // the first 16 digits are the high half
			hi = hi<<4 | uint64(x&15)
		} else {
			lo = lo<<4 | uint64(x&15)
		}
	}
	if bad > 15 {
		return core.Uint128{}, false
	}
	return core.Uint128{Hi: hi, Lo: lo}, true
}

// unhex maps a byte to its hex digit's value, or to 255.
var unhex = func() (t [256]byte) {
	for i := range t {
		t[i] = 255
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = byte(c - '0')
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = byte(c-'a') + 10
		t[c-'a'+'A'] = byte(c-'a') + 10
	}
	return t
}()

func parseID(s, path string, fm form, info core.CodeInfo) (core.Uint128, *failure) {
	id, err := core.ParseID(s, fm == formB)
	if err != nil {
		want := "a UUID or a decimal string"
		if fm == formA {
			want = "a UUID (decimal ids are accepted in Form B only)"
		}
		if len(s) > 64 {
			s = s[:61] + "..."
		}
		return core.Uint128{}, fail(info, "%s: %q is not %s", path, s, want)
	}
	return id, nil
}

// degrees decodes a Form A coordinate in degrees to nanodegrees (see
// degreesToNano) and checks it lies within ±limit degrees.
func (d *doc) degrees(i int32, path string, limitNano int64) (int64, *failure) {
	if d.nodes[i].kind != kNumber {
		return 0, d.wrongType(i, path, "a number of degrees")
	}
	v, ok := degreesToNano(d.raw(i))
	if !ok || v < -limitNano || v > limitNano {
		return 0, fail(core.InvalidCoordinates, "%s: %s degrees is outside -%d to %d", path, d.textOf(i), limitNano/1e9, limitNano/1e9)
	}
	return v, nil
}

// nanodegrees decodes a Form B coordinate and checks it lies within ±limit.
func (d *doc) nanodegrees(i int32, path string, limitNano int64) (int64, *failure) {
	x, f := d.integerOf(i, path)
	if f != nil {
		return 0, f
	}
	if !x.in(-limitNano, uint64(limitNano)) {
		return 0, fail(core.InvalidCoordinates, "%s: %s nanodegrees is outside -%d to %d", path, d.textOf(i), limitNano, limitNano)
	}
	v, _ := x.i64()
	return v, nil
}

// degreesToNano converts the text of a JSON number of degrees to
// nanodegrees exactly: the decimal value times 10^9, rounded half away from
// zero to an integer, with no binary floating point on the way. ok is false
// when the magnitude is 10^15 nanodegrees or more (far outside any valid
// coordinate). The text must be a valid JSON number.
func degreesToNano(text []byte) (nano int64, ok bool) {
	s := text
	neg := false
	if s[0] == '-' {
		neg = true
		s = s[1:]
	}
	// Split into mantissa digits and a base-10 exponent.
	var mant []byte
	exp := 0
	j := 0
	for ; j < len(s) && s[j] >= '0' && s[j] <= '9'; j++ {
		mant = append(mant, s[j])
	}
	if j < len(s) && s[j] == '.' {
		j++
		for ; j < len(s) && s[j] >= '0' && s[j] <= '9'; j++ {
			mant = append(mant, s[j])
			exp--
		}
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		j++
		eneg := false
		if s[j] == '+' || s[j] == '-' {
			eneg = s[j] == '-'
			j++
		}
		e := 0
		for ; j < len(s); j++ {
			if e < 1e9 {
				e = e*10 + int(s[j]-'0')
			}
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	// Drop leading zeros; zero is zero whatever the exponent.
	k := 0
	for k < len(mant) && mant[k] == '0' {
		k++
	}
	mant = mant[k:]
	if len(mant) == 0 {
		return 0, true
	}
	const maxDigits = 15 // 10^15 nanodegrees: out of range for sure
	scale := exp + 9     // value in nanodegrees = mant * 10^scale
	var v int64
	switch {
	case scale >= 0:
		if len(mant)+scale > maxDigits {
			return 0, false
		}
		for _, c := range mant {
			v = v*10 + int64(c-'0')
		}
		for range scale {
			v *= 10
		}
	default:
		drop := -scale
		if drop > len(mant) {
			return 0, true // below 0.1 nanodegree: rounds to 0
		}
		keep := len(mant) - drop
		if keep > maxDigits {
			return 0, false
		}
		for _, c := range mant[:keep] {
			v = v*10 + int64(c-'0')
		}
		if mant[keep] >= '5' { // half or more: away from zero
			v++
		}
	}
	if v >= 1e15 {
		return 0, false
	}
	if neg {
		v = -v
	}
	return v, true
}
