package statemachine

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/statemachine/internal/btree"
)

// spatialAfterPending returns the spatial index's entries as they will be
// once its pending changes are applied, without applying them: each
// pending delete must find its key with its slot.
func (sm *StateMachine) spatialAfterPending() (map[btree.Key]uint32, error) {
	m := map[btree.Key]uint32{}
	for it := sm.spatial.First(); it.Valid(); it.Next() {
		m[it.Key()] = it.Value()
	}
	for _, o := range sm.pendingSpatial {
		if !o.del {
			m[o.k] = o.slot
			continue
		}
		if v, ok := m[o.k]; !ok || v != o.slot {
			return nil, fmt.Errorf("a pending delete of %v (slot %d) finds no such entry", o.k, o.slot)
		}
		delete(m, o.k)
	}
	return m, nil
}

// checkInvariants checks the state machine's invariants (see doc.go) by
// walking every structure: the id index and the store agree, each entity
// has exactly its keys in the spatial and expiry indexes and its live key
// in the time index, every other time key is stale and staleTime counts
// them, and the event count adds up.
func (sm *StateMachine) checkInvariants() error {
	spatial, err := sm.spatialAfterPending()
	if err != nil {
		return err
	}
	live := map[uint32]bool{}
	var events uint64
	olderKeys := 0
	for _, id := range sm.ids.appendIDs(nil) {
		slot, _ := sm.ids.get(id)
		if live[slot] {
			return fmt.Errorf("slot %d is held by two ids", slot)
		}
		live[slot] = true
		e := sm.store.at(slot)
		if e.id != id {
			return fmt.Errorf("slot %d holds entity %v, the id index says %v", slot, e.id, id)
		}
		latest := sm.store.event(slot)
		older := sm.store.older(slot)
		n := older.len()
		if older != nil && n == 0 {
			return fmt.Errorf("entity %v: empty older facts kept", id)
		}
		if rs, ok := sm.sync.(*MemStore); ok {
			// The store holds the n older events, all before the
			// latest, which is memory's alone; first and due are
			// bounds of theirs (see older).
			evs := rs.Events(id)
			if len(evs) != n || (n > 0 && evs[n-1].TimestampNS >= latest.TimestampNS) {
				return fmt.Errorf("entity %v: the store holds %d events, memory %d older events and a latest at %d", id, len(evs), n, latest.TimestampNS)
			}
			var due uint64
			for i := range n {
				due = core.SoonerDue(due, core.RemovalDue(&evs[i]))
			}
			if n > 0 && (older.first > evs[0].TimestampNS || (due != 0 && (older.due == 0 || older.due > due))) {
				return fmt.Errorf("entity %v: facts %+v, the store's events say first %d, due %d", id, *older, evs[0].TimestampNS, due)
			}
		}
		events += uint64(n) + 1
		if e.ts > sm.lastTS {
			return fmt.Errorf("entity %v: timestamp after lastTS", id)
		}
		if v, ok := spatial[spatialKey(e)]; !ok || v != slot {
			return fmt.Errorf("entity %v: spatial key missing", id)
		}
		if v, ok := sm.byTime.Get(timeKey(e)); !ok || v != slot {
			return fmt.Errorf("entity %v: time key missing", id)
		}
		if v, ok := sm.expiry.Get(expiryKey(e)); (e.expiresAt != 0) != ok || (ok && v != slot) {
			return fmt.Errorf("entity %v: expiry key wrong", id)
		}
		if older != nil && older.due != 0 {
			olderKeys++
			if v, ok := sm.olderDue.Get(btree.Key{A: older.due, ID: id}); !ok || v != slot {
				return fmt.Errorf("entity %v: older-due key missing", id)
			}
		}
	}
	if events != sm.events {
		return fmt.Errorf("events %d, counted %d", sm.events, events)
	}
	if rs, ok := sm.sync.(*MemStore); ok {
		stored := 0
		for _, m := range rs.events {
			stored += len(m)
		}
		if older := int(events) - sm.ids.len(); stored != older {
			return fmt.Errorf("the store holds %d events, memory counts %d older ones", stored, older)
		}
	}
	// Each chunk is compact or full, as isFull says; released slots hold
	// nothing, not even in their ext.
	fulls := 0
	for c := range sm.store.chunks {
		full := sm.store.fulls[c] != nil
		if full == (sm.store.chunks[c] != nil) || full != sm.store.full(uint32(c)) {
			return fmt.Errorf("chunk %d: compact %v, full %v, isFull %v", c, sm.store.chunks[c] != nil, full, sm.store.full(uint32(c)))
		}
		if full {
			fulls++
		}
	}
	if fulls != sm.store.fullChunks() || len(sm.store.fulls) != len(sm.store.chunks) {
		return fmt.Errorf("%d full chunks, fullChunks says %d", fulls, sm.store.fullChunks())
	}
	for slot := range sm.store.n {
		if live[slot] {
			continue
		}
		if x := sm.store.ext(slot); *sm.store.at(slot) != (entity{}) || (x != nil && *x != (entityExt{})) {
			return fmt.Errorf("released slot %d is not zeroed", slot)
		}
	}
	if n := sm.ids.len(); len(spatial) != n || sm.expiry.Len() > n || sm.olderDue.Len() != olderKeys {
		return fmt.Errorf("%d entities, %d spatial keys, %d expiry keys, %d older-due keys for %d", n, len(spatial), sm.expiry.Len(), sm.olderDue.Len(), olderKeys)
	}
	stale := 0
	for it := sm.byTime.First(); it.Valid(); it.Next() {
		if !sm.liveTimeKey(it.Key(), it.Value()) {
			stale++
		} else if !live[it.Value()] {
			return fmt.Errorf("time key %v names free slot %d", it.Key(), it.Value())
		}
	}
	if stale != sm.staleTime || sm.byTime.Len() != sm.ids.len()+stale {
		return fmt.Errorf("%d time keys, %d entities, %d stale; staleTime %d", sm.byTime.Len(), sm.ids.len(), stale, sm.staleTime)
	}
	if sm.sweepDebt != 0 {
		return fmt.Errorf("sweep debt %d left after an operation", sm.sweepDebt)
	}
	return nil
}

