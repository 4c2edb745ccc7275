package statemachine

import (
	"unsafe"

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
	spatial *btree.Tree // (latest cell id, entity id) -> slot; by value, see New
	byTime  *btree.Tree // (latest timestamp, entity id) -> slot, and stale keys; see sweepTime
	expiry  *btree.Tree // (expiresAt, entity id) -> slot, finite expiries only
	// (the soonest removal due of the entity's older events, entity id)
	// -> slot, for entities with an older event that has a TTL; see
	// removalDue
	olderDue *btree.Tree

	// The time index drops an entity's key lazily: a key whose entity's
	// latest event no longer has that timestamp (or that names a slot
	// which no longer holds that entity) is stale, and readers skip it.
	// staleTime counts the stale keys; sweepTime removes them, examining
	// sweepRate keys, from sweepFrom on and round again, for every key that
	// became stale (sweepDebt).
	staleTime int
	sweepDebt int
	sweepFrom btree.Key

	hio  historyIO // the history store's writes and answers (history.go)
	sync SyncStore // nil, or a store that answers at once (Attach)

	lastTS uint64 // >= every stored timestamp
	events uint64 // events stored, visible or expired

	touchSink uint64 // sums of loads made only to warm the cache, so that they are kept

	// Spatial index changes not yet applied; see spatialbatch.go.
	// deferSpatial is false only while remove() applies its own.
	deferSpatial       bool
	pendingSpatial     []spatialOp
	sortItems, sortTmp []sortItem

	// Scratch buffers of spatial scans, kept between queries.
	scanCands   []candidate
	scanMatches []match
	scanCap     capRegion // a radius query's region, with its ranges' memory
	// A polygon query's region, and the memory its polygon, grid and
	// ranges are built in (about 13 KB a query otherwise).
	scanPolygon polygonRegion
	polygons    geom.PolygonBuilder
	scanBox     boxRegion      // a bbox query's region, with its ranges' memory
	nearest     nearestMemory  // a nearest query's scratch (nearest.go)
	offered     offeredPolygon // for the next QueryPolygon (OfferPolygon); zero after it
	// The memory of a radius, polygon, latest or history query's result,
	// which the next one reuses (allocating and zeroing a fresh result
	// cost about 12% of a 1 km radius query, and a third of a latest page
	// of 1,000). scanDistances only for radius queries.
	scanEvents    []core.GeoEvent
	scanDistances []uint64
	// The memory of a latest batch's results, which the next one reuses.
	latestResults []core.LatestResult
	// The memory of a write's per-event results, which the next write
	// reuses (a 10,000-event batch's are 240 KB).
	writeResults []core.EventResult

	// flushAt, when not 0, replaces spatialFlushAt (for tests).
	flushAt int
	// scanBudget, when not 0, replaces maxScanWork (for tests).
	scanBudget int
	// lastScanWork is the work the last radius, polygon or latest page
	// did, in the units of maxScanWork (for tests).
	lastScanWork int
	// scanWork is the work of every such page so far (ScanWork).
	scanWork uint64

	watch watchState // fences and the feed: fences.go, feed.go
	hooks hookSet    // webhooks: hooks.go
}

// SetMaxScanWork bounds each radius, polygon and latest page to n units of
// work instead of maxScanWork (n <= 0 restores it). A small bound pages a
// query in many pages: the simulator sets one to test paging under the
// budget (replica.Config.MaxScanWork).
func (sm *StateMachine) SetMaxScanWork(n int) { sm.scanBudget = max(n, 0) }

// ScanWork is the work that radius, polygon and latest pages have done
// since the state machine was made, in the units of maxScanWork (a unit is
// about 4.4 ns here): a deterministic measure of what reads cost, by which
// the replica runs its reads in steps of bounded work.
func (sm *StateMachine) ScanWork() uint64 { return sm.scanWork }

