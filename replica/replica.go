package replica

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/statemachine"
)

// Config is a replica's fixed configuration.
type Config struct {
	Cluster      core.Uint128 // clients must register with this cluster id
	ReplicaIndex uint32
	ReplicaCount uint32 // 1 in this version
	Addresses    []string
	Version      string // reported by status

	MaxSessions       int    // session table size (default 10,000)
	MaxPendingEntries int    // unapplied entries before writes are refused (default 4,096)
	CleanupEveryNS    uint64 // how often the leader appends a cleanup entry (default 10 s)

	// A snapshot is taken once the log applied since the last one holds
	// more bytes than max(SnapshotMinBytes, the last snapshot's size): the
	// work of snapshotting then stays proportional to the work of writing.
	// SnapshotEvery, when set, takes one every that many entries instead
	// (for tests).
	SnapshotMinBytes uint64 // default 64 MiB
	SnapshotEvery    uint64

	// Raft timing. A follower that hears nothing from a leader for a
	// random time in [ElectionTimeoutNS, 2*ElectionTimeoutNS) starts an
	// election (after a pre-vote); a leader sends heartbeats every
	// HeartbeatNS and steps down when it has not heard from a majority
	// for ElectionTimeoutNS (check-quorum).
	ElectionTimeoutNS uint64 // default 500 ms
	HeartbeatNS       uint64 // default 50 ms
}

func (c *Config) setDefaults() {
	if c.MaxSessions <= 0 {
		c.MaxSessions = 10_000
	}
	if c.MaxPendingEntries <= 0 {
		c.MaxPendingEntries = 4_096
	}
	if c.SnapshotMinBytes == 0 {
		c.SnapshotMinBytes = 64 << 20
	}
	if c.CleanupEveryNS == 0 {
		c.CleanupEveryNS = 10_000_000_000
	}
	if c.ElectionTimeoutNS == 0 {
		c.ElectionTimeoutNS = 500_000_000
	}
	if c.HeartbeatNS == 0 {
		c.HeartbeatNS = 50_000_000
	}
	if c.ReplicaCount == 0 {
		c.ReplicaCount = 1
	}
	if c.Version == "" {
		c.Version = "1.0.0"
	}
}

// Recovered is what storage held when the replica started.
type Recovered struct {
	HardState     core.HardState
	Snapshot      []byte // nil when there is none
	SnapshotIndex uint64
	SnapshotTerm  uint64
	Entries       []core.LogEntry // the log after the snapshot, in index order
}

// Replica is one replica. See the package documentation for its invariants.
type Replica struct {
	cfg   Config
	io    core.IO
	clock core.Clock
	rng   core.Rand

	// The replicated state.
	sm       *statemachine.StateMachine
	sessions *sessionTable
	lastOpTS uint64 // timestamp of the last applied entry

	// The log.
	term        uint64
	lastIndex   uint64
	durable     uint64
	commit      uint64
	applied     uint64
	appliedTerm uint64
	unapplied   []core.LogEntry // entries after applied, in index order
	queued      []core.LogEntry // made while a Sync is in flight
	syncing     bool

	// The leader's side.
	lastTS        uint64            // the last timestamp assigned to an entry
	waiting       map[uint64]waiter // log index -> the client to answer
	inflight      map[uint64]uint32 // session -> request number in the log, not yet applied
	startNS       uint64
	lastCleanupNS uint64
	sinceSnapshot uint64 // entries applied since the last snapshot
	bytesSince    uint64 // their bytes
	lastSnapBytes uint64 // size of the last snapshot

	// termStart is the index of this term's first entry (the no-op). Until
	// it is applied the applied state may lack acknowledged writes of
	// earlier terms, so client frames wait in held.
	termStart uint64
	held      []heldFrame

	failed error // set when the replica cannot go on (a damaged log entry)
}

type heldFrame struct {
	conn    core.ConnID
	h       core.Header
	payload []byte
}

