package io

import (
	"bytes"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/geoevent/geoevent/core"
)

// openUnrun opens a one-replica server with metrics in set, whose loop
// does not run: the test calls what the loop would.
func openUnrun(t testing.TB, set *metrics.Set) *Server {
	dir := filepath.Join(t.TempDir(), "data")
	if err := Format(dir, ClusterInfo{Cluster: testCluster, ReplicaIndex: 0, ReplicaCount: 1}); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, Options{Addresses: []string{"127.0.0.1:0"}, Metrics: set})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestHealthAndGauges: before the loop publishes, Health is zero and the
// gauges say so (no leader, no heartbeat); once published, Health and
// the gauges give the replica's state, PrevCommit the commit of the
// publication before; frames are counted by operation, a sessionless
// read's too.
func TestHealthAndGauges(t *testing.T) {
	set := metrics.NewSet()
	s := openUnrun(t, set)
	if h := s.Health(); !h.At.IsZero() || h.Running {
		t.Fatalf("before the loop: %+v", h)
	}
	scrape := func() string {
		var b strings.Builder
		set.WritePrometheus(&b)
		return b.String()
	}
	for _, want := range []string{"geoevent_raft_leader -1\n", "geoevent_loop_heartbeat_age_seconds -1\n", `geoevent_raft_role{role="leader"} 0` + "\n"} {
		if !strings.Contains(scrape(), want) {
			t.Errorf("before the loop, no %q in:\n%s", want, scrape())
		}
	}
	s.publish(time.Now())
	s.publish(time.Now())
	h := s.Health()
	if !h.Running || h.Status.NodeID != "replica-0" || h.Status.ClusterID != testCluster || h.PrevCommit != h.Commit {
		t.Fatalf("published: %+v", h)
	}
	hd := core.Header{Type: core.MsgRequest, ClientID: 5}
	s.prepare(hd, []byte{byte(core.OpQueryRadius)})
	s.prepare(core.Header{Type: core.MsgRequest}, core.AppendSessionlessRead(nil, testCluster, []byte{byte(core.OpQueryRadius)}))
	s.prepare(core.Header{Type: core.MsgRegister}, nil)
	s.prepare(hd, nil)         // empty: not counted
	s.prepare(hd, []byte{250}) // no such operation: not counted
	out := scrape()
	for _, want := range []string{`geoevent_requests_total{op="query_radius"} 2`, "geoevent_session_registers_total 1", "geoevent_raft_term "} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}

// BenchmarkPublish is the loop's cost per tick for Health (every 10 ms).
func BenchmarkPublish(b *testing.B) {
	s := openUnrun(b, metrics.NewSet())
	now := time.Now()
	s.publish(now)
	for b.Loop() {
		s.publish(now) // the data counts are not refreshed: as on most ticks
	}
}

// BenchmarkCountFrame is a connection reader's cost per client frame.
func BenchmarkCountFrame(b *testing.B) {
	m := openUnrun(b, metrics.NewSet()).metrics
	h := core.Header{Type: core.MsgRequest, ClientID: 5}
	p := []byte{byte(core.OpUpsert)}
	for b.Loop() {
		m.countFrame(h, p)
	}
}

// FuzzCountFrame: any client frame is counted or passed over, never a
// panic.
func FuzzCountFrame(f *testing.F) {
	f.Add(uint8(core.MsgRequest), uint64(0), core.AppendSessionlessRead(nil, testCluster, []byte{byte(core.OpPing)}))
	f.Add(uint8(core.MsgRequest), uint64(3), []byte{byte(core.OpInsert), 1, 2})
	f.Add(uint8(core.MsgRequest), uint64(0), []byte{1})
	f.Add(uint8(core.MsgRegister), uint64(0), []byte{})
	m := newServerMetrics(&Server{}, metrics.NewSet())
	f.Fuzz(func(t *testing.T, typ uint8, client uint64, payload []byte) {
		m.countFrame(core.Header{Type: core.MessageType(typ), ClientID: client}, payload)
	})
}

