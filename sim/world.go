package sim

import (
	"bytes"
	"container/heap"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	stdio "io"
	"math/rand/v2"
	"slices"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/replica"
)

// The world is one run: a cluster of 1, 3 or 5 replicas, their disks and
// clocks, the network between them, the client connections and the
// clients, driven tick by tick from one seeded random source in one
// goroutine.

type evKind uint8

const (
	evToNode        evKind = iota + 1 // a frame from a client reaches a replica
	evToClient                        // a frame from a replica reaches a client
	evSynced                          // a disk completes its oldest Sync
	evSnapshotSaved                   // a disk completes its oldest SaveSnapshot
	evConnDown                        // a client learns that its connection is gone
	evRestart                         // a crashed replica starts again
	evToPeer                          // a frame from a replica reaches another one
	evBeside                          // work a replica had done beside it completes
	evApplyMore                       // a replica with a backlog of committed entries applies the next part
	evPeerLost                        // a replica's connection to a crashed one breaks (from: the crashed one)
)

type event struct {
	at    int64
	seq   uint64
	kind  evKind
	node  *node // the disk's replica, or a peer frame's addressee
	epoch int
	from  int // a peer frame's sender
	conn  *conn
	frame []byte

	beside func(*replica.Replica) // evBeside: the work and its answer, run when the event happens
}

