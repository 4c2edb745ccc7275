package io

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/geoevent/geoevent/client"
	"github.com/geoevent/geoevent/core"
)

// fleetBatch is one report of each of n entities (server timestamps): an
// insert whose every event but each entity's first joins a history.
func fleetBatch(n, round int) *core.InsertRequest {
	evs := make([]core.GeoEvent, n)
	for i := range evs {
		evs[i] = event(i)
		evs[i].LatNano += int64(round)
	}
	return &core.InsertRequest{Events: evs}
}

// metricValue is the value of the metric line name in set's exposition.
func metricValue(t *testing.T, set *metrics.Set, name string) float64 {
	t.Helper()
	var b strings.Builder
	set.WritePrometheus(&b)
	for _, line := range strings.Split(b.String(), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// While the history store is behind the log, the leader refuses new
// inserts with 212 CLUSTER_BUSY and goes on serving reads at once (its
// loop is not held); once the store has drained below the low mark, the
// refused request is admitted on its retry, and every acknowledged write
// is in the history.
func TestWritesAreRefusedWhileTheHistoryIsBehind(t *testing.T) {
	const entities, high, low = 500, 1200, 600
	gate := make(chan struct{}) // closed: the store writes, slowly
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	set := metrics.NewSet()
	s := serveWith(t, formatDir(t), Options{Addresses: []string{"127.0.0.1:0"}, Metrics: set}, func(s *Server) {
		s.admit.high, s.admit.low = high, low
		s.hist.beforeWrite = func() {
			<-gate
			time.Sleep(20 * time.Millisecond)
		}
	})
	t.Cleanup(open) // registered after the server's close, so run before it: the close waits for the historian
	c := dial(t, s.Addr())
	c.register(testCluster)
	reader := dial(t, s.Addr())
	reader.register(testCluster)
	lc := dialLocal(t, s.Server)
	localID := localSession(t, lc)

	// The first insert makes the entities, which writes nothing to the
	// store (it holds older events only). Then the store takes nothing:
	// each insert adds entities writes to its queue (each entity's latest
	// becomes an older event), until the queue passes the high mark.
	c.call(core.OpInsert, fleetBatch(entities, 0))
	acked := 1
	var refused *core.Error
	for round := 1; refused == nil; round++ {
		if round > high/entities+2 {
			t.Fatalf("%d inserts of %d events admitted with the store stopped (high mark %d)", round, entities, high)
		}
		c.sendRequest(core.OpInsert, fleetBatch(entities, round))
		h, p := c.recv()
		switch h.Type {
		case core.MsgReply:
			if _, v, opErr, err := core.DecodeReplyMessage(p); err != nil || opErr != nil || !v.(*core.InsertReply).Committed {
				t.Fatalf("insert %d: %v %v %+v", round, err, opErr, v)
			}
			acked++
		case core.MsgError:
			e, err := core.DecodeErrorMessage(p)
			if err != nil || h.Request != c.req {
				t.Fatalf("insert %d: %v (request %d, want %d)", round, err, h.Request, c.req)
			}
			refused = e
		}
	}
	if refused.Code != core.ClusterBusy.Code || !strings.Contains(refused.Message, "history store is behind") ||
		!strings.Contains(refused.Message, "retry") {
		t.Fatalf("the refusal: %v", refused)
	}
	if got := metricValue(t, set, `geoevent_writes_refused_total{reason="history_backlog"}`); got != 1 {
		t.Errorf("writes refused: %v, want 1", got)
	}
	if got := metricValue(t, set, `geoevent_history_backlog_writes`); got != float64((acked-1)*entities) {
		t.Errorf("history backlog: %v writes, want %d", got, (acked-1)*entities)
	}

	// Meanwhile reads, pings and the gateway's requests are answered at
	// once, and the gateway's writes are refused too.
	for i := range 20 {
		start := time.Now()
		if got := reader.latest(i); !got.Found {
			t.Fatalf("entity %d not found", i)
		}
		reader.ping()
		if took := time.Since(start); took > 100*time.Millisecond {
			t.Fatalf("a get-latest and a ping took %v while writes were refused", took)
		}
	}
	payload, err := core.AppendRequestMessage(nil, core.OpUpsert, fleetBatch(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	h, p, err := lc.Exchange(context.Background(), core.Header{ClientID: localID, Request: 1, Type: core.MsgRequest}, payload)
	if err != nil || h.Type != core.MsgError || h.Request != 1 {
		t.Fatalf("the gateway's upsert: %+v %v", h, err)
	}
	if e, _ := core.DecodeErrorMessage(p); e == nil || e.Code != core.ClusterBusy.Code {
		t.Fatalf("the gateway's upsert: %v", e)
	}
	// A deletion is a write too, but not refused.
	none := entity(entities + 7)
	if r := reader.call(core.OpDeleteEntities, &core.DeleteRequest{EntityIDs: []core.Uint128{none}}).(*core.DeleteReply); r.NotFound != 1 {
		t.Fatalf("delete: %+v", r)
	}

	// The store writes again (slowly): the refused request, resent under
	// its number, is admitted once the queue is below the low mark, and
	// later ones too.
	open()
	resent := 0
	for acked < high/entities+4 {
		p, err := core.AppendRequestMessage(nil, core.OpInsert, fleetBatch(entities, acked))
		if err != nil {
			t.Fatal(err)
		}
		c.send(core.Header{ClientID: c.session, Request: c.req, Type: core.MsgRequest}, p)
		h, rp := c.recv()
		if h.Type == core.MsgError {
			if e, _ := core.DecodeErrorMessage(rp); e == nil || e.Code != core.ClusterBusy.Code || resent > 200 {
				t.Fatalf("resent insert: %v (resent %d times)", e, resent)
			}
			resent++
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if _, v, opErr, err := core.DecodeReplyMessage(rp); err != nil || opErr != nil || !v.(*core.InsertReply).Committed {
			t.Fatalf("insert: %v %v %+v", err, opErr, v)
		}
		acked++
		c.req++
	}
	for i := range entities {
		if got := c.history(i); len(got) != acked {
			t.Fatalf("entity %d has %d events in its history, want %d (one per acknowledged insert)", i, len(got), acked)
		}
	}
	if got := metricValue(t, set, `geoevent_history_backlog_writes`); got != 0 {
		t.Errorf("history backlog after the reads: %v writes", got)
	}
}

// growsHistory picks out inserts and upserts of a session, and never
// panics on a frame.
func FuzzGrowsHistory(f *testing.F) {
	insert, _ := core.AppendRequestMessage(nil, core.OpInsert, fleetBatch(1, 0))
	id := entity(0)
	latest, _ := core.AppendRequestMessage(nil, core.OpGetLatest, &id)
	f.Add(uint8(core.MsgRequest), uint64(1), insert)
	f.Add(uint8(core.MsgRequest), uint64(0), insert)
	f.Add(uint8(core.MsgRequest), uint64(1), latest)
	f.Add(uint8(core.MsgRegister), uint64(1), []byte{byte(core.OpUpsert)})
	f.Add(uint8(core.MsgRequest), uint64(1), []byte{})
	f.Fuzz(func(t *testing.T, typ uint8, session uint64, payload []byte) {
		h := core.Header{Type: core.MessageType(typ), ClientID: session}
		got := growsHistory(h, payload)
		want := h.Type == core.MsgRequest && session != 0 && len(payload) > 0 &&
			(payload[0] == byte(core.OpInsert) || payload[0] == byte(core.OpUpsert))
		if got != want {
			t.Fatalf("growsHistory(%+v, % x) = %v", h, payload, got)
		}
	})
}

// A write that a follower forwards is judged by the leader's admission
// control too: while the leader's history store is behind, a follower's
// client gets 212 CLUSTER_BUSY through the follower, and its retry under
// the same request number is admitted once the store has caught up.
func TestForwardedWritesAreRefusedWhileTheHistoryIsBehind(t *testing.T) {
	const entities, high, low = 200, 500, 250
	addrs := freeAddrs(t, 3)
	gate := make(chan struct{}) // closed: the stores write
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	sets := make([]*metrics.Set, 3)
	for i := range sets {
		sets[i] = metrics.NewSet()
		serveWith(t, formatReplica(t, uint32(i), 3), Options{Addresses: addrs, Metrics: sets[i]}, func(s *Server) {
			s.admit.high, s.admit.low = high, low
			s.hist.beforeWrite = func() { <-gate }
		})
	}
	t.Cleanup(open) // registered after the servers' closes, so run before them
	// The leader, once every replica names the same one.
	primary := func(i int) int {
		cl, err := client.New([]string{addrs[i]}, client.Options{Cluster: testCluster, DisableRetries: true,
			ConnectTimeout: 300 * time.Millisecond, RequestTimeout: 300 * time.Millisecond, TotalTimeout: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if top, err := cl.Topology(context.Background()); err == nil && top.Primary < 3 {
			return int(top.Primary)
		}
		return -1
	}
	leader := -1
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if p := primary(0); p >= 0 && primary(1) == p && primary(2) == p {
			leader = p
			break
		}
	}
	if leader < 0 {
		t.Fatal("the replicas do not agree on a leader")
	}
	follower := (leader + 1) % 3
	tcp, err := net.ResolveTCPAddr("tcp", addrs[follower])
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, tcp)
	c.register(testCluster)

	// Each insert after the first queues entities history writes at
	// every replica, whose stores take none, until the leader's queue
	// passes the high mark.
	c.call(core.OpInsert, fleetBatch(entities, 0))
	var refused *core.Error
	round := 1
	for ; refused == nil; round++ {
		if round > high/entities+2 {
			t.Fatalf("%d inserts of %d events admitted through a follower with the stores stopped (high mark %d)", round, entities, high)
		}
		c.sendRequest(core.OpInsert, fleetBatch(entities, round))
		h, p := c.recv()
		if h.Type == core.MsgError {
			if refused, err = core.DecodeErrorMessage(p); err != nil || h.Request != c.req {
				t.Fatalf("insert %d: %v (request %d, want %d)", round, err, h.Request, c.req)
			}
		}
	}
	if refused.Code != core.ClusterBusy.Code || !strings.Contains(refused.Message, "history store is behind") {
		t.Fatalf("the refusal through the follower: %v", refused)
	}
	if got := metricValue(t, sets[leader], `geoevent_writes_refused_total{reason="history_backlog"}`); got != 1 {
		t.Errorf("the leader's writes refused: %v, want 1", got)
	}

	// Once the stores write again, the refused request, resent under its
	// number, is admitted.
	open()
	payload, err := core.AppendRequestMessage(nil, core.OpInsert, fleetBatch(entities, round-1))
	if err != nil {
		t.Fatal(err)
	}
	for resent := 0; ; resent++ {
		c.send(core.Header{ClientID: c.session, Request: c.req, Type: core.MsgRequest}, payload)
		h, p := c.recv()
		if h.Type == core.MsgReply {
			if _, v, opErr, err := core.DecodeReplyMessage(p); err != nil || opErr != nil || !v.(*core.InsertReply).Committed {
				t.Fatalf("the resent insert: %v %v %+v", err, opErr, v)
			}
			break
		}
		if e, _ := core.DecodeErrorMessage(p); e == nil || e.Code != core.ClusterBusy.Code || resent > 500 {
			t.Fatalf("the resent insert: %v (resent %d times)", e, resent)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := c.latest(0); !got.Found || got.Event.LatNano != event(0).LatNano+int64(round-1) {
		t.Fatalf("after the retry, entity 0: %+v", got)
	}
}
