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
	ReplicaCount uint32 // 1, 3 or 5
	Addresses    []string
	Version      string // reported by status

	MaxSessions       int    // session table size (default 10,000)
	MaxPendingEntries int    // unapplied entries before writes are refused (default 4,096)
	CleanupEveryNS    uint64 // how often the leader appends a cleanup entry when an entity has expired (default 1 s)

	// MaxSessionsPerConn bounds the live sessions registered through one
	// client connection of a replica, and those it has asked for and not
	// yet been answered (default 1,024: a Go client's sessions share one
	// connection per replica). Beyond it a register is refused with 205
	// SESSION_LIMIT, so that one connection's flood of registrations
	// cannot evict every other client's session (conncap.go).
	MaxSessionsPerConn int

	// A snapshot is taken once the log applied since the last one holds
	// more bytes than max(SnapshotMinBytes, snapshotLogRatio times the
	// state's entities at the last one as 128-byte records
	// (StateMachine.RecordBytes): what a snapshot holds, older events being
	// the history store's, which is checkpointed beside it): the work of
	// snapshotting then stays proportional to the work of writing, about
	// half of it. (Snapshots pack their records, to about
	// half that size for sparse ones.) SnapshotEvery, when set, takes one
	// every that many entries instead (for tests).
	SnapshotMinBytes uint64 // default 64 MiB
	SnapshotEvery    uint64

	// MaxApplyEntries bounds the committed entries one input applies
	// (default 4,096; a byte bound of maxApplyBytes holds as well): a long
	// backlog, such as the log a restart recovers, is applied a part per
	// input, with the driver's ticks and messages in between, the driver
	// calling ApplyMore while Backlog says so. The simulator sets it small.
	MaxApplyEntries int
	// MaxScanWork, when above 0, bounds each query page's work instead of
	// the state machine's default (statemachine.SetMaxScanWork): the
	// simulator sets small bounds, so that queries page often.
	MaxScanWork int

	// ShedBatch is how many applied entries that gave up their data the
	// in-memory log lets go of at a time, keeping only their terms
	// (default 4,096). The simulator sets it small, so that its short runs
	// shed as a long-running server does.
	ShedBatch uint64

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
	if c.MaxSessionsPerConn <= 0 {
		c.MaxSessionsPerConn = 1024
	}
	if c.MaxPendingEntries <= 0 {
		c.MaxPendingEntries = 4_096
	}
	if c.MaxApplyEntries <= 0 {
		c.MaxApplyEntries = 4096
	}
	if c.ShedBatch == 0 {
		c.ShedBatch = 4096
	}
	if c.SnapshotMinBytes == 0 {
		c.SnapshotMinBytes = 64 << 20
	}
	if c.CleanupEveryNS == 0 {
		c.CleanupEveryNS = 1_000_000_000
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
	cfg    Config
	io     core.IO
	clock  core.Clock
	rng    core.Rand
	self   uint32
	quorum int // a majority of ReplicaCount

	// The replicated state.
	sm       *statemachine.StateMachine
	sessions *sessionTable
	lastOpTS uint64 // timestamp of the last applied entry
	// batchEvents is the memory the last applied insert or upsert batch
	// was decoded into, reused by the next.
	batchEvents []core.GeoEvent
	// warmIDs is warmWrites' memory; warmedTo the last entry it warmed.
	warmIDs  []core.Uint128
	warmedTo uint64

	// Raft's persistent state (saved with SaveHardState) and role.
	term   uint64
	vote   uint32
	role   Role
	leader uint32 // NoLeader when unknown

	raftLog // the log, its durability and commit (log.go)

	// Raft's timers, on raftNow's clock.
	raftClock, lastTickNS uint64
	electionDeadline      uint64 // a follower or candidate campaigns at this time
	leaderContact         uint64 // when a current leader was last heard from
	heartbeatDue          uint64 // leader: next heartbeat round
	quorumCheckDue        uint64 // leader: next check-quorum

	// Candidate: the votes of this (pre-)election, by replica.
	preVote bool
	votes   []int8 // 1 granted, -1 refused, 0 no answer

	// Leader.
	peers         []progress             // by replica index; peers[self] unused
	waiting       map[uint64]waiter      // log index -> the client to answer
	inflight      map[uint64]inflightReq // session -> its request in the log, not yet applied
	lastTS        uint64                 // the last timestamp assigned to (or seen in) an entry
	startNS       uint64
	lastCleanupNS uint64
	// cleanupBacklog: the last scheduled cleanup applied scanned its whole
	// budget, so more expired data may wait; the next one comes after
	// cleanupBacklogEveryNS instead of CleanupEveryNS. Every replica keeps
	// it from the entries it applies, so a new leader goes on at once.
	cleanupBacklog bool
	reads          readState     // linearizable reads (reads.go)
	hist           historyState  // the history store's requests (history.go)
	snapshot       *outSnapshot  // the snapshot followers are being sent
	rb             readBack      // dropped entries read back (readback.go)
	lastAppend     encodedAppend // see sendPeer
	lagMarks       [2]lagMark    // the last two heartbeat rounds' (replicationLagMS)

	// termStart is the index of this term's first entry (the no-op), or in
	// a cluster of one the last entry before it (becomeLeader). Until it is
	// applied the applied state may lack acknowledged writes of earlier
	// terms, so client frames wait in held.
	termStart uint64
	held      []heldFrame
	forwarded []forwardedReq // forward.go

	// Follower: a snapshot arriving from the leader, one being decoded
	// beside the loop, and the index of one being installed (decoded or
	// saved) now.
	incoming   *incomingSnapshot
	decoding   *decodingSnapshot
	installing uint64
	leaderSeq  uint64       // the highest read round seen from this term's leader
	health     healthReport // the leader's last view of every replica (health.go)

	// repairing: storage found a damaged log record on recovery (see
	// core.HardState.Repairing and repairDone).
	repairing bool

	failed error // set when the replica cannot go on (a damaged log entry)

	// conns: the registrations through each of this replica's own client
	// connections (conncap.go). Not replicated: only this replica knows its
	// connections.
	conns map[core.ConnID]*connRegs
}

