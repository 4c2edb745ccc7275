package io

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/replica"
)

// Health is the replica's state as the event loop last published it, for
// health probes and metrics: reading it never waits for the loop, nor for
// a leader. The loop publishes it when it starts, on every tick (every
// Options.TickInterval) and whenever the role, term or leader changes.
type Health struct {
	replica.Probe
	// At is when the loop published it: the loop's heartbeat. It is zero
	// before the loop has run.
	At time.Time
	// Running: the loop runs (it has started and not ended).
	Running bool
	// Replaying: the replica is applying the log it recovered at start
	// and holds clients' requests until it has.
	Replaying bool
	// PrevCommit is the commit index of the publication before this one
	// (a tick earlier): a replica that has applied up to it is caught up
	// but for what committed since (readiness).
	PrevCommit uint64
	// Data is the state machine's counts, refreshed at most once every
	// dataEvery (the stats operation's work: it is not free).
	Data core.Stats
	// Status is what the status operation would answer, with Data's
	// counts.
	Status core.StatusReply
}

// dataEvery is how often the loop refreshes Health.Data.
const dataEvery = time.Second

// Health is the replica's state as the loop last published it (see
// Health). Safe for concurrent use.
func (s *Server) Health() Health {
	h := s.health.Load()
	if h == nil {
		return Health{}
	}
	out := *h
	select {
	case <-s.loopDone:
		out.Running = false
	default:
	}
	return out
}

// publish stores the replica's state for Health (on the loop). The data
// counts are refreshed once they are dataEvery old.
func (s *Server) publish(now time.Time) {
	h := &Health{Probe: s.r.Probe(), At: now, Running: true, Replaying: s.replay.to > 0}
	old := s.health.Load()
	if old != nil {
		h.PrevCommit = old.Commit
	}
	if old != nil && now.Sub(s.dataAt) < dataEvery {
		h.Data = old.Data
	} else {
		h.Data, s.dataAt = s.r.Data(), now
	}
	h.Status = s.r.StatusReply(h.Data)
	s.health.Store(h)
}

// Histogram buckets, in seconds (latencies) and counts.
var (
	// LatencyBuckets are the buckets of every latency histogram: 50 µs
	// doubling to 52 s (21 buckets).
	LatencyBuckets = metrics.ExponentialBuckets(50e-6, 2, 21)
	// countBuckets: 1 doubling to 16,384 (15 buckets).
	countBuckets = metrics.ExponentialBuckets(1, 2, 15)
)

// serverMetrics are the server's instruments in Options.Metrics. The loop
// records into them only a leader change and a write it refuses (a
// counter's atomic add); the readers
// count requests (and with the writers time them: opTimes), the disk
// goroutine its fsyncs and snapshots, and gauges read Health when
// scraped.
type serverMetrics struct {
	requests      []*metrics.Counter             // by operation code, binary-protocol client requests
	latency       []*metrics.PrometheusHistogram // by operation code: from a request's arrival to its answer written
	errors        sync.Map                       // core.Code -> *metrics.Counter: answers with an error code
	set           *metrics.Set
	registers     *metrics.Counter
	leaderChanges *metrics.Counter
	// refusedHistory counts the writes refused while the history store
	// was behind (admission.go).
	refusedHistory *metrics.Counter
	disk           diskMetrics
	// Work beside the loop: a snapshot encoded for a follower (leader),
	// or a leader's snapshot decoded into the state (follower).
	snapshotEncode, snapshotDecode *metrics.PrometheusHistogram
}

// What Server.beside does (its log messages).
const (
	snapshotEncoded = "snapshot encoded"
	snapshotDecoded = "snapshot decoded"
)

// diskMetrics are the disk goroutine's and the snapshot writer's.
type diskMetrics struct {
	fsync           *metrics.PrometheusHistogram // seconds per log fsync
	entriesPerFsync *metrics.PrometheusHistogram // log entries (requests, batches) one fsync made durable
	snapshotWrite   *metrics.PrometheusHistogram // seconds to encode, write and fsync a snapshot file
	snapshotBytes   atomic.Int64                 // the last snapshot file's size
}

