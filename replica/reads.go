package replica

import (
	"bytes"

	"github.com/geoevent/geoevent/core"
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
}

type pendingRead struct {
	to      dest
	h       core.Header
	payload []byte
	index   uint64 // the commit index when it arrived
	seq     uint64 // the first round sent after it arrived
}

// read answers a read request on the leader.
func (r *Replica) read(to dest, h core.Header, payload []byte) {
	if r.quorum == 1 { // alone: nobody else can lead
		r.reads.ready = append(r.reads.ready, pendingRead{to: to, h: h, payload: bytes.Clone(payload)})
		return
	}
	r.reads.queue = append(r.reads.queue, pendingRead{to, h, bytes.Clone(payload), r.commit, r.reads.seq + 1})
	if !r.reads.open {
		r.startRound()
	}
}

func (r *Replica) executeRead(to dest, h core.Header, payload []byte) {
	op, req, err := core.DecodeRequestMessage(payload)
	if err != nil { // decoded once already when it arrived
		r.reply(to, h, op, nil, err)
		return
	}
	ts := max(r.clock.RealtimeNS(), r.lastOpTS)
	if op == core.OpEntityHistory {
		r.startHistory(to, h, ts, req) // its older events are the store's (history.go)
		return
	}
	reply, err := r.execute(op, ts, req)
	r.reply(to, h, op, reply, err)
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
// (statemachine.ScanWork; a read that counts none, such as a get latest,
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
		r.executeRead(rd.to, rd.h, rd.payload)
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
