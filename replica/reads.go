package replica

import (
	"bytes"
	"encoding/binary"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/statemachine"
)

// Linearizable reads without the log (the read index of Ongaro's
// dissertation, 6.4). A read must see every write acknowledged before it
// began. The leader's applied state holds every write it acknowledged, but
// a leader that was deposed without knowing it would answer from a stale
// state. So a read waits for two things:
//
//   - its read index, the leader's commit index when the read arrived, to
//     be applied (the term's no-op is applied before any client frame is
//     served, so commit covers every earlier term's writes); and
//   - a round of heartbeats sent after it arrived to be answered by a
//     majority in the leader's term: then no other leader was elected
//     before the read arrived.
//
// Rounds are numbered (seq): every append and heartbeat carries the latest
// round, replies echo the highest round the follower saw in the term, and a
// round confirmed by a majority confirms every read queued before it was
// sent. At most one round is outstanding; reads arriving meanwhile wait for
// the next, so under load one round serves many reads. The periodic
// heartbeat is a round too, which also recovers from lost messages.
//
// A read whose round is confirmed and whose index is applied is ready; the
// ready reads run in steps of bounded work (runReady), an input each
// (ApplyMore, as the backlog of committed entries does), so that what else
// arrives -- heartbeats and votes, pings, writes -- goes between them: a
// burst of expensive queries (each page of which the state machine bounds)
// delays the loop by one step, not by the burst. A ready read runs even if the replica stops leading meanwhile: its
// answer reflects a committed prefix that includes its read index.
type readState struct {
	seq       uint64 // the latest round sent
	confirmed uint64 // the latest round a majority answered
	open      bool   // a round is out and not yet confirmed
	queue     []pendingRead
	ready     []pendingRead // confirmed and applied: run by runReady

	// incoming is what PrepareRead made of the client frame being
	// received, set only during ReceivePreparedRead's or
	// ReceivePeerPrepared's call: the read it makes keeps it.
	incoming *PreparedRead
}

type pendingRead struct {
	to       dest
	h        core.Header
	payload  []byte        // nil when prepared
	index    uint64        // the commit index when it arrived
	seq      uint64        // the first round sent after it arrived
	prepared *PreparedRead // nil unless it was prepared
}

// read answers a read request on the leader.
func (r *Replica) read(to dest, h core.Header, payload []byte) {
	pr := r.reads.incoming
	r.reads.incoming = nil
	if pr != nil {
		payload = nil // decoded already: the copy would be a megabyte or more
	} else {
		payload = bytes.Clone(payload)
	}
	if r.quorum == 1 { // alone: nobody else can lead
		r.reads.ready = append(r.reads.ready, pendingRead{to: to, h: h, payload: payload, prepared: pr})
		return
	}
	r.reads.queue = append(r.reads.queue, pendingRead{to, h, payload, r.commit, r.reads.seq + 1, pr})
	if !r.reads.open {
		r.startRound()
	}
}

func (r *Replica) executeRead(rd *pendingRead) {
	var op core.Operation
	var req any
	if pr := rd.prepared; pr != nil {
		op, req = pr.op, pr.req
		r.sm.OfferPolygon(pr.polygon, req.(*core.PolygonQuery))
	} else {
		var err error
		if op, req, err = core.DecodeRequestMessage(rd.payload); err != nil { // decoded once already when it arrived
			r.reply(rd.to, rd.h, op, nil, err)
			return
		}
	}
	ts := max(r.clock.RealtimeNS(), r.lastOpTS)
	if op == core.OpEntityHistory {
		r.startHistory(rd.to, rd.h, ts, req) // its older events are the store's (history.go)
		return
	}
	reply, err := r.execute(op, ts, req)
	r.reply(rd.to, rd.h, op, reply, err)
}

// A PreparedRead is the part of a read's work that needs nothing but its
// frame, done away from the replica's loop: the request decoded
// (PrepareRead), and a large polygon query's polygon built with its grid
// and ranges, or found invalid (Build), or either taken from an earlier
// read of the same rings (Share). The loop's answer is the same with it
// as without: it only saves the loop the time.
type PreparedRead struct {
	op      core.Operation
	req     any
	polygon *statemachine.PreparedPolygon // nil until built or shared
	// rings is the frame's encoding of the query's rings, by which a later
	// frame finds them the same without decoding them (PrepareRead).
	rings []byte
}

// Share has pr take o's polygon when o has one of pr's rings, and reports
// whether it did.
func (pr *PreparedRead) Share(o *PreparedRead) bool {
	if pr.polygon != nil || o.polygon == nil || !o.polygon.Same(pr.req.(*core.PolygonQuery)) {
		return false
	}
	pr.polygon = o.polygon
	return true
}

