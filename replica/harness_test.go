package replica

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/statemachine"
)

// memIO is an in-memory core.IO: a log whose entries become durable only
// when the test completes a Sync, client frames collected per connection,
// and a crash that loses everything not synced.
type memIO struct {
	durable     []core.LogEntry // survives a crash
	written     []core.LogEntry // appended, not yet synced
	hard        core.HardState
	pendingHard *core.HardState
	syncs       int // Sync calls not yet completed
	snapshot    []byte
	snapIndex   uint64
	snapTerm    uint64
	sent        map[core.ConnID][][]byte
	beside      []func(*Replica) // queued encodings, decodings and reads
	reads       int              // ReadLog calls
	failReads   bool             // ReadLog finds every record damaged
	writes      int              // WriteSnapshot calls
	encodes     int              // EncodeSnapshot calls
	// snapBeyondLog names a WriteSnapshot at an index not yet appended
	// (core.IO forbids it: the snapshot would replace the log).
	snapBeyondLog string
	// The history store: live, and as saved with the snapshot (restored
	// by a crash).
	hist, snapHist *statemachine.MemStore
	histReads      int // ReadHistory calls
	// The history stream of the last EncodeSnapshot (a MemStore's history
	// section: core.AppendHistorySection) and its index, and the stream of
	// a leader's snapshot written so far (staging, for staged).
	stream         []byte
	streamIndex    uint64
	streamReads    int // ReadSnapshotStream calls
	staging        []byte
	staged         uint64
	stagingRefused bool // WriteSnapshotStream refuses every chunk
	// The answers to stream reads and writes, which completeBeside runs
	// even while a cluster holds the other work beside (holdBeside).
	streamDone []func(*Replica)
}

// WriteHistory applies the writes to the live store at once: in the order
// of the calls, as core.IO asks.
func (m *memIO) WriteHistory(_ uint64, writes []core.HistoryWrite) { m.history().Apply(writes) }
func (*memIO) PublishApplied(uint64, []core.HistoryWrite)          {}

// ReadHistory answers from the store as it is now, and queues the answer
// as ReadLog does.
func (m *memIO) ReadHistory(token uint64, reads []core.HistoryRead) {
	m.histReads++
	answers := m.history().Answer(reads)
	m.beside = append(m.beside, func(r *Replica) { r.HistoryRead(token, answers) })
}

func (m *memIO) history() *statemachine.MemStore {
	if m.hist == nil {
		m.hist = statemachine.NewMemStore()
	}
	return m.hist
}

// lastAppended is the index of the last entry appended, synced or not (or
// of the snapshot, when the log is empty after it).
func (m *memIO) lastAppended() uint64 {
	last := m.snapIndex
	for _, es := range [][]core.LogEntry{m.durable, m.written} {
		if len(es) > 0 {
			last = max(last, es[len(es)-1].Index)
		}
	}
	return last
}

func newMemIO() *memIO { return &memIO{sent: map[core.ConnID][][]byte{}} }

func (m *memIO) SendClient(conn core.ConnID, frame []byte) {
	m.sent[conn] = append(m.sent[conn], slices.Clone(frame))
}

func (m *memIO) SendReply(conn core.ConnID, frame []byte) { m.SendClient(conn, frame) }
func (m *memIO) ReplyBuffer() []byte                      { return nil }

func (m *memIO) SendPeer(to uint32, frame ...[]byte) {}

func testRand() core.Rand { return rand.New(rand.NewPCG(1, 2)) }

func (m *memIO) AppendLog(entries []core.LogEntry) {
	for _, e := range entries {
		e.Data = slices.Clone(e.Data)
		m.written = append(m.written, e)
	}
}

func (m *memIO) SaveHardState(hs core.HardState) { m.pendingHard = &hs }
func (m *memIO) Sync()                           { m.syncs++ }

// ReadLog reads what the disk holds now (durable, then written over it)
// and queues the answer, as EncodeSnapshot the encoding.
func (m *memIO) ReadLog(from, to uint64, maxBytes int) {
	m.reads++
	if m.failReads {
		m.beside = append(m.beside, func(r *Replica) { r.LogRead(from, nil) })
		return
	}
	var out []core.LogEntry
	size := 0
	for _, e := range append(slices.Clone(m.durable), m.written...) {
		// Written over: an append rewinds the log to its first index.
		for len(out) > 0 && out[len(out)-1].Index >= e.Index {
			size -= len(out[len(out)-1].Data)
			out = out[:len(out)-1]
		}
		if e.Index < from || e.Index > to || e.Index != from+uint64(len(out)) || size >= maxBytes {
			continue
		}
		out = append(out, core.LogEntry{Index: e.Index, Term: e.Term, Data: slices.Clone(e.Data)})
		size += len(e.Data)
	}
	m.beside = append(m.beside, func(r *Replica) { r.LogRead(from, out) })
}

