package statemachine

import (
	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/statemachine/internal/btree"
	"github.com/geoevent/geoevent/statemachine/internal/geom"
)

// QueryRadius returns the latest visible positions within RadiusMM of the
// center (rounded great-circle distance <= radius), ordered by leaf cell id
// then entity id, with each one's distance.
//
// The result's Events and DistancesMM are the state machine's memory: they
// hold until its next QueryRadius, QueryPolygon, QueryLatest or History,
// which reuses them. A caller that keeps them longer copies them.
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
	sm.flushSpatial()
	// The region and its ranges live in the state machine, as the scan's
	// other memory: allocated per query (fresh memory, cache-cold) they
	// cost 18% of a 1 km query with two processors (not a significant
	// share on one).
	reg := &sm.scanCap
	*reg = capRegion{c: geom.NewCap(q.Center.LatNano, q.Center.LonNano, q.RadiusMM), rs: reg.rs[:0], may: reg.may}
	reg.f = reg.c.Filter()
	reg.rs = reg.c.AppendScanRanges(reg.rs)
	s := spatialScan{sm: sm, t: opTS, group: q.Group, filter: q.Filter, limit: limit, kind: kindRadius, withDistance: true}
	s.run(reg, after, hasAfter, workPlan)
	return s.result, nil
}

// QueryPolygon returns the latest visible positions inside the polygon and
// outside its holes, ordered by leaf cell id then entity id. Its edges
// are great-circle arcs, or with q.Edges planar straight lines in
// longitude and latitude (see queryPlanarPolygon). Its result's
// Events hold until the next QueryRadius, QueryPolygon, QueryLatest or
// History, as QueryRadius's.
func (sm *StateMachine) QueryPolygon(opTS uint64, q *core.PolygonQuery) (core.QueryResult, error) {
	offered := sm.offered
	sm.offered = offeredPolygon{}
	limit, err := pageLimit(q.Limit)
	if err != nil {
		return core.QueryResult{}, err
	}
	after, hasAfter, err := decodeCursor(q.Cursor, kindPolygon)
	if err != nil {
		return core.QueryResult{}, err
	}
	switch q.Edges {
	case core.EdgesGeodesic:
	case core.EdgesPlanar:
		return sm.queryPlanarPolygon(opTS, q, limit, after, hasAfter)
	default:
		return core.QueryResult{}, core.Errorf(core.InvalidArgument, "edges %d is neither geodesic (0) nor planar (1)", q.Edges)
	}
	var p *geom.Polygon
	switch {
	case offered.q == q && offered.pp.err != nil:
		return core.QueryResult{}, offered.pp.err
	case offered.q == q:
		p = offered.pp.g.Polygon()
	default:
		if p, err = sm.polygons.Build(q.Vertices, q.Holes); err != nil {
			// The work a build that fails may have done, as for one that
			// succeeds (the plan's): runReady counts it.
			w := workPlan + workPlanEdge*ringsVertices(q)
			sm.lastScanWork = w
			sm.scanWork += uint64(w)
			return core.QueryResult{}, err
		}
	}
	sm.flushSpatial()
	s := spatialScan{sm: sm, t: opTS, group: q.Group, filter: q.Filter, limit: limit, kind: kindPolygon}
	reg := &sm.scanPolygon
	reg.p = p
	reg.rs, reg.f = p.Scan()
	s.run(reg, after, hasAfter, workPlan+workPlanEdge*p.Edges())
	*reg = polygonRegion{class: reg.class} // the polygon's memory is the builder's
	return s.result, nil
}

// ringsVertices is the number of vertices of q's rings.
func ringsVertices(q *core.PolygonQuery) int {
	n := len(q.Vertices)
	for _, h := range q.Holes {
		n += len(h)
	}
	return n
}