// The work of a radius, polygon or latest page is counted in units, each
// about what reading one polygon edge costs, and bounded by maxScanWork:
// a page that reaches it ends early, possibly empty, with has_more and a
// cursor after the last key it completed. Without the bound, a query that
// matches little in a large region (a 20,000 km radius, or a polygon of
// 101,000 edges, with a group filter that few entities have) walked the
// whole index in one operation, during which the replica answers nothing
// and, past the 500 ms election timeout, a leader's followers elect
// another (that polygon over 200,000 entities, judged by a coarser grid
// than it now gets, held it for 2 s).
//
// The count is of discrete things, in integers: keys examined, entities
// read, exact tests, edges read by judging a key (those of its grid cell,
// or of its band of each ring: see geom.PolygonFilter.ClassifyLeavesWork
// and geom.Polygon.ContainsPointWork), seeks, and the edges of the plan a
// polygon query builds. It depends on the state, the request and the
// polygon's plan alone (the plan is the same computation that decides
// which keys match), never on time or on what memory a previous query
// left (the builder's cache of the last polygon is charged as if built):
// the same query on the same state ends its pages at the same keys,
// wherever it runs. (Queries run on the leader, outside the log, by its
// read index: replica/reads.go. Pages are still the state machine's
// deterministic output, as the simulator's replays of a seed need.)
//
// Calibration: one unit is one polygon edge read while judging a key,
// about 4.4 ns of processor time on this project's 2-core machine
// (CLOCK_THREAD_CPUTIME_ID, TestReproductionPageTimes, at 2,000,000
// entities): paging the polygon of 101,000 edges read 326.5 M edges,
// 2.0 M keys and 1.4 M entities in 1.45 s beyond its keys' and entities'
// share, alike with the machine shared (load average near 20) and quiet.
// A whole-globe radius with a group that matches nothing took 71-98 ms
// for 2.0 M keys and their entities shared (35-49 ns a key:
// workKey+workEntity, 10 units), 32 ms quiet; with every entity matching
// 196-283 ms shared (the distances, and copying the events into pages,
// which is not counted: at most limit events a page). Building the
// polygon took about 31 ms shared, 19-23 ms quiet (300 ns an edge shared:
// workPlanEdge). The prices are the shared machine's, so that pages stay
// short under load: 2,000,000 units are about 9 ms, and a page's grace
// (see spatialScan.run) keeps it under about 11; radius and latest pages
// of a quiet machine take less (3.4-4.0 ms).
const maxScanWork = 2_000_000

// Work units of the steps of a page (see maxScanWork).
const (
	workKey      = 4     // examining a key: taking it, judging its leaf cell cheaply
	workEntity   = 6     // reading a candidate's entity (a cache miss, prefetched)
	workContains = 8     // an exact test's fixed part: a distance, or a projection
	workSeek     = 300   // starting a range: a descent of the spatial index
	workPlan     = 1_000 // a radius or polygon query's plan: its covering
	workPlanEdge = 70    // and, a polygon's, for each of its edges
)

func (sm *StateMachine) workBudget() int {
	if sm.scanBudget > 0 {
		return sm.scanBudget
	}
	return maxScanWork
}

// entity is one tracked entity: the fields of its latest event that every
// index, query and write reads, and its expiry. The rest of the latest event
// (correlation id, user data, altitude, velocity, TTL, accuracy, heading,
// flags) and the entity's older events live in an entityExt beside it,
// which takes memory only in a chunk of entities where one has any of
// them (see entityStore): fleets that send positions alone pay for these
// 64 bytes only.
//
// It is 64 bytes without pointers: one cache line (the store's chunks are
// page-aligned), and the garbage collector need not scan the store.
type entity struct {
	id        core.Uint128 // the latest event's EntityID: zero in a released slot
	ts        uint64       // its TimestampNS
	cell      uint64       // its CellID
	lat, lon  int64        // its LatNano, LonNano
	group     uint64       // its GroupID
	expiresAt uint64       // 0 = never
}

// entityExt is the rest of an entity: the other fields of its latest event,
// and where its older events are, in ascending timestamp order. The zero
// value is an entity whose latest event has none of them and that has no
// older events.
type entityExt struct {
	correlation core.Uint128
	userData    core.Uint128
	altitude    int32
	velocity    uint32
	ttl         uint32
	accuracy    uint32
	heading     uint16
	flags       uint16
	hist        uint32 // 1 + the index of its older events' facts in the store's table; 0 = none
}