// inflightReq is a session's request that the leader has in its log and
// not yet applied: its number and checksum.
type inflightReq struct {
	request uint32
	summed  bool
	sum     uint32
}

type heldFrame struct {
	to       dest
	h        core.Header
	payload  []byte
	prepared []byte // see ReceivePrepared
}

// waiter is a client waiting for the entry at some index (of some term).
type waiter struct {
	to   dest
	h    core.Header
	term uint64
}

// New starts a replica on what storage recovered. A replica of a cluster of
// one becomes the leader of a new term at once and appends a no-op entry,
// so that every recovered entry commits (Raft's commit rule) once that
// entry is durable; in a larger cluster it starts as a follower and waits
// to hear from a leader or to win an election.
func New(cfg Config, io core.IO, clock core.Clock, rng core.Rand, rec Recovered) (*Replica, error) {
	cfg.setDefaults()
	if cfg.ReplicaIndex >= cfg.ReplicaCount {
		return nil, fmt.Errorf("replica index %d is out of range for %d replicas", cfg.ReplicaIndex, cfg.ReplicaCount)
	}
	r := &Replica{
		cfg:      cfg,
		io:       io,
		clock:    clock,
		rng:      rng,
		self:     cfg.ReplicaIndex,
		quorum:   int(cfg.ReplicaCount)/2 + 1,
		sm:       statemachine.New(),
		sessions: newSessionTable(cfg.MaxSessions),
		waiting:  make(map[uint64]waiter),
		inflight: make(map[uint64]inflightReq),
		conns:    make(map[core.ConnID]*connRegs),
		startNS:  clock.MonotonicNS(),
		term:     rec.HardState.Term,
		vote:     rec.HardState.Vote,
		leader:   NoLeader,
		role:     Follower,
	}
	r.lastCleanupNS = r.startNS
	r.sm.SetMaxScanWork(cfg.MaxScanWork)
	r.raftClock, r.lastTickNS = r.startNS, r.startNS
	if rec.Snapshot != nil {
		if err := r.restoreState(rec.Snapshot); err != nil {
			return nil, err
		}
		r.lastSnapBytes, r.snapRecords = uint64(len(rec.Snapshot)), r.sm.RecordBytes()
		r.resetLog(rec.SnapshotIndex, rec.SnapshotTerm)
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
		r.log = append(r.log, e)
		r.lastIndex = e.Index
	}
	r.lastTS = max(r.lastTS, r.lastOpTS)
	r.durable = r.lastIndex
	r.commit = max(r.commit, min(rec.HardState.Commit, r.lastIndex))
	r.verified = r.commit
	if rec.HardState.Repairing {
		if cfg.ReplicaCount == 1 {
			return nil, core.Errorf(core.Corruption, "the log was damaged (storage cut it before a bad record) and a cluster of one replica has no peer to repair it from")
		}
		// Entries this replica acknowledged may be gone. Until a leader of a
		// later term gives them back it must not vote or campaign (repair.go).
		r.repairing = true
		r.term++
		r.vote = core.NoVote
		r.saveHardState()
		r.flush()
	}
	if cfg.ReplicaCount == 1 {
		// Alone, the replica is its own majority: it wins the election of
		// the next term without asking anyone.
		r.term++
		r.vote = r.self
		r.saveHardState()
		r.becomeLeader()
	} else {
		r.resetElectionTimer()
		r.applyCommitted()
	}
	return r, nil
}