// A PreparedPolygon is the plan of a large polygon query (its polygon,
// grid and key ranges), or its error, made away from the state machine: a
// pure function of the query's rings, which the state machine's
// QueryPolygon of those rings then takes instead of building it
// (OfferPolygon). Building the largest polygon the limits allow takes
// 19-23 ms, a few times a page's budget, and finding one invalid may take
// as long; prepared on a connection's goroutine, it leaves the event loop
// the pages alone.
type PreparedPolygon struct {
	g           *geom.PreparedPolygon // nil when err is set
	err         error                 // the polygon's, when it is not valid
	outer       []core.Coordinate     // the rings it was made of
	holes       [][]core.Coordinate
	vertexCount int
}

// PreparePolygon builds q's polygon for OfferPolygon, or finds it invalid.
// It is safe on any goroutine, and keeps q's rings (the caller does not
// change them afterwards). It returns nil when the state machine would
// build the polygon anew anyway: a small polygon (cheap), one too wide
// for the plane, or one of planar edges.
func PreparePolygon(q *core.PolygonQuery) *PreparedPolygon {
	if q.Edges != core.EdgesGeodesic {
		return nil // a planar polygon is cheap to build on the loop (queryPlanarPolygon)
	}
	g, err := geom.PreparePolygon(q.Vertices, q.Holes)
	if g == nil && err == nil {
		return nil
	}
	return &PreparedPolygon{g: g, err: err, outer: q.Vertices, holes: q.Holes}
}

// SameRings reports whether two polygon queries have the same rings.
func SameRings(a, b *core.PolygonQuery) bool {
	return geom.SameRings(a.Vertices, a.Holes, b.Vertices, b.Holes)
}

// Same reports whether pp was prepared of q's rings: then it serves q too.
func (pp *PreparedPolygon) Same(q *core.PolygonQuery) bool {
	return geom.SameRings(q.Vertices, q.Holes, pp.outer, pp.holes)
}

// Err returns the polygon's error: not nil when it is not valid.
func (pp *PreparedPolygon) Err() error { return pp.err }

// Bytes estimates the memory pp holds beyond its rings.
func (pp *PreparedPolygon) Bytes() int {
	if pp.g == nil {
		return 1024
	}
	return 1024 + 200*pp.g.Edges()
}

// OfferPolygon hands the state machine pp, prepared of q's rings (the
// caller knows pp.Same(q)): its QueryPolygon of q, next, uses it without
// comparing the rings, and, when it is valid, later queries of the same
// rings use it as the last large polygon built. Answers, page boundaries
// and the work of pages are the same as without it; only the time
// differs.
func (sm *StateMachine) OfferPolygon(pp *PreparedPolygon, q *core.PolygonQuery) {
	if pp == nil {
		return
	}
	if pp.g != nil {
		sm.polygons.Offer(pp.g)
	}
	sm.offered = offeredPolygon{pp, q}
}

// offeredPolygon is a polygon prepared of q's rings, for QueryPolygon of
// q, next (OfferPolygon).
type offeredPolygon struct {
	pp *PreparedPolygon
	q  *core.PolygonQuery
}

// region is the shape a spatial scan looks in: a covering of leaf-cell
// ranges, a cheap judgement of a leaf cell id (geom.LeafOutside: no point
// of the leaf is inside; geom.LeafInside: every point is; else
// geom.LeafUnsure), and the exact test that defines inclusion, which also
// gives the distance where the query reports one. Both count their work
// (see maxScanWork).
type region interface {
	ScanRanges() []geom.ScanRange
	// gather judges a run of keys (their leaf cell ids and values) in
	// order, appending the candidates among them to cands, until the work
	// of the keys judged reaches budget (at least one key); it returns how
	// many it judged and their work.
	gather(cells []uint64, slots []uint32, cands []candidate, budget int) (_ []candidate, judged, work int)
	contains(latNano, lonNano int64) (distanceMM uint64, ok bool, work int)
}

type capRegion struct {
	c   geom.Cap
	f   geom.CapFilter   // of c
	rs  []geom.ScanRange // of c
	may []bool           // gather's judgements of a run of keys, kept for the next query
}

func (c *capRegion) ScanRanges() []geom.ScanRange { return c.rs }
func (c *capRegion) gather(cells []uint64, slots []uint32, cands []candidate, budget int) ([]candidate, int, int) {
	return gatherMay(&c.f, &c.may, cells, slots, cands, budget)
}

