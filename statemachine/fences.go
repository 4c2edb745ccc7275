package statemachine

import (
	"math"
	"slices"
	"strings"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/statemachine/internal/geom"
	"github.com/golang/geo/r1"
	"github.com/golang/geo/s1"
	"github.com/golang/geo/s2"
)

// Geofences. A fence is a named area (polygon, circle or bbox) with a
// group filter and the notification types it reports. Every write that
// changes an entity's latest position, and every removal of an entity, is
// judged against the fences (see fencesMoved and fencesGone) and each
// transition it makes goes into the feed (feed.go).
//
// Candidates: each fence's covering, a set of disjoint S2 cells, is in
// the index (fenceindex.go). An event's leaf cell (assigned by the leader
// and carried by the log) finds the fences whose covering holds it, and
// those of the entity's previous leaf cell, in one or two buckets of the
// index; only they get the exact test, and a fence found through a cell
// inside it needs none. The covering holds the leaf cell of every point
// the exact test accepts (geom's Ranges contract, and a margin for
// bboxes), so no fence is missed.
//
// Exact tests are geom's: a polygon by Polygon.ContainsPoint, which judges
// a point the same way on every replica of a build; a circle by
// DetCap.Contains, computed the same way on every architecture (no fused
// multiply-adds, no library sines);
// a bbox by integer comparisons of nanodegrees. Whether an entity is
// inside a fence is a function of its latest position and group alone:
// there is no membership state to drift, and a fence put over entities
// already inside reports them as inside (not entered) when they move.

// fence is one fence as the state machine holds it. It is not modified
// once in the index: put_fence replaces it whole, so a frozen view may
// keep it.
type fence struct {
	def  core.Fence
	poly *geom.Polygon // FencePolygon
	cap  geom.DetCap   // FenceCircle
	// cells is the covering, and inside[i] says every point whose leaf
	// cell lies in cells[i] is inside the shape, so that it needs no
	// exact test there: checkFence makes them, addIndex takes them into
	// the index (and drops them).
	cells  []uint64
	inside []bool
	slot   uint32          // its number in the index, while it is in it
	blocks []fenceBlockUse // the blocks its covering has cells in, by key
	big    []uint64        // its covering cells coarser than blockLevel
	// feedName is the feed's number for its name, while the feed's table
	// holds the name there (feedLog.refFence): a cache, not state, and
	// the one field that changes after the fence is made.
	feedName uint32
}

// fenceCoverCells bounds a polygon fence's covering (geom's
// FineCoverRanges): four times a query's, so that boundary cells, where
// an event needs the exact test, are about four times finer. With the
// fence benchmark's polygons (20 vertices, about 900 m across) a point
// in a covering needs the exact test about 0.17 times as often as with
// 64 cells, for about 250 cells (2 KB in the index) a fence.
const fenceCoverCells = 256

// fenceCand is a candidate of an event: a fence, the lookups that found
// it (bit candNew: the new cell's, candPrev: the previous cell's) and
// which of them found it through a cell inside it.
type fenceCand struct {
	f          *fence
	via, inner uint8
}

const (
	candNew  = 1
	candPrev = 2
)

// fenceSet is the fences and their index (fenceindex.go).
type fenceSet struct {
	byName map[string]*fence
	names  []string    // sorted
	slots  []*fence    // by slot: nil for a free one
	free   []uint32    // free slots
	cands  []fenceCand // scratch of fencesMoved and fencesGone
	notes  []fenceNote // scratch of fencesMoved and fencesGone

	blocks    map[uint64]*fenceBlock // level-blockLevel cell -> its block
	big       map[uint64][]fenceRef  // covering cells coarser than blockLevel -> fences, each list in put order
	bigLevels [blockLevel]int        // cells in big at each level
	bigMsk    uint32                 // bit l: bigLevels[l] > 0
}

// fenceCount is how many fences there are.
func (fs *fenceSet) fenceCount() int { return len(fs.byName) }