// fillEvent sets ev to the latest event of the entity e, whose ext is x
// (nil: the zero value). It writes ev in place: a query fills its result
// with no copy between.
func fillEvent(ev *core.GeoEvent, e *entity, x *entityExt) {
	ev.EntityID, ev.TimestampNS, ev.CellID, ev.LatNano, ev.LonNano, ev.GroupID = e.id, e.ts, e.cell, e.lat, e.lon, e.group
	if x == nil {
		ev.CorrelationID, ev.UserData = core.Uint128{}, core.Uint128{}
		ev.AltitudeMM, ev.VelocityMMS, ev.TTLSeconds, ev.AccuracyMM, ev.HeadingCdeg, ev.Flags = 0, 0, 0, 0, 0, 0
		return
	}
	ev.CorrelationID, ev.UserData = x.correlation, x.userData
	ev.AltitudeMM, ev.VelocityMMS, ev.TTLSeconds, ev.AccuracyMM = x.altitude, x.velocity, x.ttl, x.accuracy
	ev.HeadingCdeg, ev.Flags = x.heading, x.flags
}

// hasExt reports whether ev has any field that an entity keeps in its
// entityExt.
func hasExt(ev *core.GeoEvent) bool {
	return !ev.CorrelationID.IsZero() || !ev.UserData.IsZero() || ev.AltitudeMM != 0 || ev.VelocityMMS != 0 ||
		ev.TTLSeconds != 0 || ev.AccuracyMM != 0 || ev.HeadingCdeg != 0 || ev.Flags != 0
}

func (e *entity) visible(t uint64) bool { return e.expiresAt == 0 || t < e.expiresAt }

// newSyncStore, when set (by this package's tests), gives every new state
// machine a SyncStore of its own.
var newSyncStore func() SyncStore

