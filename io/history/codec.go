package history

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/geoevent/geoevent/core"
)

// Key layout: 'e', entity id (Hi then Lo, big-endian), timestamp
// (big-endian): 25 bytes whose byte order is (entity, timestamp) order, so
// that one entity's events are one contiguous key range, oldest first.
const (
	keyPrefixEvent = 'e'
	keyLen         = 1 + 16 + 8
	entityKeyLen   = 1 + 16
)

// appliedKey holds the index of the last Apply, in the batch of its writes.
var appliedKey = []byte("m/applied")

// valueVersion is the first byte of every stored value.
const valueVersion = 1

// appendKey appends the key of (id, ts) to b.
func appendKey(b []byte, id core.Uint128, ts uint64) []byte {
	b = append(b, keyPrefixEvent)
	b = binary.BigEndian.AppendUint64(b, id.Hi)
	b = binary.BigEndian.AppendUint64(b, id.Lo)
	return binary.BigEndian.AppendUint64(b, ts)
}

// entityBounds returns the key range [lo, hi) that holds every event of id.
func entityBounds(id core.Uint128) (lo, hi []byte) {
	lo = make([]byte, 0, entityKeyLen)
	lo = append(lo, keyPrefixEvent)
	lo = binary.BigEndian.AppendUint64(lo, id.Hi)
	lo = binary.BigEndian.AppendUint64(lo, id.Lo)
	next := id
	next.Lo++
	if next.Lo == 0 {
		next.Hi++
	}
	if next.Hi == 0 && next.Lo == 0 {
		// id is the largest: every event key of it sorts below "f".
		return lo, []byte{keyPrefixEvent + 1}
	}
	hi = make([]byte, 0, entityKeyLen)
	hi = append(hi, keyPrefixEvent)
	hi = binary.BigEndian.AppendUint64(hi, next.Hi)
	hi = binary.BigEndian.AppendUint64(hi, next.Lo)
	return lo, hi
}

// errKey is the error of a key that is not an event key.
var errKey = errors.New("history: not an event key")

// decodeKey reads an event key.
func decodeKey(k []byte) (id core.Uint128, ts uint64, err error) {
	if len(k) != keyLen || k[0] != keyPrefixEvent {
		return core.Uint128{}, 0, errKey
	}
	id.Hi = binary.BigEndian.Uint64(k[1:9])
	id.Lo = binary.BigEndian.Uint64(k[9:17])
	ts = binary.BigEndian.Uint64(k[17:25])
	return id, ts, nil
}

// appendValue appends the version-1 value of e: every field but the key's
// (entity id, timestamp). The layout serves block compression, which sees
// one entity's consecutive events side by side: first the fields that
// rarely change between two events of an entity (ids, group, TTL, flags:
// varints), then the cell id, latitude and longitude as 8 big-endian bytes
// each, whose high bytes an entity's next position shares, then the
// fields that change every time (altitude as a zig-zag varint, velocity,
// accuracy, heading as varints). Measured on the track load, against
// zig-zag varint coordinates and a varint cell id after them: 31.4
// rather than 35.5 bytes an event once compacted.
func appendValue(b []byte, e *core.GeoEvent) []byte {
	b = append(b, valueVersion)
	b = binary.AppendUvarint(b, e.CorrelationID.Hi)
	b = binary.AppendUvarint(b, e.CorrelationID.Lo)
	b = binary.AppendUvarint(b, e.UserData.Hi)
	b = binary.AppendUvarint(b, e.UserData.Lo)
	b = binary.AppendUvarint(b, e.GroupID)
	b = binary.AppendUvarint(b, uint64(e.TTLSeconds))
	b = binary.AppendUvarint(b, uint64(e.Flags))
	b = binary.BigEndian.AppendUint64(b, e.CellID)
	b = binary.BigEndian.AppendUint64(b, uint64(e.LatNano))
	b = binary.BigEndian.AppendUint64(b, uint64(e.LonNano))
	b = binary.AppendVarint(b, int64(e.AltitudeMM))
	b = binary.AppendUvarint(b, uint64(e.VelocityMMS))
	b = binary.AppendUvarint(b, uint64(e.AccuracyMM))
	return binary.AppendUvarint(b, uint64(e.HeadingCdeg))
}

