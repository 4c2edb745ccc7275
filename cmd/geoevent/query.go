package main

// The spatial queries: near (radius), within (polygon).

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/paulmach/orb"
	"github.com/paulmach/orb/geojson"
)

func init() {
	register(command{name: "near", order: 30, args: "LAT LON RADIUS_M [--group N] [--limit N]", summary: "entities within a radius of a point", run: near})
	register(command{name: "within", order: 40, args: "LAT,LON LAT,LON LAT,LON... | --file F", summary: "entities inside a polygon (or a GeoJSON Polygon's file)", run: within})
}

func near(e *env, args []string) int {
	fset, group, limit := e.spatialFlags()
	pos, code, ok := e.parse(fset, args, 3, 3)
	if !ok {
		return code
	}
	lat, lon, err := parsePoint(pos[0], pos[1])
	if err != nil {
		return e.fail(err)
	}
	radius, err := strconv.ParseFloat(pos[2], 64)
	if err != nil {
		return e.fail(badArg("RADIUS_M %q is not a number of metres", pos[2]))
	}
	body := map[string]any{"center_lat": lat, "center_lon": lon, "radius_m": radius}
	return e.query("/query/radius?form=a", body, *group, *limit)
}

func within(e *env, args []string) int {
	fset, group, limit := e.spatialFlags()
	file := fset.String("file", "", "read the polygon from GeoJSON file `F` (a Polygon, or a Feature or FeatureCollection of one); - is stdin")
	pos, code, ok := e.parse(fset, args, 0, -1)
	if !ok {
		return code
	}
	var body map[string]any
	switch {
	case *file != "" && len(pos) > 0:
		return e.fail(badArg("give the polygon's vertices or --file, not both"))
	case *file != "":
		data, err := readInput(e, *file)
		if err != nil {
			return e.fail(err)
		}
		poly, err := geojsonPolygon(data)
		if err != nil {
			return e.fail(fmt.Errorf("%s: %w", *file, err))
		}
		body = polygonBody(poly)
	default:
		if len(pos) < 3 {
			fset.Usage()
			return exitUsage
		}
		var ring orb.Ring
		for _, p := range pos {
			la, lo, ok := strings.Cut(p, ",")
			lat, err1 := strconv.ParseFloat(la, 64)
			lon, err2 := strconv.ParseFloat(lo, 64)
			if !ok || err1 != nil || err2 != nil {
				return e.fail(badArg("vertex %q is not LAT,LON in degrees", p))
			}
			ring = append(ring, orb.Point{lon, lat})
		}
		body = polygonBody(orb.Polygon{ring})
	}
	return e.query("/query/polygon?form=a", body, *group, *limit)
}

// readInput reads file, or standard input for "-".
func readInput(e *env, file string) ([]byte, error) {
	if file == "-" {
		return io.ReadAll(e.stdin)
	}
	return os.ReadFile(file)
}

// spatialFlags returns a paged spatial query's flags: --group and --limit.
func (e *env) spatialFlags() (fset *flag.FlagSet, group *string, limit *int) {
	fset = e.flags()
	group = fset.String("group", "", "only entities of group `N`")
	limit = fset.Int("limit", 100, "at most `N` entities (0: all)")
	return fset, group, limit
}

// parsePoint reads a point's LAT and LON arguments, in degrees.
func parsePoint(lat, lon string) (float64, float64, error) {
	la, err := parseCoord("latitude", lat)
	if err != nil {
		return 0, 0, err
	}
	lo, err := parseCoord("longitude", lon)
	return la, lo, err
}

// query runs a paged spatial query and prints its events.
func (e *env) query(path string, body map[string]any, group string, limit int) int {
	if group != "" {
		body["group_id"] = group
	}
	all, err := e.api.pages(path, body, limit)
	if err != nil {
		return e.fail(err)
	}
	return e.printPage(all)
}

// polygonBody is a polygon query's vertices and holes (Form A). GeoJSON's
// rings repeat their first vertex last; the API takes a ring open or
// closed.
func polygonBody(p orb.Polygon) map[string]any {
	ring := func(r orb.Ring) []map[string]float64 {
		vs := make([]map[string]float64, len(r))
		for i, pt := range r {
			vs[i] = map[string]float64{"lat": pt.Lat(), "lon": pt.Lon()}
		}
		return vs
	}
	body := map[string]any{"vertices": ring(p[0])}
	if len(p) > 1 {
		holes := make([]any, len(p)-1)
		for i, h := range p[1:] {
			holes[i] = ring(h)
		}
		body["holes"] = holes
	}
	return body
}

// geojsonPolygon reads a GeoJSON Polygon: a bare geometry, a Feature, or a
// FeatureCollection holding one Polygon feature.
func geojsonPolygon(data []byte) (orb.Polygon, error) {
	var probe struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	var g orb.Geometry
	switch probe.Type {
	case "FeatureCollection":
		fc, err := geojson.UnmarshalFeatureCollection(data)
		if err != nil {
			return nil, err
		}
		if len(fc.Features) != 1 {
			return nil, fmt.Errorf("the FeatureCollection holds %d features: give one Polygon", len(fc.Features))
		}
		g = fc.Features[0].Geometry
	case "Feature":
		f, err := geojson.UnmarshalFeature(data)
		if err != nil {
			return nil, err
		}
		g = f.Geometry
	default:
		geom, err := geojson.UnmarshalGeometry(data)
		if err != nil {
			return nil, err
		}
		g = geom.Geometry()
	}
	poly, ok := g.(orb.Polygon)
	if !ok || len(poly) == 0 {
		name := "nothing"
		if g != nil {
			name = "a " + g.GeoJSONType()
		}
		return nil, fmt.Errorf("want a GeoJSON Polygon, found %s", name)
	}
	return poly, nil
}