// newServerMetrics registers the server's metrics in set (see
// docs/operations.md, Metrics, for each one's meaning). set must not hold
// them already: one server per set.
func newServerMetrics(s *Server, set *metrics.Set) *serverMetrics {
	m := &serverMetrics{set: set}
	m.requests = make([]*metrics.Counter, 256)
	for op := range 256 {
		if o := core.Operation(op); o.Valid() {
			m.requests[op] = set.NewCounter(fmt.Sprintf(`geoevent_requests_total{op=%q}`, o.String()))
		}
	}
	m.latency = make([]*metrics.PrometheusHistogram, 256)
	for op := range 256 {
		if o := core.Operation(op); o.Valid() {
			m.latency[op] = set.NewPrometheusHistogramExt(fmt.Sprintf(`geoevent_request_seconds{op=%q}`, o.String()), LatencyBuckets)
		}
	}
	for _, info := range core.Codes {
		if info.Code != core.OK.Code {
			m.errors.Store(info.Code, set.NewCounter(fmt.Sprintf(`geoevent_request_errors_total{code="%d",name=%q}`, info.Code, info.Name)))
		}
	}
	m.registers = set.NewCounter(`geoevent_session_registers_total`)
	m.leaderChanges = set.NewCounter(`geoevent_raft_leader_changes_total`)
	m.refusedHistory = set.NewCounter(`geoevent_writes_refused_total{reason="history_backlog"}`)
	m.disk.fsync = set.NewPrometheusHistogramExt(`geoevent_log_fsync_seconds`, LatencyBuckets)
	m.disk.entriesPerFsync = set.NewPrometheusHistogramExt(`geoevent_log_entries_per_fsync`, countBuckets)
	m.disk.snapshotWrite = set.NewPrometheusHistogramExt(`geoevent_snapshot_write_seconds`, LatencyBuckets)
	m.snapshotEncode = set.NewPrometheusHistogramExt(`geoevent_snapshot_encode_seconds`, LatencyBuckets)
	m.snapshotDecode = set.NewPrometheusHistogramExt(`geoevent_snapshot_decode_seconds`, LatencyBuckets)
	set.NewGauge(`geoevent_snapshot_bytes`, func() float64 { return float64(m.disk.snapshotBytes.Load()) })

	gauge := func(name string, f func(h *Health) float64) {
		set.NewGauge(name, func() float64 { h := s.Health(); return f(&h) })
	}
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	gauge(`geoevent_raft_term`, func(h *Health) float64 { return float64(h.Term) })
	for _, role := range []replica.Role{replica.Follower, replica.Candidate, replica.Leader} {
		gauge(fmt.Sprintf(`geoevent_raft_role{role=%q}`, role.String()), func(h *Health) float64 { return b(h.Running && h.Role == role) })
	}
	gauge(`geoevent_raft_leader`, func(h *Health) float64 {
		if h.At.IsZero() || h.Leader == replica.NoLeader {
			return -1
		}
		return float64(h.Leader)
	})
	gauge(`geoevent_raft_leader_heard`, func(h *Health) float64 { return b(h.Running && h.LeaderHeard) })
	gauge(`geoevent_raft_commit_index`, func(h *Health) float64 { return float64(h.Commit) })
	gauge(`geoevent_raft_applied_index`, func(h *Health) float64 { return float64(h.Applied) })
	gauge(`geoevent_raft_last_index`, func(h *Health) float64 { return float64(h.LastIndex) })
	gauge(`geoevent_replica_repairing`, func(h *Health) float64 { return b(h.Repairing) })
	gauge(`geoevent_loop_heartbeat_age_seconds`, func(h *Health) float64 {
		if h.At.IsZero() {
			return -1
		}
		return time.Since(h.At).Seconds()
	})
	gauge(`geoevent_entities`, func(h *Health) float64 { return float64(h.Data.EntityCount) })
	gauge(`geoevent_events`, func(h *Health) float64 { return float64(h.Data.EventCount) })
	gauge(`geoevent_index_bytes`, func(h *Health) float64 { return float64(h.Data.IndexBytes) })
	set.NewGauge(`geoevent_history_disk_bytes`, func() float64 {
		if s.hist == nil {
			return 0
		}
		return float64(s.hist.diskBytes.Load())
	})
	set.NewGauge(`geoevent_history_backlog_writes`, func() float64 {
		if s.hist == nil {
			return 0
		}
		return float64(s.hist.queued.Load())
	})
	set.NewGauge(`geoevent_position_listeners`, func() float64 { return float64(s.positions.listeners.Load()) })
	set.NewGauge(`geoevent_position_ring_writes`, func() float64 {
		s.positions.mu.Lock()
		defer s.positions.mu.Unlock()
		return float64(s.positions.writes)
	})
	set.NewGauge(`geoevent_connections`, func() float64 {
		s.mu.Lock()
		defer s.mu.Unlock()
		return float64(len(s.live))
	})
	return m
}

