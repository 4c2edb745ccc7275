package http

import (
	"bytes"
	"encoding/json"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/geoevent/geoevent/core"
)

// The renderers write from literals for speed; these tests hold them to
// straightforward references written with jw's generic calls, byte for
// byte, and to encoding/json's reading of the result.

func refUUID(u core.Uint128) string {
	const hex = "0123456789abcdef"
	var raw [16]byte
	for i := range 8 {
		raw[i] = byte(u.Hi >> (56 - 8*i))
		raw[8+i] = byte(u.Lo >> (56 - 8*i))
	}
	var b []byte
	for i, c := range raw {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hex[c>>4], hex[c&15])
	}
	return string(b)
}

func refEvent(w *jw, e *core.GeoEvent, dist *uint64) {
	w.open()
	w.key("id")
	w.str(refUUID(e.EntityID) + ":" + strconv.FormatUint(e.TimestampNS, 10))
	w.key("entity_id")
	w.str(refUUID(e.EntityID))
	w.key("correlation_id")
	w.str(refUUID(e.CorrelationID))
	w.key("user_data")
	w.str(refUUID(e.UserData))
	w.key("timestamp_ns")
	w.u64(e.TimestampNS)
	w.key("lat_nano")
	w.i64(e.LatNano)
	w.key("lon_nano")
	w.i64(e.LonNano)
	if w.formA {
		w.key("lat")
		w.b = append(w.b, refDegrees(e.LatNano)...)
		w.key("lon")
		w.b = append(w.b, refDegrees(e.LonNano)...)
		w.key("group_id")
		w.i64(int64(e.GroupID))
	} else {
		w.key("group_id")
		w.u64(e.GroupID)
	}
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

// refDegrees is nanodegrees in degrees by exact rational arithmetic: nine
// decimals, then the trailing zeros and a bare point dropped.
func refDegrees(nano int64) string {
	s := new(big.Rat).SetFrac(big.NewInt(nano), big.NewInt(1e9)).FloatString(9)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "-0" {
		s = "0"
	}
	return s
}

func refInsertResults(w *jw, r *core.InsertReply, req *core.InsertRequest, op core.Operation, fm form) {
	w.open()
	w.key("results")
	w.openArr()
	for _, res := range r.Results {
		w.open()
		w.key("index")
		w.num(int64(res.Index))
		if fm == formA {
			w.key("result")
			w.num(int64(res.Code))
		} else {
			w.key("code")
			w.num(int64(res.Code))
			if res.Code != 0 {
				w.key("message")
				w.str(codeName(res.Code))
			}
			if op == core.OpUpsert {
				w.key("updated")
				w.boolean(res.Updated)
			}
		}
		if r.Committed {
			w.key("id")
			w.str(refUUID(req.Events[res.Index].EntityID) + ":" + strconv.FormatUint(res.TimestampNS, 10))
			w.key("timestamp_ns")
			w.u64(res.TimestampNS)
		}
		w.close()
	}
	w.closeArr()
	w.key("committed")
	w.boolean(r.Committed)
	w.close()
}

// genU64 draws values at and around the edges the renderers care about
// (0, 2^53-1, 2^53, 2^64-1) as well as anywhere.
func genU64() *rapid.Generator[uint64] {
	return rapid.OneOf(
		rapid.Uint64(),
		rapid.SampledFrom([]uint64{0, 1, maxSafeInteger, maxSafeInteger + 1, 1<<63 - 1, 1 << 63, 1<<64 - 1}),
		rapid.Uint64Range(0, 1<<20),
	)
}

func genID() *rapid.Generator[core.Uint128] {
	return rapid.Custom(func(t *rapid.T) core.Uint128 {
		if rapid.Bool().Draw(t, "zero") {
			return core.Uint128{}
		}
		return core.Uint128{Hi: genU64().Draw(t, "hi"), Lo: genU64().Draw(t, "lo")}
	})
}

func genEvent() *rapid.Generator[core.GeoEvent] {
	return rapid.Custom(func(t *rapid.T) core.GeoEvent {
		return core.GeoEvent{
			EntityID: genID().Draw(t, "entity"), CorrelationID: genID().Draw(t, "correlation"), UserData: genID().Draw(t, "user"),
			TimestampNS: genU64().Draw(t, "ts"), LatNano: int64(genU64().Draw(t, "lat")), LonNano: int64(genU64().Draw(t, "lon")),
			GroupID: genU64().Draw(t, "group"), AltitudeMM: rapid.Int32().Draw(t, "alt"), VelocityMMS: rapid.Uint32().Draw(t, "vel"),
			TTLSeconds: rapid.Uint32().Draw(t, "ttl"), AccuracyMM: rapid.Uint32().Draw(t, "acc"),
			HeadingCdeg: rapid.Uint16().Draw(t, "heading"), Flags: rapid.Uint16().Draw(t, "flags"),
		}
	})
}

func TestRenderEventMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e := genEvent().Draw(t, "event")
		var dist *uint64
		if rapid.Bool().Draw(t, "withDistance") {
			d := genU64().Draw(t, "distance")
			dist = &d
		}
		// As the second element of an array, to check the separator too.
		formA := rapid.Bool().Draw(t, "formA")
		got, want := jw{formA: formA}, jw{formA: formA}
		for _, w := range []*jw{&got, &want} {
			w.openArr()
			w.num(1)
		}
		got.event(&e, dist)
		refEvent(&want, &e, dist)
		if !bytes.Equal(got.b, want.b) {
			t.Fatalf("event\n got %s\nwant %s", got.b, want.b)
		}
		var m map[string]any
		if err := json.Unmarshal(got.b[3:], &m); err != nil {
			t.Fatalf("%s: %v", got.b, err)
		}
	})
}

