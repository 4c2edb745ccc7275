package replica

import (
	"slices"
	"testing"

	"github.com/geoevent/geoevent/core"
)

// An import between an entity's stored events waits for the history store:
// applying pauses at its entry (no backlog to apply meanwhile) until the
// store's answer comes, which sees the writes before it. History pages are
// finished from the store, and both survive a restart (the store restored
// from the snapshot's checkpoint, the log above it replayed).
func TestHistoryReadsPauseApplying(t *testing.T) {
	n := newNode(t, Config{SnapshotEvery: 3})
	const conn = 1
	s := n.register(conn)
	now := n.clock.real
	id := core.Uint128{Hi: 7, Lo: 7}
	ev := func(ts uint64) core.GeoEvent {
		return core.GeoEvent{EntityID: id, TimestampNS: ts, LatNano: 1_000_000_000, LonNano: 2_000_000_000}
	}
	req := uint32(0)
	insert := func(ts uint64) *core.InsertReply {
		t.Helper()
		req++
		rp := n.call(conn, s, req, core.OpInsert, &core.InsertRequest{Events: []core.GeoEvent{ev(ts)}})
		if rp.err != nil {
			t.Fatalf("insert at %d: %v", ts, rp.err)
		}
		return rp.value.(*core.InsertReply)
	}
	t1, t2, t3 := now-3e9, now-2e9, now-1e9
	insert(t1)
	insert(t3)
	if n.io.histReads != 0 {
		t.Fatalf("%d history reads for writes that memory settles", n.io.histReads)
	}

	// The import between them: its entry commits, then waits.
	req++
	n.send(conn, s, req, core.OpInsert, &core.InsertRequest{Events: []core.GeoEvent{ev(t2)}})
	for n.io.syncs > 0 {
		n.r.Synced(n.io.completeSync(), 1)
	}
	for n.r.Backlog() {
		n.r.ApplyMore()
	}
	if st := n.r.Status(); n.io.histReads != 1 || st.Applied >= st.Commit || n.r.Backlog() {
		t.Fatalf("before the answer: %d history reads, applied %d of %d, backlog %v", n.io.histReads, st.Applied, st.Commit, n.r.Backlog())
	}
	if len(n.io.sent[conn]) != 0 {
		t.Fatal("answered before the history store did")
	}
	n.settle()
	if rs := n.replies(conn); len(rs) != 1 || rs[0].err != nil || !rs[0].value.(*core.InsertReply).Committed {
		t.Fatalf("the import: %+v", rs)
	}
	if r := insert(t1); r.Committed || r.Results[0].Code != core.EventExists.Code {
		t.Fatalf("importing a stored event again: %+v", r)
	}

	history := func() []uint64 {
		t.Helper()
		req++
		rp := n.call(conn, s, req, core.OpEntityHistory, &core.HistoryQuery{EntityID: id, Page: core.Page{Limit: 10}})
		if rp.err != nil {
			t.Fatal(rp.err)
		}
		var ts []uint64
		for _, e := range rp.value.(*core.QueryResult).Events {
			ts = append(ts, e.TimestampNS)
		}
		return ts
	}
	want := []uint64{t1, t2, t3}
	check := func(when string) {
		t.Helper()
		got := history()
		if len(got) != len(want) {
			t.Fatalf("%s: history %v, want %v", when, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: history %v, want %v", when, got, want)
			}
		}
	}
	check("before the restart")
	if n.io.snapHist == nil {
		t.Fatal("no snapshot saved its history")
	}
	n.restart()
	s = n.register(conn)
	req = 0
	check("after the restart")
}

// An answer that comes after the replica's state was replaced (its token
// no longer awaited) changes nothing.
func TestStaleHistoryAnswerIsDropped(t *testing.T) {
	n := newNode(t, Config{})
	applied := n.r.Status().Applied
	n.r.HistoryRead(12345, []core.HistoryAnswer{{Found: true}})
	if st := n.r.Status(); st.Applied != applied || n.r.Err() != nil {
		t.Fatalf("a stray answer: applied %d (was %d), err %v", st.Applied, applied, n.r.Err())
	}
}

// FirstHistoryRead names the first recovered entry that may read the
// store: an insert or upsert with a timestamp of its own, or a cleanup;
// never one whose events all take the server's time, nor other kinds.
func TestFirstHistoryRead(t *testing.T) {
	id := core.Uint128{Lo: 5}
	op := func(index uint64, o core.Operation, req any) core.LogEntry {
		t.Helper()
		payload, err := core.AppendRequest(nil, o, req)
		if err != nil {
			t.Fatal(err)
		}
		e := entry{kind: kindOperation, timestamp: 1e18, session: 1, request: uint32(index), op: o, payload: payload}
		return core.LogEntry{Index: index, Term: 1, Data: e.appendTo(nil)}
	}
	fresh := &core.InsertRequest{Events: []core.GeoEvent{{EntityID: id}, {EntityID: core.Uint128{Lo: 6}}}}
	own := &core.InsertRequest{Events: []core.GeoEvent{{EntityID: id}, {EntityID: id, TimestampNS: 7e17}}}
	noop := entry{kind: kindNoop, timestamp: 1e18}
	base := []core.LogEntry{
		{Index: 10, Term: 1, Data: noop.appendTo(nil)},
		op(11, core.OpInsert, fresh),
		op(12, core.OpUpsert, fresh),
		{Index: 13, Term: 1, Data: []byte{1, 2}}, // damaged: applying reports it, reads nothing
	}
	if got := FirstHistoryRead(base); got != 0 {
		t.Fatalf("server-timestamped writes: first read %d, want 0", got)
	}
	for _, c := range []struct {
		name string
		le   core.LogEntry
	}{
		{"insert with its own timestamp", op(14, core.OpInsert, own)},
		{"upsert with its own timestamp", op(14, core.OpUpsert, own)},
		{"cleanup", op(14, core.OpCleanupExpired, &core.CleanupRequest{})},
	} {
		entries := append(slices.Clone(base), c.le, op(15, core.OpInsert, own))
		if got := FirstHistoryRead(entries); got != 14 {
			t.Errorf("%s: first read %d, want 14", c.name, got)
		}
	}
}

// KnownCommitted: a lone replica's whole log, a cluster's up to its hard
// state's commit, never below the snapshot.
func TestKnownCommitted(t *testing.T) {
	rec := Recovered{SnapshotIndex: 10, HardState: core.HardState{Commit: 12}}
	if got := rec.KnownCommitted(3); got != 10 {
		t.Fatalf("no entries: %d, want the snapshot's 10", got)
	}
	for i := uint64(11); i <= 15; i++ {
		rec.Entries = append(rec.Entries, core.LogEntry{Index: i, Term: 1})
	}
	if got := rec.KnownCommitted(1); got != 15 {
		t.Fatalf("lone replica: %d, want 15", got)
	}
	if got := rec.KnownCommitted(3); got != 12 {
		t.Fatalf("cluster: %d, want 12", got)
	}
	rec.HardState.Commit = 4
	if got := rec.KnownCommitted(5); got != 10 {
		t.Fatalf("cluster, commit below the snapshot: %d, want 10", got)
	}
}