// checkFence validates a fence definition and prepares it: the errors of
// a polygon query for a polygon, of a radius query for a circle,
// INVALID_COORDINATES for a bbox's corners, INVALID_FENCE for the name,
// an unknown shape, report types or fields of another shape.
func checkFence(def *core.Fence) (*fence, error) {
	if !core.ValidFenceName(def.Name) {
		return nil, core.Errorf(core.InvalidFence, "fence name %q: want 1 to %d of A-Z a-z 0-9 _ - .", def.Name, core.MaxFenceNameLen)
	}
	if def.Report&^core.AllNotify != 0 {
		return nil, core.Errorf(core.InvalidFence, "fence %s: unknown report types %#x", def.Name, uint8(def.Report))
	}
	f := &fence{def: *def}
	if f.def.Report == 0 {
		f.def.Report = core.DefaultNotify
	}
	poly := len(def.Vertices) != 0 || len(def.Holes) != 0
	circle := def.Center != (core.Coordinate{}) || def.RadiusMM != 0
	box := def.Min != (core.Coordinate{}) || def.Max != (core.Coordinate{})
	switch def.Shape {
	case core.FencePolygon:
		if circle || box {
			return nil, core.Errorf(core.InvalidFence, "fence %s: a polygon has no center, radius or corners", def.Name)
		}
		p, err := geom.NewPolygon(def.Vertices, def.Holes)
		if err != nil {
			return nil, err
		}
		f.poly = p
		for _, r := range p.FineCoverRanges(fenceCoverCells) {
			n := len(f.cells)
			f.cells = rangesCells(f.cells, []geom.CellRange{r.CellRange})
			for range len(f.cells) - n {
				f.inside = append(f.inside, r.Inside)
			}
		}
	case core.FenceCircle:
		if poly || box {
			return nil, core.Errorf(core.InvalidFence, "fence %s: a circle has no vertices or corners", def.Name)
		}
		if !core.ValidCoordinate(def.Center.LatNano, def.Center.LonNano) {
			return nil, core.Errorf(core.InvalidCoordinates, "fence %s: center (%d, %d) nanodegrees is out of range", def.Name, def.Center.LatNano, def.Center.LonNano)
		}
		if def.RadiusMM < core.MinRadiusMM || def.RadiusMM > core.MaxRadiusMM {
			return nil, core.Errorf(core.InvalidRadius, "fence %s: radius %d mm is outside %d to %d", def.Name, def.RadiusMM, core.MinRadiusMM, uint64(core.MaxRadiusMM))
		}
		f.cap = geom.NewDetCap(def.Center.LatNano, def.Center.LonNano, def.RadiusMM)
		// The covering is the query's, whose margin holds DetCap's points.
		c := geom.NewCap(def.Center.LatNano, def.Center.LonNano, def.RadiusMM)
		f.cells = rangesCells(nil, c.Ranges())
		f.inside = make([]bool, len(f.cells))
	case core.FenceBBox:
		if poly || circle {
			return nil, core.Errorf(core.InvalidFence, "fence %s: a bbox has no vertices, center or radius", def.Name)
		}
		lo, hi := def.Min, def.Max
		if !core.ValidCoordinate(lo.LatNano, lo.LonNano) || !core.ValidCoordinate(hi.LatNano, hi.LonNano) {
			return nil, core.Errorf(core.InvalidCoordinates, "fence %s: a corner is out of range", def.Name)
		}
		if lo.LatNano > hi.LatNano {
			return nil, core.Errorf(core.InvalidCoordinates, "fence %s: min latitude %d exceeds max latitude %d", def.Name, lo.LatNano, hi.LatNano)
		}
		f.cells = bboxCells(lo, hi)
		f.inside = make([]bool, len(f.cells))
	default:
		return nil, core.Errorf(core.InvalidFence, "fence %s: unknown shape %d (polygon 1, circle 2, bbox 3)", def.Name, uint8(def.Shape))
	}
	return f, nil
}

// contains is the exact test: whether an entity at (lat, lon) in group
// is inside f.
func (f *fence) contains(lat, lon int64, group uint64) bool {
	if f.def.Group.Set && f.def.Group.ID != group {
		return false
	}
	switch f.def.Shape {
	case core.FencePolygon:
		return f.poly.ContainsPoint(lat, lon)
	case core.FenceCircle:
		return f.cap.Contains(lat, lon)
	case core.FenceBBox:
		lo, hi := f.def.Min, f.def.Max
		if lat < lo.LatNano || lat > hi.LatNano {
			return false
		}
		if lo.LonNano <= hi.LonNano {
			return lon >= lo.LonNano && lon <= hi.LonNano
		}
		return lon >= lo.LonNano || lon <= hi.LonNano // across the antimeridian
	}
	return false
}

// rangesCells appends the S2 cells that tile each leaf-cell range: the
// largest aligned cell at each step.
func rangesCells(dst []uint64, rs []geom.CellRange) []uint64 {
	for _, r := range rs {
		lo := r.Min | 1 // leaves are odd
		for lo <= r.Max {
			l := uint64(1)
			for l < 1<<60 {
				n := l << 2
				if (lo-1)%(2*n) != 0 || lo+2*n-2 > r.Max {
					break
				}
				l = n
			}
			dst = append(dst, lo+l-1)
			lo += 2 * l
			if lo == 0 {
				break
			}
		}
	}
	return dst
}

// bboxMarginDeg widens a bbox for its covering: more than a leaf cell's
// diagonal, so that the leaf cell of every point inside lies in it.
const bboxMarginDeg = 1e-6

