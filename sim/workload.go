package sim

import (
	"cmp"
	"fmt"
	"github.com/geoevent/geoevent/core"
)

// The workload: clients issue every operation on a small pool of entities
// in a small area (about 2 km across), so that operations conflict.
//
// Every event carries its origin in UserData: Hi is the id of the write
// operation, Lo its index in the batch. The first third of the pool is
// append-only: those entities get only inserts of events with a server
// timestamp and no TTL, which the durability checker can follow exactly;
// the others get everything.
//
// Client timestamps (imports, upserts naming an event) come from a small
// set an hour in the past, so that they collide with each other and always
// sort before server-assigned ones, which lie after the run's start; a few
// deliberately invalid events name a timestamp an hour in the future.

type workload struct {
	w          *world
	ids        []core.Uint128
	appendOnly int
	lat0, lon0 int64
	span       int64 // nanodegrees either side of the center
}

type opWeight struct {
	kind   core.Operation
	weight int
}

var opWeights = []opWeight{
	{core.OpInsert, 24}, {core.OpUpsert, 12}, {core.OpDeleteEntities, 4},
	{core.OpTTLSet, 3}, {core.OpTTLExtend, 2}, {core.OpTTLClear, 2}, {core.OpCleanupExpired, 2},
	{core.OpQueryRadius, 6}, {core.OpQueryPolygon, 5}, {core.OpGetLatest, 10},
	{core.OpGetLatestBatch, 6}, {core.OpQueryLatest, 4}, {core.OpEntityHistory, 10},
	{core.OpStats, 2}, {core.OpStatus, 1}, {core.OpTopology, 1}, {core.OpPing, 1},
	{core.OpQueryBBox, 3}, {core.OpQueryNearest, 3},
	{core.OpPutFence, 2}, {core.OpGetFence, 1}, {core.OpListFences, 1}, {core.OpDeleteFence, 1}, {core.OpReadFeed, 2},
	{core.OpPutHook, 1}, {core.OpGetHook, 1}, {core.OpListHooks, 1}, {core.OpDeleteHook, 1}, {core.OpHookDelivered, 1},
	{core.OpSetFeedRetention, 1}, {core.OpGetFeedRetention, 1},
}

func newWorkload(w *world) *workload {
	r := w.rng
	wl := &workload{w: w, span: 10_000_000}
	hi := r.Uint64() | 1
	for i := 0; i < w.cfg.entities; i++ {
		wl.ids = append(wl.ids, core.Uint128{Hi: hi, Lo: uint64(i + 1)})
	}
	wl.appendOnly = max(1, len(wl.ids)/3)
	wl.lat0 = (r.Int64N(120)-60)*1_000_000_000 + r.Int64N(1_000_000_000)
	wl.lon0 = (r.Int64N(340)-170)*1_000_000_000 + r.Int64N(1_000_000_000)
	return wl
}

func (wl *workload) point() (int64, int64) {
	r := wl.w.rng
	return wl.lat0 + r.Int64N(2*wl.span+1) - wl.span, wl.lon0 + r.Int64N(2*wl.span+1) - wl.span
}

// pastTS is one of six client timestamps an hour before the run.
func (wl *workload) pastTS() uint64 {
	return wl.w.cfg.clockRealBase - 3600_000_000_000 + uint64(wl.w.rng.IntN(6))*1_000_000_000
}

func (wl *workload) anyEntity() int { return wl.w.rng.IntN(len(wl.ids)) }
func (wl *workload) mutableEntity() int {
	return wl.appendOnly + wl.w.rng.IntN(len(wl.ids)-wl.appendOnly)
}
func (wl *workload) invalid() bool { return wl.w.rng.Float64() < wl.w.cfg.invalidShare }