// EncodeSnapshot queues the encoding; settle and the cluster's step run it.
// The history stream is the store's section as it is at the call.
func (m *memIO) EncodeSnapshot(index uint64, encode func() []byte) {
	m.encodes++
	stream := m.history().AppendSection(nil)
	m.beside = append(m.beside, func(r *Replica) {
		m.stream, m.streamIndex = stream, index
		r.SnapshotEncoded(index, encode(), uint64(len(stream)))
	})
}

// ReadSnapshotStream queues the chunk's answer, as ReadLog does.
func (m *memIO) ReadSnapshotStream(index, offset uint64, max int) {
	m.streamReads++
	var data []byte
	if m.stream != nil && m.streamIndex == index && offset < uint64(len(m.stream)) {
		data = slices.Clone(m.stream[offset:min(uint64(len(m.stream)), offset+uint64(max))])
	}
	m.streamDone = append(m.streamDone, func(r *Replica) { r.SnapshotStreamRead(index, offset, data) })
}

func (m *memIO) DropSnapshotStream(index uint64) {
	if m.streamIndex == index {
		m.stream, m.streamIndex = nil, 0
	}
}

// WriteSnapshotStream appends the chunk to the staging stream and queues
// the answer.
func (m *memIO) WriteSnapshotStream(index, offset uint64, data []byte) {
	if offset == 0 {
		m.staging, m.staged = nil, index
	}
	ok := !m.stagingRefused && m.staged == index && offset == uint64(len(m.staging))
	if ok {
		m.staging = append(m.staging, data...)
	}
	m.streamDone = append(m.streamDone, func(r *Replica) { r.SnapshotStreamWritten(index, offset, ok) })
}

// WriteSnapshot queues the encoding, which saves the snapshot and reports
// it saved at once.
func (m *memIO) WriteSnapshot(index, term uint64, encode func(w io.Writer) error) {
	m.writes++
	if last := m.lastAppended(); index > last && m.snapBeyondLog == "" {
		m.snapBeyondLog = fmt.Sprintf("WriteSnapshot at index %d, beyond the log's last appended entry %d", index, last)
	}
	checkpoint := m.history().Clone() // the store as it is at the call
	m.beside = append(m.beside, func(r *Replica) {
		var b bytes.Buffer
		if err := encode(&b); err != nil {
			panic(fmt.Sprintf("encoding the snapshot at index %d: %v", index, err))
		}
		m.saveSnapshot(index, term, b.Bytes())
		m.snapHist = checkpoint
		r.SnapshotSaved(index)
	})
}

// DecodeSnapshot queues the decoding, as EncodeSnapshot the encoding.
func (m *memIO) DecodeSnapshot(index uint64, decode func()) {
	m.beside = append(m.beside, func(r *Replica) { decode(); r.SnapshotDecoded(index) })
}

// completeBeside runs the queued encodings, decodings, reads and stream
// answers and reports them to r.
func (m *memIO) completeBeside(r *Replica) bool {
	streams := m.completeStreams(r)
	return runQueued(&m.beside, r) || streams
}

// completeStreams runs the queued stream answers.
func (m *memIO) completeStreams(r *Replica) bool { return runQueued(&m.streamDone, r) }

// runQueued runs the functions of q, those they queue too, in order.
func runQueued(q *[]func(*Replica), r *Replica) bool {
	done := len(*q) > 0
	for len(*q) > 0 {
		f := (*q)[0]
		*q = (*q)[1:]
		f(r)
	}
	return done
}

// SaveSnapshot installs a leader's snapshot: the stream written for it
// becomes the store, live and saved.
func (m *memIO) SaveSnapshot(index, term uint64, data []byte) {
	_, events, ok, err := core.SplitHistory(m.staging)
	if m.staged != index || !ok || err != nil {
		panic(fmt.Sprintf("SaveSnapshot at index %d without its history stream (staged %d, %v)", index, m.staged, err))
	}
	m.history().Install(events)
	m.snapHist = m.hist.Clone()
	m.staging, m.staged = nil, 0
	m.saveSnapshot(index, term, data)
}

func (m *memIO) saveSnapshot(index, term uint64, data []byte) {
	m.snapshot, m.snapIndex, m.snapTerm = slices.Clone(data), index, term
	// Storage discards the log before the snapshot.
	n := 0
	for n < len(m.durable) && m.durable[n].Index <= index {
		n++
	}
	m.durable = m.durable[n:]
}

// completeSync makes everything written durable and returns the last index.
func (m *memIO) completeSync() uint64 {
	m.syncs--
	m.durable = append(m.durable, m.written...)
	m.written = nil
	if m.pendingHard != nil {
		m.hard, m.pendingHard = *m.pendingHard, nil
	}
	if len(m.durable) == 0 {
		return m.snapIndex
	}
	return m.durable[len(m.durable)-1].Index
}