// Err is the reason the replica stopped, or nil while it runs.
func (r *Replica) Err() error { return r.failed }

// Backlog reports whether committed entries wait to be applied because the
// inputs that committed them each applied only their part
// (Config.MaxApplyEntries), and not for the history store (history.go), or
// reads wait to run (reads.go). The driver
// then calls ApplyMore, taking the other inputs that are ready first or in
// turn.
func (r *Replica) Backlog() bool {
	return r.failed == nil && ((r.applied < r.commit && r.hist.waitIndex == 0) || len(r.reads.ready) > 0)
}

// ApplyMore is the input that applies the next part of the backlog: the
// committed entries not yet applied, and one ready read (reads.go). Like
// every input, it leaves nothing queued for storage (flush).
func (r *Replica) ApplyMore() {
	if r.failed != nil {
		return
	}
	r.applyCommitted()
	r.runReady()
	r.flush()
}

// AppliedIndex is the index of the last entry applied.
func (r *Replica) AppliedIndex() uint64 { return r.applied }

// Digest is the state machine's digest (for the simulator's checkers).
func (r *Replica) Digest() [32]byte { return r.sm.Digest() }

// nextTimestamp is the leader's timestamp for a new entry: at least the wall
// clock, and above every timestamp it assigned or saw before.
func (r *Replica) nextTimestamp() uint64 {
	r.lastTS = max(r.clock.RealtimeNS(), r.lastTS+1)
	return r.lastTS
}

// appendEntry adds an entry of the leader's to the log, hands it to storage
// and to the followers, and returns its index.
func (r *Replica) appendEntry(e entry) uint64 { return r.appendData(e.appendTo(nil)) }

// appendData is appendEntry for an entry already encoded.
func (r *Replica) appendData(data []byte) uint64 {
	le := core.LogEntry{Index: r.lastIndex + 1, Term: r.term, Data: data}
	r.appendLocal(le)
	r.flush()
	r.replicateAll()
	return le.Index
}

// cleanupBacklogEveryNS is how often the leader appends a cleanup entry
// while expired entities wait beyond one cleanup's budget (10,000 entities
// scanned): up to 100,000 removed per second, where one entry a second
// removes only 10,000 and a fleet whose entities expire faster would pile
// them up without bound.
const cleanupBacklogEveryNS = 100_000_000

// pending is the number of entries in the log not yet applied: the queue
// MaxPendingEntries bounds.
func (r *Replica) pending() int { return int(r.lastIndex - r.applied) }