func (wl *workload) next(c *client) *opRec {
	if c.cont != nil {
		op := wl.continuation(c, c.cont)
		c.cont = nil
		return op
	}
	total := 0
	for _, ow := range opWeights {
		total += ow.weight
	}
	x := wl.w.rng.IntN(total)
	kind := opWeights[0].kind
	for _, ow := range opWeights {
		if x < ow.weight {
			kind = ow.kind
			break
		}
		x -= ow.weight
	}
	if wl.appendOnly == len(wl.ids) {
		switch kind {
		case core.OpUpsert, core.OpDeleteEntities, core.OpTTLSet, core.OpTTLExtend, core.OpTTLClear:
			kind = core.OpInsert
		}
	}
	return wl.build(c, kind)
}

func (wl *workload) build(c *client, kind core.Operation) *opRec {
	w, r := wl.w, wl.w.rng
	op := &opRec{client: c.id, kind: kind}
	switch kind {
	case core.OpInsert, core.OpUpsert:
		wl.writeBatch(op)
	case core.OpDeleteEntities:
		ids := []core.Uint128{wl.ids[wl.mutableEntity()]}
		for r.IntN(3) == 0 {
			ids = append(ids, wl.ids[wl.mutableEntity()])
		}
		op.req, op.entities = &core.DeleteRequest{EntityIDs: ids}, ids
	case core.OpTTLSet:
		id := wl.ids[wl.mutableEntity()]
		secs := uint32(0)
		if r.IntN(8) != 0 {
			secs = 1 + uint32(r.IntN(5))
		}
		op.req, op.entities = &core.TTLSetRequest{EntityID: id, TTLSeconds: secs}, []core.Uint128{id}
	case core.OpTTLExtend:
		id := wl.ids[wl.mutableEntity()]
		op.req, op.entities = &core.TTLExtendRequest{EntityID: id, ExtendBySeconds: 1 + uint32(r.IntN(3))}, []core.Uint128{id}
	case core.OpTTLClear:
		id := wl.ids[wl.mutableEntity()]
		op.req, op.entities = &core.TTLClearRequest{EntityID: id}, []core.Uint128{id}
	case core.OpCleanupExpired:
		op.req = &core.CleanupRequest{MaxEntries: uint32(r.IntN(4))}
	case core.OpQueryRadius:
		lat, lon := wl.point()
		q := &core.RadiusQuery{Center: core.Coordinate{LatNano: lat, LonNano: lon}, RadiusMM: 100_000 + r.Uint64N(1_400_000)}
		wl.filterAndPage(&q.Group, &q.Page)
		if wl.invalid() {
			q.RadiusMM, op.expectErr = 0, core.InvalidRadius.Code
		}
		op.req = q
		op.region = &region{radius: true, center: q.Center, radiusMM: q.RadiusMM}
	case core.OpQueryPolygon:
		q := &core.PolygonQuery{}
		lat, lon := wl.point()
		h, v := 1_000_000+r.Int64N(8_000_000), 1_000_000+r.Int64N(8_000_000) // 100 m .. 1 km
		q.Vertices = rect(lat, lon, h, v, r.IntN(2) == 0)
		if r.IntN(3) == 0 {
			q.Holes = [][]core.Coordinate{rect(lat, lon, h/3, v/3, r.IntN(2) == 0)}
		}
		if wl.invalid() {
			// A bow tie: the ring crosses itself.
			q.Vertices = []core.Coordinate{{LatNano: lat, LonNano: lon}, {LatNano: lat + v, LonNano: lon + h}, {LatNano: lat + v, LonNano: lon}, {LatNano: lat, LonNano: lon + h}}
			q.Holes, op.expectErr = nil, core.InvalidPolygon.Code
		}
		wl.filterAndPage(&q.Group, &q.Page)
		op.req = q
		op.region = &region{outer: q.Vertices, holes: q.Holes}
	case core.OpQueryBBox:
		lat, lon := wl.point()
		h, v := 1_000_000+r.Int64N(8_000_000), 1_000_000+r.Int64N(8_000_000) // 100 m .. 1 km
		q := &core.BBoxQuery{MinLatNano: lat - v, MinLonNano: lon - h, MaxLatNano: lat + v, MaxLonNano: lon + h}
		if wl.invalid() {
			q.MinLatNano, q.MaxLatNano, op.expectErr = q.MaxLatNano, q.MinLatNano, core.InvalidPolygon.Code
		}
		wl.filterAndPage(&q.Group, &q.Page)
		op.req = q
		op.region = &region{box: q}
	case core.OpQueryNearest:
		lat, lon := wl.point()
		q := &core.NearestQuery{Center: core.Coordinate{LatNano: lat, LonNano: lon}}
		if r.IntN(2) == 0 {
			q.MaxDistanceMM = 100_000 + r.Uint64N(1_400_000)
		}
		wl.filterAndPage(&q.Group, &q.Page)
		if q.Limit == 0 {
			q.Limit = 1 + uint32(r.IntN(20))
		}
		if wl.invalid() {
			q.Limit, op.expectErr = 0, core.InvalidArgument.Code
		}
		op.req = q
		op.region = &region{radius: true, nearest: true, center: q.Center, radiusMM: cmp.Or(q.MaxDistanceMM, core.MaxRadiusMM)}
	case core.OpGetLatest:
		id := wl.ids[wl.anyEntity()]
		op.req, op.entities = &id, []core.Uint128{id}
	case core.OpGetLatestBatch:
		ids := core.IDList{}
		for n := 2 + r.IntN(3); len(ids) < n; {
			ids = append(ids, wl.ids[wl.anyEntity()])
		}
		op.req, op.entities = &ids, ids
	case core.OpQueryLatest:
		q := &core.LatestQuery{}
		if r.IntN(3) == 0 {
			now, _ := w.realtimeBounds(w.now, w.now)
			q.SinceNS = now - r.Uint64N(3_000_000_000)
		}
		wl.filterAndPage(&q.Group, &q.Page)
		op.req = q
	case core.OpEntityHistory:
		id := wl.ids[wl.anyEntity()]
		q := &core.HistoryQuery{EntityID: id}
		switch r.IntN(6) {
		case 0:
			q.SinceNS = wl.pastTS()
		case 1:
			now, _ := w.realtimeBounds(w.now, w.now)
			q.SinceNS = now - r.Uint64N(3_000_000_000)
		case 2:
			q.UntilNS = wl.pastTS()
		}
		if r.IntN(4) == 0 {
			q.Limit = 1 + uint32(r.IntN(3))
		}
		op.req, op.entities = q, []core.Uint128{id}
	case core.OpPutFence, core.OpGetFence, core.OpListFences, core.OpDeleteFence, core.OpReadFeed:
		op.req = wl.fenceRequest(kind)
	case core.OpPutHook, core.OpGetHook, core.OpListHooks, core.OpDeleteHook, core.OpHookDelivered:
		op.req = wl.hookRequest(kind)
	case core.OpSetFeedRetention:
		// Bounds near the lower limits, so that a run trims its feed by
		// age; one in eight outside them.
		q := &core.FeedRetention{MaxAgeS: core.MinFeedRetentionAgeS + r.Uint64N(120), MaxNotifications: core.MinFeedRetentionCount + r.Uint64N(1000)}
		if r.IntN(8) == 0 {
			q.MaxAgeS, op.expectErr = core.MinFeedRetentionAgeS-1, core.InvalidArgument.Code
		}
		op.req = q
	case core.OpGetFeedRetention:
		op.req = nil
	}
	return op
}