type eventHeap []*event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(*event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// conn is one client connection to one incarnation of a replica.
type conn struct {
	id      core.ConnID
	node    *node
	epoch   int
	client  *client
	open    bool
	perfect bool // the checker's connection: no loss, duplication or drops
}

// node is one replica with its disk and clock.
type node struct {
	w     *world
	idx   int
	up    bool
	epoch int // incarnation; completions of an earlier one are dropped
	r     *replica.Replica
	disk  *disk
	clock *Clock
	rand  *rand.Rand // the replica's own seeded source (election jitter)
	cfg   replica.Config
	conns []*conn // open connections, in opening order
	// applyDue is set while an evApplyMore for this incarnation waits.
	applyDue bool
	// spareReply is the memory of the last frame sent with SendReply,
	// poisoned, for ReplyBuffer to hand out again.
	spareReply []byte

	// For the checkers on the replicas (convergence.go).
	noted                   bool   // a digest was noted in this incarnation,
	notedAt                 uint64 // at this applied index
	snapNote                bool   // it froze or installed a snapshot during the current input
	lastApplied, lastCommit uint64 // in this incarnation
	lastRole                replica.Role
	lastTerm                uint64
	lastLeader              uint32
}

// nodeIO is the core.IO a replica is given.
type nodeIO struct{ n *node }

func (io nodeIO) SendClient(c core.ConnID, frame []byte) { io.n.w.fromReplica(io.n, c, frame) }

// SendReply sends a copy of frame and poisons frame itself, which the
// replica promised not to keep, before ReplyBuffer hands its memory out
// again: a replica that kept a reply sent this way (say, cached for a
// retry) would answer with garbage, which the clients' checks catch.
func (io nodeIO) SendReply(c core.ConnID, frame []byte) {
	io.SendClient(c, bytes.Clone(frame))
	for i := range frame {
		frame[i] = 0xa5
	}
	io.n.spareReply = frame[:0]
}

func (io nodeIO) ReplyBuffer() []byte {
	b := io.n.spareReply
	io.n.spareReply = nil
	return b
}
func (io nodeIO) SendPeer(to uint32, frame ...[]byte) {
	io.n.w.sendPeer(io.n, to, bytes.Join(frame, nil))
}
func (io nodeIO) AppendLog(entries []core.LogEntry) { io.n.disk.appendLog(entries) }
func (io nodeIO) SaveHardState(hs core.HardState)   { io.n.disk.saveHardState(hs) }
func (io nodeIO) Sync()                             { io.n.disk.sync() }

// SaveSnapshot installs a leader's snapshot: the history stream written
// for it becomes the history store, live and saved with it.
func (io nodeIO) SaveSnapshot(index, term uint64, data []byte) {
	n := io.n
	n.snapNote = true
	n.disk.saveSnapshot(index, term, data, n.disk.hist.install(index))
}

// WriteHistory applies the writes to the live store at once: in the order
// of the calls, as core.IO asks.
func (nodeIO) PublishApplied(uint64, []core.HistoryWrite) {}

func (io nodeIO) WriteHistory(index uint64, writes []core.HistoryWrite) {
	io.n.disk.hist.apply(index, writes)
}

// ReadHistory answers from the store as it is now (the replica's later
// writes must not show in it) after a random latency, as ReadLog.
func (io nodeIO) ReadHistory(token uint64, reads []core.HistoryRead) {
	n := io.n
	w := n.w
	answers := n.disk.hist.answer(reads)
	at := w.now + w.cfg.syncMin + w.rng.Int64N(w.cfg.syncMax-w.cfg.syncMin+1)
	w.tracef("disk %d history read %d (%d reads), done at %d", n.idx, token, len(reads), at)
	w.schedule(at, &event{kind: evBeside, node: n, epoch: n.epoch, beside: func(r *replica.Replica) { r.HistoryRead(token, answers) }})
}

// ReadLog reads what the disk holds now (the replica's later writes must
// not show in it) and answers after a random latency, as a Sync; with
// chance readFail it finds the first record damaged and answers nothing.
func (io nodeIO) ReadLog(from, to uint64, maxBytes int) {
	n := io.n
	w := n.w
	var entries []core.LogEntry
	if w.rng.Float64() >= w.cfg.readFail {
		entries = n.disk.readLog(from, to, maxBytes)
	}
	w.tracef("disk %d read %d..%d: %d entries", n.idx, from, to, len(entries))
	at := w.now + w.cfg.syncMin + w.rng.Int64N(w.cfg.syncMax-w.cfg.syncMin+1)
	w.schedule(at, &event{kind: evBeside, node: n, epoch: n.epoch, beside: func(r *replica.Replica) { r.LogRead(from, entries) }})
}

// EncodeSnapshot completes after a random latency, as a snapshot save
// does. The encoding runs then, so the replica's writes in between must
// not show in it (the state machine keeps the frozen state for it).
//
// The history stream is a checkpoint of the store as it is now. Its bytes
// (pebble's files) vary from run to run with pebble's background work, so
// the trace takes snapshot frames by type alone (network.go).
func (io nodeIO) EncodeSnapshot(index uint64, encode func() []byte) {
	io.n.snapNote = true                     // the state it encodes is the state now: note its digest
	size := io.n.disk.hist.openStream(index) // the history store as it is now
	io.beside("encodes", index, func(r *replica.Replica) {
		r.SnapshotEncoded(index, encode(), size)
	})
}

// ReadSnapshotStream reads the chunk now and answers after a random
// latency, as ReadLog.
func (io nodeIO) ReadSnapshotStream(index, offset uint64, max int) {
	data := io.n.disk.hist.readStream(index, offset, max)
	io.later(func(r *replica.Replica) { r.SnapshotStreamRead(index, offset, data) })
}

func (io nodeIO) DropSnapshotStream(index uint64) { io.n.disk.hist.dropStream(index) }

// WriteSnapshotStream writes the chunk now and answers after a random
// latency, as a Sync.
func (io nodeIO) WriteSnapshotStream(index, offset uint64, data []byte) {
	ok := io.n.disk.hist.writeStream(index, offset, data)
	io.later(func(r *replica.Replica) { r.SnapshotStreamWritten(index, offset, ok) })
}

// later answers after a random latency, as a disk's.
func (io nodeIO) later(answer func(*replica.Replica)) {
	n := io.n
	w := n.w
	at := w.now + w.cfg.syncMin + w.rng.Int64N(w.cfg.syncMax-w.cfg.syncMin+1)
	w.schedule(at, &event{kind: evBeside, node: n, epoch: n.epoch, beside: answer})
}

// WriteSnapshot is EncodeSnapshot whose bytes go to the disk as a
// SaveSnapshot made when the encoding completes, answered by SnapshotSaved
// once durable. An encoding that fails fails the run: the replica's own
// state must always encode.
func (io nodeIO) WriteSnapshot(index, term uint64, encode func(w stdio.Writer) error) {
	n := io.n
	if index > n.disk.volLast {
		// core.IO: the replica asks only once it has appended the entry.
		n.w.fail("replica %d wrote a snapshot at index %d beyond its log's last appended entry %d", n.idx, index, n.disk.volLast)
		return
	}
	n.snapNote = true                      // the state it encodes is the state now: note its digest
	checkpoint := n.disk.hist.checkpoint() // the history store as it is now, saved with it
	io.beside("writes", index, func(*replica.Replica) {
		var b bytes.Buffer
		if err := encode(&b); err != nil {
			n.w.fail("replica %d could not encode its snapshot at index %d: %v", n.idx, index, err)
			return
		}
		n.disk.saveSnapshot(index, term, b.Bytes(), checkpoint)
	})
}

// DecodeSnapshot completes after a random latency too; the decoding runs
// then, while the replica may have taken other inputs.
func (io nodeIO) DecodeSnapshot(index uint64, decode func()) {
	io.beside("decodes", index, func(r *replica.Replica) { decode(); r.SnapshotDecoded(index) })
}

// beside schedules work and its answer to the replica after a random
// latency (lost if the replica restarts first).
func (io nodeIO) beside(what string, index uint64, work func(*replica.Replica)) {
	n := io.n
	w := n.w
	at := w.now + 1 + w.rng.Int64N(w.cfg.snapMax)
	w.schedule(at, &event{kind: evBeside, node: n, epoch: n.epoch, beside: work})
	w.tracef("replica %d %s a snapshot at index %d, done at %d", n.idx, what, index, at)
}

var clusterID = core.Uint128{Hi: 0x6765_6f65_7665_6e74, Lo: 0x51}

type world struct {
	seed    int64
	ticks   int64
	opts    Options
	cfg     runConfig
	rng     *rand.Rand
	now     int64
	stamp   int64 // orders every call and return of the history
	events  eventHeap
	seq     uint64
	nodes   []*node
	net     *network
	peerBuf []byte                // the payload a replica is handed (network.go)
	conns   map[core.ConnID]*conn // lookup only, never iterated
	lastCon core.ConnID
	clients []*client
	probe   *client
	hist    *history
	wl      *workload
	nonce   uint32

	trace     hash.Hash
	failure   string
	unchecked []int // entities whose linearizability check ran out of budget

	// mutate, set by tests only, may change a reply as the client records
	// it: a stand-in for a replica bug, to show that the checkers see it.
	mutate func(op *opRec, code core.Code, reply any) any
	// mutateDigest, set by tests only, may change a digest as the checker
	// notes it: a stand-in for a replica whose state diverged.
	mutateDigest func(n *node, applied uint64, d [32]byte) [32]byte
	// onPeer, set by tests only, sees every frame delivered between
	// replicas, and keeps it from the replica when it returns true.
	onPeer func(from, to int, h core.Header, payload []byte) bool
	// onTick, set by tests only, runs at the start of every tick, before
	// the faults: a scripted scenario.
	onTick func()

	// The checkers on the replicas (convergence.go).
	digests     map[uint64]digestNote // applied index -> first digest noted; lookup only
	leaders     map[uint64]int        // term -> the replica that led it; lookup only
	leaderTerm  uint64
	divergence  string
	convergence string

	crashes, drops, partitionsCut, leaderChanges int
	damagedLogs, damagedHistories, rebuilds      int
	peerSent, peerLost, peerPeak, digestNotes    int
}

func newWorld(seed int64, ticks int64, opts Options) *world {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15^uint64(seed)>>1))
	w := &world{
		seed:    seed,
		opts:    opts,
		rng:     rng,
		conns:   make(map[core.ConnID]*conn),
		trace:   sha256.New(),
		hist:    &history{},
		digests: make(map[uint64]digestNote),
		leaders: make(map[uint64]int),
	}
	w.cfg = newRunConfig(rng, opts)
	w.ticks = max(ticks, MinTicks(w.cfg))
	w.tracef("seed %d ticks %d: %s", seed, w.ticks, w.cfg.String())
	w.wl = newWorkload(w)

	k := w.cfg.replicas
	var addrs []string
	for i := range k {
		addrs = append(addrs, fmt.Sprintf("sim-%d:3000", i))
	}
	for i := range k {
		n := &node{w: w, idx: i}
		n.disk = newDisk(n)
		n.clock = &Clock{now: &w.now, monoBase: w.cfg.monoBase[i], realBase: w.cfg.clockRealBase + w.cfg.realOffset[i], DriftPPM: w.cfg.driftPPM[i]}
		n.rand = rand.New(rand.NewPCG(w.rng.Uint64(), w.rng.Uint64()))
		n.cfg = replica.Config{
			Cluster:            clusterID,
			ReplicaIndex:       uint32(i),
			ReplicaCount:       uint32(k),
			Addresses:          addrs,
			MaxSessions:        w.cfg.maxSessions,
			MaxSessionsPerConn: w.cfg.maxSessionsPerConn,
			MaxScanWork:        w.cfg.maxScanWork,
			MaxPendingEntries:  w.cfg.maxPending,
			SnapshotEvery:      w.cfg.snapshotEvery,
			SnapshotMinBytes:   w.cfg.snapshotMinBytes,
			ShedBatch:          w.cfg.shedBatch,
			MaxApplyEntries:    w.cfg.maxApply,
			CleanupEveryNS:     w.cfg.cleanupEveryNS,
			ElectionTimeoutNS:  w.cfg.electionTimeoutNS,
			HeartbeatNS:        w.cfg.heartbeatNS,
		}
		w.nodes = append(w.nodes, n)
	}
	w.net = newNetwork(k)
	for i := 0; i < w.cfg.clients; i++ {
		w.clients = append(w.clients, newClient(w, i, false))
	}
	w.probe = newClient(w, w.cfg.clients, true)
	return w
}

