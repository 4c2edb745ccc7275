package statemachine

import (
	"slices"

	"github.com/geoevent/geoevent/core"
)

// Insert applies an insert batch at operation time opTS: every event is
// added to its entity's history. See [StateMachine.write].
//
// The reply's Results are the state machine's memory: they hold until its
// next Insert or Upsert, which reuses them. A caller that keeps them
// longer copies them.
func (sm *StateMachine) Insert(opTS uint64, req *core.InsertRequest) (core.InsertReply, error) {
	if sm.sync != nil {
		sm.syncBegin()
		sm.syncProvide(sm.WriteNeeds(req.Events, nil))
		defer sm.syncWrites()
	}
	return sm.write(opTS, req.Events, false)
}

// Upsert applies an upsert batch at operation time opTS: each event replaces
// the event it names (its timestamp, or without one the entity's latest) or
// is inserted where there is none. See [StateMachine.write]. Its reply's
// Results hold until the next Insert or Upsert, as Insert's.
func (sm *StateMachine) Upsert(opTS uint64, req *core.InsertRequest) (core.InsertReply, error) {
	if sm.sync != nil {
		sm.syncBegin()
		sm.syncProvide(sm.WriteNeeds(req.Events, nil))
		defer sm.syncWrites()
	}
	return sm.write(opTS, req.Events, true)
}

// write runs a batch all-or-nothing. A batch-level error (empty, too large,
// an event without its leader-assigned cell) writes nothing. Otherwise every
// event is validated first; if any fails, nothing is written and the reply
// carries every event's code with Committed false.
//
// Timestamps: an event with TimestampNS 0 gets a fresh one. Fresh timestamps
// are base, base+1, ... in batch order with base = max(opTS, lastTS+1,
// largest client timestamp in the batch + 1), so they are strictly
// increasing across operations and never collide with a stored event or a
// client timestamp of the same batch.
func (sm *StateMachine) write(opTS uint64, events []core.GeoEvent, upsert bool) (core.InsertReply, error) {
	defer sm.endOperation()
	switch {
	case len(events) == 0:
		return core.InsertReply{}, core.Errorf(core.EmptyRequest, "the batch has no events")
	case len(events) > core.MaxBatchEvents:
		return core.InsertReply{}, core.Errorf(core.BatchTooLarge, "the batch has %d events; at most %d are allowed", len(events), core.MaxBatchEvents)
	}

	if cap(sm.writeResults) < len(events) {
		sm.writeResults = make([]core.EventResult, len(events))
	}
	results := sm.writeResults[:len(events)]
	clear(results)
	failed := false
	base := max(opTS, sm.lastTS+1)
	var batchKeys map[eventKey]struct{} // client-timestamped insert keys seen so far, made on first use
	for i := range events {
		ev := &events[i]
		results[i].Index = uint32(i)
		code := ev.Validate()
		if code.Code == 0 && !validLeaf(ev.CellID) {
			return core.InsertReply{}, core.Errorf(core.InternalError, "event %d has no valid leaf cell id; the leader must assign cells", i)
		}
		if code.Code == 0 && ev.TimestampNS != 0 {
			switch {
			case ev.TimestampNS > opTS && ev.TimestampNS-opTS > core.MaxFutureSkewNS:
				code = core.TimestampInFuture
			case !upsert:
				k := eventKey{ev.EntityID, ev.TimestampNS}
				_, dup := batchKeys[k]
				if dup || sm.hasEvent(k, opTS) {
					code = core.EventExists
				} else {
					if batchKeys == nil {
						batchKeys = make(map[eventKey]struct{})
					}
					batchKeys[k] = struct{}{}
				}
			}
			if code.Code == 0 && ev.TimestampNS >= base {
				base = ev.TimestampNS + 1
			}
		}
		if code.Code != 0 {
			results[i].Code = code.Code
			failed = true
		}
	}
	if failed {
		return core.InsertReply{Committed: false, Results: results}, nil
	}

	// The history writes: a put an event, and a delete for each latest an
	// upsert replaces. Sized once: grown by doubling, the batch's writes
	// (170 bytes each) were copied about twice over.
	if upsert {
		sm.hio.writes = slices.Grow(sm.hio.writes, 2*len(events))
	} else {
		sm.hio.writes = slices.Grow(sm.hio.writes, len(events))
	}
	next := base
	for i := range events {
		if i%writeAhead == 0 {
			sm.prefetchWrites(events[i:min(i+writeAhead, len(events))])
		}
		sm.lastTS = max(sm.lastTS, events[i].TimestampNS) // client timestamps
		ev := events[i]                                   // a copy: the request is not modified
		fresh := ev.TimestampNS == 0
		if fresh {
			ev.TimestampNS = next
			next++
		}
		results[i].TimestampNS = ev.TimestampNS
		results[i].Updated = sm.put(opTS, &ev, upsert, upsert && fresh)
		if upsert && !fresh {
			sm.rememberPut(&ev)
		}
	}
	if next > base {
		sm.lastTS = max(sm.lastTS, next-1) // fresh timestamps
	}
	if len(sm.pendingSpatial) >= sm.flushLimit() {
		sm.flushSpatial() // see spatialbatch.go
	}
	sm.sweepTime()
	return core.InsertReply{Committed: true, Results: results}, nil
}

