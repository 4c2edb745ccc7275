package statemachine

// The reference model: the state machine's semantics restated as plainly as
// possible (a map of entities, each a sorted slice of events; linear scans;
// haversine distances computed here, not by the geom package), so that the
// rapid test below can compare every reply of the real thing against it.

import (
	"math"
	"slices"
	"sort"

	"github.com/geoevent/geoevent/core"
	"github.com/golang/geo/s2"
)

type refEntity struct {
	events    []core.GeoEvent // ascending timestamp; the last is the latest
	expiresAt uint64
}

func (e *refEntity) latest() core.GeoEvent { return e.events[len(e.events)-1] }

type refModel struct {
	ents   map[core.Uint128]*refEntity
	lastTS uint64
}

func newRefModel() *refModel { return &refModel{ents: map[core.Uint128]*refEntity{}} }

func (m *refModel) visible(id core.Uint128, t uint64) *refEntity {
	e := m.ents[id]
	if e == nil || (e.expiresAt != 0 && t >= e.expiresAt) {
		return nil
	}
	return e
}

// olderVisible: is an older event (not the entity's latest) visible at t?
// It is until its own expiry, timestamp + ttl_seconds, when it has one.
func olderVisible(ev core.GeoEvent, t uint64) bool {
	return ev.TTLSeconds == 0 || t < refExpiry(ev)
}

// visibleEvents lists the entity's events visible at t: the latest (the
// entity is visible) and the older ones whose own TTL has not passed.
func (e *refEntity) visibleEvents(t uint64) []core.GeoEvent {
	var out []core.GeoEvent
	for i, ev := range e.events {
		if i == len(e.events)-1 || olderVisible(ev, t) {
			out = append(out, ev)
		}
	}
	return out
}

func refExpiry(ev core.GeoEvent) uint64 {
	if ev.TTLSeconds == 0 {
		return 0
	}
	s := uint64(ev.TTLSeconds) * 1_000_000_000
	if ev.TimestampNS > math.MaxUint64-s {
		return math.MaxUint64
	}
	return ev.TimestampNS + s
}

func refValidate(ev core.GeoEvent) core.Code {
	switch {
	case ev.EntityID == (core.Uint128{}):
		return 7
	case ev.LatNano < -90e9 || ev.LatNano > 90e9:
		return 9
	case ev.LonNano < -180e9 || ev.LonNano > 180e9:
		return 10
	case ev.AltitudeMM < -10_000_000 || ev.AltitudeMM > 100_000_000:
		return 11
	case ev.VelocityMMS > 1_000_000_000:
		return 12
	case ev.HeadingCdeg > 35_999:
		return 13
	}
	return 0
}

// write returns the reply, or the batch-level error code (0 for none).
func (m *refModel) write(opTS uint64, events []core.GeoEvent, upsert bool) (core.InsertReply, core.Code) {
	if len(events) == 0 {
		return core.InsertReply{}, 101
	}
	if len(events) > 10_000 {
		return core.InsertReply{}, 300
	}
	reply := core.InsertReply{Results: make([]core.EventResult, len(events))}
	failed := false
	seen := map[[3]uint64]bool{}
	maxClient := uint64(0)
	for i, ev := range events {
		reply.Results[i].Index = uint32(i)
		code := refValidate(ev)
		if code == 0 && ev.TimestampNS != 0 {
			if ev.TimestampNS > opTS+60_000_000_000 {
				code = 14
			} else if !upsert {
				k := [3]uint64{ev.EntityID.Hi, ev.EntityID.Lo, ev.TimestampNS}
				exists := seen[k]
				if e := m.visible(ev.EntityID, opTS); e != nil {
					for _, old := range e.visibleEvents(opTS) {
						exists = exists || old.TimestampNS == ev.TimestampNS
					}
				}
				if exists {
					code = 8
				}
				seen[k] = true
			}
			if code == 0 {
				maxClient = max(maxClient, ev.TimestampNS)
			}
		}
		reply.Results[i].Code = code
		failed = failed || code != 0
	}
	if failed {
		return reply, 0
	}
	next := max(opTS, m.lastTS+1, maxClient+1)
	for i, ev := range events {
		fresh := ev.TimestampNS == 0
		if fresh {
			ev.TimestampNS = next
			next++
		}
		m.lastTS = max(m.lastTS, ev.TimestampNS)
		reply.Results[i].TimestampNS = ev.TimestampNS
		if e := m.ents[ev.EntityID]; e != nil && m.visible(ev.EntityID, opTS) == nil {
			delete(m.ents, ev.EntityID)
		}
		e := m.ents[ev.EntityID]
		switch {
		case e == nil:
			m.ents[ev.EntityID] = &refEntity{events: []core.GeoEvent{ev}, expiresAt: refExpiry(ev)}
			continue
		case upsert && fresh:
			e.events[len(e.events)-1] = ev
			reply.Results[i].Updated = true
		default:
			j := slices.IndexFunc(e.events, func(o core.GeoEvent) bool { return o.TimestampNS == ev.TimestampNS })
			if j >= 0 {
				// An expired older event is absent: replacing it updates
				// nothing.
				reply.Results[i].Updated = j == len(e.events)-1 || olderVisible(e.events[j], opTS)
				e.events[j] = ev
			} else {
				e.events = append(e.events, ev)
				sort.Slice(e.events, func(a, b int) bool { return e.events[a].TimestampNS < e.events[b].TimestampNS })
			}
		}
		if e.latest().TimestampNS == ev.TimestampNS {
			e.expiresAt = refExpiry(ev)
		}
	}
	reply.Committed = true
	return reply, 0
}

