package http_test

import (
	"encoding/base64"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// cursorText is a cursor as the gateway issues it: URL-safe base64 of 26
// bytes, unpadded.
var cursorText = regexp.MustCompile(`^[A-Za-z0-9_-]{35}$`)

// TestCursorsThroughURLs pages every kind of query to its end with limit 1,
// cursors in JSON bodies and, for history, raw in ?cursor= (no escaping):
// every cursor is URL-safe, and each next page asked for with the cursor
// in the old encoding (standard base64, padded or not; raw in the URL,
// where '+' arrives as a space, or escaped) is the same page.
func TestCursorsThroughURLs(t *testing.T) {
	e := newEnv(t)
	// Entity fbfbfbfb-...'s bytes are 0xfb, which standard base64 writes
	// with '+' and '/': its cursors tell the alphabets apart.
	special := "fbfbfbfb-fbfb-fbfb-fbfb-fbfbfbfbfbfb"
	ids := []string{special}
	for range 7 {
		ids = append(ids, newID())
	}
	var evs []map[string]any
	for i, id := range ids {
		evs = append(evs, ev(id, 38_100_000_000+int64(i)*1000, 13_360_000_000+int64(i)*1000))
	}
	e.insert(evs...)
	e.insert(ev(special, 38_100_000_001, 13_360_000_000), ev(special, 38_100_000_002, 13_360_000_000),
		ev(special, 38_100_000_003, 13_360_000_000), ev(special, 38_100_000_004, 13_360_000_000))

	withCursor := func(body, cursor string) string {
		if cursor == "" {
			return body + "}"
		}
		return body + `,"cursor":"` + cursor + `"}`
	}
	post := func(path, body string) func(string, bool) resp {
		return func(cursor string, _ bool) resp { return e.req("POST", path, withCursor(body, cursor)) }
	}
	kinds := []struct {
		name   string
		events int
		page   func(cursor string, escape bool) resp
	}{
		{"radius B", 8, post("/query/radius", `{"center_lat_nano":38100000000,"center_lon_nano":13360000000,"radius_mm":1000000,"limit":1`)},
		{"radius A", 8, post("/query/radius", `{"center_lat":38.1,"center_lon":13.36,"radius_m":1000,"limit":1`)},
		{"polygon", 8, post("/query/polygon", `{"vertices":[{"lat":38,"lon":13},{"lat":38,"lon":14},{"lat":39,"lon":14},{"lat":39,"lon":13}],"limit":1`)},
		{"latest", 8, post("/query/latest", `{"limit":1`)},
		{"history", 5, func(cursor string, escape bool) resp {
			if escape {
				cursor = url.QueryEscape(cursor)
			}
			return e.req("GET", "/entity/"+special+"/history?limit=1&cursor="+cursor, nil)
		}},
	}
	plus, slash := 0, 0
	for _, k := range kinds {
		seen := map[string]bool{}
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > 20 {
				t.Fatalf("%s: no end after 20 pages", k.name)
			}
			r := k.page(cursor, false)
			expectOK(t, r, k.name)
			for _, ev := range get(r.body, "events").([]any) {
				id := get(ev, "id").(string)
				if seen[id] {
					t.Errorf("%s: %s twice", k.name, id)
				}
				seen[id] = true
			}
			if str(get(r.body, "has_more")) != "true" {
				break
			}
			next, _ := get(r.body, "cursor").(string)
			if !cursorText.MatchString(next) {
				t.Fatalf("%s: cursor %q is not 35 characters of URL-safe base64", k.name, next)
			}
			// The same next page by the cursor in the old encodings.
			want := k.page(next, false)
			raw, err := base64.RawURLEncoding.DecodeString(next)
			if err != nil {
				t.Fatal(err)
			}
			old := base64.StdEncoding.EncodeToString(raw)
			if strings.Contains(old, "+") {
				plus++
			}
			if strings.Contains(old, "/") {
				slash++
			}
			for _, alt := range []string{old, strings.TrimRight(old, "=")} {
				for _, escape := range []bool{false, true} {
					if got := k.page(alt, escape); got.status != 200 || string(got.raw) != string(want.raw) {
						t.Errorf("%s: cursor %q as %q (escaped %v): %d %s\nwant %s", k.name, next, alt, escape, got.status, got.raw, want.raw)
					}
				}
			}
			cursor = next
		}
		if len(seen) != k.events {
			t.Errorf("%s: %d events over all pages, want %d", k.name, len(seen), k.events)
		}
	}
	if plus == 0 || slash == 0 {
		t.Errorf("old-format cursors tried: %d with '+', %d with '/'; want some of each", plus, slash)
	}
}
