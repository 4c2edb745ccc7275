package statemachine

import (
	"bytes"
	"slices"
	"sort"
	"testing"

	"github.com/geoevent/geoevent/core"
	"pgregory.net/rapid"
)

// TestHistoryAgainstSlice drives a history and a plain slice with the same
// appends, replacements, insertions and removals of expired events,
// across many blocks, while frozen copies of it come and go, and checks
// after every step that the live history equals the slice (and its
// soonest expiries its events'), and every frozen copy still equals the
// slice as it was when the copy was taken.
func TestHistoryAgainstSlice(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var h history
		var model []core.GeoEvent
		type view struct {
			h    history
			want []core.GeoEvent
		}
		var views []view
		next := uint64(1)
		// Some events have a TTL of a few seconds: their expiries
		// interleave whatever their order.
		mark := func() core.GeoEvent {
			next++
			ttl := rapid.SampledFrom([]uint32{0, 0, 1, 2, 5}).Draw(t, "ttl")
			return core.GeoEvent{TimestampNS: next, GroupID: next * 7, TTLSeconds: ttl}
		}
		// Start long enough, sometimes, to be in blocks.
		for range rapid.SampledFrom([]int{0, 1, histBlockLen - 1, histBlockLen, 3*histBlockLen + 5}).Draw(t, "start") {
			ev := mark()
			h.push(&ev)
			model = append(model, ev)
		}
		for step := rapid.IntRange(1, 200).Draw(t, "steps"); step > 0; step-- {
			shared := len(views) > 0
			switch op := rapid.IntRange(0, 6).Draw(t, "op"); {
			case op == 0 || len(model) == 0:
				for range rapid.SampledFrom([]int{1, 2, histBlockLen}).Draw(t, "pushes") {
					ev := mark()
					h.push(&ev)
					model = append(model, ev)
				}
			case op == 1:
				i := rapid.IntRange(0, len(model)-1).Draw(t, "set")
				ev := mark()
				h.set(i, &ev, shared)
				model[i] = ev
			case op == 2:
				i := rapid.IntRange(0, len(model)).Draw(t, "insert")
				ev := mark()
				h.insert(i, &ev, shared)
				model = slices.Insert(model, i, ev)
			case op == 3:
				views = append(views, view{h, slices.Clone(model)})
			case op == 4 && len(views) > 0:
				k := rapid.IntRange(0, len(views)-1).Draw(t, "release")
				views = slices.Delete(views, k, k+1)
			case op == 5:
				// At an event's expiry, so that it goes and those
				// expiring a nanosecond later stay.
				ev := rapid.SampledFrom(model).Draw(t, "expire")
				at := ev.ExpiresAtNS()
				kept := slices.DeleteFunc(slices.Clone(model), func(ev core.GeoEvent) bool { return expiredAt(&ev, at) })
				if got, want := h.dropExpired(at, shared), len(model)-len(kept); got != want {
					t.Fatalf("dropExpired(%d) removed %d, want %d", at, got, want)
				}
				model = kept
				if h.n == 0 {
					h = history{} // what the store does with an empty one
				}
			}
			if h.n != len(model) {
				t.Fatalf("%d events, want %d", h.n, len(model))
			}
			if h.n > 0 {
				if err := h.check(); err != nil {
					t.Fatal(err)
				}
			}
			for i := range model {
				if *h.at(i) != model[i] {
					t.Fatalf("event %d is %d, want %d", i, h.at(i).TimestampNS, model[i].TimestampNS)
				}
			}
			for k, v := range views {
				for i := range v.want {
					if *v.h.at(i) != v.want[i] {
						t.Fatalf("frozen copy %d changed: event %d is %d, was %d", k, i, v.h.at(i).TimestampNS, v.want[i].TimestampNS)
					}
				}
			}
		}
	})
}

// TestHistorySearch compares search with sort.Search over the same
// ascending timestamps, within and across blocks.
func TestHistorySearch(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var h history
		var ts []uint64
		last := uint64(0)
		for range rapid.IntRange(0, 3*histBlockLen).Draw(t, "n") {
			last += rapid.Uint64Range(1, 3).Draw(t, "gap")
			ts = append(ts, last)
			h.push(&core.GeoEvent{TimestampNS: last})
		}
		for range 20 {
			q := rapid.Uint64Range(0, last+2).Draw(t, "q")
			want := sort.Search(len(ts), func(i int) bool { return ts[i] >= q })
			if got := h.search(q); got != want {
				t.Fatalf("search(%d) = %d, want %d", q, got, want)
			}
		}
	})
}

// TestLongHistoryHasNoLongAppend: adding to a long history costs no more
// than adding to a short one. With one slice per history, a batch that
// made a history of millions of events grow copied all of it.
func TestLongHistoryHasNoLongAppend(t *testing.T) {
	var h history
	for i := range 20 * histBlockLen {
		h.push(&core.GeoEvent{TimestampNS: uint64(i + 1)})
	}
	if err := h.check(); err != nil {
		t.Fatal(err)
	}
	blocks := slices.Clone(h.blocks)
	h.push(&core.GeoEvent{TimestampNS: 1 << 40})
	for i := range blocks {
		if h.blocks[i] != blocks[i] {
			t.Fatalf("appending moved block %d", i)
		}
	}
}

// TestLongHistoryHasNoLongInsert: inserting an event near the front of a
// long history (an import out of order) moves at most one block's events:
// the other blocks stay where they were. With every block kept full, each
// such event moved every later one, 6.2 ms apiece in a history of a
// million.
func TestLongHistoryHasNoLongInsert(t *testing.T) {
	var h history
	for i := range 20 * histBlockLen {
		h.push(&core.GeoEvent{TimestampNS: uint64(2 * (i + 1))})
	}
	for k := range 3 * histBlockLen {
		blocks := slices.Clone(h.blocks)
		was := make([][histBlockLen]core.GeoEvent, len(blocks))
		for b, blk := range blocks {
			was[b] = *blk
		}
		ts := uint64(2*(k+1) + 1) // between events k and k+1 as they were
		h.insert(h.search(ts), &core.GeoEvent{TimestampNS: ts}, false)
		if err := h.check(); err != nil {
			t.Fatal(err)
		}
		changed := 0
		for b, blk := range blocks {
			if *blk != was[b] || !slices.Contains(h.blocks, blk) {
				changed++
			}
		}
		if changed > 1 || len(h.blocks) > len(blocks)+1 {
			t.Fatalf("insert %d: %d blocks changed, %d -> %d blocks", k, changed, len(blocks), len(h.blocks))
		}
	}
	for i := 1; i < h.n; i++ {
		if h.at(i-1).TimestampNS >= h.at(i).TimestampNS {
			t.Fatalf("events %d and %d out of order", i-1, i)
		}
	}
}

// TestLongHistoriesSurviveASnapshot: histories of every shape (none, one
// event, a full small slice, one past it, several blocks) restore to the
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
	if sm.store.older(sm.mustSlot(t, testID(5))).ends == nil {
		t.Fatal("the imports split no block")
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
