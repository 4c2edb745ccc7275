package history

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/geoevent/geoevent/core"
)

func put(e core.GeoEvent) core.HistoryWrite {
	return core.HistoryWrite{Kind: core.HistoryPut, EntityID: e.EntityID, TS: e.TimestampNS, Event: e}
}

func ev(id, ts uint64) core.GeoEvent {
	e := sampleEvent()
	e.EntityID = core.Uint128{Lo: id}
	e.TimestampNS = ts
	e.TTLSeconds = 0
	return e
}

func mustOpen(t testing.TB, fs vfs.FS, dir string) *Store {
	t.Helper()
	s, err := Open(fs, dir, Options{CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustRange(t testing.TB, v *View, r core.HistoryRange) ([]core.GeoEvent, bool) {
	t.Helper()
	evs, more, err := v.Range(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	return evs, more
}

func TestApplyRangeGetAndReopen(t *testing.T) {
	fs := vfs.NewMem()
	s := mustOpen(t, fs, "db")
	if s.Applied() != 0 {
		t.Fatalf("new store applied %d", s.Applied())
	}
	if err := s.Apply(5, []core.HistoryWrite{put(ev(1, 10)), put(ev(1, 20)), put(ev(2, 15)), put(ev(1, 30))}); err != nil {
		t.Fatal(err)
	}
	// Replay of an applied index is skipped.
	if err := s.Apply(5, []core.HistoryWrite{put(ev(1, 40))}); err != nil {
		t.Fatal(err)
	}
	v := s.View()
	got, more := mustRange(t, v, core.HistoryRange{EntityID: core.Uint128{Lo: 1}, SinceNS: 0, UntilNS: 1 << 62, Limit: 2})
	if len(got) != 2 || got[0] != ev(1, 10) || got[1] != ev(1, 20) || !more {
		t.Fatalf("range: %v more=%v", got, more)
	}
	got, more = mustRange(t, v, core.HistoryRange{EntityID: core.Uint128{Lo: 1}, SinceNS: 20, UntilNS: 30, Limit: 5})
	if len(got) != 2 || got[0] != ev(1, 20) || got[1] != ev(1, 30) || more {
		t.Fatalf("range [20,30]: %v more=%v", got, more)
	}
	if e, ok, err := v.Get(core.Uint128{Lo: 2}, 15); err != nil || !ok || e != ev(2, 15) {
		t.Fatalf("get: %v %v %v", e, ok, err)
	}
	if _, ok, err := v.Get(core.Uint128{Lo: 1}, 40); err != nil || ok {
		t.Fatalf("get of a skipped replay: %v %v", ok, err)
	}
	v.Close()
	if err := s.Apply(7, []core.HistoryWrite{{Kind: 99}}); err == nil {
		t.Fatal("unknown kind accepted")
	}
	if s.Applied() != 5 {
		t.Fatalf("rejected entry moved applied to %d", s.Applied())
	}
	d1, err := s.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, fs, "db")
	defer s.Close()
	if s.Applied() != 5 {
		t.Fatalf("reopened at %d", s.Applied())
	}
	if d2, err := s.Digest(); err != nil || d2 != d1 {
		t.Fatalf("digest after reopen differs: %v", err)
	}
}