type waiter struct {
	conn core.ConnID
	h    core.Header
}

// New starts a replica on what storage recovered. It becomes the leader of
// a new term and appends a no-op entry, so that every recovered entry
// commits (Raft's commit rule) once that entry is durable.
func New(cfg Config, io core.IO, clock core.Clock, rng core.Rand, rec Recovered) (*Replica, error) {
	cfg.setDefaults()
	r := &Replica{
		cfg:      cfg,
		io:       io,
		clock:    clock,
		rng:      rng,
		sm:       statemachine.New(),
		sessions: newSessionTable(cfg.MaxSessions),
		waiting:  make(map[uint64]waiter),
		inflight: make(map[uint64]uint32),
		startNS:  clock.MonotonicNS(),
	}
	r.lastCleanupNS = r.startNS
	if rec.Snapshot != nil {
		if err := r.restoreState(rec.Snapshot); err != nil {
			return nil, err
		}
		r.lastSnapBytes = uint64(len(rec.Snapshot))
		r.applied, r.commit, r.lastIndex = rec.SnapshotIndex, rec.SnapshotIndex, rec.SnapshotIndex
		r.appliedTerm = rec.SnapshotTerm
	}
	for _, e := range rec.Entries {
		if e.Index != r.lastIndex+1 {
			return nil, core.Errorf(core.Corruption, "recovered log entry %d follows %d", e.Index, r.lastIndex)
		}
		d, err := decodeEntry(e.Data)
		if err != nil {
			return nil, fmt.Errorf("recovered log entry %d: %w", e.Index, err)
		}
		r.lastTS = max(r.lastTS, d.timestamp)
		r.lastIndex = e.Index
		r.unapplied = append(r.unapplied, e)
	}
	r.lastTS = max(r.lastTS, r.lastOpTS)
	r.durable = r.lastIndex
	r.commit = max(r.commit, min(rec.HardState.Commit, r.lastIndex))
	r.term = rec.HardState.Term + 1
	r.io.SaveHardState(core.HardState{Term: r.term, Vote: cfg.ReplicaIndex, Commit: r.commit})
	r.termStart = r.appendEntry(entry{kind: kindNoop, timestamp: r.nextTimestamp()})
	return r, nil
}

// Err is the reason the replica stopped, or nil while it runs.
func (r *Replica) Err() error { return r.failed }

// AppliedIndex is the index of the last entry applied.
func (r *Replica) AppliedIndex() uint64 { return r.applied }

// Digest is the state machine's digest (for the simulator's checkers).
func (r *Replica) Digest() [32]byte { return r.sm.Digest() }

// nextTimestamp is the leader's timestamp for a new entry: at least the wall
// clock, and above every timestamp it assigned before.
func (r *Replica) nextTimestamp() uint64 {
	r.lastTS = max(r.clock.RealtimeNS(), r.lastTS+1)
	return r.lastTS
}

// appendEntry adds an entry to the log and returns its index.
func (r *Replica) appendEntry(e entry) uint64 {
	r.lastIndex++
	le := core.LogEntry{Index: r.lastIndex, Term: r.term, Data: e.appendTo(nil)}
	r.unapplied = append(r.unapplied, le)
	r.queued = append(r.queued, le)
	r.flush()
	return le.Index
}

// flush hands queued entries to storage with one Sync unless a Sync is
// already in flight (then they wait for it: group commit).
func (r *Replica) flush() {
	if r.syncing || len(r.queued) == 0 {
		return
	}
	r.io.AppendLog(r.queued)
	r.queued = nil
	r.io.Sync()
	r.syncing = true
}

// Synced is storage's answer to Sync: the log is durable through index.
func (r *Replica) Synced(index uint64) {
	r.syncing = false
	if r.failed != nil {
		return
	}
	r.durable = max(r.durable, min(index, r.lastIndex))
	// Raft's rule: count replicas only for an entry of the current term.
	// With one replica, the durable copy is the majority.
	if r.termAt(r.durable) == r.term {
		r.commit = max(r.commit, r.durable)
	}
	r.applyCommitted()
	r.flush()
}