// SameRings reports whether pr and o are queries of the same rings.
func (pr *PreparedRead) SameRings(o *PreparedRead) bool {
	return statemachine.SameRings(pr.req.(*core.PolygonQuery), o.req.(*core.PolygonQuery))
}

// Build builds pr's polygon (statemachine.PreparePolygon), or finds it
// invalid, and reports whether it did either: the loop then neither
// builds nor checks it. It does neither for a polygon too wide for the
// plane, which the loop builds.
func (pr *PreparedRead) Build() bool {
	if pr.polygon == nil {
		pr.polygon = statemachine.PreparePolygon(pr.req.(*core.PolygonQuery))
	}
	return pr.polygon != nil
}

// Bytes estimates the memory pr's polygon holds (0: none).
func (pr *PreparedRead) Bytes() int {
	if pr.polygon == nil {
		return 0
	}
	return pr.polygon.Bytes()
}

// Polygon returns pr's polygon, nil until it is built or shared; reads of
// the same rings share it.
func (pr *PreparedRead) Polygon() *statemachine.PreparedPolygon { return pr.polygon }

// prepareMinPayload is the size below which a polygon query is not
// prepared: a request of fewer than 1,024 vertices (16 bytes each) is
// cheap to build on the loop (statemachine.PreparePolygon would decline it).
const prepareMinPayload = 1024 * 16

// PrepareRead decodes a client frame on any goroutine, for
// ReceivePreparedRead, when preparing it helps: a polygon query of 1,024
// vertices or more (see PreparedRead; its polygon is then built by Build
// or taken by Share). When its rings are byte for byte those of one of
// recent (earlier prepared reads with their polygons), it decodes the
// rest of the query alone, and takes that read's rings and polygon: the
// pages of a large polygon, each of which carries the polygon, are
// decoded once. Otherwise, and for a frame that does not decode, it
// returns nil.
func PrepareRead(h core.Header, payload []byte, recent []*PreparedRead) *PreparedRead {
	if h.Type != core.MsgRequest {
		return nil
	}
	if h.ClientID == 0 {
		_, request, err := core.CutSessionlessRead(payload)
		if err != nil {
			return nil
		}
		payload = request
	}
	return prepareRequest(payload, recent)
}

// prepareRequest is PrepareRead for a request's payload (a read without a
// session: after the cluster id).
func prepareRequest(payload []byte, recent []*PreparedRead) *PreparedRead {
	if len(payload) < prepareMinPayload || core.Operation(payload[0]) != core.OpQueryPolygon {
		return nil
	}
	end, ok := polygonRingsEnd(payload)
	if !ok {
		return nil
	}
	rings := payload[1:end]
	for _, o := range recent {
		if o == nil || o.polygon == nil || !bytes.Equal(o.rings, rings) {
			continue
		}
		// The same rings: the query's other fields follow them, and
		// decode as those of a query of no rings.
		rest := append([]byte{byte(core.OpQueryPolygon), 0, 0, 0, 0}, payload[end:]...)
		op, req, err := core.DecodeRequestMessage(rest)
		if err != nil {
			return nil
		}
		q, oq := req.(*core.PolygonQuery), o.req.(*core.PolygonQuery)
		q.Vertices, q.Holes = oq.Vertices, oq.Holes
		return &PreparedRead{op: op, req: req, polygon: o.polygon, rings: o.rings}
	}
	op, req, err := core.DecodeRequestMessage(payload)
	if err != nil {
		return nil
	}
	if _, ok := req.(*core.PolygonQuery); !ok {
		return nil
	}
	return &PreparedRead{op: op, req: req, rings: bytes.Clone(rings)}
}

// polygonRingsEnd returns where the rings of a polygon query's payload end
// (after the operation byte: the outer ring, the count of holes and the
// holes, each ring a u16 count of 16-byte vertices; see core's codec), or
// false when the payload is too short to hold them.
func polygonRingsEnd(payload []byte) (int, bool) {
	at := 1
	ring := func() bool {
		if len(payload) < at+2 {
			return false
		}
		at += 2 + 16*int(binary.LittleEndian.Uint16(payload[at:]))
		return len(payload) >= at
	}
	if !ring() || len(payload) < at+2 {
		return 0, false
	}
	holes := int(binary.LittleEndian.Uint16(payload[at:]))
	at += 2
	for range holes {
		if !ring() {
			return 0, false
		}
	}
	return at, true
}

