package statemachine

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/statemachine/internal/btree"
	"pgregory.net/rapid"
)

func keyOf(id core.Uint128, a uint64) btree.Key { return btree.Key{A: a, ID: id} }

// op is one recorded operation, replayable on any state machine.
type op struct {
	ts     uint64
	kind   int
	events []core.GeoEvent
	ids    []core.Uint128
	n      uint32
}

func (o op) apply(sm *StateMachine) string {
	var r any
	var err error
	switch o.kind {
	case 0:
		r, err = sm.Insert(o.ts, &core.InsertRequest{Events: o.events})
	case 1:
		r, err = sm.Upsert(o.ts, &core.InsertRequest{Events: o.events})
	case 2:
		r, err = sm.DeleteEntities(o.ts, &core.DeleteRequest{EntityIDs: o.ids})
	case 3:
		r, err = sm.TTLSet(o.ts, &core.TTLSetRequest{EntityID: o.ids[0], TTLSeconds: o.n})
	case 4:
		r, err = sm.CleanupExpired(o.ts, &core.CleanupRequest{MaxEntries: o.n})
	case 5:
		r, err = sm.QueryRadius(o.ts, &core.RadiusQuery{Center: core.Coordinate{LatNano: 38_100_000_000, LonNano: 13_400_000_000}, RadiusMM: 10_000_000, Page: core.Page{Limit: 3}})
	}
	return fmt.Sprintf("%+v %v", r, err)
}

func genOps(t *rapid.T) []op {
	h := newHarness()
	var ops []op
	for range rapid.IntRange(1, 60).Draw(t, "nops") {
		h.tick(t)
		o := op{ts: h.now, kind: rapid.IntRange(0, 5).Draw(t, "kind")}
		switch o.kind {
		case 0, 1:
			for range rapid.IntRange(1, 3).Draw(t, "n") {
				o.events = append(o.events, h.event(t))
			}
			AssignCells(o.events)
		default:
			o.ids = []core.Uint128{rapid.SampledFrom(h.ids).Draw(t, "id")}
			o.n = uint32(rapid.IntRange(0, 3).Draw(t, "n"))
		}
		ops = append(ops, o)
	}
	return ops
}

// TestDeterminism: two state machines fed the same operations give the same
// replies and digests, and a snapshot restores to the same digest and the
// same answers.
func TestDeterminism(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ops := genOps(t)
		a, b := New(), New()
		for i, o := range ops {
			if ra, rb := o.apply(a), o.apply(b); ra != rb {
				t.Fatalf("op %d: replies differ:\n%s\n%s", i, ra, rb)
			}
			if i == len(ops)/2 {
				var buf bytes.Buffer
				if err := b.WriteSnapshot(&buf); err != nil {
					t.Fatal(err)
				}
				store := b.sync
				var err error
				if b, err = ReadSnapshot(&buf); err != nil {
					t.Fatal(err)
				}
				b.Attach(store) // the store restored from its checkpoint
			}
			if a.Digest() != b.Digest() {
				t.Fatalf("op %d: digests differ", i)
			}
		}
	})
}

// TestWarmEntitiesChangesNothing: a state machine that is warmed before each
// operation (with the ids the operation names, ids never stored, and more
// than a call takes) gives the same replies and digests as one that is not.
func TestWarmEntitiesChangesNothing(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ops := genOps(t)
		cold, warm := New(), New()
		for i, o := range ops {
			ids := slices.Clone(o.ids)
			for _, e := range o.events {
				ids = append(ids, e.EntityID)
			}
			for k := range rapid.IntRange(0, 2*writeAhead).Draw(t, "extra") {
				ids = append(ids, core.Uint128{Hi: 7, Lo: uint64(k)})
			}
			warm.WarmEntities(ids)
			if rc, rw := o.apply(cold), o.apply(warm); rc != rw {
				t.Fatalf("op %d: replies differ:\n%s\n%s", i, rc, rw)
			}
			if cold.Digest() != warm.Digest() {
				t.Fatalf("op %d: digests differ", i)
			}
		}
	})
}