// MinTicks is the shortest run for a configuration: the end-of-run phases
// (quiet period, liveness bound, final reads) plus a second of faults.
func MinTicks(c runConfig) int64 { return c.quiet + 1000 }

func (w *world) fail(format string, args ...any) {
	if w.failure == "" {
		w.failure = fmt.Sprintf("tick %d: ", w.now) + fmt.Sprintf(format, args...)
		w.tracef("FAILURE %s", w.failure)
	}
}

// tracef adds an event to the trace digest and, when verbose, to the log.
// The digest covers the format and the arguments, which are integers,
// strings, byte slices and values with a deterministic %v.
func (w *world) tracef(format string, args ...any) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(w.now))
	w.trace.Write(b[:])
	w.trace.Write([]byte(format))
	for _, a := range args {
		switch v := a.(type) {
		case int:
			binary.LittleEndian.PutUint64(b[:], uint64(v))
			w.trace.Write(b[:])
		case int64:
			binary.LittleEndian.PutUint64(b[:], uint64(v))
			w.trace.Write(b[:])
		case uint64:
			binary.LittleEndian.PutUint64(b[:], v)
			w.trace.Write(b[:])
		case uint32:
			binary.LittleEndian.PutUint64(b[:], uint64(v))
			w.trace.Write(b[:])
		case core.ConnID:
			binary.LittleEndian.PutUint64(b[:], uint64(v))
			w.trace.Write(b[:])
		case string:
			w.trace.Write([]byte(v))
		case []byte:
			w.trace.Write(v)
		case lazy:
			// Only in the log: what it describes is in the digest already.
		default:
			fmt.Fprintf(w.trace, "%v", v)
		}
	}
	if w.opts.Log != nil {
		fmt.Fprintf(w.opts.Log, "%7d  %s\n", w.now, fmt.Sprintf(format, args...))
	}
}

