package statemachine

import (
	"testing"

	"github.com/geoevent/geoevent/core"
)

// FuzzDecodeCursor: any string is either refused with INVALID_CURSOR or
// decodes to a key that re-encodes to the very same string.
func FuzzDecodeCursor(f *testing.F) {
	f.Add("")
	f.Add("x")
	f.Add(encodeCursor(kindRadius, keyOf(core.Uint128{Hi: 1, Lo: 2}, 3)))
	f.Add(encodeCursor(kindLatest, keyOf(core.Uint128{}, ^uint64(0))))
	f.Fuzz(func(t *testing.T, s string) {
		for kind := cursorKind(0); kind <= 5; kind++ {
			k, ok, err := decodeCursor(s, kind)
			if err != nil {
				if errCode(t, err) != core.InvalidCursor.Code {
					t.Fatalf("%q: %v", s, err)
				}
				continue
			}
			if ok && encodeCursor(kind, k) != s {
				t.Fatalf("%q decodes but does not re-encode to itself", s)
			}
		}
	})
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
