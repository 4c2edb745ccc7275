package statemachine

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	"slices"
	"strings"
	"testing"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/statemachine/internal/btree"
)

// FuzzDecodeCursor: any string is either refused with INVALID_CURSOR or
// decodes to a key whose cursor is the string itself in the canonical
// text (URL-safe alphabet, no padding): every accepted text names one key.
func FuzzDecodeCursor(f *testing.F) {
	f.Add("")
	f.Add("x")
	f.Add(encodeCursor(kindRadius, keyOf(core.Uint128{Hi: 1, Lo: 2}, 3)))
	f.Add(encodeCursor(kindLatest, keyOf(core.Uint128{}, ^uint64(0))))
	// Standard base64, padded, holding both '+' and '/'; unpadded;
	// URL-safe padded; mixed alphabets; a line break (which package
	// base64 would skip).
	old := oldCursor(kindHistory, keyOf(core.Uint128{Hi: ^uint64(0), Lo: 0xfbef_fbef_fbef_fbef}, 0xfbff_fbff_fbff_fbff))
	f.Add(old)
	f.Add(strings.TrimRight(old, "="))
	f.Add(encodeCursor(kindPolygon, keyOf(core.Uint128{Hi: ^uint64(0)}, ^uint64(0))) + "=")
	f.Add(strings.Replace(old, "/", "_", 1))
	f.Add(old[:10] + "\n" + old[10:34])
	f.Fuzz(func(t *testing.T, s string) {
		for kind := cursorKind(0); kind <= 5; kind++ {
			k, ok, err := decodeCursor(s, kind)
			if err != nil {
				if errCode(t, err) != core.InvalidCursor.Code {
					t.Fatalf("%q: %v", s, err)
				}
				continue
			}
			if ok != (s != "") {
				t.Fatalf("%q: ok %v", s, ok)
			}
			if !ok {
				continue
			}
			canon := strings.NewReplacer("+", "-", "/", "_").Replace(strings.TrimRight(s, "="))
			if got := encodeCursor(kind, k); got != canon {
				t.Fatalf("%q decodes to a key whose cursor is %q, not %q", s, got, canon)
			}
			if k2, ok2, err2 := decodeCursor(canon, kind); err2 != nil || !ok2 || k2 != k {
				t.Fatalf("%q: its canonical %q decodes to %v %v %v", s, canon, k2, ok2, err2)
			}
		}
	})
}

// oldCursor is encodeCursor's text in standard base64 with padding, the
// encoding cursors were once issued in.
func oldCursor(kind cursorKind, k btree.Key) string {
	b, err := cursorURL.DecodeString(encodeCursor(kind, k))
	if err != nil {
		panic(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// FuzzQueriesWithCursor: arbitrary cursors and limits against a small state
// never panic and only fail with validation or limit codes.
func FuzzQueriesWithCursor(f *testing.F) {
	f.Add("", uint32(0), int64(38_100_000_000), int64(13_360_000_000), uint64(1_000_000))
	f.Add(encodeCursor(kindRadius, keyOf(testID(2), 1)), uint32(1), int64(0), int64(0), uint64(1))
	sm := New()
	sm.Insert(epoch, &core.InsertRequest{Events: batch(20)})
	f.Fuzz(func(t *testing.T, cursor string, limit uint32, lat, lon int64, radius uint64) {
		checks := []error{}
		_, err := sm.QueryRadius(epoch, &core.RadiusQuery{Center: core.Coordinate{LatNano: lat, LonNano: lon}, RadiusMM: radius, Page: core.Page{Limit: limit, Cursor: cursor}})
		checks = append(checks, err)
		_, err = sm.QueryLatest(epoch, &core.LatestQuery{SinceNS: uint64(lat), Page: core.Page{Limit: limit, Cursor: cursor}})
		checks = append(checks, err)
		_, err = sm.History(epoch, &core.HistoryQuery{EntityID: testID(int(lon & 31)), SinceNS: radius, Page: core.Page{Limit: limit, Cursor: cursor}})
		checks = append(checks, err)
		for _, err := range checks {
			if c := errCode(t, err); c != 0 && (c < 100 || c >= 400) {
				t.Fatalf("unexpected code %d: %v", c, err)
			}
		}
	})
}

// FuzzReadSnapshot: ReadSnapshot never panics on any bytes; it refuses
// them with 501 CORRUPTION, or restores a state whose own snapshot is
// exactly the bytes it read (nothing it accepted was ignored or changed).
// Each input is tried as it is and with its last 4 bytes replaced by the
// checksum of the rest, so that mutations get past the checksum and reach
// the checks of structure and ranges.
func FuzzReadSnapshot(f *testing.F) {
	var empty, small bytes.Buffer
	if err := New().WriteSnapshot(&empty); err != nil {
		f.Fatal(err)
	}
	sm := New()
	sm.Insert(epoch, &core.InsertRequest{Events: batch(3)})
	moved := batch(2)
	moved[1].TTLSeconds = 60
	sm.Insert(epoch+1e9, &core.InsertRequest{Events: moved}) // history and a TTL
	sm.TTLSet(epoch+2e9, &core.TTLSetRequest{EntityID: testID(3), TTLSeconds: 5})
	if err := sm.WriteSnapshot(&small); err != nil {
		f.Fatal(err)
	}
	f.Add(empty.Bytes())
	f.Add(small.Bytes())
	f.Add(small.Bytes()[:small.Len()/2])
	f.Add(hookedSnapshot(f))
	f.Add(retainedSnapshot(f))
	f.Fuzz(func(t *testing.T, b []byte) {
		tries := [][]byte{b}
		if len(b) >= 4 {
			body := b[:len(b)-4]
			tries = append(tries, binary.LittleEndian.AppendUint32(slices.Clip(body), crc32.Checksum(body, castagnoli)))
		}
		for _, b := range tries {
			got, err := ReadSnapshot(bytes.NewReader(b))
			if err != nil {
				if errCode(t, err) != core.Corruption.Code {
					t.Fatalf("refused with %v, want 501 CORRUPTION", err)
				}
				continue
			}
			var again bytes.Buffer
			if err := got.WriteSnapshot(&again); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again.Bytes(), b) {
				t.Fatalf("restored a state whose snapshot differs from the %d bytes read", len(b))
			}
		}
	})
}