// lazy is a description computed only when the run is logged.
type lazy func() string

func (l lazy) String() string { return l() }

// hashBytes adds bytes to the trace digest without logging them.
func (w *world) hashBytes(b []byte) { w.trace.Write(b) }

func (w *world) popEvent() *event { return heap.Pop(&w.events).(*event) }

func (w *world) schedule(at int64, e *event) {
	e.at = max(at, w.now)
	w.seq++
	e.seq = w.seq
	heap.Push(&w.events, e)
}

func (w *world) nextStamp() int64 {
	w.stamp++
	return w.stamp
}

// Phases of the run. Faults stop `quiet` ticks before the end; clients
// start no operation in the last live+tail ticks, so that everything they
// started is answered within the liveness bound; the checker reads every
// entity in the last `tail` ticks.
func (w *world) faultsOn() bool     { return w.now < w.ticks-w.cfg.quiet }
func (w *world) quietStart() int64  { return w.ticks - w.cfg.quiet }
func (w *world) acceptingOps() bool { return w.now < w.ticks-w.cfg.live-w.cfg.tail }

// tornPrefix picks how many of n pending writes survive a crash: often
// none or all, otherwise any number between.
func (w *world) tornPrefix(n int) int {
	k := 0
	switch r := w.rng.IntN(10); {
	case n == 0 || r < 4:
	case r < 6:
		k = n
	default:
		k = w.rng.IntN(n + 1)
	}
	return k
}

