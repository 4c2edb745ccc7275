package main

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/geoevent/geoevent/client"
	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/io/store"

	"github.com/geoevent/geoevent/internal/testproc"
)

// The fleet the damage tests write: damagedFleet entities of id Hi 9, each
// with damagedEvents/damagedFleet events. 540,000 events are 69 MB of log,
// past the 64 MiB at which a replica takes its first snapshot, whose
// history checkpoint a restart restores. Entity Lo 1 has the smallest
// keys: its oldest events are in the first data block of every table.
const (
	damagedFleet  = 1000
	damagedEvents = 540_000
)

var damagedEntity = core.Uint128{Hi: 9, Lo: 1}

// fillFleet inserts damagedEvents events, in batches of the most events a
// batch takes, each entity's at increasing server timestamps.
func fillFleet(ctx context.Context, t *testing.T, cl *client.Client) {
	t.Helper()
	for first := 0; first < damagedEvents; first += core.MaxBatchEvents {
		evs := make([]core.GeoEvent, core.MaxBatchEvents)
		for j := range evs {
			seq := uint64(first + j)
			evs[j] = core.GeoEvent{EntityID: core.Uint128{Hi: 9, Lo: 1 + seq%damagedFleet}, UserData: core.Uint128{Lo: seq},
				LatNano: 45_000_000_000 + int64(seq/damagedFleet)*1000, LonNano: 7_000_000_000}
		}
		if r, err := cl.Insert(ctx, evs); err != nil || !r.Committed {
			t.Fatalf("insert of events %d..: %v", first, err)
		}
	}
}

// startedCluster starts a cluster of n replicas and returns it and the
// replica that leads it.
func startedCluster(t *testing.T, n int) (*testproc.Cluster, int) {
	t.Helper()
	c := newCluster(t, n)
	return c, c.StartAll()
}

// historyOf pages through id's whole history.
func historyOf(ctx context.Context, cl *client.Client, id core.Uint128) ([]core.GeoEvent, error) {
	q := core.HistoryQuery{EntityID: id, Page: core.Page{Limit: 1000}}
	var out []core.GeoEvent
	for {
		page, err := cl.History(ctx, &q)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Events...)
		if !page.HasMore {
			return out, nil
		}
		q.Cursor = page.Cursor
	}
}