// Tick lets time pass: elections and heartbeats (raft.go), and the leader
// appends a cleanup entry so that expired entities are removed without a
// client asking: every CleanupEveryNS when its applied state holds an
// expired entity (an idle replica writes nothing), or every
// cleanupBacklogEveryNS while the last one found more expired entities
// than its budget.
func (r *Replica) Tick() {
	if r.failed != nil {
		return
	}
	r.tickRaft(r.advanceRaftClock())
	r.expireForwarded()
	now := r.clock.MonotonicNS()
	every := r.cfg.CleanupEveryNS
	if r.cleanupBacklog {
		every = min(every, cleanupBacklogEveryNS)
	}
	if r.role == Leader && now-r.lastCleanupNS >= every && r.pending() < r.cfg.MaxPendingEntries &&
		r.sm.Expired(max(r.clock.RealtimeNS(), r.lastOpTS)) {
		r.lastCleanupNS = now
		payload, _ := core.CleanupExpired.AppendRequest(nil, &core.CleanupRequest{})
		r.appendEntry(entry{kind: kindOperation, timestamp: r.nextTimestamp(), op: core.OpCleanupExpired, payload: payload})
	}
}

// Closed tells the replica a client connection is gone: its pending replies
// are dropped (the client retries, and dedupe answers from the cache), and
// so is its count of registrations.
func (r *Replica) Closed(conn core.ConnID) { delete(r.conns, conn) }

// Receive handles one client frame (its checksum already verified by the
// IO layer).
func (r *Replica) Receive(conn core.ConnID, h core.Header, payload []byte) {
	r.receiveClient(dest{via: r.self, conn: conn}, h, payload, nil)
}

// PrepareRequest does the part of a leader's work on a client frame that
// needs nothing but the frame: when payload is an insert or upsert batch,
// it returns the log entry the leader would make of it (in a new buffer,
// the batch as the client encoded it with each valid event's leaf cell
// filled in, and room for the entry's header, which only the loop can
// fill); otherwise nil. It is safe on any goroutine: IO calls it as a
// client frame arrives, away from the replica's loop, and then hands both
// to ReceivePrepared. The loop then neither copies the batch (over a
// megabyte) nor computes its geometry.
func PrepareRequest(h core.Header, payload []byte) (prepared []byte) {
	if h.Type != core.MsgRequest || h.ClientID == 0 { // client id 0: a read (core.CutSessionlessRead)
		return nil
	}
	if _, _, batch := batchRequest(payload); !batch {
		return nil
	}
	prepared = batchEntry(payload)
	// The request's checksum, for the loop to take (receiveRequest).
	binary.LittleEndian.PutUint32(prepared[entryBaseSize:], requestSum(payload))
	return prepared
}

// batchEntry returns a new buffer holding the log entry of payload, a
// well-formed insert or upsert batch, but for the entry's header (see
// putHeader; a summed one, entryHeaderSize bytes): the batch as the client
// encoded it, with each valid event's leaf cell filled in (the leader's
// geometry, carried in the log).
func batchEntry(payload []byte) []byte {
	data := make([]byte, entryHeaderSize+len(payload)-1)
	copy(data[entryHeaderSize:], payload[1:])                // after the operation byte
	statemachine.AssignRecordCells(data[entryHeaderSize+4:]) // after the event count
	return data
}

// ReceivePrepared is Receive for a frame for which PrepareRequest, in this
// process, returned prepared: as leader, the replica takes the batch as
// well-formed and prepared as its log entry.
func (r *Replica) ReceivePrepared(conn core.ConnID, h core.Header, payload, prepared []byte) {
	r.receiveClient(dest{via: r.self, conn: conn}, h, payload, prepared)
}

