package statemachine

import (
	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/statemachine/internal/btree"
	"github.com/geoevent/geoevent/statemachine/internal/geom"
)

// QueryRadius returns the latest visible positions within RadiusMM of the
// center (rounded great-circle distance <= radius), ordered by leaf cell id
// then entity id, with each one's distance.
func (sm *StateMachine) QueryRadius(opTS uint64, q *core.RadiusQuery) (core.QueryResult, error) {
	if !core.ValidCoordinate(q.Center.LatNano, q.Center.LonNano) {
		return core.QueryResult{}, core.Errorf(core.InvalidCoordinates, "center (%d, %d) nanodegrees is out of range", q.Center.LatNano, q.Center.LonNano)
	}
	if q.RadiusMM < core.MinRadiusMM || q.RadiusMM > core.MaxRadiusMM {
		return core.QueryResult{}, core.Errorf(core.InvalidRadius, "radius %d mm is outside %d to %d", q.RadiusMM, core.MinRadiusMM, uint64(core.MaxRadiusMM))
	}
	limit, err := pageLimit(q.Limit)
	if err != nil {
		return core.QueryResult{}, err
	}
	after, hasAfter, err := decodeCursor(q.Cursor, kindRadius)
	if err != nil {
		return core.QueryResult{}, err
	}
	c := geom.NewCap(q.Center.LatNano, q.Center.LonNano, q.RadiusMM)
	s := spatialScan{sm: sm, t: opTS, group: q.Group, limit: limit, kind: kindRadius, withDistance: true}
	s.run(capRegion{&c}, after, hasAfter)
	return s.result, nil
}

// QueryPolygon returns the latest visible positions inside the polygon and
// outside its holes, ordered by leaf cell id then entity id.
func (sm *StateMachine) QueryPolygon(opTS uint64, q *core.PolygonQuery) (core.QueryResult, error) {
	limit, err := pageLimit(q.Limit)
	if err != nil {
		return core.QueryResult{}, err
	}
	after, hasAfter, err := decodeCursor(q.Cursor, kindPolygon)
	if err != nil {
		return core.QueryResult{}, err
	}
	p, err := geom.NewPolygon(q.Vertices, q.Holes)
	if err != nil {
		return core.QueryResult{}, err
	}
	s := spatialScan{sm: sm, t: opTS, group: q.Group, limit: limit, kind: kindPolygon}
	s.run(polygonRegion{p}, after, hasAfter)
	return s.result, nil
}

// region is the shape a spatial scan looks in: a covering of leaf-cell
// ranges, a cheap test on a leaf cell id that never rejects a point inside,
// and the exact test that defines inclusion.
type region interface {
	Ranges() []geom.CellRange
	MayContainLeaf(leaf uint64) bool
	contains(ev *core.GeoEvent) (distanceMM uint64, ok bool)
}

type capRegion struct{ *geom.Cap }

func (c capRegion) contains(ev *core.GeoEvent) (uint64, bool) {
	return c.Contains(ev.LatNano, ev.LonNano)
}

type polygonRegion struct{ *geom.Polygon }

func (p polygonRegion) MayContainLeaf(uint64) bool { return true }
func (p polygonRegion) contains(ev *core.GeoEvent) (uint64, bool) {
	return 0, p.ContainsPoint(ev.LatNano, ev.LonNano)
}

// spatialScan walks the spatial index over sorted, disjoint cell ranges and
// collects one page of matches.
type spatialScan struct {
	sm           *StateMachine
	t            uint64
	group        core.GroupFilter
	limit        int
	kind         cursorKind
	withDistance bool
	result       core.QueryResult
}

// firstPageCap is the capacity results start with: most pages are small,
// and growing from nothing copies every event several times.
const firstPageCap = 64

func (s *spatialScan) run(reg region, after btree.Key, hasAfter bool) {
	s.result.Events = make([]core.GeoEvent, 0, min(s.limit, firstPageCap))
	if s.withDistance {
		s.result.DistancesMM = make([]uint64, 0, min(s.limit, firstPageCap))
	}
	var last btree.Key
	var chunk [scanChunk]candidate
	for _, r := range reg.Ranges() {
		if hasAfter && after.A > r.Max {
			continue
		}
		it := s.sm.spatial.SeekGE(btree.Key{A: r.Min})
		if hasAfter && after.A >= r.Min {
			it = s.sm.spatial.SeekGE(after)
			if it.Valid() && it.Key() == after {
				it.Next()
			}
		}
		for it.Valid() && it.Key().A <= r.Max {
			// Gather a chunk of candidates by their keys alone (the
			// prefilter rules most out without reading the entity)...
			n := 0
			for ; n < len(chunk) && it.Valid() && it.Key().A <= r.Max; it.Next() {
				if reg.MayContainLeaf(it.Key().A) {
					chunk[n] = candidate{it.Key(), it.Value()}
					n++
				}
			}
			// ...then read their entities: first a pass of independent
			// loads, so that the cache misses overlap instead of queueing
			// behind each candidate's checks...
			s.sm.touch(chunk[:n])
			// ...then the checks, in key order.
			for _, c := range chunk[:n] {
				e := s.sm.store.at(c.slot)
				if !e.visible(s.t) || (s.group.Set && e.latest.GroupID != s.group.ID) {
					continue
				}
				d, ok := reg.contains(&e.latest)
				if !ok {
					continue
				}
				if len(s.result.Events) == s.limit {
					s.result.HasMore = true
					s.result.Cursor = encodeCursor(s.kind, last)
					return
				}
				s.result.Events = append(s.result.Events, e.latest)
				if s.withDistance {
					s.result.DistancesMM = append(s.result.DistancesMM, d)
				}
				last = c.key
			}
		}
	}
}

