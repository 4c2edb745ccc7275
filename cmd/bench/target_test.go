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
// JSON on the right paths) and how it reads the answers, with both clients.
func TestHTTPTarget(t *testing.T) {
	for _, client := range []string{"raw", "std"} {
		t.Run(client, func(t *testing.T) { testHTTPTarget(t, client) })
	}
}

func testHTTPTarget(t *testing.T, client string) {
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
			w.Write([]byte(`{"events":[{"id":"a:1","entity_id":"a"},{"id":"b:2"}],"has_more":false,"cursor":null}`))
		case "/entities/batch":
			var req struct {
				EntityIDs []string `json:"entity_ids"`
			}
			if err := json.Unmarshal(body, &req); err != nil || len(req.EntityIDs) != 3 || req.EntityIDs[2] != "00000000-0000-0000-0000-000000000003" {
				t.Errorf("bad /entities/batch body %s: %v", body, err)
			}
			w.Write([]byte(`{"events":[{"id":"a:1","entity_id":"a"},null,{"id":"c:2"}]}`))
		case "/ping":
			w.Write([]byte(`{"ok":true}`))
		default:
			if !strings.HasPrefix(r.URL.Path, "/entity/") || strings.HasSuffix(r.URL.Path, "0") {
				w.WriteHeader(404)
			}
			w.Write([]byte(`{"found":true}`))
		}
	}))
	defer srv.Close()
	h, err := newHTTPTarget(srv.URL, 2, client)
	if err != nil {
		t.Fatal(err)
	}
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
	if n, err := h.latestBatch(ctx, []core.Uint128{{Lo: 1}, {Lo: 2}, {Lo: 3}}); err != nil || n != 2 {
		t.Fatalf("latest batch: %d found, %v", n, err)
	}
	if err := h.latest(ctx, core.Uint128{Lo: 0x10}); err == nil || !strings.Contains(err.Error(), "HTTP 404") {
		t.Fatalf("a 404 was not reported: %v", err)
	}
	if err := h.latest(ctx, core.Uint128{Lo: 9}); err != nil {
		t.Fatal(err)
	}
	if err := h.ping(ctx); err != nil {
		t.Fatal(err)
	}
	want := "POST /events,POST /events,POST /query/radius,POST /entities/batch,GET /entity/00000000-0000-0000-0000-000000000010,GET /entity/00000000-0000-0000-0000-000000000009,GET /ping"
	if got := strings.Join(paths, ","); got != want {
		t.Fatalf("requests %s, want %s", got, want)
	}
}