// fenceRequest builds a fence or feed operation: fences f0-f3 over the
// workload's area, so that moves cross them.
func (wl *workload) fenceRequest(kind core.Operation) any {
	r := wl.w.rng
	name := fmt.Sprintf("f%d", r.IntN(4))
	switch kind {
	case core.OpPutFence:
		lat, lon := wl.point()
		h, v := 1_000_000+r.Int64N(8_000_000), 1_000_000+r.Int64N(8_000_000)
		f := &core.Fence{Name: name, Report: core.NotifyMask(r.IntN(8)) << 1}
		if r.IntN(4) == 0 {
			f.Group = core.GroupFilter{Set: true, ID: 1 + uint64(r.IntN(2))}
		}
		switch r.IntN(3) {
		case 0:
			f.Shape, f.Vertices = core.FencePolygon, rect(lat, lon, h, v, r.IntN(2) == 0)
		case 1:
			f.Shape, f.Center, f.RadiusMM = core.FenceCircle, core.Coordinate{LatNano: lat, LonNano: lon}, 100_000+r.Uint64N(1_000_000)
		default:
			f.Shape = core.FenceBBox
			f.Min, f.Max = core.Coordinate{LatNano: lat - v, LonNano: lon - h}, core.Coordinate{LatNano: lat + v, LonNano: lon + h}
		}
		return f
	case core.OpGetFence, core.OpDeleteFence:
		return &core.FenceName{Name: name}
	case core.OpListFences:
		return &core.FenceListRequest{Limit: uint32(r.IntN(3))}
	}
	q := &core.FeedRequest{Limit: uint32(r.IntN(20))}
	if r.IntN(3) == 0 {
		q.Fences = []string{name}
	}
	if r.IntN(6) == 0 {
		q.After = core.FeedEnd
	}
	return q
}

