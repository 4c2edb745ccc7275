package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestFenceAndWatch defines fences with the command line, moves an entity
// through them and follows the feed: the transitions in order, resumed
// after a sequence, and as JSON lines.
func TestFenceAndWatch(t *testing.T) {
	url := startDev(t)
	mustContain(t, "fence put", ok(t, url, "fence", "put", "depot", "--bbox", "52.0,13.0,52.1,13.1"), "created fence depot")
	mustContain(t, "fence put again", ok(t, url, "fence", "put", "depot", "--bbox", "52.0,13.0,52.1,13.1"), "replaced fence depot")
	mustContain(t, "fence put circle", ok(t, url, "fence", "put", "yard", "--circle", "48.0,2.0,500", "--report", "enter"), "created fence yard")
	mustContain(t, "fence list", ok(t, url, "fence", "list"), `"depot"`, `"yard"`)
	mustContain(t, "fence get", ok(t, url, "fence", "get", "yard"), `"circle"`)

	ok(t, url, "put", "7", "51.0", "13.05")  // outside both
	ok(t, url, "put", "7", "52.05", "13.05") // enters depot
	ok(t, url, "put", "7", "48.0", "2.001")  // exits depot, enters yard

	out := ok(t, url, "watch", "--count", "3")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.Contains(lines[1], "enter") || !strings.Contains(lines[1], "depot") ||
		!strings.Contains(lines[2], "exit") || !strings.Contains(lines[3], "yard") {
		t.Fatalf("watch --count 3:\n%s", out)
	}
	// Resume after the first: the other two.
	first := strings.Fields(lines[1])[0]
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(ok(t, url, "--json", "watch", "--after", first, "--count", "2")), "\n") {
		var n notification
		if err := json.Unmarshal([]byte(l), &n); err != nil {
			t.Fatalf("watch --json line %q: %v", l, err)
		}
		got = append(got, n.Type+" "+n.Fence)
	}
	if strings.Join(got, ",") != "exit depot,enter yard" {
		t.Fatalf("watch --after %s: %v", first, got)
	}
	if got := queryIDs(t, url, "near", "48", "2", "1000"); len(got) != 1 {
		t.Fatalf("the entity is not where the feed says: %v", got)
	}

	r := cli(t, url, "", "fence", "put", "bad")
	if r.code != 2 || !strings.Contains(r.stderr, "one of --bbox, --circle and --file") {
		t.Errorf("fence put without a shape: exit %d, stderr %q", r.code, r.stderr)
	}
	r = cli(t, url, "", "fence", "put", "x y", "--bbox", "52,13,53,14")
	if r.code != 1 || !strings.Contains(r.stderr, "120 INVALID_FENCE") {
		t.Errorf("fence put with a bad name: exit %d, stderr %q", r.code, r.stderr)
	}
	mustContain(t, "fence delete", ok(t, url, "fence", "delete", "yard"), "deleted fence yard")
	r = cli(t, url, "", "fence", "get", "yard")
	if r.code != 1 || !strings.Contains(r.stderr, "240 FENCE_NOT_FOUND") {
		t.Errorf("fence get of a deleted fence: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestWatchPositions follows a box's position stream with the command
// line while entities move: the one inside, then its deletion; and a
// refused area's error.
func TestWatchPositions(t *testing.T) {
	url := startDev(t)
	done := make(chan result, 1)
	go func() { done <- cli(t, url, "", "watch", "--positions", "52,13,53,14", "--count", "2") }()
	time.Sleep(300 * time.Millisecond)     // the stream opens before the writes
	ok(t, url, "put", "8", "51.0", "13.5") // outside
	ok(t, url, "put", "9", "52.5", "13.5") // inside
	ok(t, url, "delete", "9")
	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("watch --positions did not end")
	}
	if r.code != 0 {
		t.Fatalf("watch --positions: exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], "position") || !strings.Contains(lines[1], "52.5") || !strings.Contains(lines[2], "delete") {
		t.Fatalf("watch --positions:\n%s", r.stdout)
	}
	r = cli(t, url, "", "watch", "--positions", "nope")
	if r.code != 1 || !strings.Contains(r.stderr, "240 FENCE_NOT_FOUND") {
		t.Errorf("an unknown fence: exit %d, stderr %q", r.code, r.stderr)
	}
}