// TestDigestIndependentOfOrder: the same state built in different orders
// has the same digest.
func TestDigestIndependentOfOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 30).Draw(t, "n")
		events := make([]core.GeoEvent, n)
		for i := range events {
			events[i] = at(i+1, rapid.Int64Range(boxLat0, boxLat1).Draw(t, "lat"), rapid.Int64Range(boxLon0, boxLon1).Draw(t, "lon"))
			events[i].TimestampNS = epoch - uint64(rapid.IntRange(1, 1000).Draw(t, "age"))
		}
		AssignCells(events)
		perm := rapid.Permutation(events).Draw(t, "perm")
		a, b := New(), New()
		for _, e := range events {
			a.Insert(epoch, &core.InsertRequest{Events: []core.GeoEvent{e}})
		}
		for _, e := range perm {
			b.Insert(epoch, &core.InsertRequest{Events: []core.GeoEvent{e}})
		}
		if a.Digest() != b.Digest() {
			t.Fatal("digest depends on insertion order")
		}
	})
}

// TestSnapshotCorruptionDetected flips every byte of a small snapshot in
// turn: each damaged copy is refused with CORRUPTION, never trusted.
func TestSnapshotCorruptionDetected(t *testing.T) {
	sm := New()
	sm.Insert(epoch, &core.InsertRequest{Events: batch(3)})
	var buf bytes.Buffer
	if err := sm.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	for i := range good {
		bad := slices.Clone(good)
		bad[i] ^= 0x40
		if _, err := ReadSnapshot(bytes.NewReader(bad)); errCode(t, err) != core.Corruption.Code {
			t.Fatalf("flipped byte %d: %v", i, err)
		}
	}
	for n := 0; n < len(good); n += 7 {
		if _, err := ReadSnapshot(bytes.NewReader(good[:n])); errCode(t, err) != core.Corruption.Code {
			t.Fatalf("truncated to %d bytes: %v", n, err)
		}
	}
}

// TestPagingUnderWrites: walking a radius query page by page while other
// entities are written, moved and deleted between pages returns every entity
// that was not touched exactly once.
func TestPagingUnderWrites(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sm := New()
		n := rapid.IntRange(5, 60).Draw(t, "n")
		evs := make([]core.GeoEvent, n)
		for i := range evs {
			evs[i] = at(i+1, rapid.Int64Range(boxLat0, boxLat1).Draw(t, "lat"), rapid.Int64Range(boxLon0, boxLon1).Draw(t, "lon"))
		}
		AssignCells(evs)
		sm.Insert(epoch, &core.InsertRequest{Events: evs})
		touched := map[core.Uint128]bool{}
		seen := map[core.Uint128]int{}
		q := core.RadiusQuery{Center: core.Coordinate{LatNano: 38_100_000_000, LonNano: 13_400_000_000}, RadiusMM: 100_000_000, Page: core.Page{Limit: uint32(rapid.IntRange(1, 5).Draw(t, "limit"))}}
		now := uint64(epoch)
		for pages := 0; ; pages++ {
			r, err := sm.QueryRadius(now, &q)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range r.Events {
				seen[e.EntityID]++
			}
			if !r.HasMore {
				break
			}
			q.Cursor = r.Cursor
			now++
			switch rapid.IntRange(0, 2).Draw(t, "write") {
			case 0: // move one
				i := rapid.IntRange(1, n).Draw(t, "moved")
				touched[testID(i)] = true
				e := at(i, rapid.Int64Range(boxLat0, boxLat1).Draw(t, "lat"), rapid.Int64Range(boxLon0, boxLon1).Draw(t, "lon"))
				one := []core.GeoEvent{e}
				AssignCells(one)
				sm.Upsert(now, &core.InsertRequest{Events: one})
			case 1: // delete one
				i := rapid.IntRange(1, n).Draw(t, "deleted")
				touched[testID(i)] = true
				sm.DeleteEntities(now, &core.DeleteRequest{EntityIDs: []core.Uint128{testID(i)}})
			case 2: // add a new one
				n++
				one := []core.GeoEvent{at(n, rapid.Int64Range(boxLat0, boxLat1).Draw(t, "lat"), rapid.Int64Range(boxLon0, boxLon1).Draw(t, "lon"))}
				touched[testID(n)] = true
				AssignCells(one)
				sm.Insert(now, &core.InsertRequest{Events: one})
			}
		}
		for i := 1; i <= n; i++ {
			id := testID(i)
			// A touched entity may be seen at its old and its new key, or not
			// at all; an untouched one exactly once.
			if !touched[id] && seen[id] != 1 {
				t.Fatalf("untouched entity %d seen %d times", i, seen[id])
			}
		}
	})
}
