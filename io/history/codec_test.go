package history

import (
	"bytes"
	"math"
	"testing"

	"github.com/geoevent/geoevent/core"
)

func sampleEvent() core.GeoEvent {
	return core.GeoEvent{
		EntityID:      core.Uint128{Hi: 1, Lo: 2},
		CorrelationID: core.Uint128{Hi: 3, Lo: math.MaxUint64},
		UserData:      core.Uint128{Lo: 0xfeedface},
		TimestampNS:   1_700_000_000_000_000_000,
		CellID:        0x89c25a31c0000001,
		LatNano:       -33_868_800_000,
		LonNano:       151_209_300_000,
		GroupID:       7,
		AltitudeMM:    -1200,
		VelocityMMS:   13_000,
		TTLSeconds:    3600,
		AccuracyMM:    5000,
		HeadingCdeg:   35999,
		Flags:         3,
	}
}

func TestValueRoundTrip(t *testing.T) {
	for _, e := range []core.GeoEvent{sampleEvent(), {EntityID: core.Uint128{Lo: 1}}, {
		EntityID: core.Uint128{Hi: math.MaxUint64, Lo: math.MaxUint64}, TimestampNS: math.MaxUint64,
		LatNano: math.MinInt64, LonNano: math.MaxInt64, AltitudeMM: math.MinInt32,
		VelocityMMS: math.MaxUint32, TTLSeconds: math.MaxUint32, HeadingCdeg: math.MaxUint16, Flags: math.MaxUint16,
	}} {
		k := appendKey(nil, e.EntityID, e.TimestampNS)
		v := appendValue(nil, &e)
		got, err := decodeEvent(k, v)
		if err != nil || got != e {
			t.Fatalf("round trip of %+v: %+v, %v", e, got, err)
		}
	}
}

func TestValueDecoderRejects(t *testing.T) {
	e := sampleEvent()
	good := appendValue(nil, &e)
	bad := map[string][]byte{
		"empty":       {},
		"version":     append([]byte{2}, good[1:]...),
		"short":       good[:len(good)-1],
		"trailing":    append(append([]byte(nil), good...), 0),
		"non-minimal": {1, 0x80, 0x00},
	}
	// A heading (the last field) of 65536 does not fit its field.
	big := e
	big.HeadingCdeg = 0
	v := appendValue(nil, &big)
	v = append(v[:len(v)-1], 0x80, 0x80, 0x04)
	bad["heading range"] = v
	for name, b := range bad {
		var got core.GeoEvent
		if err := decodeValue(b, &got); err == nil {
			t.Errorf("%s: %x decoded to %+v", name, b, got)
		}
	}
}

func TestEntityBounds(t *testing.T) {
	for _, id := range []core.Uint128{{Lo: 1}, {Hi: 1, Lo: math.MaxUint64}, {Hi: math.MaxUint64, Lo: math.MaxUint64}} {
		lo, hi := entityBounds(id)
		for _, ts := range []uint64{0, 1, math.MaxUint64} {
			k := appendKey(nil, id, ts)
			if bytes.Compare(k, lo) < 0 || bytes.Compare(k, hi) >= 0 {
				t.Fatalf("key %x of %v outside [%x, %x)", k, id, lo, hi)
			}
		}
		if id.Lo != math.MaxUint64 || id.Hi != math.MaxUint64 {
			next := id
			next.Lo++
			if next.Lo == 0 {
				next.Hi++
			}
			if k := appendKey(nil, next, 0); bytes.Compare(k, hi) < 0 {
				t.Fatalf("next entity's key %x below %x", k, hi)
			}
		}
	}
}

func FuzzDecodeKey(f *testing.F) {
	f.Add(appendKey(nil, core.Uint128{Hi: 1, Lo: 2}, 3))
	f.Add([]byte("m/applied"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, k []byte) {
		id, ts, err := decodeKey(k)
		if err != nil {
			return
		}
		if again := appendKey(nil, id, ts); !bytes.Equal(again, k) {
			t.Fatalf("key %x decoded to (%v, %d), which encodes to %x", k, id, ts, again)
		}
	})
}

func FuzzDecodeValue(f *testing.F) {
	e := sampleEvent()
	f.Add(appendValue(nil, &e))
	var zero core.GeoEvent
	f.Add(appendValue(nil, &zero))
	f.Add([]byte{1})
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, v []byte) {
		var e core.GeoEvent
		if err := decodeValue(v, &e); err != nil {
			return
		}
		// Every value the decoder accepts is the one encoding of what it read.
		if again := appendValue(nil, &e); !bytes.Equal(again, v) {
			t.Fatalf("value %x decoded to %+v, which encodes to %x", v, e, again)
		}
	})
}
