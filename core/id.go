package core

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/google/uuid"
)

// Uint128 is a 128-bit identifier: entity ids, correlation ids and user data.
//
// Hi holds the most significant 64 bits. As a UUID string the 16 bytes are
// big-endian (Hi first), so the canonical text form of Uint128{Hi: 1, Lo: 2}
// is "00000000-0000-0001-0000-000000000002". In the binary record the value is
// little-endian: Lo in bytes 0-7, Hi in bytes 8-15, both little-endian.
type Uint128 struct {
	Hi, Lo uint64
}

// IsZero reports whether u is the zero id, which no entity may carry.
func (u Uint128) IsZero() bool { return u.Hi == 0 && u.Lo == 0 }

// Compare orders ids as unsigned 128-bit integers: -1, 0 or +1.
func (u Uint128) Compare(v Uint128) int {
	switch {
	case u.Hi < v.Hi:
		return -1
	case u.Hi > v.Hi:
		return 1
	case u.Lo < v.Lo:
		return -1
	case u.Lo > v.Lo:
		return 1
	}
	return 0
}

// Less reports whether u orders before v.
func (u Uint128) Less(v Uint128) bool { return u.Hi < v.Hi || (u.Hi == v.Hi && u.Lo < v.Lo) }

// String formats u as a canonical lowercase UUID.
func (u Uint128) String() string { return u.UUID().String() }

// UUID returns u as a uuid.UUID: its 16 bytes big-endian, Hi first, so that
// u.UUID().String() == u.String().
func (u Uint128) UUID() uuid.UUID {
	var b uuid.UUID
	binary.BigEndian.PutUint64(b[0:8], u.Hi)
	binary.BigEndian.PutUint64(b[8:16], u.Lo)
	return b
}

// FromUUID is the id whose UUID is id (the inverse of [Uint128.UUID]):
// bytes 0-7 of id big-endian are Hi, bytes 8-15 are Lo. Every UUID is an
// id; only the nil UUID is the zero id, which no entity may carry.
func FromUUID(id uuid.UUID) Uint128 {
	return Uint128{Hi: binary.BigEndian.Uint64(id[0:8]), Lo: binary.BigEndian.Uint64(id[8:16])}
}

// Decimal formats u as an unsigned decimal integer (Form B's other id form).
func (u Uint128) Decimal() string {
	if u.Hi == 0 {
		return fmt.Sprint(u.Lo)
	}
	var buf [40]byte
	i := len(buf)
	for !u.IsZero() {
		var r uint64
		u.Hi, r = bits.Div64(0, u.Hi, 10)
		u.Lo, r = bits.Div64(r, u.Lo, 10)
		i--
		buf[i] = byte('0' + r)
	}
	return string(buf[i:])
}

// PutLE writes u into b[0:16] little-endian (Lo first), as in the record.
func (u Uint128) PutLE(b []byte) {
	binary.LittleEndian.PutUint64(b[0:8], u.Lo)
	binary.LittleEndian.PutUint64(b[8:16], u.Hi)
}

// Uint128FromLE reads an id written by [Uint128.PutLE].
func Uint128FromLE(b []byte) Uint128 {
	return Uint128{Lo: binary.LittleEndian.Uint64(b[0:8]), Hi: binary.LittleEndian.Uint64(b[8:16])}
}

// ParseUUID parses a UUID string in any form google/uuid accepts
// (canonical, braced, urn:uuid:, or 32 hex digits).
func ParseUUID(s string) (Uint128, error) {
	id, err := uuid.Parse(s)
	if err != nil {
		return Uint128{}, fmt.Errorf("not a UUID: %q", s)
	}
	return FromUUID(id), nil
}

// ParseDecimal parses an unsigned decimal integer from 0 to 2^128-1.
// Only the digits 0-9 are accepted: no sign, no spaces, no leading "+".
func ParseDecimal(s string) (Uint128, error) {
	if s == "" || len(s) > 39 {
		return Uint128{}, fmt.Errorf("not a decimal id: %q", s)
	}
	var u Uint128
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return Uint128{}, fmt.Errorf("not a decimal id: %q", s)
		}
		// u = u*10 + digit, failing on overflow past 2^128-1.
		hiHi, hiLo := bits.Mul64(u.Hi, 10)
		loHi, loLo := bits.Mul64(u.Lo, 10)
		hi, carry := bits.Add64(hiLo, loHi, 0)
		if hiHi != 0 || carry != 0 {
			return Uint128{}, fmt.Errorf("decimal id exceeds 2^128-1: %q", s)
		}
		lo, carry := bits.Add64(loLo, uint64(c-'0'), 0)
		hi, carry = bits.Add64(hi, 0, carry)
		if carry != 0 {
			return Uint128{}, fmt.Errorf("decimal id exceeds 2^128-1: %q", s)
		}
		u = Uint128{Hi: hi, Lo: lo}
	}
	return u, nil
}

// ParseID accepts a UUID string or, when decimalOK (Form B), a decimal string.
func ParseID(s string, decimalOK bool) (Uint128, error) {
	if decimalOK && len(s) > 0 && len(s) <= 39 && isDigits(s) {
		return ParseDecimal(s)
	}
	return ParseUUID(s)
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
