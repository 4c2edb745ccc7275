package main

import (
	"strings"
	"testing"
)

// TestHook defines, shows, lists and removes a webhook with the command
// line.
func TestHook(t *testing.T) {
	url := startDev(t)
	mustContain(t, "hook put", ok(t, url, "hook", "put", "dispatch", "--url", "http://127.0.0.1:9/geo", "--fences", "depot,yard", "--types", "enter"), "created hook dispatch")
	mustContain(t, "hook put again", ok(t, url, "hook", "put", "dispatch", "--url", "https://example.com/geo"), "replaced hook dispatch")
	mustContain(t, "hook get", ok(t, url, "hook", "get", "dispatch"), `"https://example.com/geo"`, `"delivered"`)
	mustContain(t, "hook list", ok(t, url, "hook", "list"), `"dispatch"`, `"feed_last"`)
	r := cli(t, url, "", "hook", "put", "x")
	if r.code != 2 || !strings.Contains(r.stderr, "--url") {
		t.Errorf("hook put without a URL: exit %d, stderr %q", r.code, r.stderr)
	}
	r = cli(t, url, "", "hook", "put", "x", "--url", "ftp://example.com")
	if r.code != 1 || !strings.Contains(r.stderr, "121 INVALID_HOOK") {
		t.Errorf("hook put with an ftp URL: exit %d, stderr %q", r.code, r.stderr)
	}
	mustContain(t, "hook delete", ok(t, url, "hook", "delete", "dispatch"), "deleted hook dispatch")
	r = cli(t, url, "", "hook", "get", "dispatch")
	if r.code != 1 || !strings.Contains(r.stderr, "242 HOOK_NOT_FOUND") {
		t.Errorf("hook get of a deleted hook: exit %d, stderr %q", r.code, r.stderr)
	}
}
