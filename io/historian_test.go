package io

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/replica"
)

// history reads entity i's whole history (one page of up to 1,000).
func (c *rawClient) history(i int) []core.GeoEvent {
	c.t.Helper()
	r := c.call(core.OpEntityHistory, &core.HistoryQuery{EntityID: entity(i), Page: core.Page{Limit: core.MaxQueryLimit}}).(*core.QueryResult)
	return r.Events
}

// A server's older events are in its history store on disk: they survive
// restarts, recovered from the snapshot's history checkpoint and the log
// above it, and imports between stored events (which read the store
// before they write) are told from duplicates after a restart too.
func TestHistorySurvivesRestarts(t *testing.T) {
	dir := formatDir(t)
	opts := Options{}
	opts.Replica.SnapshotEvery = 7 // snapshots, and entries after the last
	s := serve(t, dir, opts)
	c := dial(t, s.Addr())
	c.register(testCluster)
	const entities, rounds = 3, 20
	for r := range rounds {
		for i := range entities {
			ev := event(i)
			ev.LatNano += int64(r)
			c.insert(ev)
		}
	}
	want := make([][]core.GeoEvent, entities)
	for i := range entities {
		want[i] = c.history(i)
		if len(want[i]) != rounds {
			t.Fatalf("entity %d has %d events, want %d", i, len(want[i]), rounds)
		}
	}
	s.stop(t)
	cps, _ := filepath.Glob(filepath.Join(dir, "snapshot-*.history"))
	if len(cps) == 0 {
		t.Fatal("no history checkpoint beside the snapshots")
	}

	for restart := range 2 {
		s = serve(t, dir, opts)
		c = dial(t, s.Addr())
		c.register(testCluster)
		for i := range entities {
			got := c.history(i)
			if len(got) != len(want[i]) {
				t.Fatalf("restart %d: entity %d has %d events, want %d", restart, i, len(got), len(want[i]))
			}
			for k := range got {
				if got[k] != want[i][k] {
					t.Fatalf("restart %d: entity %d event %d is %+v, want %+v", restart, i, k, got[k], want[i][k])
				}
			}
		}
		// An import at the key of a stored older event is a duplicate;
		// one between two stored events is new.
		dup := want[0][3]
		dup.CellID = 0
		r := c.call(core.OpInsert, &core.InsertRequest{Events: []core.GeoEvent{dup}}).(*core.InsertReply)
		if r.Committed || r.Results[0].Code != core.EventExists.Code {
			t.Fatalf("restart %d: importing a stored event: %+v", restart, r)
		}
		if restart == 0 {
			between := want[0][3]
			between.CellID, between.TimestampNS = 0, between.TimestampNS+1
			c.insert(between)
			want[0] = append(want[0][:4], append([]core.GeoEvent{c.history(0)[4]}, want[0][4:]...)...)
		}
		s.stop(t)
	}
	if _, err := os.Stat(filepath.Join(dir, liveHistoryDir)); err != nil {
		t.Fatalf("no live history store: %v", err)
	}
}

