package history

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/geoevent/geoevent/core"
)

// TestApplyEntriesAsApply: entries applied in groups leave the store as
// applying them one by one does, skip what the store holds, and refuse
// entries out of order.
func TestApplyEntriesAsApply(t *testing.T) {
	open := func() *Store {
		s, err := Open(vfs.NewMem(), "h", Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	var entries []Entry
	for i := range 30 {
		id := core.Uint128{Lo: uint64(i%4 + 1)}
		ev := core.GeoEvent{EntityID: id, TimestampNS: uint64(1000 + i), LatNano: int64(i), TTLSeconds: uint32(i % 3)}
		ws := []core.HistoryWrite{{Kind: core.HistoryPut, EntityID: id, TS: ev.TimestampNS, Event: ev}}
		switch i % 7 {
		case 5:
			ws = append(ws, core.HistoryWrite{Kind: core.HistoryDeleteExpired, EntityID: id, TS: 3_000_000_000})
		case 6:
			ws = append(ws, core.HistoryWrite{Kind: core.HistoryDeleteEntity, EntityID: core.Uint128{Lo: 2}})
		}
		entries = append(entries, Entry{Index: uint64(2*i + 1), Writes: ws})
	}
	one, grouped := open(), open()
	for _, e := range entries {
		if err := one.Apply(e.Index, e.Writes); err != nil {
			t.Fatal(err)
		}
	}
	if err := grouped.ApplyEntries(entries[:10]); err != nil {
		t.Fatal(err)
	}
	if err := grouped.ApplyEntries(entries[5:]); err != nil { // 5 to 9 again: skipped
		t.Fatal(err)
	}
	d1, err1 := one.Digest()
	d2, err2 := grouped.Digest()
	if err1 != nil || err2 != nil || d1 != d2 || one.Applied() != grouped.Applied() {
		t.Fatalf("grouped %x at %d, one by one %x at %d (%v, %v)", d2, grouped.Applied(), d1, one.Applied(), err1, err2)
	}
	late := Entry{Index: grouped.Applied() + 10, Writes: entries[0].Writes}
	if err := grouped.ApplyEntries([]Entry{late, {Index: late.Index - 1}}); err == nil {
		t.Fatal("entries out of order were applied")
	}
	if d, _ := grouped.Digest(); d != d1 {
		t.Fatal("a refused group changed the store")
	}
}