// TestDiskMetrics: a served replica that takes snapshots records its
// fsyncs (one or more entries each), its snapshot files and their size,
// and the requests by operation.
func TestDiskMetrics(t *testing.T) {
	dir := formatDir(t)
	set := metrics.NewSet()
	opts := Options{SegmentBytes: 512, Metrics: set}
	opts.Replica.SnapshotEvery = 5
	const n = 40
	writeAndStop(t, dir, opts, n)
	var b strings.Builder
	set.WritePrometheus(&b)
	value := func(name string) float64 {
		for _, line := range strings.Split(b.String(), "\n") {
			if v, ok := strings.CutPrefix(line, name+" "); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatalf("%s: %v", line, err)
				}
				return f
			}
		}
		t.Fatalf("no %s in:\n%s", name, b.String())
		return 0
	}
	fsyncs, entries := value("geoevent_log_fsync_seconds_count"), value("geoevent_log_entries_per_fsync_sum")
	if fsyncs < 1 || entries < n || value("geoevent_log_entries_per_fsync_count") > fsyncs {
		t.Errorf("%v fsyncs of %v entries (%v counted), want at least %d entries", fsyncs, entries, value("geoevent_log_entries_per_fsync_count"), n)
	}
	if value("geoevent_snapshot_write_seconds_count") < 1 || value("geoevent_snapshot_bytes") <= 0 {
		t.Errorf("snapshots: %v written, the last %v bytes", value("geoevent_snapshot_write_seconds_count"), value("geoevent_snapshot_bytes"))
	}
	if got := value(`geoevent_requests_total{op="insert"}`); got != n {
		t.Errorf("%v inserts counted, want %d", got, n)
	}
	if value("geoevent_history_disk_bytes") <= 0 {
		t.Errorf("the history store's files: %v bytes", value("geoevent_history_disk_bytes"))
	}
}

// TestRequestLatency: a request's latency is recorded by operation once
// its answer is written, over TCP (pings sent many to a write, answered
// many to a writev) and over an in-process connection; the walk over a
// write's pieces finds replies and errors, several to a piece, and stops
// at a header split across pieces.
func TestRequestLatency(t *testing.T) {
	set := metrics.NewSet()
	dir := formatDir(t)
	s := serve(t, dir, Options{Metrics: set})
	c := dial(t, s.Addr())
	c.register(testCluster)
	const pings = 40
	var out []byte
	for range pings {
		c.req++
		out = core.AppendFrame(out, core.Header{ClientID: c.session, Request: c.req, Type: core.MsgRequest}, []byte{byte(core.OpPing)})
	}
	if _, err := c.nc.Write(out); err != nil {
		t.Fatal(err)
	}
	for range pings {
		if h, _ := c.recv(); h.Type != core.MsgReply {
			t.Fatalf("reply type %v", h.Type)
		}
	}
	lc, err := s.DialLocal(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	if _, _, err := lc.Exchange(t.Context(), core.Header{Request: 1, Type: core.MsgRequest}, core.AppendSessionlessRead(nil, testCluster, []byte{byte(core.OpPing)})); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		var b strings.Builder
		set.WritePrometheus(&b)
		for _, line := range strings.Split(b.String(), "\n") {
			if v, ok := strings.CutPrefix(line, `geoevent_request_seconds_count{op="ping"} `); ok {
				n, _ := strconv.Atoi(v)
				return n
			}
		}
		return 0
	}
	// The writer records after its write returns: the client may read first.
	for deadline := time.Now().Add(5 * time.Second); count() < pings+1 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := count(); n != pings+1 {
		t.Fatalf("%d ping latencies recorded, want %d", n, pings+1)
	}

	m := &serverMetrics{latency: make([]*metrics.PrometheusHistogram, 256)}
	tm := newOpTimes(m)
	req := func(client uint64, r uint32) netFrame {
		return netFrame{h: core.Header{ClientID: client, Request: r, Type: core.MsgRequest}, payload: []byte{byte(core.OpPing)}}
	}
	tm.arrived([]netFrame{req(1, 1), req(1, 2), req(2, 1), {h: core.Header{ClientID: 3, Type: core.MsgRegister}}}, time.Now())
	reply := core.AppendFrame(nil, core.Header{ClientID: 1, Request: 1, Type: core.MsgReply}, []byte{1, 0, 0, 0})
	errFrame := core.AppendFrame(nil, core.Header{ClientID: 2, Request: 1, Type: core.MsgError}, make([]byte, 8))
	other := core.AppendFrame(nil, core.Header{ClientID: 1, Request: 9, Type: core.MsgReply}, []byte{1, 0, 0})
	tm.replies([][]byte{reply[:10], reply[10:], append(bytes.Clone(errFrame), other...)})
	if len(tm.keys) != 0 || len(tm.pending) != 3 {
		t.Fatalf("a header split across pieces: %d answers found, %d pending; want none found", len(tm.keys), len(tm.pending))
	}
	// A reply, then an error and another reply in one piece.
	tm.replies([][]byte{reply, append(bytes.Clone(errFrame), other...)})
	if len(tm.keys) != 2 || len(tm.pending) != 1 {
		t.Fatalf("%d answers found, %d left pending; want 2 and 1", len(tm.keys), len(tm.pending))
	}
	tm.written(time.Now())
}

