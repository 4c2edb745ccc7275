package statemachine

import (
	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/statemachine/internal/geom"
)

// QueryBBox returns the latest visible positions in the box (see
// geom.Box: edges along parallels and meridians, across the antimeridian
// when MinLonNano > MaxLonNano), ordered by leaf cell id then entity id.
// Its result's Events hold until the next query, as QueryRadius's.
func (sm *StateMachine) QueryBBox(opTS uint64, q *core.BBoxQuery) (core.QueryResult, error) {
	if err := checkBBox(q); err != nil {
		return core.QueryResult{}, err
	}
	limit, err := pageLimit(q.Limit)
	if err != nil {
		return core.QueryResult{}, err
	}
	after, hasAfter, err := decodeCursor(q.Cursor, kindBBox)
	if err != nil {
		return core.QueryResult{}, err
	}
	sm.flushSpatial()
	reg := &sm.scanBox
	*reg = boxRegion{b: geom.NewBox(q.MinLatNano, q.MinLonNano, q.MaxLatNano, q.MaxLonNano), rs: reg.rs[:0], may: reg.may}
	reg.f = reg.b.Filter()
	reg.rs = reg.b.AppendScanRanges(reg.rs)
	s := spatialScan{sm: sm, t: opTS, group: q.Group, filter: q.Filter, limit: limit, kind: kindBBox}
	s.run(reg, after, hasAfter, workPlan)
	return s.result, nil
}

// checkBBox validates a box: corners on the globe (100) and latitudes in
// order (103: a box whose minimum latitude exceeds its maximum is no box;
// longitudes may be in either order, a box across the antimeridian).
func checkBBox(q *core.BBoxQuery) error {
	for _, c := range [2]core.Coordinate{{LatNano: q.MinLatNano, LonNano: q.MinLonNano}, {LatNano: q.MaxLatNano, LonNano: q.MaxLonNano}} {
		if !core.ValidCoordinate(c.LatNano, c.LonNano) {
			return core.Errorf(core.InvalidCoordinates, "box corner (%d, %d) nanodegrees is out of range", c.LatNano, c.LonNano)
		}
	}
	if q.MinLatNano > q.MaxLatNano {
		return core.Errorf(core.InvalidPolygon, "box min_lat %d exceeds max_lat %d nanodegrees", q.MinLatNano, q.MaxLatNano)
	}
	return nil
}

// boxRegion is a box for spatialScan: its keys judged by the box's
// prefilter, its matches by the exact test.
type boxRegion struct {
	b   geom.Box
	f   geom.BoxFilter   // of b
	rs  []geom.ScanRange // of b
	may []bool           // gather's judgements of a run of keys, kept for the next query
}

func (r *boxRegion) ScanRanges() []geom.ScanRange { return r.rs }
func (r *boxRegion) gather(cells []uint64, slots []uint32, cands []candidate, budget int) ([]candidate, int, int) {
	return gatherMay(&r.f, &r.may, cells, slots, cands, budget)
}
func (r *boxRegion) contains(latNano, lonNano int64) (uint64, bool, int) {
	return 0, r.b.Contains(latNano, lonNano), workContains
}