// countFrame counts a client frame by its operation (on the connection's
// reader, not the loop). A nil m records nothing.
func (m *serverMetrics) countFrame(h core.Header, payload []byte) {
	if m == nil {
		return
	}
	switch h.Type {
	case core.MsgRegister:
		m.registers.Inc()
	case core.MsgRequest:
		if op, ok := requestOp(h, payload); ok {
			if c := m.requests[op]; c != nil {
				c.Inc()
			}
		}
	}
}

// requestOp is the operation code of a request frame's payload.
func requestOp(h core.Header, payload []byte) (uint8, bool) {
	op := payload
	if h.ClientID == 0 {
		// A read without a session: the cluster id comes first.
		if _, req, err := core.CutSessionlessRead(payload); err == nil {
			op = req
		}
	}
	if len(op) == 0 {
		return 0, false
	}
	return op[0], true
}

// answered records the latency of a request of operation op, answered
// took after it arrived. A nil m records nothing.
func (m *serverMetrics) answered(op uint8, took time.Duration) {
	if m == nil {
		return
	}
	if l := m.latency[op]; l != nil {
		l.Update(took.Seconds())
	}
}

// failed counts an answer with error code c: a reply whose result code
// is not 0, or an error frame. A nil m counts nothing.
func (m *serverMetrics) failed(c core.Code) {
	if m == nil {
		return
	}
	v, ok := m.errors.Load(c)
	if !ok && m.set == nil {
		return
	}
	if !ok { // not a code of the table (newServerMetrics made those)
		v, _ = m.errors.LoadOrStore(c, m.set.GetOrCreateCounter(
			fmt.Sprintf(`geoevent_request_errors_total{code="%d",name="UNKNOWN"}`, c)))
	}
	v.(*metrics.Counter).Inc()
}

// answerCode is the result code of the reply or error frame whose bytes
// start frame (its length field first), and whether the piece holds it.
func answerCode(frame []byte) (core.Code, bool) {
	const payload = core.FrameLengthSize + core.FrameHeaderSize
	switch core.MessageType(frame[16]) {
	case core.MsgReply: // operation, then the code
		if len(frame) >= payload+3 {
			return core.Code(binary.LittleEndian.Uint16(frame[payload+1:])), true
		}
	case core.MsgError:
		if len(frame) >= payload+2 {
			return core.Code(binary.LittleEndian.Uint16(frame[payload:])), true
		}
	}
	return 0, false
}