// writeAhead is how many ids WarmEntities takes a call: how far ahead a
// batch's writes (prefetchWrites), GetLatestBatch's lookups and
// DeleteEntities' deletes read.
const writeAhead = 64

// warmGroup warms ids[i:] (WarmEntities: the next writeAhead of them) when
// i starts a group: a loop that looks up or deletes ids one after another
// calls it for each i, so that each group's cache misses overlap rather
// than each lookup waiting for two in turn (its id's entry, then its
// entity).
func (sm *StateMachine) warmGroup(ids []core.Uint128, i int) {
	if i%writeAhead == 0 {
		sm.WarmEntities(ids[i:])
	}
}

// prefetchWrites loads what writing evs (at most writeAhead of them) will
// read first, through WarmEntities.
func (sm *StateMachine) prefetchWrites(evs []core.GeoEvent) {
	var ids [writeAhead]core.Uint128
	n := min(len(evs), writeAhead)
	for i := range n {
		ids[i] = evs[i].EntityID
	}
	sm.WarmEntities(ids[:n])
}

// WarmEntities loads what writing events with these entity ids, or looking
// them up, will read first: each id's entry in the id index, then each
// stored entity (and its ext). Each pass is a run of independent loads, so
// the processor overlaps their cache misses, and the writes or lookups that
// follow find them in cache. A batch's writes call it for their next
// events (prefetchWrites), GetLatestBatch and DeleteEntities for their
// next ids; a caller about to apply several small writes one after another
// (a replica applying the single-event requests that one fsync committed)
// calls it for all of them. It changes nothing, so calling it or not
// leaves every reply and the state the same. ids holds at most writeAhead
// ids a call; the rest are ignored. The sum only keeps the compiler from
// dropping the loads.
func (sm *StateMachine) WarmEntities(ids []core.Uint128) {
	ids = ids[:min(len(ids), writeAhead)]
	var sum uint64
	for _, id := range ids {
		sum += sm.ids.touch(id)
	}
	for _, id := range ids {
		if slot, ok := sm.ids.get(id); ok {
			e, x := sm.store.pair(slot)
			sum += e.id.Lo
			if x != nil {
				sum += uint64(x.hist)
			}
		}
	}
	sm.touchSink = sum
}

type eventKey struct {
	id core.Uint128
	ts uint64
}

// hasEvent reports whether a visible entity holds an event at exactly k.ts
// that is visible at t.
func (sm *StateMachine) hasEvent(k eventKey, t uint64) bool {
	slot, e, ok := sm.lookup(k.id, t)
	if !ok {
		return false
	}
	found, expired := sm.findLive(e, sm.store.older(slot), k.ts, t)
	return found && !expired
}

// findLive looks for timestamp ts among the entity's events at time t,
// older being the facts of its older events (nil: none): latest is set
// when ts is the latest event's. An older event is found from memory's
// facts when they settle it (above the latest or below the first: none),
// else from the answers provided and the batch's own puts (olderAt).
// expired is set when the event found is an older one that has expired at
// t (expiredAt), which reads and writes take as absent though it is still
// stored, until cleanup removes it.
func (sm *StateMachine) findLive(e *entity, older *older, ts, t uint64) (found, expired bool) {
	if ts == e.ts {
		return true, false
	}
	if ts > e.ts || older.len() == 0 || ts < older.first {
		return false, false
	}
	ev, found := sm.olderAt(eventKey{e.id, ts})
	return found, found && expiredAt(&ev, t)
}

