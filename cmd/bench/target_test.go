package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/geoevent/geoevent/core"
)

// TestHTTPTarget checks the requests the HTTP mode sends (valid Form B
// JSON on the right paths) and how it reads the answers.
func TestHTTPTarget(t *testing.T) {
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.Method+" "+r.URL.Path)
		body, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/events":
			var req struct {
				Mode   string
				Events []struct {
					EntityID string `json:"entity_id"`
					LatNano  int64  `json:"lat_nano"`
					LonNano  int64  `json:"lon_nano"`
				}
			}
			if err := json.Unmarshal(body, &req); err != nil || len(req.Events) != 2 || req.Events[1].LatNano != -5 {
				t.Errorf("bad /events body %s: %v", body, err)
			}
			committed := req.Mode == "upsert"
			w.Write([]byte(`{"results":[],"committed":` + map[bool]string{true: "true", false: "false"}[committed] + `}`))
		case "/query/radius":
			w.Write([]byte(`{"events":[{},{}],"has_more":false,"cursor":null}`))
		default:
			if !strings.HasPrefix(r.URL.Path, "/entity/") {
				w.WriteHeader(404)
			}
			w.Write([]byte(`{"found":true}`))
		}
	}))
	defer srv.Close()
	h := newHTTPTarget(srv.URL, 2)
	defer h.close()
	ctx := context.Background()
	evs := []core.GeoEvent{{EntityID: core.Uint128{Lo: 1}, LatNano: 3, LonNano: 4}, {EntityID: core.Uint128{Lo: 2}, LatNano: -5, LonNano: 6}}
	if err := h.write(ctx, evs, true); err != nil {
		t.Fatal(err)
	}
	if err := h.write(ctx, evs, false); err == nil {
		t.Fatal("an uncommitted batch was not reported")
	}
	if n, err := h.radius(ctx, &core.RadiusQuery{RadiusMM: 5}); err != nil || n != 2 {
		t.Fatalf("radius: %d %v", n, err)
	}
	if err := h.latest(ctx, core.Uint128{Lo: 9}); err != nil {
		t.Fatal(err)
	}
	want := "POST /events,POST /events,POST /query/radius,GET /entity/00000000-0000-0000-0000-000000000009"
	if got := strings.Join(paths, ","); got != want {
		t.Fatalf("requests %s, want %s", got, want)
	}
}
