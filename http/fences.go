package http

import (
	"strings"

	"github.com/geoevent/geoevent/core"
)

// Fences: PUT, GET and DELETE /fences/{name}, GET /fences.
//
// A fence's body (coordinates in the request's form, as a polygon or
// radius query's: lat_nano/lon_nano and radius_mm in Form B, lat/lon and
// radius_m in Form A):
//
//	{"shape": "polygon", "vertices": [{...}, ...], "holes": [[...]]}
//	{"shape": "circle", "center": {...}, "radius_mm": 5000}
//	{"shape": "bbox", "min": {...}, "max": {...}}
//
// with, for any shape, "group_id" (only entities of that group) and
// "report" (a list of "enter", "exit", "inside"; default enter and exit).

const fenceFieldList = "shape, vertices, holes, center, radius_mm or radius_m, min, max, group_id, report"

// fenceName checks a fence's name (in a path or a parameter).
var fenceName = nameRule("fence", core.InvalidFence)

func (g *Gateway) putFence(c *call) *failure {
	return putNamed(c, fenceName, core.PutFence, func(d *doc, name string) (*core.Fence, *failure) {
		return parseFence(d, name, c.form)
	})
}

func (g *Gateway) getFence(c *call) *failure {
	return getNamed(c, fenceName, core.GetFence, (*jw).fence)
}

func (g *Gateway) deleteFence(c *call) *failure {
	return deleteNamed(c, fenceName, core.DeleteFence)
}

func (g *Gateway) listFences(c *call) *failure {
	return listNamed(c, core.MaxFenceList, fenceName, core.ListFences, func(w *jw, r *core.FenceList) {
		w.open()
		namedPage(w, "fences", r.Fences, (*jw).fence, r.HasMore, r.Total)
		w.close()
	})
}

// parseFence reads the body (see the top of the file) of the fence name.
func parseFence(d *doc, name string, fm form) (*core.Fence, *failure) {
	if f := d.object(0, ""); f != nil {
		return nil, f
	}
	fence := &core.Fence{Name: name}
	radiusName := "radius_mm"
	if fm == formA {
		radiusName = "radius_m"
	}
	var f *failure
	shape := ""
	d.members(0, func(k, v int32) bool {
		name := d.keyName(k)
		if d.isNull(v) {
			return true
		}
		switch name {
		case "shape":
			shape, f = d.stringOf(v, name)
		case "vertices":
			if f = ringShape(d, v, name); f == nil {
				fence.Vertices, f = parseRing(d, v, name, fm)
			}
		case "holes":
			if d.nodes[v].kind != kArray {
				f = d.wrongType(v, name, "an array of rings")
				break
			}
			if n := int(d.nodes[v].n); n > core.MaxPolygonHoles {
				f = fail(core.PolygonTooComplex, "holes: %d holes; at most %d are allowed", n, core.MaxPolygonHoles)
				break
			}
			for i, h := range d.elems(v) {
				var ring []core.Coordinate
				if f = ringShape(d, h, index(name, i)); f != nil {
					break
				}
				if ring, f = parseRing(d, h, index(name, i), fm); f != nil {
					break
				}
				fence.Holes = append(fence.Holes, ring)
			}
		case "center", "min", "max":
			var pt core.Coordinate
			if pt, f = parsePoint(d, v, name, fm); f == nil {
				switch name {
				case "center":
					fence.Center = pt
				case "min":
					fence.Min = pt
				default:
					fence.Max = pt
				}
			}
		case radiusName:
			fence.RadiusMM, f = radiusOf(d, v, name, fm)
		case "group_id":
			fence.Group.Set = true
			fence.Group.ID, f = d.groupID(v, name, fm)
		case "report":
			fence.Report, f = parseTypes(d, v, name, core.InvalidFence)
		default:
			f = unknownField(d, k, "", fenceFieldList)
		}
		return f == nil
	})
	if f != nil {
		return nil, f
	}
	switch shape {
	case "polygon":
		fence.Shape = core.FencePolygon
	case "circle":
		fence.Shape = core.FenceCircle
	case "bbox":
		fence.Shape = core.FenceBBox
	case "":
		return nil, required("shape")
	default:
		return nil, fail(core.InvalidFence, "shape %q is none of polygon, circle, bbox", truncate(shape, 40))
	}
	return fence, nil
}

