package statemachine

import (
	"cmp"
	"math"
	"slices"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/statemachine/internal/btree"
	"github.com/geoevent/geoevent/statemachine/internal/geom"
)

// QueryNearest returns the k (q.Limit) latest visible positions nearest the
// center that pass the query's group and filter, within MaxDistanceMM when
// it is not 0, ordered by distance (the rounded millimetres of
// QueryRadius) then entity id, with their distances. A page's cursor is its
// last (distance, entity id): the next page continues with the
// next-nearest, exact for entities that did not move.
//
// The search looks in caps of growing radius until one holds more than k
// matches beyond the cursor (or reaches the limit): every match of a
// completed cap is known, so its k nearest are the answer, and its cost
// grows with k and the density near the center, not with the number of
// entities. The first cap's radius comes from the keys next to the
// center on the spatial index's curve (see firstRadius), so that one cap
// usually suffices. Each further cap widens by the shortfall of
// the last (for even density, the factor that would give k+1 matches,
// times 1.5), by 2 to 16.
//
// Work is counted as for the other spatial pages (see maxScanWork). When
// the budget runs out during a cap after an earlier cap was completed, the
// page returns that cap's matches, has_more, and a cursor at its radius;
// the first cap a page tries is always completed, so a page's work exceeds
// the budget only when more than a budget's worth of entities lie within
// the first cap (entities stacked within a few metres of the center).
//
// Its result's Events and DistancesMM hold until the next query, as
// QueryRadius's.
func (sm *StateMachine) QueryNearest(opTS uint64, q *core.NearestQuery) (core.QueryResult, error) {
	if !core.ValidCoordinate(q.Center.LatNano, q.Center.LonNano) {
		return core.QueryResult{}, core.Errorf(core.InvalidCoordinates, "center (%d, %d) nanodegrees is out of range", q.Center.LatNano, q.Center.LonNano)
	}
	if q.MaxDistanceMM != 0 && (q.MaxDistanceMM < core.MinRadiusMM || q.MaxDistanceMM > core.MaxRadiusMM) {
		return core.QueryResult{}, core.Errorf(core.InvalidRadius, "max_distance %d mm is outside %d to %d", q.MaxDistanceMM, core.MinRadiusMM, uint64(core.MaxRadiusMM))
	}
	if q.Limit == 0 {
		return core.QueryResult{}, core.Errorf(core.InvalidArgument, "k must be 1 to %d", core.MaxQueryLimit)
	}
	k, err := pageLimit(q.Limit)
	if err != nil {
		return core.QueryResult{}, err
	}
	after, hasAfter, err := decodeCursor(q.Cursor, kindNearest)
	if err != nil {
		return core.QueryResult{}, err
	}
	sm.flushSpatial()
	n := &sm.nearest
	n.sm, n.t, n.group, n.filter, n.after, n.hasAfter = sm, opTS, q.Group, q.Filter, after, hasAfter
	n.center = q.Center
	n.dist = geom.NewCap(q.Center.LatNano, q.Center.LonNano, core.MaxRadiusMM)
	n.work = 0
	budget := sm.workBudget()
	limitR := uint64(core.MaxRadiusMM)
	if q.MaxDistanceMM != 0 {
		limitR = q.MaxDistanceMM
	}

	r := min(max(n.firstRadius(k+1), 1), limitR)
	done := []nearMatch(nil) // the matches of the last completed cap
	doneR, hasDone := uint64(0), false
	for which := 0; ; which ^= 1 {
		cur, complete := n.scanCap(r, n.bufs[which][:0], budget, hasDone)
		n.bufs[which] = cur[:0] // its memory, for the next cap or query
		if !complete {
			break // done holds the last completed cap's matches
		}
		done, doneR, hasDone = cur, r, true
		if len(cur) > k || r >= limitR {
			break
		}
		r = min(grow(r, len(cur), k+1), limitR)
	}
	sm.lastScanWork = n.work
	sm.scanWork += uint64(n.work)

	slices.SortFunc(done, func(a, b nearMatch) int {
		if c := cmp.Compare(a.d, b.d); c != 0 {
			return c
		}
		return a.id.Compare(b.id)
	})
	var res core.QueryResult
	m := min(len(done), k)
	res.Events = sm.pageMemory(m)[:m]
	if cap(sm.scanDistances) < m {
		sm.scanDistances = make([]uint64, m)
	}
	res.DistancesMM = sm.scanDistances[:m]
	for i, x := range done[:m] {
		e, ext := sm.store.pair(x.slot)
		fillEvent(&res.Events[i], e, ext)
		res.DistancesMM[i] = x.d
	}
	switch {
	case len(done) > k:
		res.HasMore = true
		res.Cursor = encodeCursor(kindNearest, btree.Key{A: done[k-1].d, ID: done[k-1].id})
	case doneR < limitR:
		// The budget ran out: every match within doneR is in this page.
		res.HasMore = true
		res.Cursor = encodeCursor(kindNearest, btree.Key{A: doneR, ID: core.Uint128{Hi: ^uint64(0), Lo: ^uint64(0)}})
	}
	return res, nil
}