// leafJudge rules leaf cells out of a region (geom.CapFilter,
// geom.BoxFilter): may[k] false when no point of leaves[k] is in it.
type leafJudge interface {
	MayContainLeaves(leaves []uint64, may []bool)
}

// gatherMay is region.gather for a region whose keys cost the same each
// and are judged by f alone (may is the memory of its judgements): it
// takes as many keys as the budget pays for, rounded up.
func gatherMay(f leafJudge, may *[]bool, cells []uint64, slots []uint32, cands []candidate, budget int) ([]candidate, int, int) {
	n := min(len(cells), max(budget+workKey-1, workKey)/workKey)
	cells = cells[:n]
	if len(*may) < n {
		*may = make([]bool, n)
	}
	f.MayContainLeaves(cells, *may)
	for i, m := range (*may)[:n] {
		if m {
			cands = append(cands, candidate{slots[i], false}) // the distance, if any, is wanted anyway
		}
	}
	return cands, n, n * workKey
}

func (c *capRegion) contains(latNano, lonNano int64) (uint64, bool, int) {
	d, ok := c.c.Contains(latNano, lonNano)
	return d, ok, workContains
}

type polygonRegion struct {
	p     *geom.Polygon
	rs    []geom.ScanRange
	f     geom.PolygonFilter
	class []uint8 // gather's judgements of a run of keys, kept for the next query
}

func (p *polygonRegion) ScanRanges() []geom.ScanRange { return p.rs }
func (p *polygonRegion) gather(cells []uint64, slots []uint32, cands []candidate, budget int) ([]candidate, int, int) {
	if len(p.class) < len(cells) {
		p.class = make([]uint8, len(cells))
	}
	n, work := p.f.ClassifyLeavesWork(cells, p.class, workKey, budget)
	for i, class := range p.class[:n] {
		if class != geom.LeafOutside {
			cands = append(cands, candidate{slots[i], class == geom.LeafInside})
		}
	}
	return cands, n, work
}

func (p *polygonRegion) contains(latNano, lonNano int64) (uint64, bool, int) {
	in, edges := p.p.ContainsPointWork(latNano, lonNano)
	return 0, in, workContains + edges
}

// spatialScan walks the spatial index over sorted, disjoint cell ranges and
// collects one page of matches.
type spatialScan struct {
	sm           *StateMachine
	t            uint64
	group        core.GroupFilter
	filter       core.Filter
	limit        int
	kind         cursorKind
	withDistance bool
	result       core.QueryResult

	cands   []candidate // the batch being gathered
	matches []match     // matches so far, at most limit+1

	// The page's work (see maxScanWork): left is what remains of its
	// budget for keys and may fall below 0 by one step's work; work is
	// what it has done, its plan's included.
	left, work int
}

// candidate is an entity whose key the scan has judged. Its key is
// spatialKey of the entity (the scan reads only the cell ids and values of
// the index, not the entity ids).
type candidate struct {
	slot   uint32
	inside bool // the key's leaf cell lies inside the region: no test needed
}

type match struct {
	slot     uint32
	distance uint64
}

// maxScanBatch is about how many candidates a scan gathers before reading
// their entities (it may take one leaf's run more): 1,024 entities of a
// cache line each (two in full chunks), 64 to 128 KiB, which stay in
// cache while they are checked.
const maxScanBatch = 1024

// spend counts work done by the page.
func (s *spatialScan) spend(w int) {
	s.left -= w
	s.work += w
}