// termAt is the term of an unapplied entry, or 0 when it is not held.
func (r *Replica) termAt(index uint64) uint64 {
	if index <= r.applied || len(r.unapplied) == 0 {
		return 0
	}
	i := index - r.unapplied[0].Index
	if i >= uint64(len(r.unapplied)) {
		return 0
	}
	return r.unapplied[i].Term
}

func (r *Replica) applyCommitted() {
	n := 0
	for ; n < len(r.unapplied) && r.unapplied[n].Index <= r.commit; n++ {
		if err := r.apply(r.unapplied[n]); err != nil {
			r.failed = err
			return
		}
	}
	r.unapplied = r.unapplied[n:]
	if len(r.held) > 0 && r.applied >= r.termStart {
		held := r.held
		r.held = nil
		for _, f := range held {
			r.Receive(f.conn, f.h, f.payload)
		}
	}
	if r.snapshotDue() {
		// Known limit: encoding runs in the event loop; with millions of
		// entities it stalls the replica for seconds. Move it off the loop
		// (copy-on-write state or a background encoder).
		data := r.encodeState()
		r.sinceSnapshot, r.bytesSince, r.lastSnapBytes = 0, 0, uint64(len(data))
		r.io.SaveSnapshot(r.applied, r.appliedTerm, data)
	}
}

func (r *Replica) snapshotDue() bool {
	if r.cfg.SnapshotEvery > 0 {
		return r.sinceSnapshot >= r.cfg.SnapshotEvery
	}
	return r.bytesSince >= max(r.cfg.SnapshotMinBytes, r.lastSnapBytes)
}

// SnapshotSaved is storage's answer to SaveSnapshot.
func (r *Replica) SnapshotSaved(index uint64) {}

// Tick lets time pass: the leader appends a cleanup entry every
// CleanupEveryNS so that expired entities are removed without a client
// asking.
func (r *Replica) Tick() {
	if r.failed != nil {
		return
	}
	now := r.clock.MonotonicNS()
	if now-r.lastCleanupNS >= r.cfg.CleanupEveryNS && len(r.unapplied) < r.cfg.MaxPendingEntries {
		r.lastCleanupNS = now
		payload, _ := core.AppendRequest(nil, core.OpCleanupExpired, &core.CleanupRequest{})
		r.appendEntry(entry{kind: kindOperation, timestamp: r.nextTimestamp(), op: core.OpCleanupExpired, payload: payload})
	}
}

// Closed tells the replica a client connection is gone: its pending replies
// are dropped (the client retries, and dedupe answers from the cache).
func (r *Replica) Closed(conn core.ConnID) {}

func (r *Replica) send(conn core.ConnID, h core.Header, payload []byte) {
	r.io.SendClient(conn, core.AppendFrame(nil, h, payload))
}

func (r *Replica) sendError(conn core.ConnID, h core.Header, info core.CodeInfo, format string, args ...any) {
	h.Type = core.MsgError
	r.send(conn, h, core.AppendErrorMessage(nil, info.Code, fmt.Sprintf(format, args...)))
}

// Receive handles one client frame (its checksum already verified by the
// IO layer).
func (r *Replica) Receive(conn core.ConnID, h core.Header, payload []byte) {
	if r.failed != nil {
		r.sendError(conn, h, core.ClusterUnavailable, "the replica has stopped: %v", r.failed)
		return
	}
	if r.applied < r.termStart {
		// Not caught up with its own log yet: answering now could miss
		// acknowledged writes (or sessions) of earlier terms.
		if len(r.held) >= r.cfg.MaxPendingEntries {
			r.sendError(conn, h, core.ClusterBusy, "the replica is recovering; retry")
			return
		}
		r.held = append(r.held, heldFrame{conn, h, bytes.Clone(payload)})
		return
	}
	switch h.Type {
	case core.MsgRegister:
		r.receiveRegister(conn, h, payload)
	case core.MsgRequest:
		r.receiveRequest(conn, h, payload)
	default:
		r.sendError(conn, h, core.MalformedRequest, "unexpected message type %s", h.Type)
	}
}