// realtimeBounds bounds the realtime any replica reads between two ticks.
func (w *world) realtimeBounds(from, to int64) (lo, hi uint64) {
	lo, hi = ^uint64(0), 0
	for _, n := range w.nodes {
		lo = min(lo, n.clock.realAt(from))
		hi = max(hi, n.clock.realAt(to))
	}
	return lo, hi
}

func (w *world) run() {
	for _, n := range w.nodes {
		w.start(n)
	}
	w.probe.planRound("start")
	finalPlanned := false
	for w.now = 0; w.now < w.ticks && w.failure == ""; w.now++ {
		if w.onTick != nil {
			w.onTick()
		}
		w.injectFaults()
		for len(w.events) > 0 && w.events[0].at <= w.now && w.failure == "" {
			w.handle(w.popEvent())
		}
		for _, n := range w.nodes {
			if n.up && w.failure == "" {
				n.r.Tick()
				w.afterInput(n)
			}
		}
		w.observe()
		if !finalPlanned && w.now >= w.ticks-w.cfg.tail {
			finalPlanned = true
			w.probe.planRound("final")
		}
		for _, c := range w.clients {
			c.tick()
		}
		w.probe.tick()
	}
	if w.now > w.ticks {
		w.now = w.ticks
	}
	if w.failure == "" {
		w.settle()
	}
}

func (w *world) checkReplica(n *node) {
	if err := n.r.Err(); err != nil {
		w.fail("replica %d reports an error: %v", n.idx, err)
	}
}

// afterInput runs after every input to a replica: it checks the replica
// and notes its digest when it saved a snapshot.
func (w *world) afterInput(n *node) {
	w.checkReplica(n)
	if n.snapNote && n.up && w.failure == "" {
		n.snapNote = false
		w.noteDigest(n, "snapshot")
	}
	w.scheduleApply(n)
}

// scheduleApply has a replica with a backlog of committed entries apply
// the next part in the same tick, after the events already due (as the
// production loop takes it in turn with what is ready).
func (w *world) scheduleApply(n *node) {
	if n.up && !n.applyDue && n.r.Backlog() {
		n.applyDue = true
		w.schedule(w.now, &event{kind: evApplyMore, node: n, epoch: n.epoch})
	}
}