// run gathers candidates by their keys alone (the region's judgement of
// each key's leaf cell rules most non-matches out without reading the
// entity), in batches; checks them in key order; and stops once it holds
// limit+1 matches, or once its work reaches the page's budget (see
// maxScanWork; plan is the work of preparing the region), the cursor then
// being the last key whose judgement is complete. Then it builds the page
// in the state machine's result memory from the entities it has just
// read.
//
// The budget ends a page at three places, in key order each time, so that
// the keys before the cursor are all done and the keys after it are
// judged afresh by the next page: after the key whose gathering (its
// judgement by its cell, and the reading of its entity if it is a
// candidate) spends the budget; within a batch's checks, after the
// candidate whose exact test spends it; and within the checks of the
// batch whose gathering spent it, after the candidate whose test spends a
// grace of a quarter of the budget more (so that the keys that batch
// gathered are not judged again, as long as its tests are cheap). A page
// always completes at least one key.
//
// Nearly all of a small query's time would be cache misses (entities are
// stored in the order they arrived, so each candidate's is a miss of its
// own; a seek misses at each level of the tree), so run starts loads
// early and does not wait for them: it prefetches the tree's nodes for
// the next ranges' seeks, and the leaves where they start, all at once,
// and each leaf's run of candidates' entities as it gathers them, so that
// they arrive while it judges the keys that follow. Against reading the candidates' entities in a pass of
// loads before the checks, which waits for each batch of misses, 1 km
// radius queries ran 17% faster and polygon queries 8%
// (BenchmarkQueryRadius1km, BenchmarkQueryPolygon; the radius figure
// includes a cheaper distance polynomial, itself within the noise).
func (s *spatialScan) run(reg region, after btree.Key, hasAfter bool, plan int) {
	sm := s.sm
	s.cands = sm.scanCands[:0]
	s.matches = sm.scanMatches[:0]
	defer func() { sm.scanCands, sm.scanMatches = s.cands[:0], s.matches[:0] }()
	batch := min(max(s.limit+1, 64), maxScanBatch)
	var last btree.Key // the key of the limit-th match
	done := false
	budget := sm.workBudget()
	s.work, s.left = plan, max(budget-plan, budget/4)
	var cut btree.Key // the last key completed, when the budget ran out
	cutShort := false
	var it btree.Iter
	ranges := reg.ScanRanges()
	prefetched := 0                             // ranges whose first seek's nodes have been prefetched
	finished, hasFinished := btree.Key{}, false // the end of the last range this page finished
	for k, r := range ranges {
		if done {
			break
		}
		if hasAfter && after.A > r.Max {
			continue
		}
		if s.left <= 0 && hasFinished {
			// Ranges without keys spent the budget by their seeks: the
			// page ends after the last of them, once the candidates
			// gathered before are checked (with the grace, as after a
			// gathering that spends the budget).
			cut, cutShort, done = finished, true, true
			if _, stopped, key := s.check(reg, &last, s.left-budget/4); stopped {
				cut = key
			}
			break
		}
		if k >= prefetched {
			prefetched = s.prefetch(ranges[k:]) + k
		}
		// Position it at the range's first key. Ranges often follow each
		// other closely: when it is already there (no key lies between the
		// ranges) or the range starts within its leaf, this costs no
		// descent.
		s.spend(workSeek)
		if hasAfter && after.A >= r.Min {
			sm.spatial.SeekGEFrom(&it, after)
			if it.Valid() && it.Key() == after {
				it.Next()
			}
		} else if !it.Valid() || it.A() < r.Min {
			sm.spatial.SeekGENear(&it, btree.Key{A: r.Min})
		}
		// Take the range's keys a leaf's run at a time.
		for !done {
			gathered := len(s.cands)
			cells, slots := it.Run()
			n := 0
			for n < len(cells) && cells[n] <= r.Max {
				n++
			}
			if n == 0 {
				// The range's end (or the index's): every key up to its
				// last cell is done (progress, unless the cursor was
				// there already).
				end := btree.Key{A: r.Max, ID: core.Uint128{Hi: ^uint64(0), Lo: ^uint64(0)}}
				if !hasAfter || after.Less(end) {
					finished, hasFinished = end, true
				}
				break
			}
			var w int
			if r.Inside {
				// No key needs judging; the exact test is still wanted
				// where it gives the distance. As many keys as the budget
				// pays for, rounded up.
				n = min(n, max(s.left+workKey-1, workKey)/workKey)
				for _, slot := range slots[:n] {
					s.cands = append(s.cands, candidate{slot, !s.withDistance})
				}
				w = n * workKey
			} else {
				s.cands, n, w = reg.gather(cells[:n], slots[:n], s.cands, s.left)
			}
			for _, c := range s.cands[gathered:] {
				sm.store.prefetch(c.slot)
			}
			s.spend(w + (len(s.cands)-gathered)*workEntity)
			it.Skip(n)
			grace := 0
			if s.left <= 0 {
				// The page ends here unless the keys taken fill it, or
				// their tests spend the grace.
				cut, cutShort = spatialKey(sm.store.at(slots[n-1])), true
				done = true
				grace = budget / 4
			}
			if len(s.cands) >= batch || done {
				full, stopped, key := s.check(reg, &last, min(s.left, 0)-grace)
				if stopped {
					cut, cutShort = key, true
					done = true
				}
				done = full || done
			}
		}
	}
	if !done {
		if _, stopped, key := s.check(reg, &last, 0); stopped {
			cut, cutShort = key, true
		}
	}
	sm.lastScanWork = s.work
	sm.scanWork += uint64(s.work)

	n := min(len(s.matches), s.limit)
	s.result.Events = sm.pageMemory(n)[:n]
	if s.withDistance {
		if cap(sm.scanDistances) < n {
			sm.scanDistances = make([]uint64, n)
		}
		s.result.DistancesMM = sm.scanDistances[:n]
	}
	for i, m := range s.matches[:n] {
		e, x := sm.store.pair(m.slot)
		fillEvent(&s.result.Events[i], e, x)
		if s.withDistance {
			s.result.DistancesMM[i] = m.distance
		}
	}
	switch {
	case len(s.matches) > s.limit:
		s.result.HasMore = true
		s.result.Cursor = encodeCursor(s.kind, last)
	case cutShort:
		s.result.HasMore = true
		s.result.Cursor = encodeCursor(s.kind, cut)
	}
}