// A leader's history travels as a stream of its checkpoint's files, read
// a chunk at a time: a follower's historian writes the chunks in order
// (refusing one out of order, and starting over after a damaged one),
// installs the stream in queue order and checkpoints it for the snapshot;
// the follower's store then holds exactly the leader's.
func TestHistoryStreamInstalls(t *testing.T) {
	lg := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	open := func() *historian {
		dir := t.TempDir()
		st, err := recoverHistory(dir, replica.Recovered{}, 1, 0, lg)
		if err != nil {
			t.Fatal(err)
		}
		h := newHistorian(dir, st, lg)
		go h.run()
		t.Cleanup(func() { h.close(); <-h.exited })
		return h
	}
	leader, follower := open(), open()
	var writes []core.HistoryWrite
	for i := range 5 {
		for k := range 3000 {
			ev := event(i)
			ev.TimestampNS = uint64(1e18) + uint64(k)
			writes = append(writes, core.HistoryWrite{Kind: core.HistoryPut, EntityID: ev.EntityID, TS: ev.TimestampNS, Event: ev})
		}
	}
	leader.push(histOp{kind: histWrite, index: 1, writes: writes})
	opened := make(chan streamOpened, 1)
	leader.push(histOp{kind: histStreamOpen, index: 7, opened: opened})
	o := <-opened
	if o.err != nil || o.size <= 0 {
		t.Fatalf("open: %d bytes, %v", o.size, o.err)
	}
	// Writes after the stream was taken are not in it.
	leader.push(histOp{kind: histWrite, index: 2, writes: []core.HistoryWrite{{Kind: core.HistoryPut, EntityID: entity(8), TS: 5, Event: core.GeoEvent{EntityID: entity(8), TimestampNS: 5}}}})
	type result struct {
		data []byte
		ok   bool
	}
	call := func(h *historian, op histOp) result {
		got := make(chan result, 1)
		op.streamDone = func(b []byte, ok bool) func() { got <- result{b, ok}; return func() {} }
		h.push(op)
		return <-got
	}
	const chunk = 8 << 10
	read := func(off uint64) []byte {
		r := call(leader, histOp{kind: histStreamRead, index: 7, offset: off, maxBytes: chunk})
		if !r.ok || len(r.data) == 0 || len(r.data) > chunk {
			t.Fatalf("read at %d: %d bytes, ok %v", off, len(r.data), r.ok)
		}
		return r.data
	}
	write := func(off uint64, b []byte) bool {
		return call(follower, histOp{kind: histStreamWrite, index: 7, offset: off, data: b}).ok
	}
	if r := call(leader, histOp{kind: histStreamRead, index: 6, offset: 0, maxBytes: chunk}); r.ok {
		t.Fatal("a stream read of another snapshot answered")
	}
	// A damaged chunk is refused, and so is what follows, until a chunk
	// at offset 0 starts over.
	first := read(0)
	bad := bytes.Clone(first)
	bad[0] ^= 1 // the magic
	if write(0, bad) {
		t.Fatal("a damaged header was taken")
	}
	if write(uint64(len(first)), read(uint64(len(first)))) {
		t.Fatal("a chunk after a refused one was taken")
	}
	chunks := 0
	for off := uint64(0); off < uint64(o.size); chunks++ {
		b := read(off)
		if !write(off, b) {
			t.Fatalf("the chunk at %d was refused", off)
		}
		if off > 0 && write(off, b) {
			t.Fatalf("the chunk at %d was taken twice", off)
		}
		off += uint64(len(b))
	}
	if chunks < 2 {
		t.Fatalf("a stream of %d bytes in %d chunks", o.size, chunks)
	}
	// Something the follower held before goes.
	follower.push(histOp{kind: histWrite, index: 1, writes: []core.HistoryWrite{{Kind: core.HistoryPut, EntityID: entity(9), TS: 5, Event: core.GeoEvent{EntityID: entity(9), TimestampNS: 5}}}})
	done := make(chan error, 1)
	follower.push(histOp{kind: histInstall, index: 7, result: done})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(follower.dir, checkpointDir(7))); err != nil {
		t.Fatalf("no checkpoint for the installed snapshot: %v", err)
	}
	if _, err := os.Stat(filepath.Join(follower.dir, stagingDir)); !os.IsNotExist(err) {
		t.Fatalf("the staging stays after the install: %v", err)
	}
	leader.push(histOp{kind: histStreamDrop, index: 7})
	if r := call(leader, histOp{kind: histStreamRead, index: 7, offset: 0, maxBytes: chunk}); r.ok {
		t.Fatal("a dropped stream answered")
	}
	if _, err := os.Stat(filepath.Join(leader.dir, streamDir)); !os.IsNotExist(err) {
		t.Fatalf("the dropped stream's checkpoint stays: %v", err)
	}
	// Installing again needs a stream again.
	follower.push(histOp{kind: histInstall, index: 7, result: done})
	if err := <-done; err == nil {
		t.Fatal("an install without a stream succeeded")
	}
	// The historians are idle now: their stores may be read here.
	v := follower.store.View()
	defer v.Close()
	var evs []core.GeoEvent
	for i := range 6 {
		got, _, err := v.Range(core.HistoryRange{EntityID: entity(i), UntilNS: ^uint64(0), Limit: 10_000}, nil)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, got...)
	}
	if len(evs) != len(writes) || follower.store.Applied() != 1 {
		t.Fatalf("the follower holds %d events of %d, applied %d", len(evs), len(writes), follower.store.Applied())
	}
}