func (w *world) handle(e *event) {
	switch e.kind {
	case evToNode:
		c := e.conn
		n := c.node
		if !c.open || !n.up || n.epoch != c.epoch {
			return
		}
		h, payload, rest, err := core.DecodeFrame(e.frame)
		if err != nil || len(rest) != 0 {
			w.fail("a client frame does not decode: %v", err)
			return
		}
		w.tracef("deliver conn %d -> replica %d: %s req=%d session=%d", c.id, n.idx, h.Type.String(), h.Request, h.ClientID)
		w.hashBytes(e.frame)
		// Production IO prepares a client frame on the connection's
		// goroutine while its replica leads (replica.PrepareRequest);
		// half the frames here take that path, on any replica (a hint
		// may be stale), so that every path is run.
		p := slices.Clone(payload)
		var prepared []byte
		if w.rng.IntN(2) == 0 {
			prepared = replica.PrepareRequest(h, p)
		}
		if prepared != nil {
			n.r.ReceivePrepared(c.id, h, p, prepared)
		} else {
			n.r.Receive(c.id, h, p)
		}
		w.afterInput(n)
	case evToClient:
		c := e.conn
		if !c.open {
			return
		}
		w.tracef("deliver replica -> conn %d: %d bytes", c.id, len(e.frame))
		w.hashBytes(e.frame)
		if _, _, rest, err := core.DecodeFrame(e.frame); err != nil || len(rest) != 0 {
			// It was checked when sent, and links never corrupt frames.
			w.fail("a frame to conn %d changed after the replica sent it (a buffer the replica did not own, such as a peer payload, went out with SendClient?): %v", c.id, err)
			return
		}
		c.client.receive(c, e.frame)
	case evSynced:
		n := e.node
		if !n.up || n.epoch != e.epoch {
			return
		}
		if n.disk.answeredEarly > 0 {
			n.disk.answeredEarly-- // answered with an earlier Sync of the same tick
			return
		}
		idx, syncs := n.disk.completeSync()
		w.tracef("disk %d synced through %d (%d syncs)", n.idx, idx, syncs)
		n.r.Synced(idx, syncs)
		w.afterInput(n)
	case evSnapshotSaved:
		n := e.node
		if !n.up || n.epoch != e.epoch {
			return
		}
		idx := n.disk.completeSnapshot()
		w.tracef("disk %d snapshot saved at %d", n.idx, idx)
		n.r.SnapshotSaved(idx)
		w.afterInput(n)
	case evConnDown:
		e.conn.client.connDown(e.conn)
	case evRestart:
		w.start(e.node)
		w.probe.planRound("restart")
	case evPeerLost:
		n := e.node
		if !n.up || n.epoch != e.epoch {
			return
		}
		w.tracef("replica %d: its connection to replica %d broke", n.idx, e.from)
		n.r.PeerLost(uint32(e.from))
		w.afterInput(n)
	case evToPeer:
		w.deliverPeer(e)
	case evBeside:
		n := e.node
		if !n.up || n.epoch != e.epoch {
			return
		}
		w.tracef("replica %d: work beside it completes", n.idx)
		e.beside(n.r)
		w.afterInput(n)
	case evApplyMore:
		n := e.node
		if !n.up || n.epoch != e.epoch {
			return
		}
		n.applyDue = false
		w.tracef("replica %d applies more of its backlog", n.idx)
		n.r.ApplyMore()
		w.afterInput(n)
	}
}

// start (re)starts a replica on what its disk holds.
func (w *world) start(n *node) {
	rec := n.disk.recovered()
	n.epoch++
	r, err := replica.New(n.cfg, nodeIO{n}, n.clock, n.rand, rec)
	if err != nil {
		w.fail("replica %d does not start on its recovered storage (snapshot %d, %d entries): %v", n.idx, rec.SnapshotIndex, len(rec.Entries), err)
		return
	}
	n.r, n.up, n.applyDue = r, true, false
	n.noted, n.snapNote, n.lastApplied, n.lastCommit = false, false, 0, 0
	n.lastRole, n.lastTerm, n.lastLeader = 0, 0, 0
	w.tracef("replica %d starts (epoch %d): term %d, snapshot %d, %d entries, repairing %v", n.idx, n.epoch, rec.HardState.Term, rec.SnapshotIndex, len(rec.Entries), rec.HardState.Repairing)
	w.noteDigest(n, "start")
	w.scheduleApply(n)
}

func (w *world) crash(n *node) {
	w.crashes++
	w.noteDigest(n, "crash")
	w.tracef("replica %d crashes", n.idx)
	n.up = false
	n.r = nil
	n.disk.crash()
	if w.cfg.damagePerCrash > 0 && w.rng.Float64() < w.cfg.damagePerCrash {
		w.damageLog(n)
	}
	if w.cfg.damageHistoryPerCrash > 0 && w.rng.Float64() < w.cfg.damageHistoryPerCrash {
		w.damageHistory(n)
	}
	for _, c := range n.conns {
		c.open = false
		w.schedule(w.now+1, &event{kind: evConnDown, conn: c})
	}
	n.conns = nil
	// The others' connections to it break, as a killed process's sockets
	// are reset: each notices a tick or two later.
	for _, o := range w.nodes {
		if o != n && o.up {
			w.schedule(w.now+1+w.rng.Int64N(2), &event{kind: evPeerLost, node: o, epoch: o.epoch, from: n.idx})
		}
	}
	down := w.cfg.downMin + w.rng.Int64N(w.cfg.downMax-w.cfg.downMin+1)
	w.schedule(w.now+down, &event{kind: evRestart, node: n})
}