// waitFor waits until c's stderr holds s and returns the line holding it.
func waitFor(t *testing.T, c *testproc.Proc, s string, timeout time.Duration) string {
	t.Helper()
	for deadline := time.Now().Add(timeout); ; time.Sleep(20 * time.Millisecond) {
		for _, l := range strings.Split(c.Stderr(), "\n") {
			if strings.Contains(l, s) {
				return l
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q logged within %v; stderr:\n%s", s, timeout, testproc.Tail(c.Stderr(), 8<<10))
		}
	}
}

// damageTables flips 16 bytes inside the first data block of every table
// of the history checkpoints in dir (and so of the live store, whose
// tables are links to them), and returns the tables' names.
func damageTables(t *testing.T, dir string) []string {
	t.Helper()
	ssts, _ := filepath.Glob(filepath.Join(dir, "snapshot-*.history", "*.sst"))
	live, _ := filepath.Glob(filepath.Join(dir, "history", "*.sst"))
	seen := map[string]bool{}
	var names []string
	for _, f := range append(ssts, live...) {
		if seen[filepath.Base(f)] {
			continue // a link to a table damaged already
		}
		seen[filepath.Base(f)] = true
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 1024 {
			continue
		}
		for i := 200; i < 216; i++ {
			b[i] ^= 0x5a
		}
		fh, err := os.OpenFile(f, os.O_WRONLY, 0) // in place: its links see it
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fh.WriteAt(b[200:216], 200); err != nil {
			t.Fatal(err)
		}
		fh.Close()
		names = append(names, filepath.Base(f))
	}
	if len(names) == 0 {
		t.Fatalf("no history table in %s to damage", dir)
	}
	return names
}

// TestClusterRebuildsADamagedFollowerHistory damages the history tables of
// a stopped follower of three (its snapshot's checkpoint holds every
// event), restarts it, and has it read the damaged block: an upsert at an
// existing timestamp of the entity whose events the damaged blocks hold
// makes every replica read its store as it applies the entry. The follower
// logs the file and the key range, discards its storage and state and
// rebuilds from the leader's snapshot. Every read through its address,
// during and after, answers the right events or an error; once it has
// rebuilt, its own reads of its store meet no damage, and its history
// checkpoint holds the entity's history as written.
func TestClusterRebuildsADamagedFollowerHistory(t *testing.T) {
	ctx, c, leader, f, opts, cl := historyCluster(t)
	start := time.Now()
	fillFleet(ctx, t, cl)
	waitFor(t, c.Procs[f], "history checkpointed", 30*time.Second)
	waitFor(t, c.Procs[f], "snapshot written", 30*time.Second)
	waitFor(t, c.Procs[leader], "snapshot written", 30*time.Second) // it sends a rebuilt follower a snapshot
	t.Logf("%d events written in %v; follower %d has a snapshot", damagedEvents, time.Since(start).Round(time.Millisecond), f)
	want, err := historyOf(ctx, cl, damagedEntity)
	if err != nil || len(want) != damagedEvents/damagedFleet {
		t.Fatalf("history of %v before the damage: %d events, %v", damagedEntity, len(want), err)
	}
	other := core.Uint128{Hi: 9, Lo: 2}
	wantOther, err := historyOf(ctx, cl, other)
	if err != nil {
		t.Fatal(err)
	}

	c.Kill(f)
	damaged := damageTables(t, c.Dirs[f])
	t.Logf("damaged tables %v of follower %d", damaged, f)
	c.Start(f)
	viaF := c.Client([]string{c.Addrs[f]}, opts)
	check := func(when string, want []core.GeoEvent) {
		got, err := historyOf(ctx, viaF, damagedEntity)
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: follower %d answered a wrong history of %d events (want %d)", when, f, len(got), len(want))
		}
	}
	check("after the restart", want)

	// The upsert replaces the entity's oldest event: applying it reads the
	// damaged block on the follower.
	ev := want[0]
	ev.LatNano += 123_456
	ev.UserData = core.Uint128{Lo: 999_999_999}
	upsertAt := time.Now()
	if r, err := cl.Upsert(ctx, []core.GeoEvent{ev}); err != nil || !r.Committed {
		t.Fatalf("upsert at the oldest timestamp: %v", err)
	}
	if want, err = historyOf(ctx, cl, damagedEntity); err != nil || len(want) != damagedEvents/damagedFleet ||
		want[0].TimestampNS != ev.TimestampNS || want[0].LatNano != ev.LatNano || want[0].UserData != ev.UserData {
		t.Fatalf("history after the upsert: %d events, %v", len(want), err)
	}
	line := waitFor(t, c.Procs[f], "the history store is damaged", 20*time.Second)
	named := false
	for _, n := range damaged {
		named = named || strings.Contains(line, n)
	}
	if !named || !strings.Contains(line, "entity "+damagedEntity.String()+" at ") {
		t.Fatalf("the damage report names none of the damaged tables %v or no key range: %s", damaged, line)
	}
	t.Logf("follower %d logged: %s", f, line)
	check("while rebuilding", want)

	// It rebuilds: the leader sends its log or a snapshot, and a leader of
	// a later term ends the repair.
	for deadline := time.Now().Add(40 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		check("while rebuilding", want)
		hs, _, err := store.LoadHardState(c.Dirs[f])
		if err == nil && !hs.Repairing && strings.Contains(c.Procs[f].Stderr(), "discarded the history store") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("follower %d did not finish rebuilding within 40 s: hard state %+v, %v", f, hs, err)
		}
	}
	t.Logf("follower %d rebuilt %v after the upsert (%s)", f, time.Since(upsertAt).Round(time.Millisecond),
		map[bool]string{true: "from a snapshot", false: "from the log"}[strings.Contains(c.Procs[f].Stderr(), "installed the history of the leader's snapshot")])

	// Its store answers its own reads now: an upsert at another
	// entity's oldest timestamp, which every replica applies reading its
	// store, commits, and the follower reports no damage.
	ev2 := wantOther[0]
	ev2.LatNano += 1000
	if r, err := cl.Upsert(ctx, []core.GeoEvent{ev2}); err != nil || !r.Committed {
		t.Fatalf("upsert after the rebuild: %v", err)
	}
	check("after the rebuild", want)

	// Its rebuilt store holds the entity's older events as written (its
	// latest is memory's, in the snapshot): the checkpoint of the leader's
	// snapshot it installed, read once every replica has stopped (the
	// checkpoint, not the live store, is what a restart keeps: pebble's
	// WAL is off).
	for i := range c.Procs {
		c.Procs[i].Stop(syscall.SIGTERM)
	}
	if n := strings.Count(c.Procs[f].Stderr(), "the history store is damaged"); n != 1 {
		t.Fatalf("follower %d reported damage %d times, want once", f, n)
	}
	_, v, cp := latestCheckpoint(t, c.Dirs[f])
	got, _, err := v.Range(core.HistoryRange{EntityID: damagedEntity, UntilNS: ^uint64(0), Limit: 10_000}, nil)
	if older := want[:len(want)-1]; err != nil || !reflect.DeepEqual(got, older) {
		t.Fatalf("the rebuilt follower %d's checkpoint %s holds %d events of %v (%v); want its %d older ones", f, cp, len(got), damagedEntity, err, len(older))
	}
	t.Logf("the rebuilt follower %d's checkpoint %s holds the entity's %d older events as written", f, cp, len(got))
}

