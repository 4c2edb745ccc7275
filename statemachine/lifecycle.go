package statemachine

import "github.com/geoevent/geoevent/core"

// DeleteEntities erases the listed entities with their whole history. An id
// that is not stored, or whose entity has expired, counts as not found (an
// expired entity's data is erased all the same). A repeated id counts once
// as deleted, then as not found. Any zero id fails the request before
// anything is erased.
func (sm *StateMachine) DeleteEntities(opTS uint64, req *core.DeleteRequest) (core.DeleteReply, error) {
	if sm.sync != nil {
		sm.syncBegin()
		defer sm.syncWrites()
	}
	if err := checkIDList(req.EntityIDs); err != nil {
		return core.DeleteReply{}, err
	}
	var reply core.DeleteReply
	for i, id := range req.EntityIDs {
		sm.warmGroup(req.EntityIDs, i)
		slot, e, ok := sm.lookup(id, opTS)
		if e != nil {
			sm.remove(slot)
		}
		if ok {
			reply.Deleted++
		} else {
			reply.NotFound++
		}
	}
	sm.sweepTime()
	return reply, nil
}

// checkIDList enforces the limits of a list of entity ids: 1 to 10,000
// ids, none zero.
func checkIDList(ids []core.Uint128) error {
	switch {
	case len(ids) == 0:
		return core.Errorf(core.EmptyRequest, "entity_ids is empty")
	case len(ids) > core.MaxBatchIDs:
		return core.Errorf(core.BatchTooLarge, "%d entity ids; at most %d are allowed", len(ids), core.MaxBatchIDs)
	}
	for i, id := range ids {
		if id.IsZero() {
			return core.Errorf(core.InvalidEntityID, "entity_ids[%d] is zero", i)
		}
	}
	return nil
}

// visibleEntity finds an entity for a TTL operation, to write (from
// store.mut): 101 for a zero id, 3 ENTITY_NOT_FOUND when it is not stored
// or has expired.
func (sm *StateMachine) visibleEntity(id core.Uint128, t uint64) (uint32, *entity, error) {
	if id.IsZero() {
		return 0, nil, core.Errorf(core.InvalidEntityID, "entity_id is zero")
	}
	slot, _, ok := sm.lookup(id, t)
	if !ok {
		return 0, nil, core.Errorf(core.EntityNotFound, "entity %s not found", id)
	}
	return slot, sm.store.mut(slot), nil
}

// TTLSet sets the entity's expiry to opTS + TTLSeconds (0 = never expires).
func (sm *StateMachine) TTLSet(opTS uint64, req *core.TTLSetRequest) (core.TTLSetReply, error) {
	slot, e, err := sm.visibleEntity(req.EntityID, opTS)
	if err != nil {
		return core.TTLSetReply{}, err
	}
	var at uint64
	if req.TTLSeconds != 0 {
		at = core.AddSecondsNS(opTS, uint64(req.TTLSeconds))
	}
	sm.setExpiry(slot, e, at)
	return core.TTLSetReply{ExpiresAtNS: at}, nil
}

// TTLExtend moves a finite expiry later by ExtendBySeconds; an entity that
// never expires gets 106 NO_TTL_SET.
func (sm *StateMachine) TTLExtend(opTS uint64, req *core.TTLExtendRequest) (core.TTLExtendReply, error) {
	slot, e, err := sm.visibleEntity(req.EntityID, opTS)
	if err != nil {
		return core.TTLExtendReply{}, err
	}
	if e.expiresAt == 0 {
		return core.TTLExtendReply{}, core.Errorf(core.NoTTLSet, "entity %s has no TTL to extend", req.EntityID)
	}
	prev := e.expiresAt
	sm.setExpiry(slot, e, core.AddSecondsNS(prev, uint64(req.ExtendBySeconds)))
	return core.TTLExtendReply{PreviousExpiresAtNS: prev, NewExpiresAtNS: e.expiresAt}, nil
}

