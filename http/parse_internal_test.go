package http

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// nanoRef is degreesToNano by big.Rat: text*1e9 rounded half away from zero.
func nanoRef(text string) (int64, bool) {
	r, ok := new(big.Rat).SetString(text)
	if !ok {
		panic(text)
	}
	r.Mul(r, big.NewRat(1_000_000_000, 1))
	neg := r.Sign() < 0
	r.Abs(r)
	q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if new(big.Int).Mul(m, big.NewInt(2)).Cmp(r.Denom()) >= 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() || q.Int64() >= 1e15 {
		return 0, false
	}
	if neg {
		return -q.Int64(), true
	}
	return q.Int64(), true
}

func TestDegreesToNano(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"-0", 0, true}, {"0.0", 0, true}, {"0e999999999999", 0, true},
		{"90", 90_000_000_000, true}, {"-90", -90_000_000_000, true},
		{"90.0000000004", 90_000_000_000, true}, {"90.0000000005", 90_000_000_001, true},
		{"-90.0000000005", -90_000_000_001, true}, {"-90.00000000049999", -90_000_000_000, true},
		{"0.0000000005", 1, true}, {"0.00000000049", 0, true}, {"-0.0000000005", -1, true},
		{"38.115", 38_115_000_000, true}, {"13.361", 13_361_000_000, true},
		{"1.5e-9", 2, true}, {"2.5E-9", 3, true}, {"1e2", 100_000_000_000, true}, {"0.001e+3", 1_000_000_000, true},
		{"123456.789", 123_456_789_000_000, true}, {"999999.9999999994", 999_999_999_999_999, true},
		{"999999.9999999995", 0, false}, {"1e6", 0, false}, {"1e300", 0, false}, {"-1e300", 0, false},
		{"1e-300", 0, true}, {"1e-999999999999999999999", 0, true}, {"1e999999999999999999999", 0, false},
		{"0.30000000000000004", 300_000_000, true}, {"38.1150000000000000000000001", 38_115_000_000, true},
	} {
		got, ok := degreesToNano([]byte(c.in))
		if got != c.want || ok != c.ok {
			t.Errorf("degreesToNano(%s) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20_000 {
		var s string
		switch rng.IntN(3) {
		case 0:
			s = strconv.FormatFloat((rng.Float64()-0.5)*400, 'f', rng.IntN(16), 64)
		case 1:
			s = strconv.FormatFloat((rng.Float64()-0.5)*400, 'e', rng.IntN(20), 64)
		default:
			s = fmt.Sprintf("%d.%0*d", rng.IntN(181)-90, 10, rng.IntN(10_000_000_000))
		}
		want, wok := nanoRef(s)
		got, ok := degreesToNano([]byte(s))
		if got != want || ok != wok {
			t.Fatalf("degreesToNano(%s) = %d, %v; big.Rat says %d, %v", s, got, ok, want, wok)
		}
	}
}

func TestParseInteger(t *testing.T) {
	for _, c := range []struct {
		in   string
		u64  string
		i64  string
		fine bool
	}{
		{"0", "0", "0", true}, {"-0", "0", "0", true}, {"007", "7", "7", true},
		{"18446744073709551615", "18446744073709551615", "", true}, {"18446744073709551616", "", "", true},
		{"9223372036854775807", "9223372036854775807", "9223372036854775807", true},
		{"-9223372036854775808", "", "-9223372036854775808", true}, {"-9223372036854775809", "", "", true},
		{"", "", "", false}, {"-", "", "", false}, {"+1", "", "", false}, {"1.0", "", "", false}, {" 1", "", "", false},
		{"99999999999999999999999999999999", "", "", true},
	} {
		x, ok := parseInteger([]byte(c.in))
		if ok != c.fine {
			t.Errorf("parseInteger(%q) ok = %v", c.in, ok)
			continue
		}
		if !ok {
			continue
		}
		u, uok := x.u64()
		if (c.u64 == "") == uok || (uok && strconv.FormatUint(u, 10) != c.u64) {
			t.Errorf("parseInteger(%q).u64() = %d, %v", c.in, u, uok)
		}
		i, iok := x.i64()
		if (c.i64 == "") == iok || (iok && strconv.FormatInt(i, 10) != c.i64) {
			t.Errorf("parseInteger(%q).i64() = %d, %v", c.in, i, iok)
		}
	}
	lo, hi := integer{neg: true, mag: 5}, integer{mag: 5}
	if !lo.in(-5, 5) || lo.in(-4, 5) || !hi.in(-5, 5) || hi.in(-5, 4) || hi.in(6, 10) || (integer{over: true}).in(-1, ^uint64(0)) {
		t.Error("integer.in")
	}
}

func TestRenderNumbers(t *testing.T) {
	var w jw
	w.openArr()
	for _, v := range []uint64{0, 1<<53 - 1, 1 << 53, ^uint64(0)} {
		w.u64(v)
	}
	for _, v := range []int64{-(1<<53 - 1), -(1 << 53), -1 << 63} {
		w.i64(v)
	}
	w.str("a\"b\\c\n\x01\x7f\xffé")
	w.closeArr()
	want := `[0,9007199254740991,"9007199254740992","18446744073709551615",-9007199254740991,"-9007199254740992","-9223372036854775808","a\"b\\c\n\u0001\u007f\ufffdé"]`
	if string(w.b) != want {
		t.Errorf("got  %s\nwant %s", w.b, want)
	}
	var back []any
	if err := json.Unmarshal(w.b, &back); err != nil {
		t.Fatal(err)
	}
}

// render writes node i back as JSON (strings through appendString).
func (d *doc) render(b []byte, i int32) []byte {
	nd := &d.nodes[i]
	switch nd.kind {
	case kString:
		return appendString(b, d.str(i))
	case kArray:
		b = append(b, '[')
		for j, e := range d.elems(i) {
			if j > 0 {
				b = append(b, ',')
			}
			b = d.render(b, e)
		}
		return append(b, ']')
	case kObject:
		b = append(b, '{')
		first := true
		d.members(i, func(k, v int32) bool {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = appendString(b, d.str(k))
			b = append(b, ':')
			b = d.render(b, v)
			return true
		})
		return append(b, '}')
	}
	return append(b, d.raw(i)...)
}

func checkParse(t *testing.T, src []byte) {
	d, err := parseJSON(src)
	valid := json.Valid(src)
	if err != nil {
		msg := err.Error()
		if valid && utf8.Valid(src) && !strings.Contains(msg, "duplicate field") && !strings.Contains(msg, "nesting deeper") {
			t.Fatalf("parseJSON(%q) refused valid JSON: %v", src, err)
		}
		return
	}
	if !valid {
		t.Fatalf("parseJSON(%q) accepted invalid JSON", src)
	}
	decode := func(b []byte) (any, error) {
		var v any
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		err := dec.Decode(&v)
		return v, err
	}
	a, err := decode(src)
	if err != nil {
		t.Fatal(err)
	}
	out := d.render(nil, 0)
	b, err := decode(out)
	if err != nil {
		t.Fatalf("re-rendered %q is not JSON: %v", out, err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("parseJSON(%q) reads %q", src, out)
	}
	// No request decoder panics on any document, in either form.
	for _, fm := range []form{formA, formB} {
		parseInsert(d, fm)
		parseRadius(d, fm)
		parseBBox(d, fm)
		parseNearest(d, fm)
		parsePolygon(d, fm)
		parseIDs(d, fm)
		parseLatest(d, fm)
		parseCleanup(d)
		parseTTL(d, fm, "ttl_seconds")
		parseTTL(d, fm, "")
	}
}

func TestParseJSON(t *testing.T) {
	for _, s := range parseSeeds {
		checkParse(t, []byte(s))
	}
	deep := strings.Repeat("[", 65) + strings.Repeat("]", 65)
	if _, err := parseJSON([]byte(deep)); err == nil {
		t.Error("65 levels accepted")
	}
	if _, err := parseJSON([]byte(deep[1 : len(deep)-1])); err != nil {
		t.Errorf("64 levels: %v", err)
	}
	var big strings.Builder
	big.WriteString("{")
	for i := range 40 {
		fmt.Fprintf(&big, `"k%d":%d,`, i, i)
	}
	big.WriteString(`"k7":1}`)
	if _, err := parseJSON([]byte(big.String())); err == nil || !strings.Contains(err.Error(), `duplicate field "k7"`) {
		t.Errorf("duplicate in a large object: %v", err)
	}
	if _, err := parseJSON([]byte(`{"a":{"x":1},"b":{"x":2}}`)); err != nil {
		t.Errorf("same key in sibling objects: %v", err)
	}
	if _, err := parseJSON([]byte(`{"\u0061":1,"a":2}`)); err == nil {
		t.Error("escaped duplicate accepted")
	}
}

var parseSeeds = []string{
	`{}`, `[]`, `0`, `-0.5e+10`, `"a\u00e9\ud83d\ude00\ud800x\\\/\b\f\n\r\t"`, `true`, `false`, `null`,
	`{"events":[{"entity_id":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","lat_nano":1,"lon_nano":"2"}]}`,
	`{"center_lat":1.5,"center_lon":-2,"radius_m":5,"limit":"3","group_id":-1}`,
	`{"vertices":[{"lat_nano":0,"lon_nano":0},{"lat_nano":1,"lon_nano":0}],"holes":[[{"lat":1,"lon":2}]]}`,
	`{"events":[{"entity_id":"1","lat":-90.0000000004,"lon":1e2,"timestamp_ns":1795815268123},{"lat":"1","lon_nano":1,"lon":2}]}`,
	`{"entity_ids":["1","2"],"limit":3}`, `{"entity_id":"1","ttl_seconds":1}`, `{"max_entries":null}`,
	` { "a" : [ 1 , 2 ] } `, `{"a":1,"a":2}`, `[1,]`, `{"a"}`, `01`, `1.`, `-`, `"\x"`, "\"\x01\"", `[`, `{"a":1}}`,
	"\"\xff\"", `1e`, `tru`, `{"":0}`,
}

func FuzzParseJSON(f *testing.F) {
	for _, s := range parseSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) { checkParse(t, src) })
}
