package main

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/geoevent/geoevent/client"
	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/internal/testproc"
	"github.com/geoevent/geoevent/io/history"
)

// TestWipedFollowerGetsTheHistoryStream: a follower of three whose data
// directory is wiped (formatted anew) while the leader compacts its log
// behind a snapshot gets the leader's snapshot and its history as a
// stream of checkpoint files, read and written a chunk at a time, with
// the progress in both logs; afterwards the history checkpoint it
// installed holds, for every entity sampled, the events the cluster
// answers, up to the snapshot's index.
func TestWipedFollowerGetsTheHistoryStream(t *testing.T) {
	ctx, c, leader, f, _, cl := historyCluster(t)
	// The follower is wiped while down, and the leader takes a snapshot
	// meanwhile: it compacts its log past what the follower holds (a
	// follower that answers keeps the log it needs), so the follower can
	// only get a snapshot.
	start := time.Now()
	fillFleet(ctx, t, cl)
	waitFor(t, c.Procs[leader], "snapshot written", 30*time.Second)
	c.Kill(f)
	if err := os.RemoveAll(c.Dirs[f]); err != nil {
		t.Fatal(err)
	}
	testproc.MustRun(t, nil, "replica", "format", "--cluster", "00000000-0000-0000-0000-0000c1057e20", "--replica", strconv.Itoa(f),
		"--replica-count", "3", "--data", c.Dirs[f])
	fillFleet(ctx, t, cl)
	for deadline := time.Now().Add(30 * time.Second); strings.Count(c.Procs[leader].Stderr(), "snapshot written") < 2; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the leader took no second snapshot within 30 s")
		}
	}
	t.Logf("%d events written in %v", 2*damagedEvents, time.Since(start).Round(time.Millisecond))
	sample := []core.Uint128{damagedEntity, {Hi: 9, Lo: 500}, {Hi: 9, Lo: damagedFleet}}
	want := map[core.Uint128][]core.GeoEvent{}
	for _, id := range sample {
		evs, err := historyOf(ctx, cl, id)
		if err != nil || len(evs) != 2*damagedEvents/damagedFleet {
			t.Fatalf("history of %v: %d events, %v", id, len(evs), err)
		}
		want[id] = evs
	}

	wiped := time.Now()
	c.Start(f)
	line := waitFor(t, c.Procs[f], "installed the history of the leader's snapshot", 60*time.Second)
	t.Logf("follower %d installed in %v: %s", f, time.Since(wiped).Round(time.Millisecond), line)
	sent := "" // by the replica that leads now
	for i, p := range c.Procs {
		if l := lineWith(p.Stderr(), `"msg":"sending the history stream"`); i != f && l != "" {
			sent, leader = l, i
		}
	}
	if sent == "" {
		t.Fatal("no replica logged sending the history stream")
	}
	got := waitFor(t, c.Procs[f], `"msg":"receiving the history stream"`, 10*time.Second)
	size := logInt(t, sent, "of")
	if size <= 4<<20 || logInt(t, got, "bytes") != size || !strings.Contains(sent, "rate") || !strings.Contains(got, "rate") {
		t.Fatalf("the progress logged: leader %q, follower %q", sent, got)
	}
	if rss := rssOf(c.Procs[leader].PID()); rss > 0 {
		t.Logf("a history stream of %d bytes (more than one 4 MiB chunk); the leader's resident memory %d MiB", size, rss>>20)
	}

	for i := range c.Procs {
		c.Procs[i].Stop(syscall.SIGTERM)
	}
	st, v, _ := latestCheckpoint(t, c.Dirs[f])
	// The checkpoint is the store as of the snapshot: each entity's
	// events up to there, the first fill's whole (written before the
	// wipe, so they came in the stream).
	if got, want := st.Applied(), uint64(logInt(t, line, "index")); got != want {
		t.Fatalf("follower %d's checkpoint holds the history to index %d, want the snapshot's %d", f, got, want)
	}
	for _, id := range sample {
		evs, _, err := v.Range(core.HistoryRange{EntityID: id, UntilNS: ^uint64(0), Limit: 10_000}, nil)
		if err != nil || len(evs) < damagedEvents/damagedFleet || !reflect.DeepEqual(evs, want[id][:len(evs)]) {
			t.Fatalf("follower %d's checkpoint holds %d events of %v (%v), not the first of the %d written", f, len(evs), id, err, len(want[id]))
		}
	}
}

// historyCluster starts a cluster of three for the history tests (which
// start real processes: skipped with -short) and returns a context that
// bounds the test, the cluster, its leader, a follower, the clients'
// options and a client of every replica.
func historyCluster(t *testing.T) (context.Context, *testproc.Cluster, int, int, client.Options, *client.Client) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts real processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	t.Cleanup(cancel)
	c, leader := startedCluster(t, 3)
	opts := client.Options{RequestTimeout: 2 * time.Second, TotalTimeout: 30 * time.Second,
		BaseBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, MaxRetries: 200}
	return ctx, c, leader, (leader + 1) % 3, opts, c.Client(c.Addrs, opts)
}

// latestCheckpoint opens a copy of the latest history checkpoint of the
// data directory dir (of a stopped replica) and returns it, a view of it
// and its name.
func latestCheckpoint(t *testing.T, dir string) (*history.Store, *history.View, string) {
	t.Helper()
	cps, _ := filepath.Glob(filepath.Join(dir, "snapshot-*.history"))
	if len(cps) == 0 {
		t.Fatalf("%s holds no history checkpoint", dir)
	}
	slices.Sort(cps)
	copyDir := filepath.Join(t.TempDir(), "history")
	if err := history.Restore(vfs.Default, cps[len(cps)-1], copyDir); err != nil {
		t.Fatal(err)
	}
	st, err := history.Open(vfs.Default, copyDir, history.Options{})
	if err != nil {
		t.Fatal(err)
	}
	v := st.View()
	t.Cleanup(func() { v.Close(); st.Close() })
	return st, v, filepath.Base(cps[len(cps)-1])
}

// lineWith returns the first line of s that holds sub ("": none).
func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// logInt reads the number of a zap console line's JSON field name.
func logInt(t *testing.T, line, name string) int64 {
	t.Helper()
	m := regexp.MustCompile(`"` + name + `":\s*(\d+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no %q in %q", name, line)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

// rssOf is the resident memory of process pid (0 where /proc does not
// tell).
func rssOf(pid int) int64 {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