// bboxCells covers a bbox by s2.RegionCoverer on its rectangle, widened by
// bboxMarginDeg.
func bboxCells(lo, hi core.Coordinate) []uint64 {
	latLo := max(float64(lo.LatNano)/1e9-bboxMarginDeg, -90)
	latHi := min(float64(hi.LatNano)/1e9+bboxMarginDeg, 90)
	lonLo := float64(lo.LonNano)/1e9 - bboxMarginDeg
	lonHi := float64(hi.LonNano)/1e9 + bboxMarginDeg
	const rad = math.Pi / 180
	rect := s2.Rect{Lat: r1.Interval{Lo: latLo * rad, Hi: latHi * rad}, Lng: s1.FullInterval()}
	if lo.LonNano > hi.LonNano || lonHi-lonLo < 360 {
		if lonLo < -180 {
			lonLo += 360
		}
		if lonHi > 180 {
			lonHi -= 360
		}
		rect.Lng = s1.IntervalFromEndpoints(lonLo*rad, lonHi*rad)
	}
	rc := s2.RegionCoverer{MaxLevel: 30, MaxCells: 16}
	cov := rc.Covering(rect)
	out := make([]uint64, len(cov))
	for i, c := range cov {
		out[i] = uint64(c)
	}
	return out
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// mergeCands merges each fence's entries into one, in no particular
// order: the caller orders what it emits by byName. It serves the fences
// of big cells, which are few, so a linear search is cheaper than sorting
// them; many are sorted by name first.
func mergeCands(cs []fenceCand) []fenceCand {
	if len(cs) > 64 {
		slices.SortFunc(cs, func(a, b fenceCand) int { return strings.Compare(a.f.def.Name, b.f.def.Name) })
	}
	out := cs[:0]
next:
	for _, c := range cs {
		for k := range out {
			if out[k].f == c.f {
				out[k].via |= c.via
				out[k].inner |= c.inner
				continue next
			}
		}
		out = append(out, c)
	}
	return out
}

// byName orders the fences of an event's notifications by name, and so
// the notifications.
func byName(ns []fenceNote) {
	if len(ns) > 1 {
		slices.SortFunc(ns, func(a, b fenceNote) int { return strings.Compare(a.f.def.Name, b.f.def.Name) })
	}
}

// fenceNote is a notification to make: a fence and a type.
type fenceNote struct {
	f *fence
	t core.NotifyType
}

// verdict is whether the entity at (lat, lon) in group is inside c's
// fence, as found by the lookup bit: a fence the lookup did not find does
// not hold the point (its covering holds the leaf cell of every point
// inside), and one found through a cell inside it holds it.
func (c *fenceCand) verdict(bit uint8, lat, lon int64, group uint64) bool {
	switch {
	case c.via&bit == 0:
		return false
	case c.inner&bit != 0:
		return !c.f.def.Group.Set || c.f.def.Group.ID == group
	}
	return c.f.contains(lat, lon, group)
}

// PutFence defines or replaces a fence. Entities already inside a new
// fence make no notification until they move.
func (sm *StateMachine) PutFence(opTS uint64, req *core.Fence) (core.PutFenceReply, error) {
	f, err := checkFence(req)
	if err != nil {
		return core.PutFenceReply{}, err
	}
	fs := &sm.watch.fences
	old, exists := fs.byName[f.def.Name]
	if !exists && fs.fenceCount() >= core.MaxFences {
		return core.PutFenceReply{}, core.Errorf(core.TooManyFences, "there are %d fences, the most there may be", core.MaxFences)
	}
	f.def = cloneFence(&f.def)
	if exists {
		fs.removeIndex(old)
	} else {
		if fs.byName == nil {
			fs.byName = make(map[string]*fence)
		}
		i, _ := slices.BinarySearch(fs.names, f.def.Name)
		fs.names = slices.Insert(fs.names, i, f.def.Name)
	}
	fs.byName[f.def.Name] = f
	fs.addIndex(f)
	return core.PutFenceReply{Created: !exists}, nil
}

// cloneFence copies a definition's slices: the request's memory is the
// caller's.
func cloneFence(d *core.Fence) core.Fence {
	c := *d
	c.Name = strings.Clone(d.Name)
	c.Vertices = slices.Clone(d.Vertices)
	if d.Holes != nil {
		c.Holes = make([][]core.Coordinate, len(d.Holes))
		for i, h := range d.Holes {
			c.Holes[i] = slices.Clone(h)
		}
	}
	return c
}

// DeleteFence removes a fence; 240 FENCE_NOT_FOUND when there is none.
func (sm *StateMachine) DeleteFence(opTS uint64, req *core.FenceName) (core.DeleteFenceReply, error) {
	fs := &sm.watch.fences
	f, ok := fs.byName[req.Name]
	if !ok {
		return core.DeleteFenceReply{}, core.Errorf(core.FenceNotFound, "no fence named %q", req.Name)
	}
	fs.removeIndex(f)
	delete(fs.byName, req.Name)
	i, _ := slices.BinarySearch(fs.names, req.Name)
	fs.names = slices.Delete(fs.names, i, i+1)
	return core.DeleteFenceReply{Deleted: true}, nil
}

// GetFence returns a fence's definition (with its report types filled in).
func (sm *StateMachine) GetFence(opTS uint64, req *core.FenceName) (core.Fence, error) {
	f, ok := sm.watch.fences.byName[req.Name]
	if !ok {
		return core.Fence{}, core.Errorf(core.FenceNotFound, "no fence named %q", req.Name)
	}
	return f.def, nil
}

// listVertexBudget bounds the vertices of a page of fences, so that a page
// of the largest polygons stays within a frame: a page ends early (with
// HasMore) past it.
const listVertexBudget = 200_000

// ListFences pages through the fences in name order.
func (sm *StateMachine) ListFences(opTS uint64, req *core.FenceListRequest) (core.FenceList, error) {
	limit := int(req.Limit)
	switch {
	case limit == 0:
		limit = core.DefaultFenceList
	case limit > core.MaxFenceList:
		return core.FenceList{}, core.Errorf(core.QueryResultTooLarge, "limit %d exceeds %d", limit, core.MaxFenceList)
	}
	fs := &sm.watch.fences
	i := 0
	if req.After != "" {
		var found bool
		i, found = slices.BinarySearch(fs.names, req.After)
		if found {
			i++
		}
	}
	out := core.FenceList{Total: uint32(len(fs.names))}
	vertices := 0
	for ; i < len(fs.names) && len(out.Fences) < limit && vertices < listVertexBudget; i++ {
		f := fs.byName[fs.names[i]]
		out.Fences = append(out.Fences, f.def)
		vertices += len(f.def.Vertices)
		for _, h := range f.def.Holes {
			vertices += len(h)
		}
	}
	out.HasMore = i < len(fs.names)
	return out, nil
}

// fencesMoved judges an entity's move: e is the entity before it (nil:
// the entity is new), ev its new latest event. It is called before the
// entity changes.
func (sm *StateMachine) fencesMoved(e *entity, ev *core.GeoEvent) {
	fs := &sm.watch.fences
	if len(fs.byName) == 0 {
		return
	}
	other := uint64(0)
	if e != nil {
		other = e.cell
	}
	merged := fs.appendCandidates(fs.cands[:0], ev.CellID, other)
	notes := fs.notes[:0]
	for i := range merged {
		c := &merged[i]
		was := e != nil && c.verdict(candPrev, e.lat, e.lon, e.group)
		now := c.verdict(candNew, ev.LatNano, ev.LonNano, ev.GroupID)
		var t core.NotifyType
		switch {
		case now && !was:
			t = core.NotifyEnter
		case was && !now:
			t = core.NotifyExit
		case was && now:
			t = core.NotifyInside
		default:
			continue
		}
		if c.f.def.Report.Has(t) {
			notes = append(notes, fenceNote{c.f, t})
		}
	}
	byName(notes)
	if e != nil {
		sm.watch.feed.pushEvent(ev, core.Coordinate{LatNano: e.lat, LonNano: e.lon}, true, notes)
	} else {
		sm.watch.feed.pushEvent(ev, core.Coordinate{}, false, notes)
	}
	clear(merged)
	clear(notes)
	fs.cands, fs.notes = merged[:0], notes[:0]
}

// fencesGone reports the exits of the entity in slot, which is about to
// be removed (deleted, expired, or replaced after expiring).
func (sm *StateMachine) fencesGone(slot uint32) {
	fs := &sm.watch.fences
	if len(fs.byName) == 0 {
		return
	}
	e, ext := sm.store.pair(slot)
	cands := fs.appendCandidates(fs.cands[:0], e.cell, 0)
	notes := fs.notes[:0]
	for i := range cands {
		c := &cands[i]
		if c.f.def.Report.Has(core.NotifyExit) && c.verdict(candNew, e.lat, e.lon, e.group) {
			notes = append(notes, fenceNote{c.f, core.NotifyExit})
		}
	}
	byName(notes)
	if len(notes) > 0 {
		var ev core.GeoEvent
		fillEvent(&ev, e, ext)
		sm.watch.feed.pushEvent(&ev, core.Coordinate{LatNano: e.lat, LonNano: e.lon}, true, notes)
	}
	clear(cands)
	clear(notes)
	fs.cands, fs.notes = cands[:0], notes[:0]
}
