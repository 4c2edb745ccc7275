package statemachine

import (
	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/statemachine/internal/btree"
	"github.com/geoevent/geoevent/statemachine/internal/geom"
	"github.com/golang/geo/s2"
)

// StateMachine is GeoEvent's state: entities, their events and the indexes
// over them. It is not safe for concurrent use; the replica owns it.
type StateMachine struct {
	ids     idIndex // entity id -> slot in store
	store   entityStore
	spatial *btree.Tree // (latest cell id, entity id) -> slot
	byTime  *btree.Tree // (latest timestamp, entity id) -> slot
	expiry  *btree.Tree // (expiresAt, entity id) -> slot, finite expiries only

	lastTS uint64 // >= every stored timestamp
	events uint64 // events stored, visible or expired

	touchSink uint64 // see touch
}

// entity is one tracked entity: its latest event inline and older events in
// ascending timestamp order.
type entity struct {
	latest    core.GeoEvent
	older     []core.GeoEvent
	expiresAt uint64 // 0 = never
}

func (e *entity) visible(t uint64) bool { return e.expiresAt == 0 || t < e.expiresAt }
func (e *entity) eventCount() uint64    { return uint64(len(e.older)) + 1 }

// New returns an empty state machine.
func New() *StateMachine {
	return &StateMachine{
		ids:     newIDIndex(),
		spatial: btree.New(),
		byTime:  btree.New(),
		expiry:  btree.New(),
	}
}

// AssignCells sets each event's CellID to the S2 leaf cell of its position.
// The leader calls it once before an insert or upsert enters the log, so that
// floating point never decides state on a follower. Events whose coordinates
// are out of range are left alone; validation rejects them.
func AssignCells(events []core.GeoEvent) {
	for i := range events {
		e := &events[i]
		if core.ValidCoordinate(e.LatNano, e.LonNano) {
			e.CellID = geom.LeafCell(e.LatNano, e.LonNano)
		}
	}
}

func validLeaf(cell uint64) bool {
	c := s2.CellID(cell)
	return c.IsValid() && c.IsLeaf()
}

// lookup returns the slot and entity of id when it is stored and visible at
// t. A stored but expired entity is reported with ok false and expired true.
func (sm *StateMachine) lookup(id core.Uint128, t uint64) (slot uint32, e *entity, ok bool) {
	slot, found := sm.ids.get(id)
	if !found {
		return 0, nil, false
	}
	e = sm.store.at(slot)
	return slot, e, e.visible(t)
}

func spatialKey(e *entity) btree.Key { return btree.Key{A: e.latest.CellID, ID: e.latest.EntityID} }
func timeKey(e *entity) btree.Key    { return btree.Key{A: e.latest.TimestampNS, ID: e.latest.EntityID} }
func expiryKey(e *entity) btree.Key  { return btree.Key{A: e.expiresAt, ID: e.latest.EntityID} }

// unindexLatest removes the entity's latest-position keys.
func (sm *StateMachine) unindexLatest(e *entity) {
	sm.spatial.Delete(spatialKey(e))
	sm.byTime.Delete(timeKey(e))
}

// indexLatest adds the entity's latest-position keys.
func (sm *StateMachine) indexLatest(slot uint32, e *entity) {
	sm.spatial.Set(spatialKey(e), slot)
	sm.byTime.Set(timeKey(e), slot)
}

// setExpiry changes an entity's expiry and its expiry-index key.
func (sm *StateMachine) setExpiry(slot uint32, e *entity, expiresAt uint64) {
	if e.expiresAt == expiresAt {
		return
	}
	if e.expiresAt != 0 {
		sm.expiry.Delete(expiryKey(e))
	}
	e.expiresAt = expiresAt
	if expiresAt != 0 {
		sm.expiry.Set(expiryKey(e), slot)
	}
}

// create stores a new entity whose only event is ev.
func (sm *StateMachine) create(ev *core.GeoEvent) {
	slot := sm.store.alloc()
	e := sm.store.at(slot)
	*e = entity{latest: *ev}
	sm.ids.put(ev.EntityID, slot)
	sm.indexLatest(slot, e)
	sm.setExpiry(slot, e, ev.ExpiresAtNS())
	sm.events++
}

// remove erases an entity and all its events; it returns how many events.
func (sm *StateMachine) remove(slot uint32, e *entity) uint64 {
	n := e.eventCount()
	sm.unindexLatest(e)
	sm.setExpiry(slot, e, 0)
	sm.ids.remove(e.latest.EntityID)
	sm.events -= n
	sm.store.release(slot)
	return n
}

// Stats counts the entities and events visible at t.
func (sm *StateMachine) Stats(t uint64) core.Stats {
	entities, events := uint64(sm.ids.len()), sm.events
	for it := sm.expiry.SeekGE(btree.Key{}); it.Valid() && it.Key().A <= t; it.Next() {
		entities--
		events -= sm.store.at(it.Value()).eventCount()
	}
	idx := sm.spatial.Bytes() + sm.byTime.Bytes() + sm.expiry.Bytes() +
		sm.ids.bytes() + sm.store.bytes()
	return core.Stats{
		EntityCount:  entities,
		EventCount:   events,
		StorageBytes: events * core.RecordSize,
		IndexBytes:   idx,
	}
}

// entityStore keeps entities in fixed chunks so that growth never copies
// (and never doubles) the whole store; freed slots are reused LIFO.
type entityStore struct {
	chunks [][]entity
	n      uint32 // slots ever handed out
	free   []uint32
}

const chunkBits = 12
const chunkSize = 1 << chunkBits

func (s *entityStore) at(slot uint32) *entity {
	return &s.chunks[slot>>chunkBits][slot&(chunkSize-1)]
}

func (s *entityStore) alloc() uint32 {
	if k := len(s.free); k > 0 {
		slot := s.free[k-1]
		s.free = s.free[:k-1]
		return slot
	}
	if int(s.n>>chunkBits) == len(s.chunks) {
		s.chunks = append(s.chunks, make([]entity, chunkSize))
	}
	s.n++
	return s.n - 1
}

func (s *entityStore) release(slot uint32) {
	*s.at(slot) = entity{}
	s.free = append(s.free, slot)
}

func (s *entityStore) bytes() uint64 {
	const entityBytes = 144
	return uint64(len(s.chunks))*chunkSize*entityBytes + uint64(cap(s.free))*4
}