// damageLog damages a record of a crashed replica's durable log (after its
// snapshot), found when it restarts (disk.recovered), unless that would
// leave fewer than a majority of the replicas intact: at most (n-1)/2 may
// be damaged or repairing (a durable hard state with Repairing set) at
// once, counting this one, so that a majority holds every acknowledged
// entry and can elect a leader. It reports whether it did.
func (w *world) damageLog(n *node) bool {
	d := n.disk
	if n.up || len(d.log) == 0 {
		return false
	}
	others, ok := w.mayDamage(n)
	if !ok {
		return false
	}
	// Often the first entry after the snapshot (the log is then empty) or
	// the last one (probably acknowledged just before the crash), otherwise
	// any.
	first, last := d.log[0].Index, d.lastDurable()
	var at uint64
	switch w.rng.IntN(4) {
	case 0:
		at = first
	case 1:
		at = last
	default:
		at = first + w.rng.Uint64N(last-first+1)
	}
	d.damageLog(at)
	w.damagedLogs++
	w.tracef("disk %d damaged: log record %d of %d..%d (after snapshot %d); %d other replicas damaged or repairing",
		n.idx, at, first, last, last-uint64(len(d.log)), others)
	return true
}

// mayDamage counts the replicas other than n that are damaged or
// repairing, and reports whether n may be damaged too: at most (n-1)/2 at
// once, counting it.
func (w *world) mayDamage(n *node) (others int, ok bool) {
	for _, m := range w.nodes {
		if m != n && m.disk.damagedOrRepairing() {
			others++
		}
	}
	return others, others+1 <= (len(w.nodes)-1)/2
}

// damageHistory damages the tables of the history checkpoint of a crashed
// replica's durable snapshot, found when it restarts (disk.recovered),
// under damageLog's rule: at most (n-1)/2 replicas damaged or repairing at
// once. It reports whether it did.
func (w *world) damageHistory(n *node) bool {
	d := n.disk
	if n.up || d.snap == nil || d.snap.hist == "" || d.histDamaged {
		return false
	}
	others, ok := w.mayDamage(n)
	if !ok {
		return false
	}
	// The live store too: recovery may keep it rather than restore the
	// checkpoint (history.Recover), and a damage it never reads would
	// wait, unfound, for a later recovery that restores the checkpoint.
	tables := d.hist.damage(d.snap.hist) + d.hist.damage(simLiveHistory)
	if tables == 0 {
		return false
	}
	d.histDamaged = true
	w.damagedHistories++
	// Not the table count: how many tables hold the same history depends
	// on Pebble's background compactions (see disk.rebuildDamagedHistory).
	w.tracef("disk %d damaged: the tables of its history store and checkpoint %s (snapshot %d); %d other replicas damaged or repairing",
		n.idx, d.snap.hist, d.snap.index, others)
	return true
}

func (w *world) injectFaults() {
	if w.net.partitioned() && (w.now >= w.net.partUntil || !w.faultsOn()) {
		w.healPartition()
	}
	if !w.faultsOn() {
		return
	}
	if w.cfg.crashPerTick > 0 && w.rng.Float64() < w.cfg.crashPerTick {
		// One replica crashes: the leader, now and then, or any that is up.
		var up []*node
		for _, n := range w.nodes {
			if n.up {
				up = append(up, n)
			}
		}
		l := w.leader()
		switch {
		case l >= 0 && len(w.nodes) > 1 && w.rng.Float64() < w.cfg.crashLeader:
			w.crash(w.nodes[l])
		case len(up) > 0:
			w.crash(up[w.rng.IntN(len(up))])
		}
	}
	if w.cfg.partitionPerTick > 0 && !w.net.partitioned() && w.rng.Float64() < w.cfg.partitionPerTick {
		w.startPartition()
	}
	if w.cfg.connDropPerTick > 0 && w.rng.Float64() < w.cfg.connDropPerTick {
		var open []*conn
		for _, n := range w.nodes {
			for _, c := range n.conns {
				if !c.perfect {
					open = append(open, c)
				}
			}
		}
		if len(open) > 0 {
			w.drops++
			w.closeConn(open[w.rng.IntN(len(open))], "dropped")
		}
	}
}

