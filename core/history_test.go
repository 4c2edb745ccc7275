package core

import (
	"bytes"
	"testing"
)

// A history section round-trips, and a snapshot without one splits to
// itself.
func TestHistorySection(t *testing.T) {
	evs := []GeoEvent{
		{EntityID: Uint128{Lo: 1}, TimestampNS: 5, LatNano: 1, LonNano: 2, CellID: 3, TTLSeconds: 9},
		{EntityID: Uint128{Lo: 1}, TimestampNS: 6, LatNano: -1, LonNano: -2, CellID: 3},
		{EntityID: Uint128{Hi: 2}, TimestampNS: 1, UserData: Uint128{Lo: 7}},
	}
	w := NewHistorySection([]byte("the state"))
	for i := range evs {
		w.Add(&evs[i])
	}
	data := w.Finish()
	state, got, ok, err := SplitHistory(data)
	if !ok || err != nil || string(state) != "the state" || len(got) != len(evs) {
		t.Fatalf("split: ok %v, %v, state %q, %d events", ok, err, state, len(got))
	}
	for i := range evs {
		if got[i] != evs[i] {
			t.Fatalf("event %d: %+v, want %+v", i, got[i], evs[i])
		}
	}
	plain := []byte("a snapshot with no section")
	if s, e, ok, err := SplitHistory(plain); ok || err != nil || !bytes.Equal(s, plain) || e != nil {
		t.Fatalf("no section: %q %v %v %v", s, e, ok, err)
	}
	if _, _, ok, err := SplitHistory(data[1:]); !ok || err == nil {
		t.Fatalf("a section whose state lost a byte: ok %v, err %v", ok, err)
	}
}

// FuzzSplitHistory: SplitHistory never panics, and a section it accepts
// encodes back to the same bytes.
func FuzzSplitHistory(f *testing.F) {
	w := NewHistorySection([]byte("s"))
	w.Add(&GeoEvent{EntityID: Uint128{Lo: 1}, TimestampNS: 5, LatNano: 1})
	f.Add(w.Finish())
	f.Add(NewHistorySection(nil).Finish())
	f.Add([]byte("GEOHIST1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		state, evs, ok, err := SplitHistory(data)
		if !ok || err != nil {
			return
		}
		w := NewHistorySection(bytes.Clone(state))
		for i := range evs {
			w.Add(&evs[i])
		}
		if !bytes.Equal(w.Finish(), data) {
			t.Fatal("a section does not encode back to its bytes")
		}
	})
}
