package http

import (
	"math"
	"strings"

	"github.com/paulmach/orb"
	"github.com/paulmach/orb/geojson"

	"github.com/geoevent/geoevent/core"
)

// GeoJSON (RFC 7946) in and out.
//
// Out: a query's answer as a FeatureCollection (Accept:
// application/geo+json, or ?format=geojson): each event a Feature whose
// geometry is its Point ([lon, lat] in degrees, exact decimals of its
// nanodegrees) and whose properties are the event's fields as the JSON
// answer has them (distance_mm included), with the page's has_more and
// cursor as foreign members of the collection. A history's collection
// ends with a LineString Feature of the events in order, when there are
// two or more.
//
// In: a polygon query's "geometry", a GeoJSON Polygon (its first ring the
// outer one, the others holes) or a MultiPolygon of one polygon, in place
// of vertices and holes. Positions are [lon, lat] in degrees (a third
// number, the altitude, is allowed and ignored), rounded to the
// nanodegree; the rings may wind either way, as vertices may. The
// geometry is checked for shape here (every position an array of 2 or 3
// numbers: the library reads [1] as [1, 0]) and decoded by
// github.com/paulmach/orb/geojson.

// geoJSONType is the media type of a GeoJSON answer.
const geoJSONType = "application/geo+json"

var geoJSONContentType = []string{geoJSONType}

// geoFeatures writes a FeatureCollection of r's events (see the package's
// GeoJSON rules); line adds the history's LineString.
func (w *jw) geoFeatures(r *core.QueryResult, distances, line bool) {
	w.open()
	w.key("type")
	w.b = append(w.b, `"FeatureCollection"`...)
	w.key("features")
	w.openArr()
	for i := range r.Events {
		e := &r.Events[i]
		var d *uint64
		if distances && i < len(r.DistancesMM) {
			d = &r.DistancesMM[i]
		}
		w.sep()
		w.b = append(w.b, `{"type":"Feature","geometry":{"type":"Point","coordinates":[`...)
		w.b = appendDegrees(w.b, e.LonNano)
		w.b = append(w.b, ',')
		w.b = appendDegrees(w.b, e.LatNano)
		w.b = append(w.b, `]},"properties":`...)
		w.event(e, d)
		w.b = append(w.b, '}')
	}
	if line && len(r.Events) >= 2 {
		w.sep()
		w.b = append(w.b, `{"type":"Feature","geometry":{"type":"LineString","coordinates":[`...)
		for i := range r.Events {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.b = append(w.b, '[')
			w.b = appendDegrees(w.b, r.Events[i].LonNano)
			w.b = append(w.b, ',')
			w.b = appendDegrees(w.b, r.Events[i].LatNano)
			w.b = append(w.b, ']')
		}
		w.b = append(w.b, `]},"properties":{"entity_id":`...)
		w.id(r.Events[0].EntityID)
		w.b = append(w.b, `}}`...)
	}
	w.closeArr()
	w.pageEnd(r)
	w.close()
}

// geoLatest writes the found events of a latest lookup as a
// FeatureCollection.
func (w *jw) geoLatest(rs core.LatestResults) {
	r := core.QueryResult{}
	for i := range rs {
		if rs[i].Found {
			r.Events = append(r.Events, rs[i].Event)
		}
	}
	w.geoFeatures(&r, false, false)
}

// polygonGeometry decodes a polygon query's GeoJSON geometry at node g.
func polygonGeometry(d *doc, g int32) ([]core.Coordinate, [][]core.Coordinate, *failure) {
	const path = "geometry"
	if d.nodes[g].kind != kObject {
		return nil, nil, d.wrongType(g, path, "a GeoJSON Polygon or MultiPolygon object")
	}
	typ, coords := "", int32(-1)
	var f *failure
	d.members(g, func(k, v int32) bool {
		switch string(d.name(k)) {
		case "type":
			typ, f = d.stringOf(v, path+".type")
		case "coordinates":
			coords = v
		case "bbox", "crs":
		default:
			f = unknownField(d, k, path, "type, coordinates, bbox")
		}
		return f == nil
	})
	if f != nil {
		return nil, nil, f
	}
	var polygons []int32 // each an array of rings
	switch {
	case coords < 0:
		return nil, nil, required(path + ".coordinates")
	case d.nodes[coords].kind != kArray:
		return nil, nil, d.wrongType(coords, path+".coordinates", "an array")
	case typ == "Polygon":
		polygons = []int32{coords}
	case typ == "MultiPolygon":
		polygons = d.elems(coords)
		if len(polygons) != 1 {
			return nil, nil, fail(core.InvalidPolygon, "%s: a MultiPolygon of %d polygons; a query takes one polygon (with holes)", path, len(polygons))
		}
	default:
		return nil, nil, malformed("%s.type: %q is not Polygon or MultiPolygon", path, typ)
	}
	// The shape: the library decodes what is well formed.
	rings := polygons[0]
	if d.nodes[rings].kind != kArray {
		return nil, nil, d.wrongType(rings, path+".coordinates", "an array of rings")
	}
	ringNodes := d.elems(rings)
	switch {
	case len(ringNodes) == 0:
		return nil, nil, fail(core.InvalidPolygon, "%s: a polygon without rings", path)
	case len(ringNodes)-1 > core.MaxPolygonHoles:
		return nil, nil, fail(core.PolygonTooComplex, "%s: %d holes; at most %d are allowed", path, len(ringNodes)-1, core.MaxPolygonHoles)
	}
	for i, r := range ringNodes {
		rp := index(path+".coordinates", i)
		if f := ringShape(d, r, rp); f != nil {
			return nil, nil, f
		}
		for j, p := range d.elems(r) {
			nd := &d.nodes[p]
			if nd.kind != kArray || nd.n < 2 || nd.n > 3 {
				return nil, nil, d.wrongType(p, index(rp, j), "a position [lon, lat]")
			}
			for _, x := range d.elems(p) {
				if d.nodes[x].kind != kNumber {
					return nil, nil, d.wrongType(p, index(rp, j), "a position of numbers [lon, lat]")
				}
			}
		}
	}
	geom, err := geojson.UnmarshalGeometry(d.raw(g))
	if err != nil {
		return nil, nil, malformed("%s: %v", path, err)
	}
	var poly orb.Polygon
	switch x := geom.Coordinates.(type) {
	case orb.Polygon:
		poly = x
	case orb.MultiPolygon:
		poly = x[0]
	default:
		return nil, nil, malformed("%s: not a polygon", path)
	}
	out := make([][]core.Coordinate, len(poly))
	for i, ring := range poly {
		out[i] = make([]core.Coordinate, len(ring))
		for j, p := range ring {
			lat, lon := p.Lat(), p.Lon()
			if !(math.Abs(lat) <= 90) || !(math.Abs(lon) <= 180) {
				return nil, nil, fail(core.InvalidCoordinates, "%s: position [%v, %v] is off the globe (longitude -180 to 180, latitude -90 to 90)",
					index(index(path+".coordinates", i), j), lon, lat)
			}
			out[i][j] = core.Coordinate{LatNano: int64(math.Round(lat * 1e9)), LonNano: int64(math.Round(lon * 1e9))}
		}
	}
	return out[0], out[1:], nil
}

// acceptsGeoJSON reports whether an Accept header's value names
// application/geo+json (in any case; its parameters and q values aside).
func acceptsGeoJSON(v string) bool {
	for i := 0; i+len(geoJSONType) <= len(v); i++ {
		if strings.EqualFold(v[i:i+len(geoJSONType)], geoJSONType) {
			return true
		}
	}
	return false
}