func (r *Replica) receiveRegister(conn core.ConnID, h core.Header, payload []byte) {
	cluster, err := core.DecodeRegister(payload)
	switch {
	case err != nil:
		r.sendError(conn, h, core.MalformedRequest, "%v", err)
	case cluster != r.cfg.Cluster:
		r.sendError(conn, h, core.WrongCluster, "this is cluster %s, not %s", r.cfg.Cluster, cluster)
	case len(r.unapplied) >= r.cfg.MaxPendingEntries:
		r.sendError(conn, h, core.ClusterBusy, "too many operations pending; retry")
	default:
		idx := r.appendEntry(entry{kind: kindRegister, timestamp: r.nextTimestamp()})
		r.waiting[idx] = waiter{conn, h}
	}
}

func (r *Replica) receiveRequest(conn core.ConnID, h core.Header, payload []byte) {
	op, req, err := core.DecodeRequestMessage(payload)
	if err != nil {
		if op.Valid() {
			r.reply(conn, h, op, nil, err)
		} else {
			r.sendError(conn, h, core.UnknownOperation, "%v", err)
		}
		return
	}
	s := r.sessions.get(h.ClientID)
	if s == nil {
		r.sendError(conn, h, core.SessionExpired, "session %d is unknown or was evicted; register again", h.ClientID)
		return
	}
	if !op.Mutates() {
		// Reads skip the log: the applied state holds every write this
		// leader has acknowledged, so answering now is linearizable.
		reply, err := r.execute(op, max(r.clock.RealtimeNS(), r.lastOpTS), req)
		r.reply(conn, h, op, reply, err)
		return
	}
	switch inflight, busy := r.inflight[h.ClientID]; {
	case h.Request == s.lastRequest && s.reply != nil:
		r.send(conn, core.Header{ClientID: h.ClientID, Request: h.Request, Type: s.replyType}, s.reply)
		return
	case h.Request <= s.lastRequest:
		r.sendError(conn, h, core.StaleRequest, "request %d is older than the session's last, %d", h.Request, s.lastRequest)
		return
	case busy && inflight == h.Request:
		r.rewait(h, conn) // a retry, perhaps on a new connection: answer there
		return
	case busy:
		r.sendError(conn, h, core.RequestInFlight, "request %d is still in flight on this session", inflight)
		return
	case len(r.unapplied) >= r.cfg.MaxPendingEntries:
		r.sendError(conn, h, core.ClusterBusy, "too many operations pending; retry")
		return
	}
	if ins, ok := req.(*core.InsertRequest); ok {
		statemachine.AssignCells(ins.Events) // the leader's geometry, carried in the log
	}
	body, err := core.AppendRequest(nil, op, req)
	if err != nil {
		r.reply(conn, h, op, nil, err)
		return
	}
	idx := r.appendEntry(entry{kind: kindOperation, timestamp: r.nextTimestamp(), session: h.ClientID, request: h.Request, op: op, payload: body})
	r.waiting[idx] = waiter{conn, h}
	r.inflight[h.ClientID] = h.Request
}

// rewait moves the pending answer of (session, request) to conn.
func (r *Replica) rewait(h core.Header, conn core.ConnID) {
	for i := range r.unapplied { // few entries: bounded by MaxPendingEntries
		idx := r.unapplied[i].Index
		if w, ok := r.waiting[idx]; ok && w.h.ClientID == h.ClientID && w.h.Request == h.Request {
			r.waiting[idx] = waiter{conn, h}
			return
		}
	}
}