// receiveClient handles a client frame that reached this replica directly
// or was forwarded to it (to says where the answer goes). prepared, when
// not nil, is the log entry PrepareRequest made of the frame's batch in
// this process (see ReceivePrepared); a forwarded frame never has one.
func (r *Replica) receiveClient(to dest, h core.Header, payload, prepared []byte) {
	if r.failed != nil {
		r.sendError(to, h, core.ClusterUnavailable, "the replica has stopped: %v", r.failed)
		return
	}
	frame := payload // as it arrived: what a held frame keeps
	if h.Type == core.MsgRequest && h.ClientID == 0 && to.via == r.self {
		// A read without a session (core.CutSessionlessRead), from a client
		// of this replica: checked here, and forwarded without the cluster
		// id (a forwarded frame of client id 0 has been checked).
		cluster, request, err := core.CutSessionlessRead(payload)
		switch {
		case err != nil:
			r.sendError(to, h, core.MalformedRequest, "%v", err)
			return
		case cluster != r.cfg.Cluster:
			r.sendError(to, h, core.WrongCluster, "this is cluster %s, not %s", r.cfg.Cluster, cluster)
			return
		case core.Operation(request[0]).Mutates():
			r.sendError(to, h, core.SessionExpired, "a write needs a session: register first")
			return
		}
		payload, prepared = request, nil
	}
	if h.Type == core.MsgRegister && to.via == r.self && !r.admitRegister(to.conn, h) {
		return
	}
	if h.Type == core.MsgRequest && len(payload) > 0 && isLocal(core.Operation(payload[0])) {
		// Status, topology and ping describe this replica: any replica
		// answers them itself. So does it a feed read, from what it has
		// applied: the feed is the same on every replica up to its applied
		// index, and a reader resumes after its last sequence, so a
		// lagging replica only answers later, never differently.
		op, req, err := core.DecodeRequestMessage(payload)
		reply, opErr := r.execute(op, max(r.clock.RealtimeNS(), r.lastOpTS), req)
		if err != nil {
			opErr = err
		}
		r.reply(to, h, op, reply, opErr)
		return
	}
	if r.role != Leader {
		r.forward(to, h, payload)
		return
	}
	if r.applied < r.termStart {
		// Not caught up with its own log yet: answering now could miss
		// acknowledged writes (or sessions) of earlier terms.
		if len(r.held) >= r.cfg.MaxPendingEntries {
			r.sendError(to, h, core.ClusterBusy, "the replica is catching up; retry")
			return
		}
		r.held = append(r.held, heldFrame{to, h, bytes.Clone(frame), prepared})
		return
	}
	switch h.Type {
	case core.MsgRegister:
		r.receiveRegister(to, h, payload)
	case core.MsgRequest:
		r.receiveRequest(to, h, payload, prepared)
	default:
		r.sendError(to, h, core.MalformedRequest, "unexpected message type %s", h.Type)
	}
}

// isLocal reports whether op is answered by whichever replica receives it.
func isLocal(op core.Operation) bool {
	return op == core.OpStatus || op == core.OpTopology || op == core.OpPing || op == core.OpReadFeed
}

func (r *Replica) receiveRegister(to dest, h core.Header, payload []byte) {
	cluster, err := core.DecodeRegister(payload)
	switch {
	case err != nil:
		r.sendError(to, h, core.MalformedRequest, "%v", err)
	case cluster != r.cfg.Cluster:
		r.sendError(to, h, core.WrongCluster, "this is cluster %s, not %s", r.cfg.Cluster, cluster)
	case r.pending() >= r.cfg.MaxPendingEntries:
		r.sendError(to, h, core.ClusterBusy, "too many operations pending; retry")
	default:
		idx := r.appendEntry(entry{kind: kindRegister, timestamp: r.nextTimestamp()})
		r.waiting[idx] = waiter{to, h, r.term}
	}
}

