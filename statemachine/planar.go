package statemachine

import (
	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/statemachine/internal/btree"
	"github.com/geoevent/geoevent/statemachine/internal/geom"
)

// queryPlanarPolygon is QueryPolygon for a polygon of planar edges
// (geom.PlanarPolygon): its index scan covers the polygon's bounding box,
// judged by the box's prefilter, and tests each candidate exactly against
// every edge, which counts as the test's work (as a geodesic polygon's
// edges read do). Its plan costs as a geodesic polygon's (workPlanEdge an
// edge).
func (sm *StateMachine) queryPlanarPolygon(opTS uint64, q *core.PolygonQuery, limit int, after btree.Key, hasAfter bool) (core.QueryResult, error) {
	p, err := geom.NewPlanarPolygon(q.Vertices, q.Holes)
	if err != nil {
		// Its plan's work, as a geodesic build that fails counts.
		w := workPlan + workPlanEdge*ringsVertices(q)
		sm.lastScanWork = w
		sm.scanWork += uint64(w)
		return core.QueryResult{}, err
	}
	sm.flushSpatial()
	reg := &planarRegion{p: p, f: p.Box().Filter(), may: sm.scanBox.may}
	reg.rs = p.Box().AppendScanRanges(sm.scanBox.rs[:0])
	s := spatialScan{sm: sm, t: opTS, group: q.Group, filter: q.Filter, limit: limit, kind: kindPolygon}
	s.run(reg, after, hasAfter, workPlan+workPlanEdge*p.Edges())
	sm.scanBox.rs, sm.scanBox.may = reg.rs, reg.may // their memory, for the next query
	return s.result, nil
}

// planarRegion is a planar polygon for spatialScan.
type planarRegion struct {
	p   *geom.PlanarPolygon
	f   geom.BoxFilter
	rs  []geom.ScanRange
	may []bool
}

func (r *planarRegion) ScanRanges() []geom.ScanRange { return r.rs }
func (r *planarRegion) gather(cells []uint64, slots []uint32, cands []candidate, budget int) ([]candidate, int, int) {
	return gatherMay(&r.f, &r.may, cells, slots, cands, budget)
}
func (r *planarRegion) contains(latNano, lonNano int64) (uint64, bool, int) {
	in, edges := r.p.ContainsWork(latNano, lonNano)
	return 0, in, workContains + edges
}