// TestLoneReplicaStopsOnADamagedHistory: a replica of one whose history
// tables are damaged answers a read of the damaged entity with an error,
// never its events, and stops with a message naming the file and the key
// range and saying to restore from a backup.
func TestLoneReplicaStopsOnADamagedHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	data := t.TempDir()
	addr := testproc.FreeAddr(t)
	srv := testproc.StartDev(t, testproc.DevOptions{Dir: data, Addr: addr, HTTP: true})
	cl := srv.Client(devClientOptions)
	fillFleet(ctx, t, cl)
	waitFor(t, srv.Proc, "snapshot written", 30*time.Second)
	want, err := historyOf(ctx, cl, damagedEntity)
	if err != nil {
		t.Fatal(err)
	}
	cl.Close()
	srv.Stop(syscall.SIGTERM)
	damaged := damageTables(t, data)

	srv = testproc.StartDev(t, testproc.DevOptions{Dir: data, Addr: addr, HTTP: true})
	cl = srv.Client(client.Options{DisableRetries: true, TotalTimeout: 5 * time.Second})
	got, err := historyOf(ctx, cl, damagedEntity)
	if err == nil {
		if reflect.DeepEqual(got, want) {
			t.Fatalf("the damaged blocks were not read (damaged %v)", damaged)
		}
		t.Fatalf("a damaged history answered %d events", len(got))
	}
	select {
	case <-srv.Done():
	case <-time.After(15 * time.Second):
		t.Fatalf("the replica did not stop; stderr:\n%s", testproc.Tail(srv.Stderr(), 8<<10))
	}
	if code := srv.ExitCode(); code == 0 {
		t.Fatal("the replica stopped with exit code 0")
	}
	line := waitFor(t, srv.Proc, "no peer to rebuild it from", time.Second)
	named := false
	for _, n := range damaged {
		named = named || strings.Contains(line, n)
	}
	if !named || !strings.Contains(line, "entity "+damagedEntity.String()+" at ") || !strings.Contains(line, "restore the data directory from a backup") {
		t.Fatalf("the stop names none of the damaged tables %v, no key range or no remedy: %s", damaged, line)
	}
	t.Logf("read answered %v; the replica stopped: %s", err, line)
}
