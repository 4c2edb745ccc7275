package http_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/geoevent/geoevent/core"
	ghttp "github.com/geoevent/geoevent/http"
)

// TestHooks defines, reads, lists and removes webhooks over HTTP against a
// real replica, and checks the refusals.
func TestHooks(t *testing.T) {
	e := newEnv(t)
	hook := map[string]any{"url": "https://example.com/geo?x=1", "fences": []string{"depot"}, "types": []string{"enter", "exit"}}
	r := e.req("PUT", "/hooks/dispatch", hook)
	expectOK(t, r, "put dispatch")
	if str(get(r.body, "created")) != "true" || str(get(r.body, "name")) != `"dispatch"` {
		t.Fatalf("put: %s", r.raw)
	}
	expectOK(t, e.req("PUT", "/hooks/all", map[string]any{"url": "http://127.0.0.1:9/"}), "put all")
	r = e.req("GET", "/hooks/dispatch", nil)
	expectOK(t, r, "get dispatch")
	if str(get(r.body, "url")) != `"https://example.com/geo?x=1"` || str(get(r.body, "fences", 0)) != `"depot"` ||
		str(get(r.body, "types")) != `["enter","exit"]` || str(get(r.body, "delivered")) != `"0"` || str(get(r.body, "version")) != "1" {
		t.Fatalf("get: %s", r.raw)
	}
	r = e.req("GET", "/hooks/all", nil)
	if str(get(r.body, "types")) != `["enter","exit","inside"]` || str(get(r.body, "fences")) != `[]` {
		t.Fatalf("a hook without a filter: %s", r.raw)
	}
	r = e.req("PUT", "/hooks/dispatch", map[string]any{"url": "https://example.com/v2"})
	if str(get(r.body, "created")) != "false" {
		t.Fatalf("replace: %s", r.raw)
	}
	r = e.req("GET", "/hooks?limit=1", nil)
	expectOK(t, r, "list")
	if str(get(r.body, "hooks", 0, "name")) != `"all"` || str(get(r.body, "has_more")) != "true" || str(get(r.body, "total")) != "2" ||
		str(get(r.body, "feed_last")) != `"0"` {
		t.Fatalf("list: %s", r.raw)
	}
	r = e.req("GET", "/hooks?after=all", nil)
	if str(get(r.body, "hooks", 0, "name")) != `"dispatch"` || str(get(r.body, "hooks", 0, "version")) != "3" || str(get(r.body, "has_more")) != "false" {
		t.Fatalf("list after: %s", r.raw)
	}

	bad := func(what, path string, body any, status int, code core.CodeInfo) {
		t.Helper()
		expectErr(t, e.req("PUT", path, body), what, "b", status, code.Code, code.Name)
	}
	bad("ftp url", "/hooks/x", map[string]any{"url": "ftp://example.com"}, 400, core.InvalidHook)
	bad("url with a space", "/hooks/x", map[string]any{"url": "http://a b"}, 400, core.InvalidHook)
	bad("long url", "/hooks/x", map[string]any{"url": "http://" + strings.Repeat("a", core.MaxHookURLLen)}, 400, core.InvalidHook)
	bad("no url", "/hooks/x", map[string]any{"fences": []string{"a"}}, 400, core.MalformedRequest)
	bad("bad fence", "/hooks/x", map[string]any{"url": "http://a", "fences": []string{"a,b"}}, 400, core.InvalidHook)
	bad("bad type", "/hooks/x", map[string]any{"url": "http://a", "types": []string{"sideways"}}, 400, core.InvalidHook)
	bad("unknown field", "/hooks/x", map[string]any{"url": "http://a", "delivered": "5"}, 400, core.MalformedRequest)
	bad("bad name", "/hooks/a%20b", hook, 400, core.InvalidHook)
	expectErr(t, e.req("GET", "/hooks/nope", nil), "get unknown", "b", 404, core.HookNotFound.Code, "HOOK_NOT_FOUND")
	expectErr(t, e.req("GET", "/hooks?limit=1001", nil), "list limit", "b", 400, core.QueryResultTooLarge.Code, "QUERY_RESULT_TOO_LARGE")

	expectOK(t, e.req("DELETE", "/hooks/dispatch", nil), "delete")
	expectErr(t, e.req("DELETE", "/hooks/dispatch", nil), "delete again", "b", 404, core.HookNotFound.Code, "HOOK_NOT_FOUND")
	r = e.req("GET", "/hooks", nil)
	if str(get(r.body, "total")) != "1" {
		t.Fatalf("after delete: %s", r.raw)
	}
}

// TestWebhookBody: a post's body is JSON, with the notifications as the
// feed renders them (sequences as strings).
func TestWebhookBody(t *testing.T) {
	ns := []core.Notification{
		{Seq: 5<<32 + 1, Type: core.NotifyEnter, Fence: "depot", Event: core.GeoEvent{EntityID: core.Uint128{Lo: 7}, LatNano: 1, LonNano: 2}, OpNS: 9},
		{Seq: 6 << 32, Type: core.NotifyExit, Fence: "depot", HasPrev: true, Prev: core.Coordinate{LatNano: 3, LonNano: 4}},
	}
	b := ghttp.WebhookBody("h", ns, true)
	var body struct {
		Hook          string `json:"hook"`
		Trimmed       bool   `json:"trimmed"`
		Notifications []struct {
			Seq      string          `json:"seq"`
			Type     string          `json:"type"`
			Fence    string          `json:"fence"`
			Previous json.RawMessage `json:"previous"`
		} `json:"notifications"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if body.Hook != "h" || !body.Trimmed || len(body.Notifications) != 2 || body.Notifications[0].Seq != "21474836481" ||
		body.Notifications[1].Type != "exit" || string(body.Notifications[0].Previous) != "null" || string(body.Notifications[1].Previous) != `{"lat_nano":3,"lon_nano":4}` {
		t.Fatalf("body: %s", b)
	}
	if b := ghttp.WebhookBody("h", nil, false); string(b) != `{"hook":"h","trimmed":false,"notifications":[]}` {
		t.Fatalf("empty: %s", b)
	}
}
