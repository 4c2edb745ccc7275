package http

import (
	"encoding/json"
	"testing"

	"github.com/geoevent/geoevent/core"
)

// FuzzPolygonGeometry feeds the GeoJSON reader arbitrary polygon bodies:
// it never panics, and what it accepts has rings of positions on the
// globe within the limits.
func FuzzPolygonGeometry(f *testing.F) {
	for _, s := range []string{
		`{"geometry":{"type":"Polygon","coordinates":[[[13,52],[14,52],[14,53],[13,52]]]}}`,
		`{"geometry":{"type":"Polygon","coordinates":[[[13,52,10],[14,52],[14,53],[13,52]],[[13.5,52.2],[13.6,52.2],[13.6,52.3]]]}}`,
		`{"geometry":{"type":"MultiPolygon","coordinates":[[[[13,52],[14,52],[14,53],[13,52]]]]}}`,
		`{"geometry":{"type":"MultiPolygon","coordinates":[[[[0,0],[1,0],[1,1]]],[[[2,2],[3,2],[3,3]]]]}}`,
		`{"geometry":{"type":"Polygon","coordinates":[[[1],[2,3],[4,5]]]}}`,
		`{"geometry":{"type":"Polygon","coordinates":[[[181,0],[0,0],[0,1]]]}}`,
		`{"geometry":{"type":"Point","coordinates":[1,2]}}`,
		`{"geometry":{"type":"Polygon","coordinates":[]}}`,
		`{"geometry":{"type":"Polygon"}}`,
		`{"geometry":{"type":"Polygon","coordinates":[[["1",2],[2,3],[4,5]]],"bbox":[0,0,1,1]}}`,
		`{"geometry":[1],"limit":2}`,
		`{"geometry":{"type":"Polygon","coordinates":[[[1e400,2],[2,3],[4,5]]]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		d, err := parseJSON(body)
		if err != nil {
			return
		}
		_, q, fl := parsePolygon(d, formB)
		if fl != nil || q == nil {
			return
		}
		for _, ring := range append([][]core.Coordinate{q.Vertices}, q.Holes...) {
			if len(ring) > core.MaxPolygonVertices+1 {
				t.Fatalf("a ring of %d vertices accepted", len(ring))
			}
			for _, c := range ring {
				if !core.ValidCoordinate(c.LatNano, c.LonNano) {
					t.Fatalf("position %+v off the globe accepted", c)
				}
			}
		}
		if len(q.Holes) > core.MaxPolygonHoles {
			t.Fatalf("%d holes accepted", len(q.Holes))
		}
	})
}

// TestGeoFeatures: the GeoJSON writer's output is JSON of the documented
// shape, and costs about what the plain JSON answer does (see
// BenchmarkRenderGeoJSON).
func TestGeoFeatures(t *testing.T) {
	r := &core.QueryResult{Events: []core.GeoEvent{
		{EntityID: core.Uint128{Lo: 1}, TimestampNS: 5, LatNano: 52_500_000_000, LonNano: -13_400_000_001, Flags: 3},
		{EntityID: core.Uint128{Lo: 1}, TimestampNS: 6, LatNano: 52_600_000_000, LonNano: 13_400_000_000},
	}, DistancesMM: []uint64{7, 8}, HasMore: true, Cursor: "abc"}
	var w jw
	w.geoFeatures(r, true, true)
	var v struct {
		Type     string
		HasMore  bool   `json:"has_more"`
		Cursor   string `json:"cursor"`
		Features []struct {
			Type     string
			Geometry struct {
				Type        string
				Coordinates json.RawMessage
			}
			Properties map[string]any
		}
	}
	if err := json.Unmarshal(w.b, &v); err != nil {
		t.Fatalf("%v: %s", err, w.b)
	}
	if v.Type != "FeatureCollection" || !v.HasMore || v.Cursor != "abc" || len(v.Features) != 3 {
		t.Fatalf("collection %+v", v)
	}
	if g := v.Features[0].Geometry; g.Type != "Point" || string(g.Coordinates) != "[-13.400000001,52.5]" {
		t.Errorf("point %s %s", g.Type, g.Coordinates)
	}
	if p := v.Features[0].Properties; p["flags"] != 3.0 || p["distance_mm"] != 7.0 || p["lat_nano"] != 52_500_000_000.0 {
		t.Errorf("properties %v", p)
	}
	if g := v.Features[2].Geometry; g.Type != "LineString" || string(g.Coordinates) != "[[-13.400000001,52.5],[13.4,52.6]]" {
		t.Errorf("line %s %s", g.Type, g.Coordinates)
	}
}

// BenchmarkRenderGeoJSON renders a page of 1,000 events as GeoJSON, and
// BenchmarkRenderGeoJSONPlain the same page as the plain JSON answer (the
// target: GeoJSON at most 1.2 times its cost).
func BenchmarkRenderGeoJSON(b *testing.B)      { benchRender(b, true) }
func BenchmarkRenderGeoJSONPlain(b *testing.B) { benchRender(b, false) }

func benchRender(b *testing.B, geo bool) {
	r := &core.QueryResult{Events: make([]core.GeoEvent, 1000), DistancesMM: make([]uint64, 1000)}
	for i := range r.Events {
		r.Events[i] = core.GeoEvent{EntityID: core.Uint128{Hi: uint64(i) * 7919, Lo: uint64(i)}, TimestampNS: 1_795_815_268_000_000_000 + uint64(i),
			LatNano: 38_110_000_000 + int64(i)*1_234_567, LonNano: 13_360_000_000 - int64(i)*7_654_321, GroupID: uint64(i % 16), VelocityMMS: 12_500}
		r.DistancesMM[i] = uint64(i) * 1001
	}
	var w jw
	b.ReportAllocs()
	for b.Loop() {
		w.b = w.b[:0]
		if geo {
			w.geoFeatures(r, true, false)
		} else {
			w.queryResult(r, true)
		}
	}
}