// TestHistorianBoundsItsQueue: a write pushed while more than
// maxQueuedWrites are queued waits until the historian has applied them,
// and answers to the loop never wait for the loop.
func TestHistorianBoundsItsQueue(t *testing.T) {
	lg := zap.NewNop()
	dir := t.TempDir()
	st, err := recoverHistory(dir, replica.Recovered{}, 1, 0, lg)
	if err != nil {
		t.Fatal(err)
	}
	h := newHistorian(dir, st, lg)
	h.stallAfter = time.Minute // this test's historian is not stalled, only late
	running := false
	defer func() {
		h.close()
		if !running {
			go h.run()
		}
		<-h.exited
	}()
	batch := func(index uint64) []core.HistoryWrite {
		ws := make([]core.HistoryWrite, maxQueuedWrites/2)
		for i := range ws {
			ev := event(i)
			ev.TimestampNS = uint64(1e18) + index
			ws[i] = core.HistoryWrite{Kind: core.HistoryPut, EntityID: ev.EntityID, TS: ev.TimestampNS, Event: ev}
		}
		return ws
	}
	// The historian is not running: three batches fill the bound.
	for i := uint64(1); i <= 3; i++ {
		h.push(histOp{kind: histWrite, index: i, writes: batch(i)})
	}
	pushed := make(chan struct{})
	go func() {
		h.push(histOp{kind: histWrite, index: 4, writes: batch(4)})
		h.push(histOp{kind: histRead, token: 7, reads: []core.HistoryRead{{Kind: core.HistoryGet, EntityID: entity(1), TS: uint64(1e18) + 4}}})
		close(pushed)
	}()
	select {
	case <-pushed:
		t.Fatal("a write was queued past the bound")
	case <-time.After(200 * time.Millisecond):
	}
	running = true
	go h.run()
	select {
	case <-pushed:
	case <-time.After(20 * time.Second):
		t.Fatal("the write still waits after the historian ran")
	}
	deadline := time.After(20 * time.Second)
	for {
		select {
		case <-h.done.ready:
		case <-deadline:
			t.Fatal("no answer to the read")
		}
		for _, c := range h.done.take() {
			if c.err != nil || c.token != 7 || len(c.answers) != 1 || !c.answers[0].Found {
				t.Fatalf("answer %+v, want token 7 finding the fourth batch's event", c)
			}
			return
		}
	}
}

// TestHistorianStalledDoesNotHoldTheLoop: a store that makes no progress
// for stallAfter (a full disk stalls pebble) is stalled: writes past the
// bound are queued without waiting, so the loop and its reads go on.
func TestHistorianStalledDoesNotHoldTheLoop(t *testing.T) {
	lg := zap.NewNop()
	dir := t.TempDir()
	st, err := recoverHistory(dir, replica.Recovered{}, 1, 0, lg)
	if err != nil {
		t.Fatal(err)
	}
	h := newHistorian(dir, st, lg)
	h.stallAfter = 50 * time.Millisecond
	defer func() { h.close(); go h.run(); <-h.exited }() // run releases a push still waiting
	ws := make([]core.HistoryWrite, maxQueuedWrites+1)
	for i := range ws {
		ev := event(1)
		ev.TimestampNS = uint64(1e18) + uint64(i)
		ws[i] = core.HistoryWrite{Kind: core.HistoryPut, EntityID: ev.EntityID, TS: ev.TimestampNS, Event: ev}
	}
	h.push(histOp{kind: histWrite, index: 1, writes: ws}) // the historian never runs: past the bound
	pushed := make(chan struct{})
	go func() {
		for i := uint64(2); i <= 5; i++ {
			h.push(histOp{kind: histWrite, index: i, writes: ws[:1]})
		}
		close(pushed)
	}()
	select {
	case <-pushed:
	case <-time.After(5 * time.Second):
		t.Fatal("writes to a stalled store still wait after 5 s")
	}
}