func refCheckIDs(ids []core.Uint128) core.Code {
	if len(ids) == 0 {
		return 101
	}
	if len(ids) > 10_000 {
		return 300
	}
	for _, id := range ids {
		if id == (core.Uint128{}) {
			return 101
		}
	}
	return 0
}

func (m *refModel) deleteEntities(opTS uint64, ids []core.Uint128) (core.DeleteReply, core.Code) {
	if c := refCheckIDs(ids); c != 0 {
		return core.DeleteReply{}, c
	}
	var r core.DeleteReply
	for _, id := range ids {
		if m.visible(id, opTS) != nil {
			r.Deleted++
		} else {
			r.NotFound++
		}
		delete(m.ents, id)
	}
	return r, 0
}

func (m *refModel) ttlEntity(id core.Uint128, t uint64) (*refEntity, core.Code) {
	if id == (core.Uint128{}) {
		return nil, 101
	}
	e := m.visible(id, t)
	if e == nil {
		return nil, 3
	}
	return e, 0
}

func satAdd(ts uint64, seconds uint32) uint64 {
	s := uint64(seconds) * 1_000_000_000
	if ts > math.MaxUint64-s {
		return math.MaxUint64
	}
	return ts + s
}

func (m *refModel) cleanup(opTS uint64, maxEntries uint32) core.CleanupReply {
	if maxEntries == 0 {
		maxEntries = 10_000
	}
	type exp struct {
		at uint64
		id core.Uint128
	}
	// An entity is due at the sooner of its own expiry and its older
	// events' removal dues: expiry + ttl/16.
	var expired []exp
	for id, e := range m.ents {
		due := e.expiresAt
		for _, ev := range e.events[:len(e.events)-1] {
			if ev.TTLSeconds == 0 {
				continue
			}
			d := refExpiry(ev)
			grace := uint64(ev.TTLSeconds) * 62_500_000
			if d > math.MaxUint64-grace {
				d = math.MaxUint64
			} else {
				d += grace
			}
			if due == 0 || d < due {
				due = d
			}
		}
		if due != 0 && due <= opTS {
			expired = append(expired, exp{due, id})
		}
	}
	sort.Slice(expired, func(a, b int) bool {
		if expired[a].at != expired[b].at {
			return expired[a].at < expired[b].at
		}
		return expired[a].id.Less(expired[b].id)
	})
	var r core.CleanupReply
	for _, x := range expired {
		if r.Scanned == maxEntries {
			break
		}
		r.Scanned++
		e := m.ents[x.id]
		if m.visible(x.id, opTS) == nil {
			r.Removed += uint32(len(e.events))
			delete(m.ents, x.id)
			continue
		}
		kept := e.visibleEvents(opTS)
		r.Removed += uint32(len(e.events) - len(kept))
		e.events = kept
	}
	return r
}

