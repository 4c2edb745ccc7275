package http

import (
	"math"

	"github.com/geoevent/geoevent/core"
)

// The bounding-box and nearest queries, and the filters every spatial
// query takes.

// POST /query/bbox.
func (g *Gateway) bbox(c *call) *failure {
	d, f := c.bodyNoParams(false)
	if f != nil {
		return f
	}
	fm, q, f := parseBBox(d, c.form)
	c.form = fm
	if f != nil {
		return f
	}
	return query(c, core.QueryBBox, q, false)
}

// POST /query/nearest.
func (g *Gateway) nearest(c *call) *failure {
	d, f := c.bodyNoParams(false)
	if f != nil {
		return f
	}
	fm, q, f := parseNearest(d, c.form)
	c.form = fm
	if f != nil {
		return f
	}
	return query(c, core.QueryNearest, q, true) // both forms carry distance_mm
}

// filterFields lists the filter's fields for unknownField's messages.
const filterFields = ", since_ns, flags_all, flags_any"

// filterField decodes since_ns, flags_all and flags_any (the same in both
// forms); handled is false for any other key.
func filterField(d *doc, k, v int32, filter *core.Filter) (handled bool, f *failure) {
	name := d.name(k)
	switch string(name) {
	case "since_ns":
		if !d.isNull(v) {
			filter.SinceNS, f = d.uintIn(v, "since_ns", 0, math.MaxUint64, core.InvalidArgument)
		}
	case "flags_all", "flags_any":
		if !d.isNull(v) {
			var u uint64
			u, f = d.uintIn(v, string(name), 0, math.MaxUint16, core.InvalidArgument)
			if name[len(name)-1] == 'l' {
				filter.FlagsAll = uint16(u)
			} else {
				filter.FlagsAny = uint16(u)
			}
		}
	default:
		return false, nil
	}
	return true, f
}

// queryField decodes a spatial query's limit, cursor, group_id and
// filter; handled is false for any other key.
func queryField(d *doc, k, v int32, fm form, page *core.Page, group *core.GroupFilter, filter *core.Filter) (bool, *failure) {
	if ok, f := pageField(d, k, v, fm, page, group); ok || f != nil {
		return true, f
	}
	return filterField(d, k, v, filter)
}

// ---- POST /query/bbox ----

var (
	bboxA = []string{"min_lat", "min_lon", "max_lat", "max_lon"}
	bboxB = []string{"min_lat_nano", "min_lon_nano", "max_lat_nano", "max_lon_nano"}
)

// parseBBox decodes a bbox body in either form: its corners, each
// coordinate within range (100 INVALID_COORDINATES otherwise); the state
// machine refuses inverted latitudes (103).
func parseBBox(d *doc, fm form) (form, *core.BBoxQuery, *failure) {
	q := &core.BBoxQuery{}
	dst := [4]*int64{&q.MinLatNano, &q.MinLonNano, &q.MaxLatNano, &q.MaxLonNano}
	limits := [4]int64{core.MaxLatNano, core.MaxLonNano, core.MaxLatNano, core.MaxLonNano}
	var has [4]bool
	fm, names, f := parseQuery(d, fm, bboxA, bboxB, ", limit, cursor, group_id", &q.Page, &q.Group, &q.Filter,
		func(name string, v int32, names []string, fm form) (ok bool, f *failure) {
			for i, n := range names {
				if name == n {
					if !d.isNull(v) {
						has[i] = true
						*dst[i], f = coordinate(d, v, name, fm, limits[i])
					}
					return true, f
				}
			}
			return false, nil
		})
	if f != nil {
		return fm, q, f
	}
	for i, ok := range has {
		if !ok {
			return fm, q, required(names[i])
		}
	}
	return fm, q, nil
}

// ---- POST /query/nearest ----

var (
	nearestA = []string{"center_lat", "center_lon", "max_distance_m"}
	nearestB = []string{"center_lat_nano", "center_lon_nano", "max_distance_mm"}
)

// parseNearest decodes a nearest body in either form: the center, k (1 to
// 10,000, as a page's limit), and max_distance_m or max_distance_mm
// (optional, a radius's range).
func parseNearest(d *doc, fm form) (form, *core.NearestQuery, *failure) {
	q := &core.NearestQuery{}
	var hasLat, hasLon, hasK bool
	fm, names, f := parseQuery(d, fm, nearestA, nearestB, ", k, cursor, group_id", &q.Page, &q.Group, &q.Filter,
		func(name string, v int32, names []string, fm form) (ok bool, f *failure) {
			if ok, f = centerField(d, v, name, names, fm, &q.Center, &hasLat, &hasLon); ok {
				return ok, f
			}
			switch name {
			case "limit":
				return true, malformed("limit: a nearest query's page size is k")
			case names[2]:
				if !d.isNull(v) {
					q.MaxDistanceMM, f = radiusOf(d, v, name, fm)
				}
			case "k":
				if !d.isNull(v) {
					hasK = true
					q.Limit, f = limitOf(d, v, "k")
				}
			default:
				return false, nil
			}
			return true, f
		})
	switch {
	case f != nil:
	case !hasLat:
		f = required(names[0])
	case !hasLon:
		f = required(names[1])
	case !hasK:
		f = required("k")
	}
	return fm, q, f
}