// PreparePeer is PrepareRead for a replica-to-replica frame: a read a
// follower forwarded to this replica, for ReceivePeerPrepared. It returns
// nil for any other frame.
func PreparePeer(h core.Header, payload []byte, recent []*PreparedRead) *PreparedRead {
	if h.Type != msgForward {
		return nil
	}
	m, err := decodeMessage(h, payload)
	if err != nil || m.client.Type != core.MsgRequest {
		return nil
	}
	// A forwarded read without a session no longer carries the cluster id
	// (the follower's receiveClient cut it).
	return prepareRequest(m.frame, recent)
}

// ReceivePreparedRead is Receive for a client frame of which PrepareRead,
// in this process, made pr.
func (r *Replica) ReceivePreparedRead(conn core.ConnID, h core.Header, payload []byte, pr *PreparedRead) {
	r.reads.incoming = pr
	r.receiveClient(dest{via: r.self, conn: conn}, h, payload, nil)
	r.reads.incoming = nil
}

// ReceivePeerPrepared is ReceivePeer for a frame of which PreparePeer, in
// this process, made pr.
func (r *Replica) ReceivePeerPrepared(h core.Header, payload []byte, pr *PreparedRead) {
	r.reads.incoming = pr
	r.ReceivePeer(h, payload)
	r.reads.incoming = nil
}

// startRound sends a heartbeat round to every follower.
func (r *Replica) startRound() {
	r.reads.seq++
	r.reads.open = true
	r.eachPeer(func(p uint32) {
		// An append of no entries at the follower's match: a follower
		// that holds that entry (of that term) knows its log is this
		// leader's up to there, so it can take the commit index even
		// when no entry is due, as after it restarted.
		match := r.peers[p].match
		r.sendPeer(p, &message{typ: msgHeartbeat, term: r.term, seq: r.reads.seq,
			prevIndex: match, prevTerm: r.termAt(match), commit: min(match, r.commit)})
	})
	if r.quorum == 1 {
		r.confirmReads()
	}
}

// confirmReads advances the confirmed round to what a majority answered
// and serves the reads it confirms.
func (r *Replica) confirmReads() {
	if r.role != Leader {
		return
	}
	if c := r.majorityValue(r.reads.seq, func(pr *progress) uint64 { return pr.ackedSeq }); c > r.reads.confirmed {
		r.reads.confirmed = c
		if c >= r.reads.seq {
			r.reads.open = false
		}
	}
	r.serveReads()
	if !r.reads.open && len(r.reads.queue) > 0 && r.reads.queue[len(r.reads.queue)-1].seq > r.reads.confirmed {
		r.startRound()
	}
}

// serveReads makes ready, in order of arrival, the queued reads whose round
// is confirmed and whose read index is applied.
func (r *Replica) serveReads() {
	q := r.reads.queue[:0]
	for _, rd := range r.reads.queue {
		if rd.seq <= r.reads.confirmed && rd.index <= r.applied {
			r.reads.ready = append(r.reads.ready, rd)
		} else {
			q = append(q, rd)
		}
	}
	clear(r.reads.queue[len(q):])
	r.reads.queue = q
}

// Reads run in steps of bounded work (runReady): a step runs ready reads
// in order until their work, as the state machine counts it
// (statemachine.ScanWork, which counts a polygon's plan even when the
// polygon proves invalid; a read that counts none, such as a get latest,
// costs readMinWork), reaches readStepWork. Cheap reads then share a step
// by the hundred, as they shared their input before reads were deferred
// (one a step cost a get-latest load a tenth of its rate), while one
// expensive page (at most about 2,000,000 units, 9 ms) makes a step alone.
const (
	readStepWork = 250_000 // about 1.1 ms
	readMinWork  = 1_000   // about 4 µs: what a cheap read costs end to end
)

// runReady runs a step of ready reads, oldest first.
func (r *Replica) runReady() {
	spent := uint64(0)
	n := 0
	for n < len(r.reads.ready) && spent < readStepWork {
		rd := r.reads.ready[n]
		r.reads.ready[n] = pendingRead{}
		n++
		before := r.sm.ScanWork()
		r.executeRead(&rd)
		spent += max(r.sm.ScanWork()-before, readMinWork)
	}
	r.reads.ready = r.reads.ready[n:]
	if len(r.reads.ready) == 0 {
		r.reads.ready = nil // let the array go
	}
}

// failReads answers every queued read with a retryable error (the leader
// steps down).
func (r *Replica) failReads() {
	for _, rd := range r.reads.queue {
		r.sendError(rd.to, rd.h, core.PrimaryUnreachable, "replica %d stopped leading before the read was confirmed; retry", r.self)
	}
	r.reads = readState{seq: r.reads.seq, confirmed: r.reads.seq, ready: r.reads.ready}
}