func (r *Replica) reply(conn core.ConnID, h core.Header, op core.Operation, reply any, err error) {
	payload, encErr := core.AppendReplyMessage(nil, op, reply, err)
	if encErr != nil {
		r.sendError(conn, h, core.InternalError, "encoding the reply: %v", encErr)
		return
	}
	h.Type = core.MsgReply
	r.send(conn, h, payload)
}

// apply executes one committed entry and answers the client waiting for it.
func (r *Replica) apply(le core.LogEntry) error {
	e, err := decodeEntry(le.Data)
	if err != nil {
		return fmt.Errorf("applying log entry %d: %w", le.Index, err)
	}
	r.lastOpTS = max(r.lastOpTS, e.timestamp)
	r.applied, r.appliedTerm = le.Index, le.Term
	r.sinceSnapshot++
	r.bytesSince += uint64(len(le.Data))
	w, waited := r.waiting[le.Index]
	delete(r.waiting, le.Index)
	switch e.kind {
	case kindNoop:
	case kindRegister:
		r.sessions.register(le.Index)
		if waited {
			r.send(w.conn, core.Header{ClientID: le.Index, Request: w.h.Request, Type: core.MsgRegisterReply}, core.AppendRegisterReply(nil, le.Index))
		}
	case kindOperation:
		var s *session
		if e.session != 0 {
			delete(r.inflight, e.session)
			s = r.sessions.get(e.session)
			if s == nil {
				if waited {
					r.sendError(w.conn, w.h, core.SessionExpired, "session %d was evicted; register again", e.session)
				}
				return nil
			}
			if e.request <= s.lastRequest { // a duplicate in the log: never run twice
				return nil
			}
		}
		req, err := core.DecodeRequest(e.op, e.payload)
		if err != nil {
			return fmt.Errorf("applying log entry %d: %w", le.Index, err)
		}
		reply, opErr := r.execute(e.op, e.timestamp, req)
		payload, err := core.AppendReplyMessage(nil, e.op, reply, opErr)
		if err != nil {
			return fmt.Errorf("encoding the reply of log entry %d: %w", le.Index, err)
		}
		if s != nil {
			s.lastRequest, s.lastActivity, s.reply, s.replyType = e.request, le.Index, payload, core.MsgReply
		}
		if waited {
			r.send(w.conn, core.Header{ClientID: w.h.ClientID, Request: w.h.Request, Type: core.MsgReply}, payload)
		}
	}
	return nil
}

// execute runs one operation against the state machine at time ts.
func (r *Replica) execute(op core.Operation, ts uint64, req any) (any, error) {
	sm := r.sm
	switch op {
	case core.OpInsert:
		return sm.Insert(ts, req.(*core.InsertRequest))
	case core.OpUpsert:
		return sm.Upsert(ts, req.(*core.InsertRequest))
	case core.OpDeleteEntities:
		return sm.DeleteEntities(ts, req.(*core.DeleteRequest))
	case core.OpTTLSet:
		return sm.TTLSet(ts, req.(*core.TTLSetRequest))
	case core.OpTTLExtend:
		return sm.TTLExtend(ts, req.(*core.TTLExtendRequest))
	case core.OpTTLClear:
		return sm.TTLClear(ts, req.(*core.TTLClearRequest))
	case core.OpCleanupExpired:
		return sm.CleanupExpired(ts, req.(*core.CleanupRequest))
	case core.OpQueryRadius:
		return sm.QueryRadius(ts, req.(*core.RadiusQuery))
	case core.OpQueryPolygon:
		return sm.QueryPolygon(ts, req.(*core.PolygonQuery))
	case core.OpGetLatest:
		return sm.GetLatest(ts, *req.(*core.Uint128))
	case core.OpGetLatestBatch:
		res, err := sm.GetLatestBatch(ts, *req.(*core.IDList))
		return core.LatestResults(res), err
	case core.OpQueryLatest:
		return sm.QueryLatest(ts, req.(*core.LatestQuery))
	case core.OpEntityHistory:
		return sm.History(ts, req.(*core.HistoryQuery))
	case core.OpStats:
		return sm.Stats(ts), nil
	case core.OpStatus:
		st := sm.Stats(ts)
		return &core.StatusReply{
			EventsCount: st.EventCount, EntitiesCount: st.EntityCount, IndexBytes: st.IndexBytes,
			UptimeSeconds: (r.clock.MonotonicNS() - r.startNS) / 1_000_000_000,
			Version:       r.cfg.Version, ClusterState: "healthy", NodeID: r.nodeID(r.cfg.ReplicaIndex),
		}, nil
	case core.OpTopology:
		t := &core.TopologyReply{Version: r.term, ReplicaCount: r.cfg.ReplicaCount, Primary: r.cfg.ReplicaIndex}
		for i := uint32(0); i < r.cfg.ReplicaCount; i++ {
			addr := ""
			if int(i) < len(r.cfg.Addresses) {
				addr = r.cfg.Addresses[i]
			}
			t.Nodes = append(t.Nodes, core.NodeInfo{NodeID: r.nodeID(i), Address: addr, Status: "healthy"})
		}
		return t, nil
	case core.OpPing:
		return &core.PingReply{Pong: true}, nil
	}
	return nil, core.Errorf(core.UnknownOperation, "unknown operation %d", op)
}

