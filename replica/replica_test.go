package replica

import (
	"bytes"
	"testing"

	"github.com/geoevent/geoevent/core"
)

func ev(id uint64, lat, lon int64) core.GeoEvent {
	return core.GeoEvent{EntityID: core.Uint128{Lo: id}, LatNano: lat, LonNano: lon}
}

func insertReq(evs ...core.GeoEvent) *core.InsertRequest { return &core.InsertRequest{Events: evs} }

func latest(t *testing.T, n *node, conn core.ConnID, session uint64, id uint64) (core.GeoEvent, bool) {
	t.Helper()
	rp := n.call(conn, session, 0, core.OpGetLatest, &core.Uint128{Lo: id})
	if rp.err != nil {
		t.Fatalf("get latest: %v", rp.err)
	}
	lr := rp.value.(*core.LatestResult)
	return lr.Event, lr.Found
}

func TestWriteThenRead(t *testing.T) {
	n := newNode(t, Config{})
	s := n.register(1)
	rp := n.call(1, s, 1, core.OpInsert, insertReq(ev(7, 38_100_000_000, 13_360_000_000)))
	if rp.err != nil || !rp.value.(*core.InsertReply).Committed {
		t.Fatalf("insert: %+v", rp)
	}
	got, found := latest(t, n, 1, s, 7)
	if !found || got.LatNano != 38_100_000_000 || got.CellID == 0 {
		t.Fatalf("latest: %+v %v", got, found)
	}
	if got.TimestampNS < n.clock.real {
		t.Fatalf("timestamp %d is below the clock %d", got.TimestampNS, n.clock.real)
	}
}

func TestNoReplyBeforeDurable(t *testing.T) {
	n := newNode(t, Config{})
	s := n.register(1)
	n.send(1, s, 1, core.OpInsert, insertReq(ev(7, 1, 1)))
	if rs := n.replies(1); len(rs) != 0 {
		t.Fatalf("answered before the entry was durable: %+v", rs)
	}
	// A crash now loses the write, which was never acknowledged.
	n.restart()
	s2 := n.register(2)
	if _, found := latest(t, n, 2, s2, 7); found {
		t.Fatal("an unsynced, unacknowledged write survived a crash that lost it")
	}
}

func TestAcknowledgedWritesSurviveRestart(t *testing.T) {
	n := newNode(t, Config{})
	s := n.register(1)
	for i := uint64(1); i <= 20; i++ {
		if rp := n.call(1, s, uint32(i), core.OpUpsert, insertReq(ev(i, int64(i)*1000, 5))); rp.err != nil {
			t.Fatal(rp.err)
		}
	}
	before := n.r.Digest()
	n.restart()
	if n.r.Digest() != before {
		t.Fatal("state after restart differs")
	}
	// The session survived too: a retry of the last request is deduplicated.
	rp := n.call(1, s, 20, core.OpUpsert, insertReq(ev(20, 20_000, 5)))
	if rp.err != nil || n.r.Digest() != before {
		t.Fatalf("retry after restart: %+v", rp)
	}
}

func TestDuplicateRequestGetsCachedReply(t *testing.T) {
	n := newNode(t, Config{})
	s := n.register(1)
	first := n.call(1, s, 1, core.OpInsert, insertReq(ev(7, 1, 1)))
	digest := n.r.Digest()
	again := n.call(2, s, 1, core.OpInsert, insertReq(ev(7, 1, 1))) // a retry on another connection
	if again.err != nil || first.value.(*core.InsertReply).Results[0] != again.value.(*core.InsertReply).Results[0] {
		t.Fatalf("retry: %+v vs %+v", again, first)
	}
	if n.r.Digest() != digest {
		t.Fatal("a retried insert ran twice")
	}
	if rp := n.call(1, s, 0, core.OpUpsert, insertReq(ev(7, 1, 1))); rp.err == nil || rp.err.Code != core.StaleRequest.Code {
		t.Fatalf("older request number: %+v", rp)
	}
}