// prefetch has the spatial index read the nodes that the seeks of the next
// ranges will read, all at once, the leaves where they start included
// (see btree.Prefetch). It returns how many ranges it covered.
func (s *spatialScan) prefetch(ranges []geom.ScanRange) int {
	var starts [btree.PrefetchMax]btree.Key
	n := min(len(ranges), len(starts))
	for i, r := range ranges[:n] {
		starts[i] = btree.Key{A: r.Min}
	}
	s.sm.spatial.Prefetch(starts[:n])
	return n
}

// check reads the entities of the gathered candidates and keeps those that
// match, in key order, until it holds limit+1 matches; it reports whether
// it does. It counts the exact tests' work, and stops early, after the
// candidate whose test leaves the budget's remainder (s.left) at or below
// floor while candidates remain, returning that candidate's key: the
// page's cursor. It empties the batch.
func (s *spatialScan) check(reg region, last *btree.Key, floor int) (full, stopped bool, key btree.Key) {
	sm := s.sm
	for k, c := range s.cands {
		e := sm.store.at(c.slot)
		if !e.visible(s.t) || (s.group.Set && e.group != s.group.ID) {
			continue
		}
		if !s.filter.IsZero() {
			ok, w := sm.passes(c.slot, e, s.filter)
			if s.spend(w); !ok {
				continue
			}
		}
		var d uint64
		if !c.inside {
			var ok bool
			var w int
			d, ok, w = reg.contains(e.lat, e.lon)
			if s.spend(w); s.left <= floor && k+1 < len(s.cands) && (!ok || len(s.matches)+1 <= s.limit) {
				if ok {
					s.matches = append(s.matches, match{c.slot, d})
				}
				s.cands = s.cands[:0]
				return false, true, spatialKey(e)
			}
			if !ok {
				continue
			}
		}
		s.matches = append(s.matches, match{c.slot, d})
		if len(s.matches) == s.limit {
			*last = spatialKey(e)
		}
		if len(s.matches) > s.limit {
			full = true
			break
		}
	}
	s.cands = s.cands[:0]
	return full, false, btree.Key{}
}