// openConn connects a client to a replica, or returns nil when it is down.
func (w *world) openConn(cl *client, n *node) *conn {
	if !n.up {
		return nil
	}
	w.lastCon++
	c := &conn{id: w.lastCon, node: n, epoch: n.epoch, client: cl, open: true, perfect: cl.probe}
	w.conns[c.id] = c
	n.conns = append(n.conns, c)
	w.tracef("client %d connects to replica %d: conn %d", cl.id, n.idx, c.id)
	return c
}

// closeConn closes a connection: frames in flight on it are lost, the
// replica is told, and the client learns it a tick later.
func (w *world) closeConn(c *conn, why string) {
	if !c.open {
		return
	}
	c.open = false
	n := c.node
	n.conns = slices.DeleteFunc(n.conns, func(x *conn) bool { return x == c })
	w.tracef("conn %d %s", c.id, why)
	if n.up && n.epoch == c.epoch {
		n.r.Closed(c.id)
		w.checkReplica(n)
	}
	w.schedule(w.now+1, &event{kind: evConnDown, conn: c})
}

// send puts a frame on a connection's link: delayed, and unless the link
// is perfect or faults are over, perhaps lost or duplicated.
func (w *world) send(c *conn, toNode bool, frame []byte) {
	if !c.open {
		return
	}
	copies := 1
	if !c.perfect && w.faultsOn() {
		if w.rng.Float64() < w.cfg.netLoss {
			copies = 0
		} else if w.rng.Float64() < w.cfg.netDup {
			copies = 2
		}
	}
	kind := evToClient
	if toNode {
		kind = evToNode
	}
	for range copies {
		delay := int64(1)
		if !c.perfect {
			delay = w.cfg.netMinDelay + w.rng.Int64N(w.cfg.netMaxDelay-w.cfg.netMinDelay+1)
		}
		w.schedule(w.now+delay, &event{kind: kind, conn: c, frame: frame})
	}
}

// fromReplica is a replica's SendClient: the frame is checked, then sent
// unless its connection is gone.
func (w *world) fromReplica(n *node, id core.ConnID, frame []byte) {
	w.checkReplyFrame(n, id, frame)
	c := w.conns[id]
	if c == nil || !c.open || c.node != n {
		w.tracef("replica %d -> closed conn %d: frame lost", n.idx, id)
		return
	}
	w.send(c, false, frame)
}

// checkReplyFrame checks that a frame from a replica is well formed: one
// whole frame of a reply type whose payload decodes.
func (w *world) checkReplyFrame(n *node, id core.ConnID, frame []byte) {
	h, p, rest, err := core.DecodeFrame(frame)
	if err != nil || len(rest) != 0 {
		w.fail("replica %d sent conn %d a malformed frame (%d trailing bytes): %v", n.idx, id, len(rest), err)
		return
	}
	switch h.Type {
	case core.MsgRegisterReply:
		s, err := core.DecodeRegisterReply(p)
		if err == nil && s != h.ClientID {
			err = fmt.Errorf("session %d in the payload, %d in the header", s, h.ClientID)
		}
		if err == nil && s == 0 {
			err = fmt.Errorf("session id 0")
		}
		if err != nil {
			w.fail("replica %d sent a bad register reply: %v", n.idx, err)
		}
	case core.MsgReply:
		if _, _, _, err := core.DecodeReplyMessage(p); err != nil {
			w.fail("replica %d sent a reply that does not decode: %v", n.idx, err)
		}
	case core.MsgError:
		e, err := core.DecodeErrorMessage(p)
		if err == nil && e.Code == 0 {
			err = fmt.Errorf("an error frame with code 0")
		}
		if err != nil {
			w.fail("replica %d sent an error frame that does not decode: %v", n.idx, err)
		}
	default:
		w.fail("replica %d sent a frame of type %s to a client", n.idx, h.Type)
	}
}

func (w *world) digest() string {
	return hex.EncodeToString(w.trace.Sum(nil))
}