// New returns an empty state machine.
func New() *StateMachine {
	sm := &StateMachine{
		byTime:       btree.New(),
		expiry:       btree.New(),
		olderDue:     btree.New(),
		deferSpatial: true, // see spatialbatch.go
	}
	if newSyncStore != nil {
		sm.sync = newSyncStore()
	}
	sm.ids = newIDIndex(&sm.store)
	// The spatial index holds exactly the live key of each entity, so its
	// value, the entity's slot, names the entity whose id is in the key:
	// its leaves need not store ids.
	sm.spatial = btree.NewByValue(func(slot uint32) core.Uint128 { return sm.store.at(slot).id })
	return sm
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

func spatialKey(e *entity) btree.Key { return btree.Key{A: e.cell, ID: e.id} }
func timeKey(e *entity) btree.Key    { return btree.Key{A: e.ts, ID: e.id} }
func expiryKey(e *entity) btree.Key  { return btree.Key{A: e.expiresAt, ID: e.id} }

// unindexLatest removes the entity's latest-position keys: its spatial key
// at once, its time key by leaving it stale.
func (sm *StateMachine) unindexLatest(slot uint32, e *entity) {
	sm.spatialDelete(spatialKey(e), slot)
	sm.staleTime++
	sm.sweepDebt += sweepRate
}

// indexLatest adds the entity's latest-position keys. A stale time key
// equal to the new one is taken over.
func (sm *StateMachine) indexLatest(slot uint32, e *entity) {
	sm.spatialSet(spatialKey(e), slot)
	if sm.byTime.Set(timeKey(e), slot) {
		sm.staleTime--
	}
}

// liveTimeKey reports whether the time index's key k, whose value is slot,
// is the entity's current key rather than a stale one.
func (sm *StateMachine) liveTimeKey(k btree.Key, slot uint32) bool {
	e := sm.store.at(slot)
	return e.id == k.ID && e.ts == k.A
}

// sweepRate is how many keys of the time index sweepTime examines for each
// key that became stale. The sweep goes round the index, so every stale key
// is gone within a round after it became stale; a round of n+s keys (n
// entities, s stale keys) comes with at most (n+s)/sweepRate new stale
// keys, so s stays below about n/(sweepRate-1).
const sweepRate = 4

// sweepTime pays the sweep debt: it examines that many keys of the time
// index from sweepFrom on, wrapping round at the end, and removes the stale
// ones, a leaf at a time. Writes call it once their changes are made.
func (sm *StateMachine) sweepTime() {
	budget := sm.sweepDebt
	sm.sweepDebt = 0
	for budget > 0 && sm.staleTime > 0 {
		examined, dropped := 0, 0
		next, more := sm.byTime.SweepLeaf(sm.sweepFrom, min(budget, 64), func(as []uint64, ids []core.Uint128, vals []uint32, drop []bool) {
			// Load the entities first, in one pass of independent loads
			// (their id and timestamp share a cache line).
			var sum uint64
			for _, v := range vals {
				sum += sm.store.at(v).ts
			}
			sm.touchSink = sum
			for i, v := range vals {
				if !sm.liveTimeKey(btree.Key{A: as[i], ID: ids[i]}, v) {
					drop[i] = true
					dropped++
				}
			}
			examined = len(vals)
		})
		budget -= examined
		sm.staleTime -= dropped
		if !more {
			if examined == 0 && sm.sweepFrom == (btree.Key{}) {
				break // an empty index; staleTime cannot be positive
			}
			next = btree.Key{}
		}
		sm.sweepFrom = next
	}
}

// setExpiry changes an entity's expiry and its expiry-index key; e comes
// from store.mut.
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

// reindexOlder moves the entity's key in the older-due index from the
// soonest removal due of its older events was to now (0: no key).
func (sm *StateMachine) reindexOlder(slot uint32, id core.Uint128, was, now uint64) {
	if was == now {
		return
	}
	if was != 0 {
		sm.olderDue.Delete(btree.Key{A: was, ID: id})
	}
	if now != 0 {
		sm.olderDue.Set(btree.Key{A: now, ID: id}, slot)
	}
}

// create stores a new entity whose only event is ev.
func (sm *StateMachine) create(ev *core.GeoEvent) {
	slot := sm.store.alloc()
	sm.fencesMoved(nil, ev)
	e, x := sm.store.write(slot, hasExt(ev))
	setLatest(e, x, ev)
	sm.ids.put(ev.EntityID, slot)
	sm.indexLatest(slot, e)
	sm.setExpiry(slot, e, ev.ExpiresAtNS())
	sm.events++
}

// remove erases the entity in slot and all its events; it returns how
// many events.
func (sm *StateMachine) remove(slot uint32) uint64 {
	e := sm.store.mut(slot)
	// The slot is about to name no entity, or another one: apply the
	// spatial index's pending changes and this one now (see
	// spatialbatch.go).
	sm.flushSpatial()
	sm.deferSpatial = false
	defer func() { sm.deferSpatial = true }()
	n := sm.store.eventCount(slot)
	sm.fencesGone(slot)
	sm.unindexLatest(slot, e)
	sm.setExpiry(slot, e, 0)
	if h := sm.store.older(slot); h != nil {
		sm.reindexOlder(slot, e.id, h.due, 0)
	}
	sm.histDelete(core.HistoryDeleteEntity, e.id, 0)
	sm.hio.applied = append(sm.hio.applied, core.HistoryWrite{Kind: core.HistoryDeleteEntity, EntityID: e.id})
	sm.ids.remove(e.id)
	sm.events -= n
	sm.store.release(slot)
	return n
}

// RecordBytes is the size of the entities' latest events as 128-byte
// records: about what a snapshot of the state holds before packing (older
// events are the history store's, beside it), and what the log took to
// write them.
func (sm *StateMachine) RecordBytes() uint64 { return uint64(sm.ids.len()) * core.RecordSize }

// Stats counts the entities visible at t and their events. An older event
// that has expired counts until cleanup removes it: counting those would
// read every history that has one.
func (sm *StateMachine) Stats(t uint64) core.Stats {
	entities, events := uint64(sm.ids.len()), sm.events
	for it := sm.expiry.SeekGE(btree.Key{}); it.Valid() && it.Key().A <= t; it.Next() {
		entities--
		events -= sm.store.eventCount(it.Value())
	}
	sm.flushSpatial()
	idx := sm.spatial.Bytes() + sm.byTime.Bytes() + sm.expiry.Bytes() + sm.olderDue.Bytes() +
		sm.ids.bytes() + sm.store.bytes()
	return core.Stats{
		EntityCount:  entities,
		EventCount:   events,
		StorageBytes: events * core.RecordSize,
		IndexBytes:   idx,
	}
}

var _ [0]struct{} = [unsafe.Sizeof(entity{}) - 64]struct{}{}
