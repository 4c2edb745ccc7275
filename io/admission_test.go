package io

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

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