// crash loses what was not synced and returns what a restart recovers.
func (m *memIO) crash() Recovered {
	m.written, m.pendingHard, m.syncs, m.beside = nil, nil, 0, nil
	m.stream, m.streamIndex, m.staging, m.staged, m.streamDone = nil, 0, nil, 0, nil
	m.sent = map[core.ConnID][][]byte{}
	m.hist = nil
	if m.snapHist != nil {
		m.hist = m.snapHist.Clone()
	}
	return Recovered{
		HardState: m.hard, Snapshot: m.snapshot, SnapshotIndex: m.snapIndex, SnapshotTerm: m.snapTerm,
		Entries: slices.Clone(m.durable),
	}
}

// fakeClock is a clock the test moves.
type fakeClock struct{ mono, real uint64 }

func (c *fakeClock) MonotonicNS() uint64 { return c.mono }
func (c *fakeClock) RealtimeNS() uint64  { return c.real }

var testCluster = core.Uint128{Hi: 0xc1, Lo: 0x05}

// node is a replica with its IO and clock.
type node struct {
	t     *testing.T
	r     *Replica
	io    *memIO
	clock *fakeClock
	cfg   Config
}

func newNode(t *testing.T, cfg Config) *node {
	t.Helper()
	cfg.Cluster = testCluster
	n := &node{t: t, io: newMemIO(), clock: &fakeClock{mono: 1, real: 1_700_000_000_000_000_000}, cfg: cfg}
	r, err := New(cfg, n.io, n.clock, testRand(), Recovered{})
	if err != nil {
		t.Fatal(err)
	}
	n.r = r
	n.settle()
	return n
}

// settle completes Syncs and snapshot encodings until none is in flight,
// and has the replica apply its backlog.
func (n *node) settle() {
	for n.io.syncs > 0 || len(n.io.beside) > 0 || n.r.Backlog() {
		for n.io.syncs > 0 {
			n.r.Synced(n.io.completeSync(), 1)
		}
		n.io.completeBeside(n.r)
		for n.r.Backlog() {
			n.r.ApplyMore()
		}
	}
}

// restart crashes the node (losing unsynced writes) and starts it again.
func (n *node) restart() {
	n.t.Helper()
	rec := n.io.crash()
	r, err := New(n.cfg, n.io, n.clock, testRand(), rec)
	if err != nil {
		n.t.Fatal(err)
	}
	n.r = r
	n.settle()
}

// replies decodes every frame sent to conn since the last call.
func (n *node) replies(conn core.ConnID) []reply {
	n.t.Helper()
	var out []reply
	for _, f := range n.io.sent[conn] {
		h, p, rest, err := core.DecodeFrame(f)
		if err != nil || len(rest) != 0 {
			n.t.Fatalf("bad frame from the replica: %v", err)
		}
		out = append(out, decodeReply(n.t, h, p))
	}
	n.io.sent[conn] = nil
	return out
}

type reply struct {
	h       core.Header
	session uint64
	op      core.Operation
	value   any
	err     *core.Error
}

func decodeReply(t *testing.T, h core.Header, p []byte) reply {
	t.Helper()
	rp := reply{h: h}
	var err error
	switch h.Type {
	case core.MsgRegisterReply:
		rp.session, err = core.DecodeRegisterReply(p)
	case core.MsgReply:
		rp.op, rp.value, rp.err, err = core.DecodeReplyMessage(p)
	case core.MsgError:
		rp.err, err = core.DecodeErrorMessage(p)
	default:
		t.Fatalf("unexpected message type %v", h.Type)
	}
	if err != nil {
		t.Fatalf("undecodable %v payload: %v", h.Type, err)
	}
	return rp
}

// register opens a session on conn and returns its id.
func (n *node) register(conn core.ConnID) uint64 {
	n.t.Helper()
	n.r.Receive(conn, core.Header{Type: core.MsgRegister}, core.AppendRegister(nil, testCluster))
	n.settle()
	rs := n.replies(conn)
	if len(rs) != 1 || rs[0].h.Type != core.MsgRegisterReply {
		n.t.Fatalf("register: %+v", rs)
	}
	return rs[0].session
}

// send submits a request without settling.
func (n *node) send(conn core.ConnID, session uint64, request uint32, op core.Operation, req any) {
	n.t.Helper()
	p, err := core.AppendRequestMessage(nil, op, req)
	if err != nil {
		n.t.Fatal(err)
	}
	n.r.Receive(conn, core.Header{ClientID: session, Request: request, Type: core.MsgRequest}, p)
}

// call submits a request, settles, and returns the one reply.
func (n *node) call(conn core.ConnID, session uint64, request uint32, op core.Operation, req any) reply {
	n.t.Helper()
	n.send(conn, session, request, op, req)
	n.settle()
	rs := n.replies(conn)
	if len(rs) != 1 {
		n.t.Fatalf("%v: %d replies", op, len(rs))
	}
	return rs[0]
}

// encodeState encodes the replicated state at once, as a snapshot of it
// would be encoded.
func (r *Replica) encodeState() []byte {
	buf := bytes.NewBuffer(r.statePrefix())
	_ = r.sm.WriteSnapshot(buf) // writes to memory cannot fail
	return buf.Bytes()
}