// Upserts leave stale time keys behind; the sweep keeps them to a fraction
// of the entities, and QueryLatest walks past them.
func TestStaleTimeKeysBounded(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	sm := New()
	now := uint64(epoch)
	const n = 5000
	for first := 1; first <= n; first += 1000 {
		now += 1e6
		if _, err := sm.Insert(now, &core.InsertRequest{Events: benchEvents(r, first, 1000)}); err != nil {
			t.Fatal(err)
		}
	}
	maxStale := 0
	for round := 0; round < 200; round++ {
		evs := make([]core.GeoEvent, 1+r.IntN(500))
		for j := range evs {
			lat, lon := benchPoint(r)
			evs[j] = core.GeoEvent{EntityID: core.Uint128{Hi: 1, Lo: uint64(1 + r.IntN(n))}, LatNano: lat, LonNano: lon}
		}
		AssignCells(evs)
		now += 1e6
		if _, err := sm.Upsert(now, &core.InsertRequest{Events: evs}); err != nil {
			t.Fatal(err)
		}
		if round%50 == 49 {
			ids := []core.Uint128{{Hi: 1, Lo: uint64(1 + r.IntN(n))}, {Hi: 1, Lo: uint64(1 + r.IntN(n))}}
			if _, err := sm.DeleteEntities(now, &core.DeleteRequest{EntityIDs: ids}); err != nil {
				t.Fatal(err)
			}
		}
		maxStale = max(maxStale, sm.staleTime)
	}
	if err := sm.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	if limit := n/(sweepRate-1) + 500; maxStale > limit {
		t.Fatalf("%d stale time keys for %d entities (limit %d)", maxStale, n, limit)
	}
	t.Logf("at most %d stale time keys for %d entities", maxStale, n)

	// Every entity once, newest first, across pages.
	var got []core.Uint128
	q := core.LatestQuery{Page: core.Page{Limit: 777}}
	for {
		res, err := sm.QueryLatest(now, &q)
		if err != nil {
			t.Fatal(err)
		}
		for i, ev := range res.Events {
			if i > 0 && ev.TimestampNS > res.Events[i-1].TimestampNS {
				t.Fatal("not newest first")
			}
			got = append(got, ev.EntityID)
		}
		if !res.HasMore {
			break
		}
		q.Cursor = res.Cursor
	}
	if len(got) != sm.ids.len() {
		t.Fatalf("QueryLatest listed %d entities, %d stored", len(got), sm.ids.len())
	}
	seen := map[core.Uint128]bool{}
	for _, id := range got {
		if seen[id] {
			t.Fatalf("entity %v listed twice", id)
		}
		seen[id] = true
	}

	// Deleting most entities leaves most time keys stale at once; the
	// deletions pay for sweeping them all.
	var ids []core.Uint128
	for lo := uint64(1); lo <= n; lo++ {
		if lo%5 != 0 {
			ids = append(ids, core.Uint128{Hi: 1, Lo: lo})
		}
		if len(ids) == core.MaxBatchIDs || lo == n {
			if _, err := sm.DeleteEntities(now, &core.DeleteRequest{EntityIDs: ids}); err != nil {
				t.Fatal(err)
			}
			ids = ids[:0]
		}
	}
	if err := sm.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	if sm.staleTime != 0 {
		t.Fatalf("%d stale time keys left after deleting %d of %d entities", sm.staleTime, n-sm.ids.len(), n)
	}
}