// GetLatest returns the entity's latest visible event.
func (sm *StateMachine) GetLatest(opTS uint64, id core.Uint128) (core.LatestResult, error) {
	if id.IsZero() {
		return core.LatestResult{}, core.Errorf(core.InvalidEntityID, "entity_id is zero")
	}
	slot, _, ok := sm.lookup(id, opTS)
	if !ok {
		return core.LatestResult{}, nil
	}
	return core.LatestResult{Event: sm.store.event(slot), Found: true}, nil
}

// GetLatestBatch returns each listed entity's latest visible event, in
// request order, with Found false for a missing one. The results are the
// state machine's memory: they hold until its next GetLatestBatch.
func (sm *StateMachine) GetLatestBatch(opTS uint64, ids []core.Uint128) ([]core.LatestResult, error) {
	if err := checkIDList(ids); err != nil {
		return nil, err
	}
	if cap(sm.latestResults) < len(ids) {
		sm.latestResults = make([]core.LatestResult, len(ids))
	}
	out := sm.latestResults[:len(ids)]
	for i, id := range ids {
		sm.warmGroup(ids, i)
		if slot, _, ok := sm.lookup(id, opTS); ok {
			out[i] = core.LatestResult{Event: sm.store.event(slot), Found: true}
		} else {
			out[i] = core.LatestResult{}
		}
	}
	return out, nil
}

// QueryLatest lists latest visible positions newest first, ordered by
// (timestamp, entity id) descending, with timestamps after SinceNS. Its
// result's Events are the state machine's memory, as QueryRadius's: they
// hold until the next QueryRadius, QueryPolygon, QueryLatest or History.
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
	var last, examined btree.Key
	// Each key costs its examination and the reading of its entity.
	budget := sm.workBudget()
	defer func(budget0 int) {
		sm.lastScanWork = budget0 - budget
		sm.scanWork += uint64(budget0 - budget)
	}(budget)
	events := sm.pageMemory(min(limit, sm.ids.len()))
	// Entities lie in memory in no order of time, so each key's entity is
	// a cache miss of its own: ahead runs latestAhead keys before it and
	// starts loading their entities, so that the misses overlap.
	ahead := it
	for k := 0; k < latestAhead && ahead.Valid(); k++ {
		sm.store.prefetch(ahead.Value())
		ahead.Prev()
	}
	for ; it.Valid() && it.Key().A > q.SinceNS; it.Prev() {
		if ahead.Valid() {
			sm.store.prefetch(ahead.Value())
			ahead.Prev()
		}
		if budget <= 0 {
			// The page ends early (see maxScanWork), after the last key
			// examined.
			res.HasMore = true
			res.Cursor = encodeCursor(kindLatest, examined)
			break
		}
		budget -= workKey + workEntity
		examined = it.Key()
		if !sm.liveTimeKey(it.Key(), it.Value()) {
			continue
		}
		e := sm.store.at(it.Value())
		if !e.visible(opTS) || (q.Group.Set && e.group != q.Group.ID) {
			continue
		}
		if len(events) == limit {
			res.HasMore = true
			res.Cursor = encodeCursor(kindLatest, last)
			break
		}
		events = append(events, sm.store.event(it.Value()))
		last = it.Key()
	}
	res.Events = sm.keepPage(events)
	return res, nil
}

// latestAhead is how many keys ahead of the one it reads QueryLatest
// prefetches entities.
const latestAhead = 16

// pageMemory returns the query result memory (scanEvents), empty, with
// room for want events: a spatial page fills its n at once, a latest or
// history page is appended to it. Grown by doubling from nothing instead,
// as each latest or history page's slice once was, a page of 1,000 events
// was copied and zeroed about twice over, a third of a latest query's time
// and two thirds of a history read's (BenchmarkQueryLatest,
// BenchmarkHistory).
func (sm *StateMachine) pageMemory(want int) []core.GeoEvent {
	if cap(sm.scanEvents) < want {
		sm.scanEvents = make([]core.GeoEvent, 0, want)
	}
	return sm.scanEvents[:0]
}