// BenchmarkTimeRequest is what timing one request costs its connection's
// reader and writer together (arrived, replies, written), none of it on
// the loop.
func BenchmarkTimeRequest(b *testing.B) {
	s := openUnrun(b, metrics.NewSet())
	tm := newOpTimes(s.metrics)
	f := []netFrame{{h: core.Header{ClientID: 1, Type: core.MsgRequest}, payload: []byte{byte(core.OpPing)}}}
	reply := core.AppendFrame(nil, core.Header{ClientID: 1, Type: core.MsgReply}, []byte{byte(core.OpPing), 0, 0})
	pieces := [][]byte{reply}
	now := time.Now()
	for b.Loop() {
		tm.arrived(f, now)
		tm.replies(pieces)
		tm.written(now)
	}
}

// TestRequestErrors: binary-protocol answers with an error code, an error
// frame's or a reply's, are counted by code; answers without one are not.
func TestRequestErrors(t *testing.T) {
	set := metrics.NewSet()
	s := serve(t, formatDir(t), Options{Metrics: set})
	c := dial(t, s.Addr())
	c.register(testCluster)
	var out []byte
	c.req++ // a ping: answered, code 0
	out = core.AppendFrame(out, core.Header{ClientID: c.session, Request: c.req, Type: core.MsgRequest}, []byte{byte(core.OpPing)})
	c.req++ // an operation the table does not have
	out = core.AppendFrame(out, core.Header{ClientID: c.session, Request: c.req, Type: core.MsgRequest}, []byte{250})
	c.req++ // a session the replica never opened
	out = core.AppendFrame(out, core.Header{ClientID: c.session + 99, Request: c.req, Type: core.MsgRequest}, []byte{byte(core.OpPing)})
	if _, err := c.nc.Write(out); err != nil {
		t.Fatal(err)
	}
	want := map[core.Code]int{}
	for range 3 {
		h, p := c.recv()
		if code, ok := answerCode(core.AppendFrame(nil, h, p)); ok && code != core.OK.Code {
			want[code]++
		}
	}
	if len(want) == 0 {
		t.Fatal("no answer had an error code")
	}
	counted := func() map[core.Code]int {
		var b strings.Builder
		set.WritePrometheus(&b)
		got := map[core.Code]int{}
		for _, line := range strings.Split(b.String(), "\n") {
			rest, ok := strings.CutPrefix(line, `geoevent_request_errors_total{code="`)
			if !ok {
				continue
			}
			code, _, _ := strings.Cut(rest, `"`)
			_, v, _ := strings.Cut(rest, "} ")
			c, _ := strconv.Atoi(code)
			if n, _ := strconv.Atoi(v); n > 0 {
				got[core.Code(c)] = n
			}
		}
		return got
	}
	// The writer counts as it writes: the client may read first.
	got := counted()
	for deadline := time.Now().Add(5 * time.Second); !reflect.DeepEqual(got, want) && time.Now().Before(deadline); got = counted() {
		time.Sleep(time.Millisecond)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("errors counted %v, want %v (the answers' codes)", got, want)
	}
}