// opTimes times a TCP connection's requests, from their arrival to their
// answer written, without the loop: the reader notes when each request
// frame arrived (arrived), the writer finds the replies among the frames
// it writes and records the time since (replies, then written). A reply
// or error frame answers the request of its client id and request number.
// At most maxTimedRequests wait at once per connection: a client that
// sends more without reading has the others go untimed.
type opTimes struct {
	m       *serverMetrics
	mu      sync.Mutex
	pending map[opKey]opStart
	keys    []opStart // the writer's: the answers of the frames being written
}

type opKey struct {
	client  uint64
	request uint32
}

type opStart struct {
	op uint8
	at time.Time
}

const maxTimedRequests = 4096

func newOpTimes(m *serverMetrics) *opTimes {
	if m == nil {
		return nil
	}
	return &opTimes{m: m, pending: make(map[opKey]opStart)}
}

// arrived notes the request frames among frames, which arrived at at (on
// the connection's reader). A nil t does nothing.
func (t *opTimes) arrived(frames []netFrame, at time.Time) {
	if t == nil {
		return
	}
	t.mu.Lock()
	for i := range frames {
		f := &frames[i]
		if f.h.Type != core.MsgRequest || len(t.pending) >= maxTimedRequests {
			continue
		}
		if op, ok := requestOp(f.h, f.payload); ok {
			t.pending[opKey{f.h.ClientID, f.h.Request}] = opStart{op, at}
		}
	}
	t.mu.Unlock()
}

// replies finds the answers among the pieces of the frames about to be
// written (on the connection's writer), each frame's header at the start
// of a piece; written then records them. A nil t does nothing.
func (t *opTimes) replies(pieces [][]byte) {
	if t == nil {
		return
	}
	t.keys = t.keys[:0]
	t.mu.Lock()
	defer t.mu.Unlock()
	left := 0 // bytes of the current frame still to come
	for _, p := range pieces {
		for len(p) > 0 {
			if left == 0 {
				if len(p) < core.FrameLengthSize+core.FrameHeaderSize {
					return // a header split across pieces: time nothing more in this write
				}
				left = core.FrameLengthSize + int(binary.LittleEndian.Uint32(p))
				if typ := core.MessageType(p[16]); typ == core.MsgReply || typ == core.MsgError {
					if c, ok := answerCode(p); ok && c != core.OK.Code {
						t.m.failed(c)
					}
					k := opKey{binary.LittleEndian.Uint64(p[4:]), binary.LittleEndian.Uint32(p[12:])}
					if st, ok := t.pending[k]; ok {
						delete(t.pending, k)
						t.keys = append(t.keys, st)
					}
				}
			}
			n := min(left, len(p))
			left, p = left-n, p[n:]
		}
	}
}

// written records the answers replies found, written at at.
func (t *opTimes) written(at time.Time) {
	if t == nil {
		return
	}
	for _, st := range t.keys {
		t.m.answered(st.op, at.Sub(st.at))
	}
}

// refusedWrite counts a write refused while the history store was behind.
// A nil m counts nothing.
func (m *serverMetrics) refusedWrite() {
	if m != nil {
		m.refusedHistory.Inc()
	}
}

// besideDone records work done beside the loop (Server.beside). A nil m
// records nothing.
func (m *serverMetrics) besideDone(what string, took time.Duration) {
	if m == nil {
		return
	}
	switch what {
	case snapshotEncoded:
		m.snapshotEncode.Update(took.Seconds())
	case snapshotDecoded:
		m.snapshotDecode.Update(took.Seconds())
	}
}

// The disk's recordings; a nil d records nothing.

func (d *diskMetrics) synced(took time.Duration, entries int) {
	if d == nil {
		return
	}
	d.fsync.Update(took.Seconds())
	if entries > 0 {
		d.entriesPerFsync.Update(float64(entries))
	}
}

func (d *diskMetrics) snapshotWritten(took time.Duration, bytes int64) {
	if d == nil {
		return
	}
	d.snapshotWrite.Update(took.Seconds())
	d.snapshotBytes.Store(bytes)
}