// selectNth reorders xs so that xs[k] is the value a sort would put
// there, and returns it (Hoare's selection, the middle element as pivot:
// deterministic).
func selectNth(xs []float64, k int) float64 {
	lo, hi := 0, len(xs)-1
	for lo < hi {
		p := xs[lo+(hi-lo)/2]
		i, j := lo, hi
		for i <= j {
			for xs[i] < p {
				i++
			}
			for xs[j] > p {
				j--
			}
			if i <= j {
				xs[i], xs[j] = xs[j], xs[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return xs[k]
		}
	}
	return xs[k]
}

// grow returns the next cap's radius after one of radius r held found
// matches of the want sought.
func grow(r uint64, found, want int) uint64 {
	f := 16.0
	if found > 0 {
		f = min(max(1.5*math.Sqrt(float64(want)/float64(found)), 2), 16)
	}
	next := float64(r) * f
	if next >= float64(core.MaxRadiusMM) {
		return core.MaxRadiusMM
	}
	return uint64(next)
}

// nearestMemory is a nearest query's state and scratch, kept in the state
// machine between queries.
type nearestMemory struct {
	sm       *StateMachine
	t        uint64
	group    core.GroupFilter
	filter   core.Filter
	after    btree.Key
	hasAfter bool
	center   core.Coordinate
	dist     geom.Cap // distances from the center
	work     int
	bufs     [2][]nearMatch // the matches of a cap, and of the cap before
	walk     []float64      // firstRadius's squared chords
	cands    []uint32       // a run's candidates' slots
	reg      capRegion
}

// nearMatch is a match of a nearest query: its distance, entity id and
// slot.
type nearMatch struct {
	d    uint64
	id   core.Uint128
	slot uint32
}

// match judges the entity in slot: whether it is visible and passes the
// group and filter, lies beyond the cursor, and its distance, counting
// the work beyond reading the entity.
func (n *nearestMemory) match(slot uint32) (nearMatch, bool) {
	e := n.sm.store.at(slot)
	if !e.visible(n.t) || (n.group.Set && e.group != n.group.ID) {
		return nearMatch{}, false
	}
	if !n.filter.IsZero() {
		ok, w := n.sm.passes(slot, e, n.filter)
		if n.work += w; !ok {
			return nearMatch{}, false
		}
	}
	d, _ := n.dist.Contains(e.lat, e.lon)
	n.work += workContains
	if n.hasAfter && (d < n.after.A || d == n.after.A && e.id.Compare(n.after.ID) <= 0) {
		return nearMatch{}, false
	}
	return nearMatch{d: d, id: e.id, slot: slot}, true
}

// firstRadius returns the first cap's radius: the want-th smallest of
// the distances to the leaf cells of the keys next to the center's leaf
// cell on the index's curve (2*want+32 keys each way), read off the index
// alone (an entity may not match, so this is a guess, but a good one:
// without filters a cap of this radius holds want entities), or, when
// there are fewer keys, twice the largest distance, at least 1 m. Past a
// cursor it is at least twice the cursor's distance, so that a page
// always gets further than the last.
func (n *nearestMemory) firstRadius(want int) uint64 {
	sm := n.sm
	steps := 2*want + 32
	ds := n.walk[:0]
	est := geom.NewLeafDistances(n.center.LatNano, n.center.LonNano)
	n.work += workSeek
	from := btree.Key{A: geom.LeafCell(n.center.LatNano, n.center.LonNano)}
	for it, left := sm.spatial.SeekGE(from), steps; it.Valid() && left > 0; {
		cells, _ := it.Run()
		cells = cells[:min(len(cells), left)]
		ds = est.AppendChord2(ds, cells)
		left -= len(cells)
		it.Skip(len(cells))
	}
	for it, left := sm.spatial.SeekLE(from), steps; it.Valid() && left > 0; it.Prev() {
		ds = est.AppendChord2(ds, []uint64{it.A()})
		left--
	}
	n.work += len(ds) * workKey
	n.walk = ds
	var r uint64
	if len(ds) >= want {
		r = est.MM(selectNth(ds, want-1))
	} else if len(ds) > 0 {
		r = 2 * est.MM(slices.Max(ds))
	}
	r = max(r, 1000)
	if n.hasAfter {
		r = max(r, 2*min(n.after.A, core.MaxRadiusMM)) // (a cursor may say anything)
	}
	return r
}

// scanCap collects into buf the matches within radius r of the center
// beyond the cursor. When the page's work reaches budget and mayStop is
// set, it stops and reports the cap incomplete.
func (n *nearestMemory) scanCap(r uint64, buf []nearMatch, budget int, mayStop bool) ([]nearMatch, bool) {
	sm := n.sm
	reg := &n.reg
	*reg = capRegion{c: geom.NewCap(n.center.LatNano, n.center.LonNano, r), rs: reg.rs[:0], may: reg.may}
	reg.f = reg.c.Filter()
	reg.rs = reg.c.AppendScanRanges(reg.rs)
	n.work += workPlan
	var it btree.Iter
	for _, rg := range reg.rs {
		n.work += workSeek
		if !it.Valid() || it.A() < rg.Min {
			sm.spatial.SeekGENear(&it, btree.Key{A: rg.Min})
		}
		for it.Valid() {
			if mayStop && n.work >= budget {
				return buf, false
			}
			cells, slots := it.Run()
			m := 0
			for m < len(cells) && cells[m] <= rg.Max {
				m++
			}
			if m == 0 {
				break
			}
			if len(reg.may) < m {
				reg.may = make([]bool, m)
			}
			reg.f.MayContainLeaves(cells[:m], reg.may)
			n.work += m * workKey
			// The candidates' entities are loaded all at once, then judged.
			cands := n.cands[:0]
			for i, may := range reg.may[:m] {
				if may {
					cands = append(cands, slots[i])
					sm.store.prefetch(slots[i])
				}
			}
			n.cands = cands
			n.work += len(cands) * workEntity
			for _, slot := range cands {
				x, ok := n.match(slot)
				if ok && x.d <= r {
					buf = append(buf, x)
				}
			}
			it.Skip(m)
		}
	}
	return buf, true
}
