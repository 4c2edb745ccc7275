package core

import (
	"bytes"
	"testing"

	"pgregory.net/rapid"
)

func genEvent() *rapid.Generator[GeoEvent] {
	return rapid.Custom(func(t *rapid.T) GeoEvent {
		return GeoEvent{
			EntityID:      genUint128().Draw(t, "entity"),
			CorrelationID: genUint128().Draw(t, "corr"),
			UserData:      genUint128().Draw(t, "user"),
			TimestampNS:   rapid.Uint64().Draw(t, "ts"),
			CellID:        rapid.Uint64().Draw(t, "cell"),
			LatNano:       rapid.Int64().Draw(t, "lat"),
			LonNano:       rapid.Int64().Draw(t, "lon"),
			GroupID:       rapid.Uint64().Draw(t, "group"),
			AltitudeMM:    rapid.Int32().Draw(t, "alt"),
			VelocityMMS:   rapid.Uint32().Draw(t, "vel"),
			TTLSeconds:    rapid.Uint32().Draw(t, "ttl"),
			AccuracyMM:    rapid.Uint32().Draw(t, "acc"),
			HeadingCdeg:   rapid.Uint16().Draw(t, "heading"),
			Flags:         rapid.Uint16().Draw(t, "flags"),
		}
	})
}

func TestRecordRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e := genEvent().Draw(t, "e")
		r := e.AppendRecord(nil)
		if len(r) != RecordSize {
			t.Fatalf("record is %d bytes", len(r))
		}
		got, err := DecodeRecord(r)
		if err != nil || got != e {
			t.Fatalf("round trip: %+v, %v; want %+v", got, err, e)
		}
	})
}

// TestRecordLayout pins the documented byte offsets.
func TestRecordLayout(t *testing.T) {
	e := GeoEvent{
		EntityID: Uint128{Hi: 0x0102030405060708, Lo: 0x1112131415161718}, TimestampNS: 0x2122232425262728,
		CellID: 0x3132333435363738, LatNano: -1, LonNano: 2, GroupID: 3, AltitudeMM: -4, VelocityMMS: 5,
		TTLSeconds: 6, AccuracyMM: 7, HeadingCdeg: 8, Flags: 9,
	}
	r := e.AppendRecord(nil)
	check := func(off int, want ...byte) {
		t.Helper()
		if !bytes.Equal(r[off:off+len(want)], want) {
			t.Errorf("bytes %d..%d = % x, want % x", off, off+len(want), r[off:off+len(want)], want)
		}
	}
	check(0, 0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01)
	check(48, 0x28, 0x27, 0x26, 0x25, 0x24, 0x23, 0x22, 0x21)
	check(56, 0x38, 0x37, 0x36, 0x35, 0x34, 0x33, 0x32, 0x31)
	check(64, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	check(72, 2, 0, 0, 0, 0, 0, 0, 0)
	check(80, 3, 0, 0, 0, 0, 0, 0, 0)
	check(88, 0xfc, 0xff, 0xff, 0xff)
	check(92, 5, 0, 0, 0)
	check(96, 6, 0, 0, 0)
	check(100, 7, 0, 0, 0)
	check(104, 8, 0, 9, 0)
	check(108, make([]byte, 20)...)
}

func TestDecodeRecordRejects(t *testing.T) {
	if _, err := DecodeRecord(make([]byte, 127)); err == nil {
		t.Fatal("127 bytes accepted")
	}
	if _, err := DecodeRecord(make([]byte, 129)); err == nil {
		t.Fatal("129 bytes accepted")
	}
	r := make([]byte, RecordSize)
	r[127] = 1
	_, err := DecodeRecord(r)
	if e, ok := err.(*Error); !ok || e.Code != ReservedBytesNotZero.Code {
		t.Fatalf("reserved byte set: %v", err)
	}
}

func TestValidateEdges(t *testing.T) {
	ok := GeoEvent{EntityID: Uint128{Lo: 1}}
	cases := []struct {
		name string
		mod  func(*GeoEvent)
		want CodeInfo
	}{
		{"valid", func(*GeoEvent) {}, OK},
		{"zero id", func(e *GeoEvent) { e.EntityID = Uint128{} }, EntityIDZero},
		{"lat max", func(e *GeoEvent) { e.LatNano = MaxLatNano }, OK},
		{"lat min", func(e *GeoEvent) { e.LatNano = -MaxLatNano }, OK},
		{"lat over", func(e *GeoEvent) { e.LatNano = MaxLatNano + 1 }, LatOutOfRange},
		{"lat under", func(e *GeoEvent) { e.LatNano = -MaxLatNano - 1 }, LatOutOfRange},
		{"lon max", func(e *GeoEvent) { e.LonNano = MaxLonNano }, OK},
		{"lon min", func(e *GeoEvent) { e.LonNano = -MaxLonNano }, OK},
		{"lon over", func(e *GeoEvent) { e.LonNano = MaxLonNano + 1 }, LonOutOfRange},
		{"lon under", func(e *GeoEvent) { e.LonNano = -MaxLonNano - 1 }, LonOutOfRange},
		{"alt max", func(e *GeoEvent) { e.AltitudeMM = MaxAltitudeMM }, OK},
		{"alt over", func(e *GeoEvent) { e.AltitudeMM = MaxAltitudeMM + 1 }, AltitudeOutOfRange},
		{"alt min", func(e *GeoEvent) { e.AltitudeMM = MinAltitudeMM }, OK},
		{"alt under", func(e *GeoEvent) { e.AltitudeMM = MinAltitudeMM - 1 }, AltitudeOutOfRange},
		{"velocity max", func(e *GeoEvent) { e.VelocityMMS = MaxVelocityMMS }, OK},
		{"velocity over", func(e *GeoEvent) { e.VelocityMMS = MaxVelocityMMS + 1 }, VelocityOutOfRange},
		{"heading max", func(e *GeoEvent) { e.HeadingCdeg = MaxHeadingCdeg }, OK},
		{"heading over", func(e *GeoEvent) { e.HeadingCdeg = MaxHeadingCdeg + 1 }, HeadingOutOfRange},
	}
	for _, c := range cases {
		e := ok
		c.mod(&e)
		if got := e.Validate(); got != c.want {
			t.Errorf("%s: Validate() = %s, want %s", c.name, got.Name, c.want.Name)
		}
	}
}

func TestAddSecondsSaturates(t *testing.T) {
	if got := AddSecondsNS(^uint64(0)-5, 1); got != ^uint64(0) {
		t.Fatalf("got %d", got)
	}
	if got := AddSecondsNS(10, 2); got != 2_000_000_010 {
		t.Fatalf("got %d", got)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add(make([]byte, RecordSize))
	f.Add(make([]byte, 3))
	e := GeoEvent{EntityID: Uint128{Lo: 7}, LatNano: 38_110_000_000, LonNano: 13_360_000_000, TTLSeconds: 60}
	f.Add(e.AppendRecord(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := DecodeRecord(b)
		if err != nil {
			return
		}
		_ = ev.Validate()
		if !bytes.Equal(ev.AppendRecord(nil), b) {
			t.Fatal("an accepted record does not re-encode to the same bytes")
		}
	})
}