func (r *Replica) nodeID(i uint32) string { return fmt.Sprintf("replica-%d", i) }

// The replicated state's snapshot encoding: magic "GEOREPL1", the last
// applied timestamp (u64), the session table (see sessionTable.appendTo),
// then the state machine's own snapshot (which carries its own checksum).
// Storage wraps the whole in a checksummed file.
const stateMagic = "GEOREPL1"

func (r *Replica) encodeState() []byte {
	b := append([]byte(stateMagic), make([]byte, 8)...)
	binary.LittleEndian.PutUint64(b[8:], r.lastOpTS)
	b = r.sessions.appendTo(b)
	var buf bytes.Buffer
	buf.Write(b)
	_ = r.sm.WriteSnapshot(&buf) // writes to memory cannot fail
	return buf.Bytes()
}

func (r *Replica) restoreState(b []byte) error {
	if len(b) < 16 || string(b[:8]) != stateMagic {
		return core.Errorf(core.Corruption, "snapshot is not a GeoEvent replica state")
	}
	r.lastOpTS = binary.LittleEndian.Uint64(b[8:16])
	sessions, rest, err := decodeSessions(b[16:], r.cfg.MaxSessions)
	if err != nil {
		return err
	}
	sm, err := statemachine.ReadSnapshot(bytes.NewReader(rest))
	if err != nil {
		return err
	}
	r.sessions, r.sm = sessions, sm
	return nil
}

// ReceivePeer handles one replica-to-replica frame (type 64..127, its
// checksum already verified by the IO layer); h.ClientID is the sender's
// replica index.
func (r *Replica) ReceivePeer(h core.Header, payload []byte) {}

// Role is a replica's part in its term.
type Role uint8

const (
	Follower  Role = 1
	Candidate Role = 2
	Leader    Role = 3
)

func (r Role) String() string {
	switch r {
	case Follower:
		return "follower"
	case Candidate:
		return "candidate"
	case Leader:
		return "leader"
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

// NoLeader is Status.Leader when the replica knows no leader.
const NoLeader = ^uint32(0)

// Status is what a replica knows of itself, for the IO layer's logs and the
// simulator's checkers.
type Status struct {
	Role      Role
	Term      uint64
	Leader    uint32 // NoLeader when unknown
	Commit    uint64
	Applied   uint64
	LastIndex uint64
}

// Status reports the replica's role, term and log positions.
func (r *Replica) Status() Status {
	return Status{Role: Leader, Term: r.term, Leader: r.cfg.ReplicaIndex, Commit: r.commit, Applied: r.applied, LastIndex: r.lastIndex}
}
