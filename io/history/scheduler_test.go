package history

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/geoevent/geoevent/core"
)

// A store with tables piled up in L0 (a crash during a heavy load leaves
// one) opens without compacting them first; once open, its compactions
// run: L0 drains below the compaction threshold.
func TestOpenDoesNotWaitForCompactions(t *testing.T) {
	fs := vfs.NewMem()
	const tables = 12 // L0CompactionThreshold is 4
	s, err := Open(fs, "db", Options{CacheBytes: 1 << 20, holdCompactions: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= tables; i++ {
		var ws []core.HistoryWrite
		for id := uint64(1); id <= 100; id++ {
			ws = append(ws, put(ev(id, i*1e9)))
		}
		if err := s.Apply(i, ws); err != nil {
			t.Fatal(err)
		}
		if err := s.db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	l0 := func(db *pebble.DB) int64 { return db.Metrics().Levels[0].TablesCount }
	if n := l0(s.db); n != tables {
		t.Fatalf("%d tables in L0 with compactions held, want %d", n, tables)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	var atOpen int64 = -1
	s, err = Open(fs, "db", Options{CacheBytes: 1 << 20, opened: func(db *pebble.DB) { atOpen = l0(db) }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if atOpen != tables {
		t.Fatalf("pebble.Open returned with %d tables in L0, want %d: it compacted first", atOpen, tables)
	}
	if s.Applied() != tables {
		t.Fatalf("applied %d, want %d", s.Applied(), tables)
	}
	for deadline := time.Now().Add(10 * time.Second); l0(s.db) >= 4; {
		if time.Now().After(deadline) {
			t.Fatalf("L0 still holds %d tables 10 s after the open: compactions do not run", l0(s.db))
		}
		time.Sleep(5 * time.Millisecond)
	}
	v := s.View()
	defer v.Close()
	got, _ := mustRange(t, v, core.HistoryRange{EntityID: core.Uint128{Lo: 7}, UntilNS: 1 << 62, Limit: 100})
	if len(got) != tables {
		t.Fatalf("entity 7 has %d events after the compactions, want %d", len(got), tables)
	}
}
