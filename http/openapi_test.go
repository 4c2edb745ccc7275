package http_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/geoevent/geoevent/core"
	ghttp "github.com/geoevent/geoevent/http"

	"github.com/geoevent/geoevent/internal/testproc"
)

type openAPIDoc struct {
	OpenAPI    string                                `json:"openapi"`
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas    map[string]json.RawMessage `json:"schemas"`
		Parameters map[string]json.RawMessage `json:"parameters"`
		Responses  map[string]json.RawMessage `json:"responses"`
	} `json:"components"`
}

func loadOpenAPI(t *testing.T) (openAPIDoc, []byte) {
	t.Helper()
	raw := ghttp.OpenAPI()
	var doc openAPIDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("openapi.json is not JSON: %v", err)
	}
	return doc, raw
}

// TestOpenAPIMatchesRoutes fails when a route of the gateway is missing
// from openapi.json or the document has a path or method the gateway does
// not serve.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	doc, raw := loadOpenAPI(t)
	if !strings.HasPrefix(doc.OpenAPI, "3.1.") {
		t.Fatalf("openapi is %q, want 3.1.x", doc.OpenAPI)
	}
	g, err := ghttp.New(ghttp.Config{Backend: fakeBackend{func(context.Context, core.Operation, any) (any, error) { return nil, nil }}})
	if err != nil {
		t.Fatal(err)
	}
	var routes, documented []string
	for _, r := range g.Routes() {
		routes = append(routes, r.Method+" "+r.Path)
	}
	methods := map[string]bool{"get": true, "put": true, "post": true, "delete": true, "options": true, "head": true, "patch": true, "trace": true}
	for path, item := range doc.Paths {
		for m := range item {
			if methods[m] {
				documented = append(documented, strings.ToUpper(m)+" "+path)
			}
		}
	}
	slices.Sort(routes)
	slices.Sort(documented)
	for _, r := range routes {
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is not in openapi.json", r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(routes, d) {
			t.Errorf("openapi.json documents %s, which the gateway does not serve", d)
		}
	}

	// Every $ref resolves.
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok {
				parts := strings.Split(strings.TrimPrefix(ref, "#/components/"), "/")
				var m map[string]json.RawMessage
				switch parts[0] {
				case "schemas":
					m = doc.Components.Schemas
				case "parameters":
					m = doc.Components.Parameters
				case "responses":
					m = doc.Components.Responses
				}
				if len(parts) != 2 || m[parts[1]] == nil {
					t.Errorf("unresolved $ref %q", ref)
				}
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	var all any
	json.Unmarshal(raw, &all)
	walk(all)

	// Every operation documents a 200 and its path parameters.
	for path, item := range doc.Paths {
		for m, op := range item {
			var o struct {
				Responses  map[string]any `json:"responses"`
				Parameters []struct {
					Name string `json:"name"`
					In   string `json:"in"`
				} `json:"parameters"`
			}
			json.Unmarshal(op, &o)
			if o.Responses["200"] == nil {
				t.Errorf("%s %s documents no 200", m, path)
			}
			for _, seg := range strings.Split(path, "/") {
				if strings.HasPrefix(seg, "{") {
					name := strings.Trim(seg, "{}")
					found := false
					for _, p := range o.Parameters {
						found = found || (p.Name == name && p.In == "path")
					}
					if !found {
						t.Errorf("%s %s does not document path parameter %s", m, path, name)
					}
				}
			}
		}
	}
}

// TestOpenAPIServed: GET /openapi.json serves the checked-in document, and
// every documented method and path reaches a handler (no 404 or 405).
func TestOpenAPIServed(t *testing.T) {
	doc, raw := loadOpenAPI(t)
	gw := testproc.ServeGateway(t, ghttp.Config{Backend: fakeBackend{func(context.Context, core.Operation, any) (any, error) {
		return nil, core.Errorf(core.InternalError, "fake")
	}}})
	base := "http://" + gw.Addr().String()
	r := request(t, base, "GET", "/openapi.json", nil)
	expectOK(t, r, "GET /openapi.json")
	if !bytes.Equal(bytes.TrimSpace(r.raw), bytes.TrimSpace(raw)) {
		t.Fatal("GET /openapi.json differs from openapi.json")
	}
	for path, item := range doc.Paths {
		for m := range item {
			p := strings.ReplaceAll(path, "{entity_id}", newID())
			r := request(t, base, strings.ToUpper(m), p, "{}")
			if r.status == 404 && str(get(r.body, "error", "code")) == "4" || r.status == 405 {
				t.Errorf("%s %s: %d %s", m, path, r.status, r.raw)
			}
		}
	}
}

// TestOpenAPILicense: the document names the licence of the repository's
// LICENSE file.
func TestOpenAPILicense(t *testing.T) {
	_, raw := loadOpenAPI(t)
	var doc struct {
		Info struct {
			License struct{ Name, Identifier string } `json:"license"`
		} `json:"info"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Info.License.Identifier != "Apache-2.0" {
		t.Fatalf("info.license is %+v, want the SPDX identifier Apache-2.0", doc.Info.License)
	}
	text, err := os.ReadFile("../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(text, []byte("Apache License")) || !bytes.Contains(text, []byte("Version 2.0, January 2004")) {
		t.Fatal("LICENSE is not the Apache License 2.0")
	}
}