// valueError is the error of a value decodeValue cannot read.
type valueError struct{ detail string }

func (e *valueError) Error() string { return "history: bad value: " + e.detail }

// valueReader reads the fields of a value in order, remembering the first
// failure; every read after a failure returns 0.
type valueReader struct {
	b   []byte
	err error
}

func (r *valueReader) fail(what string) {
	if r.err == nil {
		r.err = &valueError{what}
	}
}

func (r *valueReader) uvarint(what string, max uint64) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	// n <= 0: short or over 64 bits. A last byte of 0 after others is a
	// non-minimal encoding, which appendValue never writes: each value has
	// exactly one encoding.
	if n <= 0 || (n > 1 && r.b[n-1] == 0) {
		r.fail(what + ": bad varint")
		return 0
	}
	if v > max {
		r.fail(fmt.Sprintf("%s: %d out of range", what, v))
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *valueReader) varint(what string, min, max int64) int64 {
	u := r.uvarint(what, math.MaxUint64)
	v := int64(u>>1) ^ -int64(u&1)
	if r.err == nil && (v < min || v > max) {
		r.fail(fmt.Sprintf("%s: %d out of range", what, v))
		return 0
	}
	return v
}

func (r *valueReader) fixed64(what string) uint64 {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 8 {
		r.fail(what + ": short")
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

// decodeValue reads a value into e's fields other than EntityID and
// TimestampNS, which it leaves as they are. It rejects an unknown version,
// a short or overlong value, a non-minimal varint and a field out of its
// type's range.
func decodeValue(v []byte, e *core.GeoEvent) error {
	if len(v) == 0 {
		return &valueError{"empty"}
	}
	if v[0] != valueVersion {
		return &valueError{fmt.Sprintf("unknown version %d", v[0])}
	}
	r := valueReader{b: v[1:]}
	e.CorrelationID.Hi = r.uvarint("correlation_id", math.MaxUint64)
	e.CorrelationID.Lo = r.uvarint("correlation_id", math.MaxUint64)
	e.UserData.Hi = r.uvarint("user_data", math.MaxUint64)
	e.UserData.Lo = r.uvarint("user_data", math.MaxUint64)
	e.GroupID = r.uvarint("group_id", math.MaxUint64)
	e.TTLSeconds = uint32(r.uvarint("ttl", math.MaxUint32))
	e.Flags = uint16(r.uvarint("flags", math.MaxUint16))
	e.CellID = r.fixed64("cell_id")
	e.LatNano = int64(r.fixed64("lat"))
	e.LonNano = int64(r.fixed64("lon"))
	e.AltitudeMM = int32(r.varint("altitude", math.MinInt32, math.MaxInt32))
	e.VelocityMMS = uint32(r.uvarint("velocity", math.MaxUint32))
	e.AccuracyMM = uint32(r.uvarint("accuracy", math.MaxUint32))
	e.HeadingCdeg = uint16(r.uvarint("heading", math.MaxUint16))
	if r.err != nil {
		return r.err
	}
	if len(r.b) != 0 {
		return &valueError{fmt.Sprintf("%d trailing bytes", len(r.b))}
	}
	return nil
}

// decodeEvent reads the event stored under key k with value v.
func decodeEvent(k, v []byte) (core.GeoEvent, error) {
	var e core.GeoEvent
	id, ts, err := decodeKey(k)
	if err != nil {
		return e, err
	}
	e.EntityID, e.TimestampNS = id, ts
	err = decodeValue(v, &e)
	return e, err
}
