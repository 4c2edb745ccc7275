package statemachine

import (
	"bytes"
	"slices"
	"testing"

	"github.com/geoevent/geoevent/core"
)

// TestLongHistoriesSurviveASnapshot: histories of every length restore to the
// same state, digest and history pages.
func TestLongHistoriesSurviveASnapshot(t *testing.T) {
	sm := New()
	ts := uint64(epoch)
	for id, events := range []int{1, 2, histBlockLen + 1, histBlockLen + 2, 3*histBlockLen + 17} {
		for range events {
			ts += 1000
			ev := at(id+1, 38_100_000_000+int64(id)*1000, 13_360_000_000)
			ev.TimestampNS = ts
			evs := []core.GeoEvent{ev}
			AssignCells(evs)
			if r, err := sm.Insert(ts, &core.InsertRequest{Events: evs}); err != nil || !r.Committed {
				t.Fatalf("insert: %v", err)
			}
		}
	}
	// The longest gets events imported out of order between its own, so
	// that its blocks split.
	for k := range histBlockLen + 3 {
		ev := at(5, 38_100_000_000, 13_360_000_000)
		ev.TimestampNS = ts - uint64(k)*1000 - 500
		evs := []core.GeoEvent{ev}
		AssignCells(evs)
		if r, err := sm.Insert(ts, &core.InsertRequest{Events: evs}); err != nil || !r.Committed {
			t.Fatalf("import: %v", err)
		}
	}
	if h := sm.store.older(sm.mustSlot(t, testID(5))); h.len() != 3*histBlockLen+16+histBlockLen+3 {
		t.Fatalf("entity 5 has %d older events", h.len())
	}
	if err := sm.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := sm.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := ReadSnapshot(&buf)
	if err != nil {
		t.Fatal(err)
	}
	back.Attach(sm.sync) // the store's checkpoint, restored with the snapshot
	if err := back.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	if sm.Digest() != back.Digest() {
		t.Fatal("the restored state has another digest")
	}
	for id := 1; id <= 5; id++ {
		q := core.HistoryQuery{EntityID: testID(id), Page: core.Page{Limit: core.MaxQueryLimit}}
		a, _ := sm.History(ts, &q)
		b, _ := back.History(ts, &q)
		if !slices.Equal(a.Events, b.Events) || len(a.Events) == 0 {
			t.Fatalf("entity %d: %d events before the snapshot, %d after", id, len(a.Events), len(b.Events))
		}
	}
}

// mustSlot returns the slot of a stored entity.
func (sm *StateMachine) mustSlot(t *testing.T, id core.Uint128) uint32 {
	t.Helper()
	slot, ok := sm.ids.get(id)
	if !ok {
		t.Fatalf("%v is not stored", id)
	}
	return slot
}

// TestWritesAndApplied: the history store gets an entity's older events
// only, when they become older, while TakeApplied reports every event put
// (the latest too) and every entity removed, for the position stream.
func TestWritesAndApplied(t *testing.T) {
	sm := New()
	rs, ok := sm.sync.(*MemStore)
	if !ok {
		t.Skip("the state machine's tests run without a MemStore")
	}
	ts := uint64(epoch)
	step := func(what string, apply func() error, stored [2]int, wantApplied ...core.HistoryWriteKind) {
		t.Helper()
		ts += 1000
		if err := apply(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := [2]int{len(rs.Events(testID(1))), len(rs.Events(testID(2)))}; got != stored {
			t.Errorf("%s: the store holds %v events of entities 1 and 2, want %v", what, got, stored)
		}
		var got []core.HistoryWriteKind
		for _, w := range sm.TakeApplied() {
			got = append(got, w.Kind)
		}
		if !slices.Equal(got, wantApplied) {
			t.Errorf("%s: applied %v, want %v", what, got, wantApplied)
		}
	}
	write := func(upsert bool, evs ...core.GeoEvent) func() error {
		return func() error {
			AssignCells(evs)
			f := sm.Insert
			if upsert {
				f = sm.Upsert
			}
			r, err := f(ts, &core.InsertRequest{Events: evs})
			if err == nil && !r.Committed {
				t.Fatalf("not committed: %+v", r.Results)
			}
			return err
		}
	}
	put, del := core.HistoryPut, core.HistoryDeleteEntity
	a, b := at(1, 38_100_000_000, 13_360_000_000), at(2, 38_100_000_000, 13_360_000_000)
	step("two new entities", write(false, a, b), [2]int{0, 0}, put, put)
	step("a new latest of each", write(false, a, b), [2]int{1, 1}, put, put)
	step("an upsert replacing a latest", write(true, a), [2]int{1, 1}, put)
	older := a
	older.TimestampNS = epoch + 500 // below every stored timestamp
	step("an older event", write(false, older), [2]int{2, 1}, put)
	step("a deletion", func() error {
		_, err := sm.DeleteEntities(ts, &core.DeleteRequest{EntityIDs: []core.Uint128{testID(1)}})
		return err
	}, [2]int{0, 1}, del)
	// Untaken, what an operation applied does not pile up: with a
	// SyncStore each operation forgets the one before's.
	for range 3 {
		ts += 1000
		if err := write(false, b)(); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(sm.TakeApplied()); got != 1 {
		t.Errorf("after three inserts untaken, applied holds %d changes, want the last insert's 1", got)
	}
	if err := sm.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}