// TTLClear makes the entity never expire and reports the expiry it had.
func (sm *StateMachine) TTLClear(opTS uint64, req *core.TTLClearRequest) (core.TTLClearReply, error) {
	slot, e, err := sm.visibleEntity(req.EntityID, opTS)
	if err != nil {
		return core.TTLClearReply{}, err
	}
	prev := e.expiresAt
	sm.setExpiry(slot, e, 0)
	return core.TTLClearReply{PreviousExpiresAtNS: prev, HadTTL: prev != 0}, nil
}

// Expired reports whether some entity has expired at t or some older
// event is due for removal (removalDue): whether a cleanup at t would
// remove anything.
func (sm *StateMachine) Expired(t uint64) bool {
	k, _, ok := sm.expiry.Min()
	if ok && k.A <= t {
		return true
	}
	k, _, ok = sm.olderDue.Min()
	return ok && k.A <= t
}

// CleanupExpired removes what has expired at opTS: entities, and older
// events of entities that have not. An entity is due at the sooner of its
// expiry and its older events' removal dues (core.RemovalDue: an older
// event's expiry plus a sixteenth of its TTL). It takes the entities due at or
// before opTS, soonest (then lowest entity id) first, at most MaxEntries
// of them (0 = the default 10,000): an entity that has expired is removed
// with all its events, of any other every older event that has expired at
// opTS is. Scanned counts the entities taken; Removed counts the events
// removed.
//
// Memory keeps a lower bound of each entity's older events' removal due
// (see older); the scans provided (CleanupNeeds) give the exact one, and
// an entity found not yet due is only moved in the older-due index, not
// taken. An entity without its scan ends the cleanup there (the caller
// asks CleanupNeeds until it needs nothing, so that does not happen).
func (sm *StateMachine) CleanupExpired(opTS uint64, req *core.CleanupRequest) (core.CleanupReply, error) {
	if sm.sync != nil {
		sm.syncBegin()
		for reads := sm.CleanupNeeds(opTS, req, nil); len(reads) > 0; reads = sm.CleanupNeeds(opTS, req, nil) {
			sm.syncProvide(reads)
		}
		defer sm.syncWrites()
	}
	defer sm.endOperation()
	budget, err := cleanupBudget(req)
	if err != nil {
		return core.CleanupReply{}, err
	}
	var reply core.CleanupReply
	for reply.Scanned < budget {
		k, slot, ok := sm.expiry.Min()
		if ko, so, older := sm.olderDue.Min(); older && (!ok || ko.Less(k)) {
			k, slot, ok = ko, so, true
		}
		if !ok || k.A > opTS {
			break
		}
		e := sm.store.at(slot)
		if !e.visible(opTS) {
			reply.Scanned++
			reply.Removed += uint32(sm.remove(slot))
			continue
		}
		a, ok := sm.hio.scans[k.ID]
		if !ok || a.Err != nil {
			break
		}
		_, x := sm.store.write(slot, true)
		h := sm.store.olderFor(x)
		if a.SoonestDue == 0 || a.SoonestDue > opTS {
			sm.reindexOlder(slot, k.ID, h.due, a.SoonestDue)
			h.due = a.SoonestDue
			continue
		}
		reply.Scanned++
		removed := min(a.Expired, h.n)
		sm.reindexOlder(slot, k.ID, h.due, a.NextDue)
		h.due = a.NextDue
		h.n -= removed
		if h.n == 0 {
			sm.store.dropOlder(x)
		}
		if removed > 0 {
			sm.histDelete(core.HistoryDeleteExpired, k.ID, opTS) // older events only: the latest is memory's
		}
		sm.events -= uint64(removed)
		reply.Removed += uint32(removed)
	}
	sm.sweepTime()
	return reply, nil
}

// cleanupBudget returns the entities a cleanup takes at most.
func cleanupBudget(req *core.CleanupRequest) (uint32, error) {
	switch {
	case req.MaxEntries == 0:
		return core.DefaultCleanupLimit, nil
	case req.MaxEntries > core.MaxCleanupLimit:
		return 0, core.Errorf(core.InvalidArgument, "max_entries %d exceeds %d", req.MaxEntries, core.MaxCleanupLimit)
	}
	return req.MaxEntries, nil
}