func (r *Replica) receiveRequest(to dest, h core.Header, payload, prepared []byte) {
	// A well-formed insert or upsert batch goes into the log entry as the
	// client encoded it, with the leader's cells filled in: decoding and
	// re-encoding a batch would cost more than the copy.
	var op core.Operation
	var batch bool
	if prepared != nil {
		// PrepareRequest found this payload a well-formed batch.
		op, batch = core.Operation(payload[0]), true
	} else {
		op, _, batch = batchRequest(payload)
	}
	var req any
	if pr := r.reads.incoming; pr != nil && !batch {
		op, req = pr.op, pr.req // decoded where the frame arrived (PrepareRead)
	} else if !batch {
		var err error
		if op, req, err = core.DecodeRequestMessage(payload); err != nil {
			if op.Valid() {
				r.reply(to, h, op, nil, err)
			} else {
				r.sendError(to, h, core.UnknownOperation, "%v", err)
			}
			return
		}
	}
	if h.ClientID == 0 && !op.Mutates() {
		// A read without a session (see receiveClient): reads go on where
		// no write, and so no registration, can, as on a full disk.
		r.read(to, h, payload)
		return
	}
	s := r.sessions.get(h.ClientID)
	if s == nil {
		r.sendError(to, h, core.SessionExpired, "session %d is unknown or was evicted; register again", h.ClientID)
		return
	}
	if !op.Mutates() {
		r.read(to, h, payload)
		return
	}
	var sum uint32
	if prepared != nil {
		sum = binary.LittleEndian.Uint32(prepared[entryBaseSize:]) // PrepareRequest's
	} else {
		sum = requestSum(payload)
	}
	switch inflight, busy := r.inflight[h.ClientID]; {
	case h.Request == s.lastRequest && s.reply != nil:
		if s.summed && s.sum != sum {
			r.requestMismatch(to, h, s.sum, sum)
			return
		}
		r.send(to, core.Header{ClientID: h.ClientID, Request: h.Request, Type: s.replyType}, s.reply)
		return
	case h.Request <= s.lastRequest:
		r.sendError(to, h, core.StaleRequest, "request %d is older than the session's last, %d", h.Request, s.lastRequest)
		return
	case busy && inflight.request == h.Request:
		if inflight.summed && inflight.sum != sum {
			r.requestMismatch(to, h, inflight.sum, sum)
			return
		}
		r.rewait(h, to) // a retry, perhaps on a new connection: answer there
		return
	case busy:
		// Either the client broke the one-request-at-a-time rule, or this
		// replica is behind: a newer leader answered the earlier request
		// and this one has not applied it yet. A retry settles both.
		r.sendError(to, h, core.RequestInFlight, "request %d of this session is not yet applied here; retry", inflight.request)
		return
	case r.pending() >= r.cfg.MaxPendingEntries:
		r.sendError(to, h, core.ClusterBusy, "too many operations pending; retry")
		return
	}
	// The entry's header, then the request right after it: one buffer (a
	// batch is over a megabyte).
	head := entry{kind: kindOperation, session: h.ClientID, request: h.Request, op: op, summed: true, sum: sum}
	data := prepared // a batch's entry, when the connection made it
	if batch {
		if data == nil {
			data = batchEntry(payload)
		}
		head.putHeader(data)
	} else {
		data = head.appendTo(make([]byte, 0, entryHeaderSize+len(payload)+64))
		var err error
		if data, err = core.AppendRequest(data, op, req); err != nil {
			r.reply(to, h, op, nil, err)
			return
		}
	}
	ts := r.nextTimestamp()
	binary.LittleEndian.PutUint64(data[1:9], ts) // entry.timestamp
	idx := r.appendData(data)
	r.waiting[idx] = waiter{to, h, r.term}
	r.inflight[h.ClientID] = inflightReq{request: h.Request, summed: true, sum: sum}
}

// requestMismatch refuses request h, whose number the session used for
// another request, of checksum had; this one's is got.
func (r *Replica) requestMismatch(to dest, h core.Header, had, got uint32) {
	r.sendError(to, h, core.RequestMismatch,
		"request number %d of session %d was used for another request (checksum %08x; this one's is %08x): a retry must resend the same request, and a new request must take the next number",
		h.Request, h.ClientID, had, got)
}