// scanChunk is how many candidates a scan gathers before reading their
// entities.
const scanChunk = 32

type candidate struct {
	key  btree.Key
	slot uint32
}

// touch loads each candidate's entity. The loads do not depend
// on each other, so the processor overlaps their cache misses; the checks
// that follow then find the entities in cache. The sum only keeps the
// compiler from dropping the loads; it is kept per state machine so that
// state machines in different goroutines share nothing.
func (sm *StateMachine) touch(cs []candidate) {
	var sum uint64
	for _, c := range cs {
		// An entity spans three cache lines; load one word of each.
		e := sm.store.at(c.slot)
		sum += e.latest.EntityID.Lo + e.latest.GroupID + e.expiresAt
	}
	sm.touchSink = sum
}

// GetLatest returns the entity's latest visible event.
func (sm *StateMachine) GetLatest(opTS uint64, id core.Uint128) (core.LatestResult, error) {
	if id.IsZero() {
		return core.LatestResult{}, core.Errorf(core.InvalidEntityID, "entity_id is zero")
	}
	_, e, ok := sm.lookup(id, opTS)
	if !ok {
		return core.LatestResult{}, nil
	}
	return core.LatestResult{Event: e.latest, Found: true}, nil
}

// GetLatestBatch returns each listed entity's latest visible event, in
// request order, with Found false for a missing one.
func (sm *StateMachine) GetLatestBatch(opTS uint64, ids []core.Uint128) ([]core.LatestResult, error) {
	if err := checkIDList(ids); err != nil {
		return nil, err
	}
	out := make([]core.LatestResult, len(ids))
	for i, id := range ids {
		if _, e, ok := sm.lookup(id, opTS); ok {
			out[i] = core.LatestResult{Event: e.latest, Found: true}
		}
	}
	return out, nil
}

// QueryLatest lists latest visible positions newest first, ordered by
// (timestamp, entity id) descending, with timestamps after SinceNS.
func (sm *StateMachine) QueryLatest(opTS uint64, q *core.LatestQuery) (core.QueryResult, error) {
	limit, err := pageLimit(q.Limit)
	if err != nil {
		return core.QueryResult{}, err
	}
	after, hasAfter, err := decodeCursor(q.Cursor, kindLatest)
	if err != nil {
		return core.QueryResult{}, err
	}
	var res core.QueryResult
	it := sm.byTime.SeekLE(btree.Key{A: ^uint64(0), ID: core.Uint128{Hi: ^uint64(0), Lo: ^uint64(0)}})
	if hasAfter {
		it = sm.byTime.SeekLE(after)
		if it.Valid() && it.Key() == after {
			it.Prev()
		}
	}
	var last btree.Key
	for ; it.Valid() && it.Key().A > q.SinceNS; it.Prev() {
		e := sm.store.at(it.Value())
		if !e.visible(opTS) || (q.Group.Set && e.latest.GroupID != q.Group.ID) {
			continue
		}
		if len(res.Events) == limit {
			res.HasMore = true
			res.Cursor = encodeCursor(kindLatest, last)
			break
		}
		res.Events = append(res.Events, e.latest)
		last = it.Key()
	}
	return res, nil
}

// History lists one entity's visible events with SinceNS <= timestamp <=
// UntilNS (UntilNS 0 = no bound), oldest first. An unknown or expired entity
// has an empty history.
func (sm *StateMachine) History(opTS uint64, q *core.HistoryQuery) (core.QueryResult, error) {
	if q.EntityID.IsZero() {
		return core.QueryResult{}, core.Errorf(core.InvalidEntityID, "entity_id is zero")
	}
	until := q.UntilNS
	if until == 0 {
		until = ^uint64(0)
	}
	if q.SinceNS > until {
		return core.QueryResult{}, core.Errorf(core.InvalidTimeRange, "since_ns %d is after until_ns %d", q.SinceNS, q.UntilNS)
	}
	limit, err := pageLimit(q.Limit)
	if err != nil {
		return core.QueryResult{}, err
	}
	after, hasAfter, err := decodeCursor(q.Cursor, kindHistory)
	if err != nil {
		return core.QueryResult{}, err
	}
	if hasAfter && after.ID != q.EntityID {
		return core.QueryResult{}, core.Errorf(core.InvalidCursor, "the cursor belongs to another entity")
	}
	var res core.QueryResult
	_, e, ok := sm.lookup(q.EntityID, opTS)
	if !ok {
		return res, nil
	}
	from := q.SinceNS
	if hasAfter {
		if after.A == ^uint64(0) {
			return res, nil
		}
		from = max(from, after.A+1)
	}
	i, _ := e.find(from)
	n := len(e.older) + 1
	for ; i < n; i++ {
		ev := &e.latest
		if i < len(e.older) {
			ev = &e.older[i]
		}
		if ev.TimestampNS < from {
			continue // only the latest can lie below from: find stops at it
		}
		if ev.TimestampNS > until {
			break
		}
		if len(res.Events) == limit {
			res.HasMore = true
			res.Cursor = encodeCursor(kindHistory, btree.Key{A: res.Events[limit-1].TimestampNS, ID: q.EntityID})
			break
		}
		res.Events = append(res.Events, *ev)
	}
	return res, nil
}
