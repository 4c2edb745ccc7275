package core

import (
	"bytes"
	"math/big"
	"strings"
	"testing"

	"github.com/google/uuid"
	"pgregory.net/rapid"
)

func genUint128() *rapid.Generator[Uint128] {
	return rapid.Custom(func(t *rapid.T) Uint128 {
		return Uint128{Hi: rapid.Uint64().Draw(t, "hi"), Lo: rapid.Uint64().Draw(t, "lo")}
	})
}

func TestUUIDRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		u := genUint128().Draw(t, "u")
		s := u.String()
		if len(s) != 36 || s != strings.ToLower(s) {
			t.Fatalf("%v formats as %q", u, s)
		}
		got, err := ParseUUID(s)
		if err != nil || got != u {
			t.Fatalf("ParseUUID(%q) = %v, %v; want %v", s, got, err, u)
		}
		up, err := ParseUUID(strings.ToUpper(s))
		if err != nil || up != u {
			t.Fatalf("upper-case UUID %q not accepted", s)
		}
	})
}

func TestUUIDByteOrder(t *testing.T) {
	u := Uint128{Hi: 1, Lo: 2}
	if got, want := u.String(), "00000000-0000-0001-0000-000000000002"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
}

func TestDecimalRoundTripAgainstBig(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		u := genUint128().Draw(t, "u")
		want := new(big.Int).Lsh(new(big.Int).SetUint64(u.Hi), 64)
		want.Or(want, new(big.Int).SetUint64(u.Lo))
		if got := u.Decimal(); got != want.String() {
			t.Fatalf("Decimal(%v) = %s, want %s", u, got, want)
		}
		back, err := ParseDecimal(want.String())
		if err != nil || back != u {
			t.Fatalf("ParseDecimal(%s) = %v, %v", want, back, err)
		}
	})
}

func TestParseDecimalEdges(t *testing.T) {
	max := "340282366920938463463374607431768211455" // 2^128-1
	u, err := ParseDecimal(max)
	if err != nil || u != (Uint128{^uint64(0), ^uint64(0)}) {
		t.Fatalf("2^128-1: %v, %v", u, err)
	}
	for _, bad := range []string{
		"340282366920938463463374607431768211456", // 2^128
		"999999999999999999999999999999999999999",
		"1000000000000000000000000000000000000000", // 40 digits
		"", "-1", "+1", "1 ", "0x10", "１",
	} {
		if _, err := ParseDecimal(bad); err == nil {
			t.Errorf("ParseDecimal(%q) accepted", bad)
		}
	}
	if u, err := ParseDecimal("0"); err != nil || !u.IsZero() {
		t.Fatalf("0: %v %v", u, err)
	}
}

func TestParseID(t *testing.T) {
	if _, err := ParseID("12345", false); err == nil {
		t.Fatal("decimal accepted where only UUIDs are")
	}
	u, err := ParseID("12345", true)
	if err != nil || u != (Uint128{Lo: 12345}) {
		t.Fatalf("ParseID decimal: %v %v", u, err)
	}
	u, err = ParseID("00000000-0000-0000-0000-000000003039", true)
	if err != nil || u != (Uint128{Lo: 12345}) {
		t.Fatalf("ParseID uuid: %v %v", u, err)
	}
	if _, err := ParseID("not-a-uuid", true); err == nil {
		t.Fatal("garbage accepted")
	}
}

func TestCompareIsUnsigned128(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := genUint128().Draw(t, "a"), genUint128().Draw(t, "b")
		ab := func(u Uint128) *big.Int {
			x := new(big.Int).Lsh(new(big.Int).SetUint64(u.Hi), 64)
			return x.Or(x, new(big.Int).SetUint64(u.Lo))
		}
		if got, want := a.Compare(b), ab(a).Cmp(ab(b)); got != want {
			t.Fatalf("Compare(%v, %v) = %d, want %d", a, b, got, want)
		}
		if a.Less(b) != (a.Compare(b) < 0) {
			t.Fatal("Less disagrees with Compare")
		}
	})
}

func FuzzParseID(f *testing.F) {
	for _, s := range []string{"0", "1", "340282366920938463463374607431768211455", "00000000-0000-0001-0000-000000000002", "{00000000-0000-0001-0000-000000000002}", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := ParseID(s, true)
		if err != nil {
			return
		}
		// Whatever parsed must format and parse back to itself.
		if back, err := ParseUUID(u.String()); err != nil || back != u {
			t.Fatalf("%q -> %v does not round-trip through UUID", s, u)
		}
		if back, err := ParseDecimal(u.Decimal()); err != nil || back != u {
			t.Fatalf("%q -> %v does not round-trip through decimal", s, u)
		}
	})
}

// TestUUIDConversion checks FromUUID and Uint128.UUID against google/uuid's
// own parsing and formatting, from both sides.
func TestUUIDConversion(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var raw uuid.UUID
		copy(raw[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "bytes"))
		u := FromUUID(raw)
		if u.UUID() != raw {
			t.Fatalf("FromUUID(%v).UUID() = %v", raw, u.UUID())
		}
		if u.String() != raw.String() {
			t.Fatalf("FromUUID(%v).String() = %q, uuid says %q", raw, u.String(), raw.String())
		}
		if p, err := ParseUUID(raw.String()); err != nil || p != u {
			t.Fatalf("ParseUUID(%q) = %v, %v; want %v", raw.String(), p, err, u)
		}
		if u.IsZero() != (raw == uuid.Nil) {
			t.Fatalf("FromUUID(%v).IsZero() = %v", raw, u.IsZero())
		}

		v := genUint128().Draw(t, "v")
		parsed, err := uuid.Parse(v.String())
		if err != nil || parsed != v.UUID() {
			t.Fatalf("uuid.Parse(%q) = %v, %v; want %v", v.String(), parsed, err, v.UUID())
		}
		if FromUUID(v.UUID()) != v {
			t.Fatalf("FromUUID(%v.UUID()) = %v", v, FromUUID(v.UUID()))
		}
		// The order of ids is the order of their UUIDs' bytes.
		w := genUint128().Draw(t, "w")
		vu, wu := v.UUID(), w.UUID()
		if got, want := v.Compare(w), bytes.Compare(vu[:], wu[:]); got != want {
			t.Fatalf("%v.Compare(%v) = %d, bytes compare %d", v, w, got, want)
		}
	})
}

func TestUUIDConversionFixed(t *testing.T) {
	id := uuid.MustParse("00000000-0000-0001-0000-000000000002")
	if got := FromUUID(id); got != (Uint128{Hi: 1, Lo: 2}) {
		t.Fatalf("FromUUID(%v) = %+v, want {Hi:1 Lo:2}", id, got)
	}
	if FromUUID(uuid.Nil) != (Uint128{}) || (Uint128{}).UUID() != uuid.Nil {
		t.Fatal("the nil UUID is not the zero id")
	}
}