// haversineMM is the model's own great-circle distance on the mean sphere.
func haversineMM(aLat, aLon, bLat, bLon int64) float64 {
	const rad = math.Pi / 180 / 1e9
	φ1, φ2 := float64(aLat)*rad, float64(bLat)*rad
	dφ, dλ := φ2-φ1, float64(bLon-aLon)*rad
	h := math.Sin(dφ/2)*math.Sin(dφ/2) + math.Cos(φ1)*math.Cos(φ2)*math.Sin(dλ/2)*math.Sin(dλ/2)
	return 2 * 6_371_008_800 * math.Asin(math.Min(1, math.Sqrt(h)))
}

type refHit struct {
	ev   core.GeoEvent
	dist float64 // radius queries only, in mm, unrounded
}

// spatialOrder sorts hits by (leaf cell id, entity id), the result order of
// radius and polygon queries.
func spatialOrder(h []refHit) {
	sort.Slice(h, func(a, b int) bool {
		x, y := h[a].ev, h[b].ev
		if x.CellID != y.CellID {
			return x.CellID < y.CellID
		}
		return x.EntityID.Less(y.EntityID)
	})
}

func (m *refModel) latestVisible(t uint64, g core.GroupFilter) []core.GeoEvent {
	var out []core.GeoEvent
	for id, e := range m.ents {
		if m.visible(id, t) == nil {
			continue
		}
		if l := e.latest(); !g.Set || l.GroupID == g.ID {
			out = append(out, l)
		}
	}
	return out
}

func (m *refModel) radius(t uint64, q core.RadiusQuery) []refHit {
	var hits []refHit
	for _, l := range m.latestVisible(t, q.Group) {
		if d := haversineMM(q.Center.LatNano, q.Center.LonNano, l.LatNano, l.LonNano); math.Round(d) <= float64(q.RadiusMM) {
			hits = append(hits, refHit{l, d})
		}
	}
	spatialOrder(hits)
	return hits
}

// refLoop builds the s2 loop of a ring read as enclosing its smaller side.
func refLoop(ring []core.Coordinate) *s2.Loop {
	pts := make([]s2.Point, len(ring))
	for i, c := range ring {
		pts[i] = s2.PointFromLatLng(s2.LatLngFromDegrees(float64(c.LatNano)/1e9, float64(c.LonNano)/1e9))
	}
	l := s2.LoopFromPoints(pts)
	if l.Area() > 2*math.Pi {
		l.Invert()
	}
	return l
}

func (m *refModel) polygon(t uint64, q core.PolygonQuery) []refHit {
	outer := refLoop(q.Vertices)
	var holes []*s2.Loop
	for _, h := range q.Holes {
		holes = append(holes, refLoop(h))
	}
	var hits []refHit
	for _, l := range m.latestVisible(t, q.Group) {
		p := s2.PointFromLatLng(s2.LatLngFromDegrees(float64(l.LatNano)/1e9, float64(l.LonNano)/1e9))
		in := outer.ContainsPoint(p)
		for _, h := range holes {
			in = in && !h.ContainsPoint(p)
		}
		if in {
			hits = append(hits, refHit{ev: l})
		}
	}
	spatialOrder(hits)
	return hits
}

func (m *refModel) latest(t uint64, q core.LatestQuery) []core.GeoEvent {
	var out []core.GeoEvent
	for _, l := range m.latestVisible(t, q.Group) {
		if l.TimestampNS > q.SinceNS {
			out = append(out, l)
		}
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].TimestampNS != out[b].TimestampNS {
			return out[a].TimestampNS > out[b].TimestampNS
		}
		return out[b].EntityID.Less(out[a].EntityID)
	})
	return out
}

func (m *refModel) history(t uint64, q core.HistoryQuery) []core.GeoEvent {
	e := m.visible(q.EntityID, t)
	if e == nil {
		return nil
	}
	var out []core.GeoEvent
	for _, ev := range e.visibleEvents(t) {
		if ev.TimestampNS >= q.SinceNS && (q.UntilNS == 0 || ev.TimestampNS <= q.UntilNS) {
			out = append(out, ev)
		}
	}
	return out
}

func (m *refModel) stats(t uint64) core.Stats {
	var s core.Stats
	for id, e := range m.ents {
		if m.visible(id, t) != nil {
			s.EntityCount++
			s.EventCount += uint64(len(e.events)) // expired older ones too, until cleanup
		}
	}
	s.StorageBytes = s.EventCount * 128
	return s
}