// put stores one validated event of an upsert batch (upsertBatch) or an
// insert batch, whose timestamp is set. replaceLatest is set for an
// upsert whose event had no timestamp of its own: it replaces the
// entity's latest event. Otherwise an event at the same timestamp is
// replaced (only upserts get here with one) and a new timestamp is added
// to the history. put reports whether an existing event was replaced
// ("updated").
// The history store holds an entity's older events, never its latest
// (core/history.go): an event is put there when it is or becomes an older
// one, so that a new entity, or a latest replaced in place, costs the
// store nothing.
func (sm *StateMachine) put(opTS uint64, ev *core.GeoEvent, upsertBatch, replaceLatest bool) (updated bool) {
	slot, e, ok := sm.lookup(ev.EntityID, opTS)
	if e != nil && !ok {
		sm.remove(slot) // expired data never comes back
		if sm.hio.removed == nil {
			sm.hio.removed = make(map[core.Uint128]struct{})
		}
		sm.hio.removed[ev.EntityID] = struct{}{}
		e = nil
	}
	sm.hio.applied = append(sm.hio.applied, putWrite(ev))
	if e == nil {
		sm.create(ev)
		return false
	}
	if replaceLatest {
		if e.ts != ev.TimestampNS {
			sm.forgetPut(eventKey{e.id, e.ts}) // the event replaced
		}
		e, x := sm.store.write(slot, hasExt(ev))
		sm.replaceLatest(slot, e, x, ev)
		return true
	}
	// An older event that has expired is absent: the new one takes its
	// place, and updates nothing.
	found, expired := sm.findLive(e, sm.store.older(slot), ev.TimestampNS, opTS)
	latest := found && ev.TimestampNS == e.ts
	// Every case but replacing the latest event writes the entity's
	// older facts, which its ext holds.
	e, x := sm.store.write(slot, hasExt(ev) || !latest)
	switch {
	case latest:
		sm.replaceLatest(slot, e, x, ev)
		return true
	case found:
		sm.histPut(ev)
		h := sm.store.olderFor(x)
		was := h.due
		h.due = core.SoonerDue(h.due, core.RemovalDue(ev)) // a lower bound: see older
		sm.reindexOlder(slot, e.id, was, h.due)
		return !expired
	case ev.TimestampNS > e.ts:
		var prev core.GeoEvent
		fillEvent(&prev, e, x)
		sm.histPut(&prev)
		if upsertBatch {
			sm.rememberPut(&prev) // a later event of the batch at its key finds it
		}
		h := sm.store.olderFor(x)
		was := h.due
		h.add(&prev)
		sm.reindexOlder(slot, e.id, was, h.due)
		sm.replaceLatest(slot, e, x, ev)
		sm.events++
		return false
	default:
		sm.histPut(ev)
		h := sm.store.olderFor(x)
		was := h.due
		h.add(ev)
		sm.reindexOlder(slot, e.id, was, h.due)
		sm.events++
		return false
	}
}

// rememberPut records an upsert batch's event put at a client timestamp,
// so that a later event of the batch at its key finds it once it is an
// older event (olderAt). An insert batch needs none: its keys are
// distinct (write's batchKeys). Events at fresh timestamps lie above every
// client timestamp of the batch, and the entity's latest before the batch
// is read from the store (WriteNeeds).
func (sm *StateMachine) rememberPut(ev *core.GeoEvent) {
	sm.setBatchKey(eventKey{ev.EntityID, ev.TimestampNS}, batchKey{*ev, true})
}

// forgetPut records that the batch removed the event at k (the latest,
// replaced by an event at a fresh timestamp), so that a later event of
// the batch at k finds none (olderAt), whatever the store answered for k
// as of before the batch.
func (sm *StateMachine) forgetPut(k eventKey) { sm.setBatchKey(k, batchKey{}) }

func (sm *StateMachine) setBatchKey(k eventKey, b batchKey) {
	if sm.hio.batchKeys == nil {
		sm.hio.batchKeys = make(map[eventKey]batchKey)
	}
	sm.hio.batchKeys[k] = b
}

// replaceLatest makes ev the entity's latest event in place of the current
// one, moving its index keys and resetting its expiry from ev's TTL. e and
// x come from store.write.
func (sm *StateMachine) replaceLatest(slot uint32, e *entity, x *entityExt, ev *core.GeoEvent) {
	sm.fencesMoved(e, ev)
	sm.unindexLatest(slot, e)
	setLatest(e, x, ev)
	sm.indexLatest(slot, e)
	sm.setExpiry(slot, e, ev.ExpiresAtNS())
}