// hookRequest builds a hook operation: hooks h0-h2. The workload plays the
// leader's deliverer too (hook_delivered), with positions and versions
// that may be stale, equal or beyond the feed.
func (wl *workload) hookRequest(kind core.Operation) any {
	r := wl.w.rng
	name := fmt.Sprintf("h%d", r.IntN(3))
	switch kind {
	case core.OpPutHook:
		h := &core.Hook{Name: name, URL: fmt.Sprintf("http://127.0.0.1:%d/%s", 8000+r.IntN(3), name), Types: core.NotifyMask(r.IntN(8)) << 1}
		if r.IntN(2) == 0 {
			h.Fences = []string{fmt.Sprintf("f%d", r.IntN(4))}
		}
		return h
	case core.OpGetHook, core.OpDeleteHook:
		return &core.HookName{Name: name}
	case core.OpListHooks:
		return &core.HookListRequest{Limit: uint32(r.IntN(3))}
	}
	return &core.HookDelivered{Name: name, Version: 1 + r.Uint64N(6), Seq: r.Uint64N(1 << 40)}
}

func (wl *workload) filterAndPage(g *core.GroupFilter, p *core.Page) {
	r := wl.w.rng
	if r.IntN(5) == 0 {
		*g = core.GroupFilter{Set: true, ID: 1 + uint64(r.IntN(2))}
	}
	if r.IntN(5) == 0 {
		p.Limit = 1 + uint32(r.IntN(3))
	}
}

// rect is a rectangle of half-sizes h (longitude) and v (latitude), wound
// either way, open.
func rect(lat, lon, h, v int64, ccw bool) []core.Coordinate {
	ring := []core.Coordinate{
		{LatNano: lat - v, LonNano: lon - h}, {LatNano: lat - v, LonNano: lon + h},
		{LatNano: lat + v, LonNano: lon + h}, {LatNano: lat + v, LonNano: lon - h},
	}
	if !ccw {
		ring[1], ring[3] = ring[3], ring[1]
	}
	return ring
}

