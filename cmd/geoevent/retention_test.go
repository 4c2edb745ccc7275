package main

import (
	"strings"
	"testing"
	"time"
)

// TestRetention: retention shows the defaults, sets both bounds, and
// refuses a half or an unreadable setting (2) and one out of range (1,
// with the server's code); watch --after now waits for what is new.
func TestRetention(t *testing.T) {
	url := startDev(t)
	mustContain(t, "retention", ok(t, url, "retention"), `"max_age_s":86400`, `"max_notifications":10000000`)
	mustContain(t, "retention set", ok(t, url, "retention", "--max-age", "2h", "--max-notifications", "5000"), `"max_age_s":7200`, `"max_notifications":5000`)
	for _, args := range [][]string{{"--max-age", "2h"}, {"--max-age", "1.5s", "--max-notifications", "5000"}, {"--max-age", "1h", "--max-notifications", "x"}} {
		if r := cli(t, url, "", append([]string{"retention"}, args...)...); r.code != 2 {
			t.Errorf("retention %v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
	if r := cli(t, url, "", "retention", "--max-age", "30s", "--max-notifications", "5000"); r.code != 1 || !strings.Contains(r.stderr, "108 INVALID_ARGUMENT") {
		t.Errorf("retention of 30 s: exit %d, stderr %q", r.code, r.stderr)
	}
	ok(t, url, "fence", "put", "depot", "--bbox", "52.0,13.0,52.1,13.1")
	ok(t, url, "put", "7", "52.05", "13.05") // enters depot: before the watch
	before := strings.Fields(strings.Split(ok(t, url, "watch", "--count", "1"), "\n")[1])[0]
	done := make(chan string, 1)
	go func() { done <- ok(t, url, "watch", "--after", "now", "--count", "1") }()
	// The watch's first long poll starts at the end; what comes after it
	// is the one it prints (an exit made before it began would not be).
	for i := 0; ; i++ {
		ok(t, url, "put", "7", []string{"51.0", "52.05"}[i%2], "13.05")
		select {
		case out := <-done:
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 2 || !strings.Contains(lines[1], "depot") || strings.Fields(lines[1])[0] == before {
				t.Fatalf("watch --after now (the enter before it was %s):\n%s", before, out)
			}
			return
		default:
		}
		if i == 200 {
			t.Fatal("watch --after now printed nothing")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