func TestAppendDegrees(t *testing.T) {
	for nano, want := range map[int64]string{
		38_115_500_000: "38.1155", -5: "-0.000000005", 0: "0", 90_000_000_000: "90", -180_000_000_000: "-180",
		1_000_000_001: "1.000000001", -13_361_000_000: "-13.361", 100_000_000: "0.1",
		math.MinInt64: "-9223372036.854775808", math.MaxInt64: "9223372036.854775807",
	} {
		if got := string(appendDegrees([]byte("x"), nano)); got != "x"+want {
			t.Errorf("appendDegrees(%d) = %s, want x%s", nano, got, want)
		}
	}
	// Against exact rational arithmetic, and back through the Form A
	// parser to the same nanodegrees.
	rapid.Check(t, func(t *rapid.T) {
		nano := rapid.OneOf(rapid.Int64(), rapid.Int64Range(-200e9, 200e9), rapid.Int64Range(-2e9, 2e9)).Draw(t, "nano")
		got := string(appendDegrees(nil, nano))
		if want := refDegrees(nano); got != want {
			t.Fatalf("appendDegrees(%d) = %s, want %s", nano, got, want)
		}
		if back, ok := degreesToNano([]byte(got)); nano > -1e15 && nano < 1e15 && (!ok || back != nano) {
			t.Fatalf("%d renders as %s, which reads back as %d %v", nano, got, back, ok)
		}
	})
}

func TestRenderInsertResultsMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		evs := rapid.SliceOfN(genEvent(), 1, 5).Draw(t, "events")
		r := &core.InsertReply{Committed: rapid.Bool().Draw(t, "committed")}
		for i, e := range evs {
			r.Results = append(r.Results, core.EventResult{
				Index: uint32(i), TimestampNS: e.TimestampNS, Updated: rapid.Bool().Draw(t, "updated"),
				Code: core.Code(rapid.SampledFrom([]uint16{0, 0, 7, 9, 13, 999}).Draw(t, "code")),
			})
		}
		op := rapid.SampledFrom([]core.Operation{core.OpInsert, core.OpUpsert}).Draw(t, "op")
		fm := rapid.SampledFrom([]form{formA, formB}).Draw(t, "form")
		var got, want jw
		got.insertResults(r, &core.InsertRequest{Events: evs}, op, fm)
		refInsertResults(&want, r, &core.InsertRequest{Events: evs}, op, fm)
		if !bytes.Equal(got.b, want.b) {
			t.Fatalf("results\n got %s\nwant %s", got.b, want.b)
		}
		if !json.Valid(got.b) {
			t.Fatalf("not JSON: %s", got.b)
		}
	})
}

func TestUUIDRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		id := genID().Draw(t, "id")
		s := string(appendUUID(nil, id))
		if s != refUUID(id) {
			t.Fatalf("appendUUID %s, want %s", s, refUUID(id))
		}
		for _, text := range []string{s, upper(s)} {
			got, ok := parseCanonicalUUID([]byte(text))
			want, err := core.ParseID(text, true)
			if !ok || err != nil || got != id || want != id {
				t.Fatalf("%s: parseCanonicalUUID %v %v, core.ParseID %v %v, want %v", text, got, ok, want, err, id)
			}
		}
	})
}

// parseCanonicalUUID accepts exactly the 36-byte texts core.ParseID reads
// as UUIDs, with the same value, and refuses the rest (which core.ParseID
// then judges).
func TestParseCanonicalUUIDAgreesWithCore(t *testing.T) {
	alphabet := []byte("0123456789abcdefABCDEF-gG{}:x ")
	rapid.Check(t, func(t *rapid.T) {
		var b []byte
		if rapid.Bool().Draw(t, "fromUUID") {
			b = appendUUID(nil, genID().Draw(t, "id"))
			for range rapid.IntRange(0, 2).Draw(t, "edits") {
				b[rapid.IntRange(0, 35).Draw(t, "at")] = rapid.SampledFrom(alphabet).Draw(t, "c")
			}
		} else {
			b = rapid.SliceOfN(rapid.SampledFrom(alphabet), 0, 40).Draw(t, "text")
		}
		got, ok := parseCanonicalUUID(b)
		if !ok {
			if len(b) == 36 {
				if _, err := core.ParseUUID(string(b)); err == nil && b[8] == '-' && b[13] == '-' && b[18] == '-' && b[23] == '-' {
					t.Fatalf("%q refused, but core reads it", b)
				}
			}
			return
		}
		want, err := core.ParseID(string(b), true)
		if err != nil || got != want {
			t.Fatalf("%q: %v, core.ParseID %v %v", b, got, want, err)
		}
	})
}

func upper(s string) string { return string(bytes.ToUpper([]byte(s))) }

// appendUint and appendInt write what strconv writes.
func TestAppendIntegersAsStrconv(t *testing.T) {
	us := []uint64{0, 1, 9, 10, 11, 99, 100, 101, 999, 1000, math.MaxUint32, math.MaxInt64, math.MaxUint64, maxSafeInteger, maxSafeInteger + 1}
	for p := uint64(1); p <= 1e19; p *= 10 {
		us = append(us, p-1, p, p+1, 2*p-1, 9*p, 9*p+p-1)
		if p == 1e19 {
			break
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		us = append(us, rng.Uint64()>>rng.IntN(64))
	}
	prefix := []byte("x:")
	for _, u := range us {
		if got, want := appendUint(prefix[:2:2], u), strconv.AppendUint(prefix[:2:2], u, 10); string(got) != string(want) {
			t.Fatalf("appendUint(%d) = %s, want %s", u, got, want)
		}
		for _, v := range []int64{int64(u), -int64(u)} {
			if got, want := appendInt(prefix[:2:2], v), strconv.AppendInt(prefix[:2:2], v, 10); string(got) != string(want) {
				t.Fatalf("appendInt(%d) = %s, want %s", v, got, want)
			}
		}
	}
	if got := string(appendInt(nil, math.MinInt64)); got != strconv.FormatInt(math.MinInt64, 10) {
		t.Fatalf("appendInt(MinInt64) = %s", got)
	}
}