func TestRetryWhileInFlightIsAnsweredOnce(t *testing.T) {
	n := newNode(t, Config{})
	s := n.register(1)
	n.send(1, s, 1, core.OpInsert, insertReq(ev(7, 1, 1)))
	n.send(2, s, 1, core.OpInsert, insertReq(ev(7, 1, 1))) // the client timed out and retried elsewhere
	n.send(2, s, 2, core.OpInsert, insertReq(ev(8, 1, 1))) // a second request while one is in flight
	n.settle()
	r1, r2 := n.replies(1), n.replies(2)
	if len(r1) != 0 || len(r2) != 2 {
		t.Fatalf("replies: conn1 %d, conn2 %d", len(r1), len(r2))
	}
	if r2[0].err == nil || r2[0].err.Code != core.RequestInFlight.Code {
		t.Fatalf("second request in flight: %+v", r2[0])
	}
	if r2[1].err != nil || !r2[1].value.(*core.InsertReply).Committed {
		t.Fatalf("retried request: %+v", r2[1])
	}
}

// fiftyWrites registers sessions on connections 1..50 and sends one
// single-event write (op) on each, leaving every write's Sync in flight.
func fiftyWrites(t *testing.T, op core.Operation) *node { return writes(t, Config{}, 50, op) }

// writes starts a replica with cfg, registers sessions on connections
// 1..k and sends one single-event write (op) of entity c on each conn c,
// without settling.
func writes(t *testing.T, cfg Config, k int, op core.Operation) *node {
	n := newNode(t, cfg)
	var sessions []uint64
	for c := core.ConnID(1); c <= core.ConnID(k); c++ {
		sessions = append(sessions, n.register(c))
	}
	for i, s := range sessions {
		n.send(core.ConnID(i+1), s, 1, op, insertReq(ev(uint64(i+1), 1, 1)))
	}
	return n
}

// Every write goes to storage at once, with a Sync of its own, however
// many Syncs are in flight (storage may answer them all with one fsync:
// package io's group commit), and is answered only once a Sync that covers
// it completes: storage that made more durable does not let the replica
// answer writes that a later Sync covers.
func TestWritesSyncWithoutWaitingForTheSyncInFlight(t *testing.T) {
	n := fiftyWrites(t, core.OpInsert)
	if n.io.syncs != 50 || len(n.io.written) != 50 {
		t.Fatalf("%d syncs in flight and %d entries written, want 50 of each", n.io.syncs, len(n.io.written))
	}
	n.r.Synced(n.io.completeSync(), 1) // makes all 50 durable, but answers the first Sync only
	if len(n.replies(1)) != 1 || len(n.replies(2)) != 0 {
		t.Fatal("the first Sync covers only the first write, so only it may be answered")
	}
	n.settle()
	for c := core.ConnID(2); c <= 50; c++ {
		if rs := n.replies(c); len(rs) != 1 || rs[0].err != nil {
			t.Fatalf("conn %d: %+v", c, rs)
		}
	}
}