// writeBatch fills an insert or upsert of one to four events.
func (wl *workload) writeBatch(op *opRec) {
	w, r := wl.w, wl.w.rng
	w.addOp(op) // the id tags the events
	n := 1 + r.IntN(2)
	if r.IntN(4) == 0 {
		n += r.IntN(3)
	}
	upsert := op.kind == core.OpUpsert
	evs := make([]core.GeoEvent, n)
	op.static = make([]core.Code, n)
	seen := map[core.Uint128]bool{}
	for i := range evs {
		ent := wl.anyEntity()
		if upsert {
			ent = wl.mutableEntity()
		}
		e := &evs[i]
		e.EntityID = wl.ids[ent]
		e.CorrelationID = core.Uint128{Hi: uint64(op.client), Lo: r.Uint64()}
		e.UserData = core.Uint128{Hi: uint64(op.id), Lo: uint64(i)}
		e.LatNano, e.LonNano = wl.point()
		e.GroupID = 1 + uint64(r.IntN(2))
		e.AltitudeMM = int32(r.IntN(200_000)) - 50_000
		e.VelocityMMS = uint32(r.IntN(40_000))
		e.AccuracyMM = uint32(r.IntN(10_000))
		e.HeadingCdeg = uint16(r.IntN(36_000))
		e.Flags = uint16(r.IntN(1 << 16))
		if ent >= wl.appendOnly {
			if r.Float64() < w.cfg.ttlShare {
				e.TTLSeconds = 1 + uint32(r.IntN(4))
			}
			if r.IntN(4) == 0 {
				e.TimestampNS = wl.pastTS()
			}
		}
		if wl.invalid() {
			switch r.IntN(4) {
			case 0:
				e.LatNano = core.MaxLatNano + 1 + r.Int64N(1000)
			case 1:
				e.LonNano = -core.MaxLonNano - 1
			case 2:
				now, _ := w.realtimeBounds(w.now, w.now)
				e.TimestampNS = now + 3600_000_000_000
			case 3:
				e.EntityID = core.Uint128{}
			}
		}
		op.static[i] = e.Validate().Code
		if op.static[i] == 0 && e.TimestampNS > wl.w.cfg.clockRealBase {
			op.static[i] = core.TimestampInFuture.Code
		}
		if !e.EntityID.IsZero() && !seen[e.EntityID] {
			seen[e.EntityID] = true
			op.entities = append(op.entities, e.EntityID)
		}
	}
	op.req = &core.InsertRequest{Events: evs}
}

// continuation is the next page of a query that said it has more.
func (wl *workload) continuation(c *client, prev *opRec) *opRec {
	res := prev.reply.(*core.QueryResult)
	op := &opRec{client: c.id, kind: prev.kind, entities: prev.entities, region: prev.region, paged: true}
	switch q := prev.req.(type) {
	case *core.RadiusQuery:
		nq := *q
		nq.Cursor = res.Cursor
		op.req = &nq
	case *core.PolygonQuery:
		nq := *q
		nq.Cursor = res.Cursor
		op.req = &nq
	case *core.LatestQuery:
		nq := *q
		nq.Cursor = res.Cursor
		op.req = &nq
	case *core.BBoxQuery:
		nq := *q
		nq.Cursor = res.Cursor
		op.req = &nq
	case *core.NearestQuery:
		nq := *q
		nq.Cursor = res.Cursor
		op.req = &nq
	case *core.HistoryQuery:
		nq := *q
		nq.Cursor = res.Cursor
		op.req = &nq
		op.paged = false
		op.hasAfter, op.afterTS = true, res.Events[len(res.Events)-1].TimestampNS
	}
	return op
}

// probeOps are the checker's reads of everything: each entity's history,
// every latest position, and a radius query over the whole area.
func (wl *workload) probeOps(c *client) []*opRec {
	var ops []*opRec
	for _, id := range wl.ids {
		q := &core.HistoryQuery{EntityID: id, Page: core.Page{Limit: core.MaxQueryLimit}}
		ops = append(ops, &opRec{client: c.id, kind: core.OpEntityHistory, req: q, entities: []core.Uint128{id}})
	}
	ids := core.IDList(append([]core.Uint128(nil), wl.ids...))
	ops = append(ops, &opRec{client: c.id, kind: core.OpGetLatestBatch, req: &ids, entities: ids})
	q := &core.RadiusQuery{Center: core.Coordinate{LatNano: wl.lat0, LonNano: wl.lon0}, RadiusMM: 5_000_000, Page: core.Page{Limit: core.MaxQueryLimit}}
	ops = append(ops, &opRec{client: c.id, kind: core.OpQueryRadius, req: q, region: &region{radius: true, center: q.Center, radiusMM: q.RadiusMM}})
	ops = append(ops, &opRec{client: c.id, kind: core.OpQueryLatest, req: &core.LatestQuery{Page: core.Page{Limit: core.MaxQueryLimit}}})
	return ops
}