// keepPage keeps the memory of a page built from pageMemory for the next
// query, and returns the page: nil when it is empty.
func (sm *StateMachine) keepPage(events []core.GeoEvent) []core.GeoEvent {
	if len(events) == 0 {
		return nil
	}
	sm.scanEvents = events[:0]
	return events
}

// HistoryStart lists one entity's visible events with SinceNS <= timestamp <=
// UntilNS (UntilNS 0 = no bound), oldest first. An unknown or expired entity
// has an empty history.
//
// Its older events are in the history store, so a history page takes two
// steps. HistoryStart answers what memory settles (a bad request, an unknown
// entity, a range that holds only the latest event) with done set;
// otherwise it returns the page to finish (HistoryPage), whose Range the
// caller has the store answer, at this place in the log, before
// FinishHistory builds the result. A done result's Events are the state
// machine's memory, as QueryRadius's: they hold until the next QueryRadius,
// QueryPolygon, QueryLatest or history page.
func (sm *StateMachine) HistoryStart(opTS uint64, q *core.HistoryQuery) (res core.QueryResult, page HistoryPage, done bool, err error) {
	if q.EntityID.IsZero() {
		return res, page, true, core.Errorf(core.InvalidEntityID, "entity_id is zero")
	}
	until := q.UntilNS
	if until == 0 {
		until = ^uint64(0)
	}
	if q.SinceNS > until {
		return res, page, true, core.Errorf(core.InvalidTimeRange, "since_ns %d is after until_ns %d", q.SinceNS, q.UntilNS)
	}
	limit, err := pageLimit(q.Limit)
	if err != nil {
		return res, page, true, err
	}
	after, hasAfter, err := decodeCursor(q.Cursor, kindHistory)
	if err != nil {
		return res, page, true, err
	}
	if hasAfter && after.ID != q.EntityID {
		return res, page, true, core.Errorf(core.InvalidCursor, "the cursor belongs to another entity")
	}
	slot, e, ok := sm.lookup(q.EntityID, opTS)
	if !ok {
		return res, page, true, nil
	}
	from := q.SinceNS
	if hasAfter {
		if after.A == ^uint64(0) {
			return res, page, true, nil
		}
		from = max(from, after.A+1)
	}
	page = HistoryPage{limit: limit}
	if from <= e.ts && e.ts <= until {
		page.latest, page.hasLatest = sm.store.event(slot), true
	}
	h := sm.store.older(slot)
	if h.len() == 0 || from >= e.ts || until < h.first {
		res, err = sm.FinishHistory(page, nil)
		return res, page, true, err
	}
	page.Range = core.HistoryRange{
		EntityID:  q.EntityID,
		SinceNS:   max(from, h.first),
		UntilNS:   min(until, e.ts-1),
		ExpiredAt: opTS,
		Limit:     limit + 1,
	}
	return res, page, false, nil
}

// HistoryPage is a history page waiting for the store's events (see
// HistoryStart).
type HistoryPage struct {
	// Range is what the store is to answer: the entity's older events of
	// the page, and one more when there are.
	Range     core.HistoryRange
	limit     int
	latest    core.GeoEvent
	hasLatest bool
}

// FinishHistory builds the result of a history page from the store's
// answer to its Range: older, oldest first, expired ones already left out.
// The result's Events are the state machine's memory (see HistoryStart).
func (sm *StateMachine) FinishHistory(page HistoryPage, older []core.GeoEvent) (core.QueryResult, error) {
	var res core.QueryResult
	events := sm.pageMemory(min(page.limit, len(older)+1))
	for i := range older {
		if len(events) == page.limit {
			break
		}
		events = append(events, older[i])
	}
	n := len(older)
	if page.hasLatest {
		n++
		if len(events) < page.limit {
			events = append(events, page.latest)
		}
	}
	if n > page.limit {
		res.HasMore = true
		res.Cursor = encodeCursor(kindHistory, btree.Key{A: events[page.limit-1].TimestampNS, ID: events[0].EntityID})
	}
	res.Events = sm.keepPage(events)
	return res, nil
}