// batchRequest reports whether the request payload is a well-formed insert
// or upsert batch (core.EventRecords), its operation, and the batch's
// records within payload.
func batchRequest(payload []byte) (op core.Operation, records []byte, ok bool) {
	if len(payload) == 0 {
		return core.OpInvalid, nil, false
	}
	op = core.Operation(payload[0])
	if op != core.OpInsert && op != core.OpUpsert {
		return op, nil, false
	}
	records, _, ok = core.EventRecords(payload[1:])
	return op, records, ok
}

// rewait moves the pending answer of (session, request) to to.
func (r *Replica) rewait(h core.Header, to dest) {
	for idx := r.applied + 1; idx <= r.lastIndex; idx++ { // bounded by MaxPendingEntries
		if w, ok := r.waiting[idx]; ok && w.h.ClientID == h.ClientID && w.h.Request == h.Request {
			r.waiting[idx] = waiter{to, h, w.term}
			return
		}
	}
}

// reply answers a request whose reply no session keeps (a read, a local
// operation, a request refused before it was logged).
func (r *Replica) reply(to dest, h core.Header, op core.Operation, reply any, err error) {
	frame, _, encErr := replyFrame(r.io.ReplyBuffer(), h, op, reply, err)
	if encErr != nil {
		r.sendError(to, h, core.InternalError, "encoding the reply: %v", encErr)
		return
	}
	if to.via == r.self {
		r.io.SendReply(to.conn, frame) // nothing keeps it: its memory may serve again
		return
	}
	r.sendFrame(to, frame)
}

// replyFrame encodes op's reply straight into a frame answering h, appended
// to buf[:0] (a query result can be a megabyte: no second copy), and
// returns the frame and its payload, which aliases it.
func replyFrame(buf []byte, h core.Header, op core.Operation, reply any, opErr error) (frame, payload []byte, err error) {
	if cap(buf) < 512 {
		buf = make([]byte, 0, 512)
	}
	b, start := core.BeginFrame(buf[:0])
	if b, err = core.AppendReplyMessage(b, op, reply, opErr); err != nil {
		return nil, nil, err
	}
	h.Type = core.MsgReply
	frame = core.FinishFrame(b, start, h)
	return frame, frame[start+core.FrameLengthSize+core.FrameHeaderSize : len(frame)-core.FrameChecksumSize], nil
}

// apply executes one committed entry and answers the client waiting for it
// (on whichever replica the client's request was received and appended).
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
	if waited && w.term != le.Term {
		// The entry the client waited for was replaced by another leader's.
		r.sendError(w.to, w.h, core.PrimaryUnreachable, "the leader changed before the request committed; retry it")
		waited = false
	}
	switch e.kind {
	case kindNoop:
	case kindRegister:
		r.sessions.register(le.Index)
		if waited {
			r.send(w.to, core.Header{ClientID: le.Index, Request: w.h.Request, Type: core.MsgRegisterReply}, core.AppendRegisterReply(nil, le.Index))
		}
	case kindOperation:
		var s *session
		if e.session != 0 {
			if f, ok := r.inflight[e.session]; ok && f.request == e.request {
				delete(r.inflight, e.session)
			}
			s = r.sessions.get(e.session)
			if s == nil {
				if waited {
					r.sendError(w.to, w.h, core.SessionExpired, "session %d was evicted; register again", e.session)
				}
				return nil
			}
			if e.request <= s.lastRequest { // a duplicate in the log: never run twice
				switch {
				case !waited || e.request != s.lastRequest || s.reply == nil:
				case e.summed && s.summed && e.sum != s.sum:
					r.requestMismatch(w.to, w.h, s.sum, e.sum)
				default:
					r.send(w.to, core.Header{ClientID: w.h.ClientID, Request: w.h.Request, Type: s.replyType}, s.reply)
				}
				return nil
			}
		}
		var req any
		var err error
		if e.op == core.OpInsert || e.op == core.OpUpsert {
			// Decoded into the replica's memory of the last batch: the
			// state machine copies the events, and a fresh megabyte per
			// batch would be garbage the collector makes room for.
			var b *core.InsertRequest
			if b, err = core.DecodeBatch(e.op, e.payload, r.batchEvents); err == nil {
				r.batchEvents, req = b.Events[:0], b
			}
		} else {
			req, err = core.DecodeRequest(e.op, e.payload)
		}
		if err != nil {
			return fmt.Errorf("applying log entry %d: %w", le.Index, err)
		}
		r.sm.BeginEntry(le.Index, e.timestamp) // fence notifications' sequences derive from the index
		reply, opErr := r.execute(e.op, e.timestamp, req)
		if e.session == 0 && e.op == core.OpCleanupExpired && opErr == nil {
			r.cleanupBacklog = reply.(*core.CleanupReply).Scanned >= core.DefaultCleanupLimit
		}
		frame, payload, err := replyFrame(nil, core.Header{ClientID: w.h.ClientID, Request: w.h.Request}, e.op, reply, opErr)
		if err != nil {
			return fmt.Errorf("encoding the reply of log entry %d: %w", le.Index, err)
		}
		if s != nil {
			s.lastRequest, s.reply, s.replyType = e.request, payload, core.MsgReply
			s.summed, s.sum = e.summed, e.sum
			r.sessions.touch(s, le.Index)
		}
		if waited {
			r.sendFrame(w.to, frame)
		}
	}
	return nil
}