// parsePoint reads one coordinate object (a vertex, a center, a corner):
// {lat_nano, lon_nano} in Form B, {lat, lon} in Form A; null is absent.
func parsePoint(d *doc, v int32, path string, fm form) (core.Coordinate, *failure) {
	if d.nodes[v].kind != kObject {
		return core.Coordinate{}, d.wrongType(v, path, "a coordinate object")
	}
	names := vertexB
	if fm == formA {
		names = vertexA
	}
	var c core.Coordinate
	var hasLat, hasLon bool
	var f *failure
	d.members(v, func(k, x int32) bool {
		name := d.keyName(k)
		switch {
		case name == names[0] && !d.isNull(x):
			hasLat = true
			c.LatNano, f = coordinate(d, x, join(path, name), fm, core.MaxLatNano)
		case name == names[1] && !d.isNull(x):
			hasLon = true
			c.LonNano, f = coordinate(d, x, join(path, name), fm, core.MaxLonNano)
		case name == names[0] || name == names[1]:
		default:
			f = unknownField(d, k, path, strings.Join(names, ", "))
		}
		return f == nil
	})
	switch {
	case f != nil:
	case !hasLat:
		f = required(join(path, names[0]))
	case !hasLon:
		f = required(join(path, names[1]))
	}
	return c, f
}

// parseTypes reads a list of notification type names, a name that is none
// refused with code.
func parseTypes(d *doc, v int32, path string, code core.CodeInfo) (core.NotifyMask, *failure) {
	if d.nodes[v].kind != kArray {
		return 0, d.wrongType(v, path, `an array of "enter", "exit", "inside"`)
	}
	var m core.NotifyMask
	for i, x := range d.elems(v) {
		s, f := d.stringOf(x, index(path, i))
		if f != nil {
			return 0, f
		}
		t, ok := core.ParseNotifyType(s)
		if !ok {
			return 0, fail(code, "%s: %q is none of enter, exit, inside", index(path, i), truncate(s, 40))
		}
		m |= 1 << t
	}
	return m, nil
}

// typeNames lists the types of m.
func typeNames(m core.NotifyMask) []string {
	var out []string
	for t := core.NotifyEnter; t <= core.NotifyInside; t++ {
		if m.Has(t) {
			out = append(out, t.String())
		}
	}
	return out
}

// point writes a coordinate object in the response's form.
func (w *jw) point(c core.Coordinate) {
	w.open()
	if w.formA {
		w.key("lat")
		w.b = appendDegrees(w.b, c.LatNano)
		w.key("lon")
		w.b = appendDegrees(w.b, c.LonNano)
	} else {
		w.key("lat_nano")
		w.i64(c.LatNano)
		w.key("lon_nano")
		w.i64(c.LonNano)
	}
	w.close()
}

func (w *jw) ring(r []core.Coordinate) {
	w.openArr()
	for _, c := range r {
		w.point(c)
	}
	w.closeArr()
}

// fence writes a fence's definition as PUT takes it, with its name.
func (w *jw) fence(f *core.Fence) {
	w.open()
	w.key("name")
	w.str(f.Name)
	w.key("shape")
	w.str(f.Shape.String())
	switch f.Shape {
	case core.FencePolygon:
		w.key("vertices")
		w.ring(f.Vertices)
		if len(f.Holes) > 0 {
			w.key("holes")
			w.openArr()
			for _, h := range f.Holes {
				w.ring(h)
			}
			w.closeArr()
		}
	case core.FenceCircle:
		w.key("center")
		w.point(f.Center)
		if w.formA {
			w.key("radius_m")
			w.u64(f.RadiusMM / 1000)
		} else {
			w.key("radius_mm")
			w.u64(f.RadiusMM)
		}
	case core.FenceBBox:
		w.key("min")
		w.point(f.Min)
		w.key("max")
		w.point(f.Max)
	}
	if f.Group.Set {
		w.key("group_id")
		if w.formA {
			w.i64(int64(f.Group.ID))
		} else {
			w.u64(f.Group.ID)
		}
	}
	w.key("report")
	w.strs(typeNames(f.Report))
	w.close()
}