// One Synced may answer several Syncs (storage served them with one
// fsync): every write they cover is answered then, and a count larger than
// the Syncs in flight answers those there are.
func TestOneSyncedAnswersTheSyncsItCounts(t *testing.T) {
	n := fiftyWrites(t, core.OpUpsert)
	idx := n.io.completeSync()
	n.io.syncs -= 29 // the one fsync served 30 Syncs
	n.r.Synced(idx, 30)
	for c := core.ConnID(1); c <= 50; c++ {
		want := 0
		if c <= 30 {
			want = 1
		}
		if rs := n.replies(c); len(rs) != want || (want == 1 && rs[0].err != nil) {
			t.Fatalf("conn %d after 30 Syncs answered: %+v", c, rs)
		}
	}
	n.io.syncs = 0
	n.r.Synced(idx, 100) // the 20 left, not 100
	for c := core.ConnID(31); c <= 50; c++ {
		if rs := n.replies(c); len(rs) != 1 || rs[0].err != nil {
			t.Fatalf("conn %d after the rest: %+v", c, rs)
		}
	}
	n.r.Synced(idx, 1) // none in flight: nothing happens
	if err := n.r.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestSessionEviction(t *testing.T) {
	n := newNode(t, Config{MaxSessions: 2})
	a, b := n.register(1), n.register(2)
	n.call(2, b, 1, core.OpInsert, insertReq(ev(1, 1, 1))) // b is now more recent than a
	n.register(3)                                          // evicts a
	rp := n.call(1, a, 1, core.OpInsert, insertReq(ev(2, 1, 1)))
	if rp.err == nil || rp.err.Code != core.SessionExpired.Code {
		t.Fatalf("evicted session: %+v", rp)
	}
	if rp := n.call(2, b, 2, core.OpInsert, insertReq(ev(3, 1, 1))); rp.err != nil {
		t.Fatalf("kept session: %+v", rp)
	}
}

func TestBackpressure(t *testing.T) {
	n := writes(t, Config{MaxPendingEntries: 3}, 5, core.OpInsert)
	busy := 0
	for c := core.ConnID(1); c <= 5; c++ {
		for _, rp := range n.replies(c) {
			if rp.err != nil && rp.err.Code == core.ClusterBusy.Code && rp.err.Retryable {
				busy++
			}
		}
	}
	if busy != 2 {
		t.Fatalf("%d writes refused as busy, want 2", busy)
	}
	n.settle()
}

func TestSnapshotAndRecovery(t *testing.T) {
	n := newNode(t, Config{SnapshotEvery: 5})
	s := n.register(1)
	for i := uint64(1); i <= 12; i++ {
		n.call(1, s, uint32(i), core.OpUpsert, insertReq(ev(i, int64(i)*1000, 5)))
	}
	if n.io.snapshot == nil {
		t.Fatal("no snapshot taken")
	}
	if n.io.writes == 0 || n.io.encodes != 0 {
		// Periodic snapshots go straight to storage: no copy in memory.
		t.Fatalf("%d snapshots written to storage, %d encoded into memory; want them all written", n.io.writes, n.io.encodes)
	}
	if len(n.io.durable) >= 14 {
		t.Fatalf("the log was not compacted: %d entries", len(n.io.durable))
	}
	before := n.r.Digest()
	n.restart()
	if n.r.Digest() != before {
		t.Fatal("snapshot + log replay gives another state")
	}
	if rp := n.call(1, s, 13, core.OpUpsert, insertReq(ev(13, 1, 1))); rp.err != nil {
		t.Fatalf("session lost across a snapshot: %v", rp.err)
	}
}

func TestTimestampsIncreaseWhenTheClockGoesBack(t *testing.T) {
	n := newNode(t, Config{})
	s := n.register(1)
	var last uint64
	for i := uint32(1); i <= 5; i++ {
		n.clock.real -= 1_000_000_000 // the wall clock jumps back a second each time
		rp := n.call(1, s, i, core.OpInsert, insertReq(ev(1, 1, 1), ev(2, 2, 2)))
		for _, res := range rp.value.(*core.InsertReply).Results {
			if res.TimestampNS <= last {
				t.Fatalf("timestamp %d after %d", res.TimestampNS, last)
			}
			last = res.TimestampNS
		}
	}
	// Still after a restart.
	n.restart()
	s2 := n.register(2)
	rp := n.call(2, s2, 1, core.OpInsert, insertReq(ev(3, 1, 1)))
	if ts := rp.value.(*core.InsertReply).Results[0].TimestampNS; ts <= last {
		t.Fatalf("after restart: timestamp %d after %d", ts, last)
	}
}

func TestWrongClusterAndUnknownSession(t *testing.T) {
	n := newNode(t, Config{})
	n.r.Receive(1, core.Header{Type: core.MsgRegister}, core.AppendRegister(nil, core.Uint128{Lo: 99}))
	if rs := n.replies(1); len(rs) != 1 || rs[0].err == nil || rs[0].err.Code != core.WrongCluster.Code {
		t.Fatalf("wrong cluster: %+v", rs)
	}
	if rp := n.call(1, 12345, 1, core.OpStats, nil); rp.err == nil || rp.err.Code != core.SessionExpired.Code {
		t.Fatalf("unknown session: %+v", rp)
	}
}

func TestPeriodicCleanup(t *testing.T) {
	n := newNode(t, Config{CleanupEveryNS: 1_000_000_000})
	s := n.register(1)
	e := ev(1, 1, 1)
	e.TTLSeconds = 1
	n.call(1, s, 1, core.OpInsert, insertReq(e))
	n.clock.real += 2_000_000_000
	n.clock.mono += 2_000_000_000
	n.r.Tick()
	n.settle()
	rp := n.call(1, s, 0, core.OpStats, nil)
	if st := rp.value.(*core.Stats); st.EntityCount != 0 {
		t.Fatalf("stats after cleanup: %+v", st)
	}
	if n.r.sm.Stats(0).EntityCount != 0 { // judged at time 0 nothing has expired: the entity must be gone
		t.Fatal("the periodic cleanup did not remove the expired entity")
	}
}

// TestPeriodicCleanupWorksOffABacklog: when more entities have expired
// than one cleanup entry scans (10,000), the leader appends the next after
// 100 ms instead of the full interval, and goes back to the interval once
// a cleanup finds less than its budget. With nothing expired it appends
// none; an entity that expires is removed at the next tick once the
// interval since the last cleanup has passed.
func TestPeriodicCleanupWorksOffABacklog(t *testing.T) {
	n := newNode(t, Config{CleanupEveryNS: 10_000_000_000})
	s := n.register(1)
	const total = 25_000
	for first, req := 1, uint32(1); first <= total; first, req = first+10_000, req+1 {
		var evs []core.GeoEvent
		for id := first; id < first+10_000 && id <= total; id++ {
			e := ev(uint64(id), int64(id), 1)
			e.TTLSeconds = 1
			evs = append(evs, e)
		}
		if rp := n.call(1, s, req, core.OpInsert, insertReq(evs...)); rp.err != nil {
			t.Fatal(rp.err)
		}
	}
	stored := func() uint64 { return n.r.sm.Stats(0).EntityCount } // at time 0 nothing has expired
	pass := func(ns uint64) {
		n.clock.real += ns
		n.clock.mono += ns
		n.r.Tick()
		n.settle()
	}
	pass(10_000_000_000)
	if got := stored(); got != total-10_000 {
		t.Fatalf("after the first cleanup %d entities are stored, want %d", got, total-10_000)
	}
	pass(cleanupBacklogEveryNS)
	pass(cleanupBacklogEveryNS)
	if got := stored(); got != 0 {
		t.Fatalf("200 ms later %d entities are stored, want 0", got)
	}
	// The backlog is gone, and nothing else has expired: no cleanup entry
	// at all, even past the interval.
	last := n.r.lastIndex
	for range 300 {
		pass(cleanupBacklogEveryNS)
	}
	if n.r.lastIndex != last {
		t.Fatalf("%d entries appended with nothing expired", n.r.lastIndex-last)
	}
	// An entity that expires long after the last cleanup is removed at
	// the next tick; one that expires right after a cleanup waits for the
	// interval.
	a, b := ev(total+1, 1, 1), ev(total+2, 2, 2)
	a.TTLSeconds, b.TTLSeconds = 1, 3
	if rp := n.call(1, s, 9, core.OpInsert, insertReq(a, b)); rp.err != nil {
		t.Fatal(rp.err)
	}
	last = n.r.lastIndex
	for range 11 {
		pass(cleanupBacklogEveryNS)
	}
	if n.r.lastIndex != last+1 || stored() != 1 {
		t.Fatalf("1.1 s after: %d entries appended, %d entities stored; want a's cleanup", n.r.lastIndex-last, stored())
	}
	for range 89 { // to 10 s after the insert: a's cleanup came at 1.0-1.1 s
		pass(cleanupBacklogEveryNS)
	}
	if n.r.lastIndex != last+1 || stored() != 1 {
		t.Fatalf("within the interval: %d entries appended, %d entities stored", n.r.lastIndex-last, stored())
	}
	for range 12 { // to 11.2 s
		pass(cleanupBacklogEveryNS)
	}
	if n.r.lastIndex != last+2 || stored() != 0 {
		t.Fatalf("after the interval: %d entries appended, %d entities stored; want b's cleanup", n.r.lastIndex-last, stored())
	}
}

func TestTimestampsIncreaseAfterSnapshotRestart(t *testing.T) {
	n := newNode(t, Config{SnapshotEvery: 1000})
	s := n.register(1)
	var last uint64
	for i := uint32(1); i <= 4; i++ {
		rp := n.call(1, s, i, core.OpInsert, insertReq(ev(1, 1, 1)))
		last = rp.value.(*core.InsertReply).Results[0].TimestampNS
	}
	// Compact the whole log into the snapshot, then restart with the wall
	// clock an hour behind.
	n.io.saveSnapshot(n.r.applied, n.r.appliedTerm, n.r.encodeState())
	n.clock.real -= 3_600_000_000_000
	n.restart()
	rp := n.call(1, s, 5, core.OpInsert, insertReq(ev(2, 1, 1)))
	if ts := rp.value.(*core.InsertReply).Results[0].TimestampNS; ts <= last {
		t.Fatalf("after a snapshot restart: timestamp %d after %d", ts, last)
	}
	// Every entry's own timestamp (the time operations are judged at, TTL
	// expiry included) increases across the restart too.
	prev := uint64(0)
	if len(n.io.durable) != 2 {
		t.Fatalf("%d entries after the restart, want the no-op and the insert", len(n.io.durable))
	}
	for _, e := range n.io.durable {
		d, err := decodeEntry(e.Data)
		if err != nil {
			t.Fatal(err)
		}
		if d.timestamp <= prev || d.timestamp <= last-4 {
			t.Fatalf("entry %d has timestamp %d after %d (last event %d)", e.Index, d.timestamp, prev, last)
		}
		prev = d.timestamp
	}
}

// TestDuplicateEntryInLogAppliesOnce: a request can reach the log twice (a
// client retry that a new leader appended again); applying runs it once.
func TestDuplicateEntryInLogAppliesOnce(t *testing.T) {
	n := newNode(t, Config{})
	s := n.register(1)
	n.call(1, s, 1, core.OpInsert, insertReq(ev(7, 1, 1)))
	rec := n.io.crash()
	var dup core.LogEntry
	for _, e := range rec.Entries {
		if d, _ := decodeEntry(e.Data); d.kind == kindOperation && d.session == s {
			dup = e
		}
	}
	dup.Index = rec.Entries[len(rec.Entries)-1].Index + 1
	rec.Entries = append(rec.Entries, dup)
	r, err := New(n.cfg, n.io, n.clock, testRand(), rec)
	if err != nil {
		t.Fatal(err)
	}
	n.r = r
	n.settle()
	if st := n.r.sm.Stats(0); st.EventCount != 1 {
		t.Fatalf("%d events after a duplicated log entry, want 1", st.EventCount)
	}
}

// TestNoAnswerBeforeCaughtUp: after a restart, a read that arrives before
// the recovered entries are applied waits for them rather than miss
// acknowledged writes. Alone, the replica applies them without waiting for
// the new term's no-op to be durable (becomeLeader), a few entries an input
// (MaxApplyEntries).
func TestNoAnswerBeforeCaughtUp(t *testing.T) {
	n := newNode(t, Config{MaxApplyEntries: 1})
	s := n.register(1)
	for i := range uint32(3) {
		n.call(1, s, i+1, core.OpInsert, insertReq(ev(uint64(7+i), 1, 1)))
	}
	rec := n.io.crash()
	r, err := New(n.cfg, n.io, n.clock, testRand(), rec)
	if err != nil {
		t.Fatal(err)
	}
	n.r = r
	// The recovered entries are not all applied, and the no-op's Sync is
	// in flight; a read and a write arrive now.
	n.send(1, s, 0, core.OpGetLatest, &core.Uint128{Lo: 9})
	n.send(1, s, 4, core.OpInsert, insertReq(ev(10, 1, 1)))
	if rs := n.replies(1); len(rs) != 0 {
		t.Fatalf("answered before catching up: %+v", rs)
	}
	for n.r.Backlog() {
		n.r.ApplyMore()
	}
	// Applied, but the no-op is not durable: the read is answered, the
	// write waits for its own Sync.
	rs := n.replies(1)
	if len(rs) != 1 || rs[0].err != nil || !rs[0].value.(*core.LatestResult).Found {
		t.Fatalf("after catching up, before the no-op's Sync: %+v", rs)
	}
	n.settle()
	rs = n.replies(1)
	if len(rs) != 1 || rs[0].err != nil {
		t.Fatalf("the write: %+v", rs)
	}
}

func TestSnapshotByLogBytes(t *testing.T) {
	n := newNode(t, Config{SnapshotMinBytes: 4096})
	s := n.register(1)
	for i := uint32(1); n.io.snapshot == nil; i++ {
		if i > 100 {
			t.Fatal("no snapshot after well over 4 KiB of log")
		}
		n.call(1, s, i, core.OpInsert, insertReq(ev(uint64(i), 1, 1)))
	}
	// The next snapshot waits for max(4 KiB, snapshotLogRatio times the
	// state's records at the last one) of log, and not much more: an
	// entry here is well under 1 KiB.
	taken := n.io.snapIndex
	due := max(4096, snapshotLogRatio*n.r.snapRecords)
	if due == 4096 {
		t.Fatalf("setup: the state's records (%d bytes) do not set the interval", n.r.snapRecords)
	}
	for i := uint32(200); n.io.snapIndex == taken; i++ {
		before := n.r.bytesSince
		n.call(1, s, i, core.OpInsert, insertReq(ev(uint64(i), 1, 1)))
		switch {
		case n.io.snapIndex != taken && before+1024 < due:
			t.Fatalf("the second snapshot came after %d bytes of log, not %d", before, due)
		case n.r.bytesSince > due+1024:
			t.Fatal("the second snapshot is overdue")
		}
	}
}

// TestPreparedBatchLogsTheSameEntry: a batch whose cells IO filled in with
// PrepareRequest enters the log exactly as one the leader fills in itself;
// a frame that is not a batch is not touched.
func TestPreparedBatchLogsTheSameEntry(t *testing.T) {
	evs := []core.GeoEvent{ev(1, 38_100_000_000, 13_360_000_000), ev(2, -33_900_000_000, 151_200_000_000), ev(3, 91_000_000_000, 0)}
	payload, err := core.AppendRequestMessage(nil, core.OpInsert, insertReq(evs...))
	if err != nil {
		t.Fatal(err)
	}
	h := core.Header{Request: 1, Type: core.MsgRequest}
	entries := func(prepared bool) []byte {
		n := newNode(t, Config{})
		h.ClientID = n.register(1)
		p := bytes.Clone(payload)
		if prepared {
			e := PrepareRequest(h, p)
			if e == nil {
				t.Fatal("an insert batch was not prepared")
			}
			if !bytes.Equal(p, payload) {
				t.Fatal("preparing changed the frame")
			}
			if bytes.Equal(e[entryHeaderSize:], payload[1:]) {
				t.Fatal("preparing filled in no cell")
			}
			n.r.ReceivePrepared(1, h, p, e)
		} else {
			n.r.Receive(1, h, p)
		}
		n.settle()
		if rs := n.replies(1); len(rs) != 1 || rs[0].err != nil {
			t.Fatalf("replies %+v", rs)
		}
		last := n.io.durable[len(n.io.durable)-1]
		d, err := decodeEntry(last.Data)
		if err != nil {
			t.Fatal(err)
		}
		return d.payload
	}
	if a, b := entries(false), entries(true); !bytes.Equal(a, b) {
		t.Fatal("a prepared batch logged another entry than the leader's own")
	}
	stats, _ := core.AppendRequestMessage(nil, core.OpStats, nil)
	if PrepareRequest(h, stats) != nil || PrepareRequest(core.Header{Type: core.MsgRegister}, payload) != nil {
		t.Fatal("prepared a frame that is not a request batch")
	}
}

// A replica of a cluster of one keeps no data of applied entries in
// memory (only their index and term), and still recovers them from
// storage.
func TestSingleReplicaDropsAppliedData(t *testing.T) {
	n := newNode(t, Config{})
	s := n.register(1)
	for i := uint64(1); i <= 5; i++ {
		n.call(1, s, uint32(i), core.OpUpsert, insertReq(ev(i, int64(i)*1000, 5)))
	}
	if n.r.applied < 6 {
		t.Fatalf("applied %d", n.r.applied)
	}
	for idx := n.r.base + 1; idx <= n.r.applied; idx++ {
		if e := n.r.entryAt(idx); e.Data != nil || e.Term == 0 {
			t.Fatalf("applied entry %d: %d bytes of data, term %d", idx, len(e.Data), e.Term)
		}
	}
	before := n.r.Digest()
	n.restart()
	if n.r.Digest() != before {
		t.Fatal("a restart recovers another state")
	}
}

// With MaxApplyEntries set, an input applies that many committed entries
// and leaves the rest as a backlog (Backlog), which ApplyMore applies a
// part at a time, answering each write as it is applied, in log order.
func TestBacklogIsAppliedAPartPerInput(t *testing.T) {
	n := writes(t, Config{MaxApplyEntries: 7}, 20, core.OpInsert)
	idx := n.io.completeSync()
	n.io.syncs = 0
	n.r.Synced(idx, 20) // all 20 committed at once
	// The writes are answered in log order: part p answers those of
	// conns 7p+1 .. 7p+7.
	answered := func(part int) (k int) {
		for c := core.ConnID(1); c <= 20; c++ {
			rs := n.replies(c)
			switch {
			case len(rs) == 1 && rs[0].err == nil && (int(c)-1)/7 == part:
				k++
			case len(rs) != 0:
				t.Fatalf("part %d: conn %d: %+v", part, c, rs)
			}
		}
		return k
	}
	done := 0
	for part, want := range []int{7, 14, 20} {
		if done += answered(part); done != want {
			t.Fatalf("%d writes answered, want %d", done, want)
		}
		if backlog := want < 20; n.r.Backlog() != backlog {
			t.Fatalf("after %d answered: Backlog() = %v", want, !backlog)
		}
		n.r.ApplyMore()
	}
	if st := n.r.Status(); st.Applied != st.Commit {
		t.Fatalf("applied %d of %d", st.Applied, st.Commit)
	}
}