func (r *Replica) nodeID(i uint32) string { return fmt.Sprintf("replica-%d", i) }

// The replicated state's snapshot encoding: magic "GEOREPL2", the last
// applied timestamp (u64), the session table (see sessionTable.appendTo),
// then the state machine's own snapshot (which carries its own checksum).
// Storage wraps the whole in a checksummed file. A "GEOREPL1" state, whose
// sessions keep no request checksums, decodes too.
const (
	stateMagic   = "GEOREPL2"
	stateMagicV1 = "GEOREPL1"
)

// statePrefix is the state's encoding up to the state machine's snapshot.
func (r *Replica) statePrefix() []byte {
	b := make([]byte, 16, 1<<16)
	copy(b, stateMagic)
	binary.LittleEndian.PutUint64(b[8:], r.lastOpTS)
	return r.sessions.appendTo(b)
}

func (r *Replica) restoreState(b []byte) error {
	var s decodedState
	if err := s.decode(b, r.cfg.MaxSessions); err != nil {
		return err
	}
	r.takeState(&s)
	return nil
}

// decodedState is a replicated state decoded from a snapshot.
type decodedState struct {
	lastOpTS uint64
	sessions *sessionTable
	sm       *statemachine.StateMachine
}

// decode decodes b (see stateMagic). It reads nothing of any replica, so
// it may run beside the event loop.
func (s *decodedState) decode(b []byte, maxSessions int) error {
	// A follower's snapshot file written before the history was streamed
	// ends in a history section (core.SplitHistory), which the history
	// checkpoint beside it holds too: the state is what precedes it.
	b, _, _, err := core.SplitHistory(b)
	if err != nil {
		return err
	}
	version := 0
	if len(b) >= 16 {
		switch string(b[:8]) {
		case stateMagic:
			version = 2
		case stateMagicV1:
			version = 1
		}
	}
	if version == 0 {
		return core.Errorf(core.Corruption, "snapshot is not a GeoEvent replica state")
	}
	s.lastOpTS = binary.LittleEndian.Uint64(b[8:16])
	sessions, rest, err := decodeSessions(b[16:], maxSessions, version)
	if err != nil {
		return err
	}
	sm, err := statemachine.ReadSnapshot(bytes.NewReader(rest))
	if err != nil {
		return err
	}
	s.sessions, s.sm = sessions, sm
	return nil
}

// takeState replaces the replica's state with s.
func (r *Replica) takeState(s *decodedState) {
	r.lastOpTS, r.sessions, r.sm = s.lastOpTS, s.sessions, s.sm
	r.sm.SetMaxScanWork(r.cfg.MaxScanWork)
	r.resetHistory()
	r.encoding = nil // a snapshot of the state replaced is of no use
}
