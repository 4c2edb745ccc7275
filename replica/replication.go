package replica

import (
	"bytes"
	"slices"

	"github.com/geoevent/geoevent/core"
)

// Log replication: the leader's side (progress, appends, snapshots, commit)
// and the follower's (accepting appends, heartbeats and snapshots).
//
// The leader keeps one progress per follower, in one of three states:
//
//   - probe: the leader does not know where the follower's log matches its
//     own; it sends one append (from next) and waits for the answer, which
//     either confirms the match (then: replicate) or says where to try next.
//   - replicate: appends are pipelined, up to maxInflight messages of at
//     most maxAppendBytes each, next advancing as they are sent.
//   - snapshot: the entries the follower needs are gone from the leader's
//     log; it sends a snapshot of its applied state in chunks, one chunk in
//     flight, and probes again once the follower has installed it.
//
// A snapshot sent is the state's bytes, held in memory, followed by the
// history stream: the history store as of the snapshot (core.IO's
// EncodeSnapshot), which neither side holds in memory. The leader asks IO
// for each chunk of it (ReadSnapshotStream, answered by SnapshotStreamRead)
// and sends it when read; the follower hands each chunk to IO
// (WriteSnapshotStream) and asks for the next once IO has written it
// (SnapshotStreamWritten). A chunk is read, sent and written once each, at
// the offset the follower asked for.
//
// Lost messages are recovered by the heartbeat timer (retryStalled): a
// probe is resent, a stalled pipeline falls back to probing from match+1,
// a snapshot chunk is resent. Duplicated and reordered messages are
// harmless: a follower skips entries it already holds with the same term
// and acknowledges only min(durable, verified); the leader ignores
// acknowledgements below what it knows.

const (
	maxInflight    = 8       // pipelined appends per follower
	maxAppendBytes = 4 << 20 // entry bytes per append (at least one entry)
	snapshotChunk  = 4 << 20 // bytes of snapshot per message
)

type progressState uint8

const (
	stateProbe progressState = iota
	stateReplicate
	stateSnapshot
)

// progress is the leader's view of one follower.
type progress struct {
	match, next uint64
	state       progressState
	inflight    []uint64 // replicate: the last index of each append in flight
	probeSentNS uint64   // probe: when the unanswered probe was sent (0: none)
	probePrev   uint64   // probe: the prevIndex of that probe
	progressNS  uint64   // when match last advanced or the state changed
	lastReplyNS uint64   // when the follower last answered
	caughtUpNS  uint64   // it holds every entry the leader had at this time (see noteCaughtUp)
	heard       bool     // answered since the last check-quorum
	ackedSeq    uint64   // the highest read round it confirmed (reads.go)
	snapOffset  uint64   // snapshot: bytes the follower holds
	snapSentNS  uint64
}

func (pr *progress) answered(now, within uint64) bool {
	return pr.lastReplyNS != 0 && now-pr.lastReplyNS < within
}

func (pr *progress) become(s progressState, now uint64) {
	pr.state, pr.inflight, pr.probeSentNS, pr.progressNS = s, pr.inflight[:0], 0, now
}

// outSnapshot is the snapshot the leader sends to followers that need one:
// data, the state, then IO's history stream of streamSize bytes.
type outSnapshot struct {
	index, term uint64
	data        []byte
	streamSize  uint64
	reading     []uint64 // the stream's offsets asked of IO and not yet answered
}

// total is the length of the snapshot sent: the state and the stream.
func (s *outSnapshot) total() uint64 { return uint64(len(s.data)) + s.streamSize }

// setSnapshot makes s (nil: none) the snapshot the leader sends, and has IO
// drop the history stream of the one it replaces.
func (r *Replica) setSnapshot(s *outSnapshot) {
	if old := r.snapshot; old != nil && old != s {
		r.io.DropSnapshotStream(old.index)
	}
	r.snapshot = s
}

func (r *Replica) replicateAll() {
	if r.role == Leader {
		r.eachPeer(r.replicate)
	}
}

// replicate sends follower p what it can take now.
func (r *Replica) replicate(p uint32) {
	pr := &r.peers[p]
	now := r.clock.MonotonicNS()
	for {
		switch pr.state {
		case stateSnapshot:
			return
		case stateProbe:
			if pr.probeSentNS != 0 {
				return
			}
		case stateReplicate:
			if len(pr.inflight) >= maxInflight || pr.next > r.lastIndex {
				return
			}
		}
		if pr.next <= r.unsendable() {
			r.startSnapshot(p, now)
			return
		}
		prev := pr.next - 1
		m := message{typ: msgAppend, term: r.term, prevIndex: prev, prevTerm: r.termAt(prev), commit: r.commit, seq: r.reads.seq}
		size := 0
		for i := pr.next; i <= r.lastIndex; i++ {
			e, ok := r.sendable(i)
			if !ok || (len(m.entries) > 0 && size+len(e.Data) > maxAppendBytes) {
				break
			}
			size += len(e.Data)
			m.entries = append(m.entries, e)
		}
		if len(m.entries) == 0 && pr.next <= r.lastIndex {
			r.readFrom(pr.next) // dropped from memory: LogRead replicates again
			return
		}
		r.sendPeer(p, &m)
		if pr.state == stateProbe {
			pr.probeSentNS, pr.probePrev = now, prev
			return
		}
		pr.next = prev + uint64(len(m.entries)) + 1
		pr.inflight = append(pr.inflight, pr.next-1)
	}
}

// retryStalled recovers from lost messages (called every heartbeat).
func (r *Replica) retryStalled(p uint32, now uint64) {
	pr := &r.peers[p]
	switch pr.state {
	case stateProbe:
		if pr.probeSentNS != 0 && now-pr.probeSentNS >= r.cfg.HeartbeatNS {
			pr.probeSentNS = 0
		}
	case stateReplicate:
		if len(pr.inflight) > 0 && now-pr.progressNS >= r.cfg.ElectionTimeoutNS/2 {
			pr.next = pr.match + 1
			pr.become(stateProbe, now)
		}
	case stateSnapshot:
		switch {
		case r.snapshot == nil && r.encoding == nil:
			r.beginSnapshot() // waiting for one that is not coming
		case r.snapshot != nil && now-pr.snapSentNS >= r.cfg.ElectionTimeoutNS/2:
			r.sendSnapshotChunk(p, now)
		}
		return
	}
	r.replicate(p)
}

// startSnapshot moves follower p to the snapshot state. Without a
// snapshot at hand that covers the entries it cannot send (the compacted
// log, and what storage cannot give back), it waits for the next
// one: the encoding in flight, or one begun now (encoding a large state
// takes long; the loop does not wait for it). SnapshotEncoded starts the
// transfer.
func (r *Replica) startSnapshot(p uint32, now uint64) {
	pr := &r.peers[p]
	pr.become(stateSnapshot, now)
	pr.snapOffset = 0
	if r.snapshotAtHand() {
		r.sendSnapshotChunk(p, now)
		return
	}
	r.setSnapshot(nil)
	if r.encoding == nil {
		r.beginSnapshot()
	}
}

// sendWaitingSnapshots starts the transfer of the snapshot just encoded
// (index, term, the state's data and a history stream of streamSize bytes)
// to the followers in the snapshot state, unless the one they get still
// covers the entries the leader cannot send: those waiting for one, and
// those being sent one that the compaction has just overtaken (installing
// it, they would need entries that are gone). A snapshot that no follower
// takes has its stream dropped.
func (r *Replica) sendWaitingSnapshots(index, term uint64, data []byte, streamSize uint64) {
	if r.role != Leader || r.snapshotAtHand() {
		r.io.DropSnapshotStream(index)
		return
	}
	r.setSnapshot(nil)
	now := r.clock.MonotonicNS()
	r.eachPeer(func(p uint32) {
		pr := &r.peers[p]
		if pr.state != stateSnapshot {
			return
		}
		if r.snapshot == nil {
			r.snapshot = &outSnapshot{index: index, term: term, data: data, streamSize: streamSize}
		}
		pr.snapOffset = 0
		r.sendSnapshotChunk(p, now)
	})
	if r.snapshot == nil {
		r.io.DropSnapshotStream(index)
	}
}

// snapshotAtHand reports whether the leader holds the bytes of a snapshot
// that covers every entry it cannot send.
func (r *Replica) snapshotAtHand() bool {
	return r.snapshot != nil && r.snapshot.index >= r.unsendable()
}

// snapshotWanted reports whether a follower waits for a snapshot that the
// leader has no bytes of at hand (see sendWaitingSnapshots).
func (r *Replica) snapshotWanted() bool {
	if r.role != Leader || r.snapshotAtHand() {
		return false
	}
	wanted := false
	r.eachPeer(func(p uint32) { wanted = wanted || r.peers[p].state == stateSnapshot })
	return wanted
}

// sendSnapshotChunk sends follower p the chunk at its offset: from the
// state's bytes, or, in the history stream, once IO has read it
// (SnapshotStreamRead; one read serves every follower at that offset).
func (r *Replica) sendSnapshotChunk(p uint32, now uint64) {
	pr, s := &r.peers[p], r.snapshot
	pr.snapSentNS = now
	stateLen := uint64(len(s.data))
	if pr.snapOffset < stateLen || pr.snapOffset >= s.total() {
		// The state's bytes (a chunk ends where they do), or nothing past
		// the end, which makes the follower say where it is.
		end := min(pr.snapOffset+snapshotChunk, stateLen)
		r.sendSnapshotMessage(p, s, pr.snapOffset, s.data[min(pr.snapOffset, end):end])
		return
	}
	off := pr.snapOffset - stateLen
	if !slices.Contains(s.reading, off) {
		s.reading = append(s.reading, off)
		r.io.ReadSnapshotStream(s.index, off, snapshotChunk)
	}
}

func (r *Replica) sendSnapshotMessage(p uint32, s *outSnapshot, offset uint64, data []byte) {
	r.sendPeer(p, &message{typ: msgSnapshot, term: r.term, index: s.index, snapTerm: s.term,
		offset: offset, total: s.total(), stateLen: uint64(len(s.data)), data: data})
}

// SnapshotStreamRead is IO's answer to ReadSnapshotStream: the chunk of
// the history stream of the snapshot at index from offset on, sent to the
// followers that wait for it. No data: IO no longer holds the stream (or
// could not read it), and the followers wait for a new snapshot.
func (r *Replica) SnapshotStreamRead(index, offset uint64, data []byte) {
	s := r.snapshot
	if r.failed != nil || r.role != Leader || s == nil || s.index != index {
		return // a stream since dropped
	}
	if i := slices.Index(s.reading, offset); i >= 0 {
		s.reading = slices.Delete(s.reading, i, i+1)
	}
	if len(data) == 0 || uint64(len(data)) > s.streamSize-min(offset, s.streamSize) {
		r.setSnapshot(nil)
		if r.encoding == nil && r.snapshotWanted() {
			r.beginSnapshot()
		}
		return
	}
	now := r.clock.MonotonicNS()
	at := uint64(len(s.data)) + offset
	r.eachPeer(func(p uint32) {
		if pr := &r.peers[p]; pr.state == stateSnapshot && pr.snapOffset == at {
			r.sendSnapshotMessage(p, s, at, data)
			pr.snapSentNS = now
		}
	})
}

// dropIdleSnapshot frees the outgoing snapshot once no follower needs it.
func (r *Replica) dropIdleSnapshot() {
	if r.snapshot == nil {
		return
	}
	for p := range r.peers {
		if uint32(p) != r.self && r.peers[p].state == stateSnapshot {
			return
		}
	}
	r.setSnapshot(nil)
}

// keepFrom is how far the log may be compacted after a snapshot at index:
// not past what a follower that answers recently still needs, so that it
// gets entries rather than a whole snapshot.
func (r *Replica) keepFrom(index uint64) uint64 {
	if r.role != Leader {
		return index
	}
	now := r.clock.MonotonicNS()
	r.eachPeer(func(p uint32) {
		if pr := &r.peers[p]; pr.answered(now, r.cfg.ElectionTimeoutNS) && pr.match >= r.base {
			index = min(index, pr.match)
		}
	})
	return index
}

// lagMark is the leader's last index at a heartbeat round, and when.
type lagMark struct{ index, ns uint64 }

// markLag records the leader's last index at a heartbeat round (the
// leader's lagMarks hold the last two).
func (r *Replica) markLag(now uint64) {
	r.lagMarks[0], r.lagMarks[1] = r.lagMarks[1], lagMark{r.lastIndex, now}
}

// noteCaughtUp moves pr.caughtUpNS, as a follower's answer shows its
// match: to now when it holds the leader's whole log; else to the time of
// the newest heartbeat round whose last index it holds. So a follower that
// keeps up within a round trip under a steady stream of writes, its match
// never equal to the leader's last index when it answers, lags by at most
// a heartbeat interval and a round trip rather than since it last held the
// whole log.
func (r *Replica) noteCaughtUp(pr *progress, now uint64) {
	switch {
	case pr.match >= r.lastIndex:
		pr.caughtUpNS = now
	case pr.match >= r.lagMarks[1].index:
		pr.caughtUpNS = max(pr.caughtUpNS, r.lagMarks[1].ns)
	case pr.match >= r.lagMarks[0].index:
		pr.caughtUpNS = max(pr.caughtUpNS, r.lagMarks[0].ns)
	}
}

// replicationLagMS is, on the leader, the furthest-behind follower's lag:
// how long ago the leader's log last ended at an entry the follower now
// holds (to a heartbeat interval; see noteCaughtUp), 0 when every
// follower holds the whole log. A follower that is down holds what it
// held: its lag is 0 while the leader appends nothing, then counts from
// its last answer before it went down (or the heartbeat round before; a
// leader elected since counts from its election, as it starts every
// follower caught up to then), growing until it is back and caught up.
func (r *Replica) replicationLagMS() uint64 {
	if r.role != Leader {
		return 0
	}
	now, lag := r.clock.MonotonicNS(), uint64(0)
	r.eachPeer(func(p uint32) {
		if pr := &r.peers[p]; pr.match < r.lastIndex {
			lag = max(lag, (now-pr.caughtUpNS)/1_000_000)
		}
	})
	return lag
}

// receiveFollowerReply handles a follower's answer (of the leader's term).
func (r *Replica) receiveFollowerReply(m *message) {
	pr := &r.peers[m.from]
	now := r.clock.MonotonicNS()
	pr.heard, pr.lastReplyNS = true, now
	defer r.noteCaughtUp(pr, now)
	if m.seq > pr.ackedSeq {
		pr.ackedSeq = m.seq
		defer r.confirmReads()
	}
	switch m.typ {
	case msgHeartbeatReply:
		if pr.state == stateProbe && pr.probeSentNS != 0 && now-pr.probeSentNS >= r.cfg.HeartbeatNS {
			pr.probeSentNS = 0 // the follower is back: probe again now
		}
	case msgAppendReply:
		if m.ok {
			if m.index > pr.match {
				pr.match, pr.progressNS = m.index, now
			}
			pr.next = max(pr.next, pr.match+1)
			n := 0
			for n < len(pr.inflight) && pr.inflight[n] <= m.index {
				n++
			}
			pr.inflight = append(pr.inflight[:0], pr.inflight[n:]...)
			switch {
			case pr.state == stateProbe,
				pr.state == stateSnapshot && r.snapshot != nil && pr.match >= r.snapshot.index:
				pr.next = pr.match + 1
				pr.become(stateReplicate, now)
			}
			// Send what the follower can take now, before applying what
			// this answer commits: it writes while the leader applies.
			r.replicate(m.from)
			r.advanceCommit()
			r.dropData()
		} else {
			switch {
			case m.index < pr.match || pr.state == stateSnapshot:
				return // stale: it rejected something older than what it has
			case pr.state == stateProbe && pr.probeSentNS != 0 && m.index != pr.probePrev:
				return // not the probe in flight (a duplicate or a late answer)
			}
			if m.hint < pr.match {
				// Its log ends below what it acknowledged: it lost entries
				// (a damaged log cut on restart), or this is an old
				// rejection overtaken by an acknowledgement. Either way
				// probing from below is safe; commit never goes back.
				pr.match = m.hint
			}
			next := min(m.index, m.hint+1)
			for next-1 > pr.match && next-1 > r.base && r.termAt(next-1) > m.hintTerm {
				next--
			}
			pr.next = max(next, pr.match+1)
			pr.become(stateProbe, now)
		}
	case msgSnapshotReply:
		if pr.state != stateSnapshot || r.snapshot == nil || m.index != r.snapshot.index {
			return
		}
		if m.ok {
			pr.match = max(pr.match, m.index)
			pr.next = pr.match + 1
			pr.become(stateProbe, now)
			r.advanceCommit()
		} else {
			pr.snapOffset = min(m.offset, r.snapshot.total())
			r.sendSnapshotChunk(m.from, now)
			return
		}
	}
	if r.role == Leader {
		r.replicate(m.from)
	}
}

// majorityValue is the largest value that a majority has reached, given
// the leader's own and each follower's (of) progress. It runs on every
// follower reply: no allocation (at most 5 replicas).
func (r *Replica) majorityValue(own uint64, of func(*progress) uint64) uint64 {
	var buf [5]uint64
	vs := buf[:0]
	for p := range r.peers {
		if uint32(p) == r.self {
			vs = append(vs, own)
		} else {
			vs = append(vs, of(&r.peers[p]))
		}
	}
	slices.Sort(vs)
	return vs[len(vs)-r.quorum]
}

// advanceCommit commits the highest index that a majority holds durably,
// if its entry is of the current term (Raft's commit rule). The leader
// counts its own durable copy, not what it merely appended.
func (r *Replica) advanceCommit() {
	if r.role != Leader {
		return
	}
	n := r.majorityValue(r.durable, func(pr *progress) uint64 { return pr.match })
	if n > r.commit && r.termAt(n) == r.term {
		r.commit = n
		r.applyCommitted()
	}
}

// receiveAppend is a follower accepting (or refusing) the leader's entries.
func (r *Replica) receiveAppend(m *message) {
	if r.installing != 0 {
		return // the leader retries once the snapshot is acknowledged
	}
	r.leaderSeq = max(r.leaderSeq, m.seq)
	prev, entries := m.prevIndex, m.entries
	if prev < r.commit {
		// Entries up to commit are the leader's already.
		skip := min(r.commit-prev, uint64(len(entries)))
		entries = entries[skip:]
		prev += skip
	} else if prev > r.lastIndex {
		r.rejectAppend(m, r.lastIndex)
		return
	} else if t := r.termAt(prev); t != m.prevTerm {
		// Skip back over this replica's whole term t: the leader has none
		// of its entries from there on, or they would have matched.
		h := prev - 1
		for h > r.commit && r.termAt(h) == t {
			h--
		}
		r.rejectAppend(m, h)
		return
	}
	appended := false
	for _, e := range entries {
		if e.Index <= r.lastIndex {
			if r.termAt(e.Index) == e.Term {
				continue
			}
			r.dropWaitersFrom(e.Index)
			r.truncateFrom(e.Index) // e.Index > commit: never a committed entry
		}
		e.Data = bytes.Clone(e.Data)
		if d, err := decodeEntry(e.Data); err == nil {
			r.lastTS = max(r.lastTS, d.timestamp)
		}
		r.appendLocal(e)
		appended = true
	}
	last := m.prevIndex + uint64(len(m.entries))
	r.verified = max(r.verified, min(last, r.lastIndex))
	r.commit = max(r.commit, min(m.commit, r.verified))
	if appended {
		r.flush() // written and fsynced while the committed entries are applied
	}
	r.applyCommitted()
	if len(r.syncs) == 0 {
		r.acknowledge()
		r.checkRepaired()
	}
}

// checkRepaired ends repairing (see New) once this follower durably holds,
// as its leader's, an entry of the leader's term that the leader committed.
// That leader's term is later than any in which this replica acknowledged
// an entry (New raised its term), so every entry committed with its
// acknowledgement precedes that entry: the replica holds them all again.
func (r *Replica) checkRepaired() {
	if !r.repairing || r.role != Follower || r.leader == NoLeader {
		return
	}
	if c := r.commit; c <= min(r.durable, r.verified) && r.termAt(c) == r.term {
		r.repairing = false
		r.saveHardState()
		r.flush()
	}
}

func (r *Replica) rejectAppend(m *message, hint uint64) {
	r.sendPeer(m.from, &message{typ: msgAppendReply, term: r.term, seq: r.leaderSeq,
		index: m.prevIndex, hint: hint, hintTerm: r.termAt(hint)})
}

// acknowledge tells the leader how far this replica's log matches the
// leader's and is durable.
func (r *Replica) acknowledge() {
	if r.role != Follower || r.leader == NoLeader || r.installing != 0 {
		return
	}
	r.sendPeer(r.leader, &message{typ: msgAppendReply, term: r.term, seq: r.leaderSeq, ok: true,
		index: min(r.durable, r.verified)})
}

// dropWaitersFrom answers the clients waiting for entries from index on,
// which are being replaced: they retry, and dedupe finds out what ran.
func (r *Replica) dropWaitersFrom(index uint64) {
	for i := index; i <= r.lastIndex; i++ {
		if w, ok := r.waiting[i]; ok {
			delete(r.waiting, i)
			r.sendError(w.to, w.h, core.PrimaryUnreachable, "the leader changed before the request committed; retry it")
		}
	}
}

// receiveHeartbeat takes a heartbeat as an append of no entries: when this
// log holds the entry at prevIndex with prevTerm, it matches the leader's
// up to there (Log Matching), and commit may follow the leader's that far.
// A heartbeat whose prevIndex is not in this log, or of another term, only
// tells the commit index as far as the log is already verified; the
// leader's appends repair the rest.
func (r *Replica) receiveHeartbeat(m *message) {
	r.leaderSeq = max(r.leaderSeq, m.seq)
	if m.prevIndex > r.verified && m.prevIndex <= r.lastIndex && m.prevTerm != 0 && r.termAt(m.prevIndex) == m.prevTerm {
		r.verified = m.prevIndex
	}
	r.commit = max(r.commit, min(m.commit, r.verified))
	r.applyCommitted()
	r.checkRepaired()
	r.sendPeer(m.from, &message{typ: msgHeartbeatReply, term: r.term, seq: r.leaderSeq})
}

// incomingSnapshot is a snapshot arriving from the leader in chunks: the
// state's stateLen bytes, kept in data, then the history stream, handed to
// IO (WriteSnapshotStream) a chunk at a time. got counts the bytes taken;
// writing is the length of the chunk IO is writing (0: none).
type incomingSnapshot struct {
	index, term     uint64
	total, stateLen uint64
	data            []byte
	got             uint64
	writing         uint64
}

func (r *Replica) receiveSnapshot(m *message) {
	reply := message{typ: msgSnapshotReply, term: r.term, index: m.index}
	switch {
	case r.installing != 0:
		return // acknowledged once saved
	case m.index <= r.commit:
		// It has all of that already; its appends' acknowledgements tell
		// the leader how far.
		if m.index <= min(r.durable, r.verified) {
			reply.ok = true
			r.sendPeer(m.from, &reply)
		}
		return
	case m.index <= r.lastIndex && r.termAt(m.index) == m.snapTerm:
		// It holds the snapshot's last entry: its log up to there is the
		// leader's and committed, and what follows (perhaps acknowledged
		// already) stays. The snapshot only moves commit.
		r.verified = max(r.verified, m.index)
		r.commit = max(r.commit, m.index)
		r.applyCommitted()
		if m.index <= r.durable {
			reply.ok = true
			r.sendPeer(m.from, &reply)
		}
		return
	}
	in := r.incoming
	if in == nil || in.index != m.index || in.term != m.snapTerm || in.total != m.total || in.stateLen != m.stateLen {
		if m.offset != 0 {
			r.sendPeer(m.from, &reply) // offset 0: start again
			return
		}
		// A new snapshot (or a new stream of one: the leader encoded it
		// again): the stream IO writes starts over at its offset 0.
		in = &incomingSnapshot{index: m.index, term: m.snapTerm, total: m.total, stateLen: m.stateLen}
		r.incoming = in
	}
	if in.writing != 0 {
		return // a duplicate: the written chunk's completion answers
	}
	if m.offset != in.got {
		reply.offset = in.got
		r.sendPeer(m.from, &reply)
		return
	}
	data := m.data
	if in.got < in.stateLen {
		n := min(uint64(len(data)), in.stateLen-in.got)
		in.data = append(in.data, data[:n]...)
		in.got += n
		data = data[n:]
	}
	if len(data) > 0 {
		in.writing = uint64(len(data))
		r.io.WriteSnapshotStream(in.index, in.got-in.stateLen, bytes.Clone(data))
		return
	}
	r.snapshotTaken(m.from)
}

// SnapshotStreamWritten is IO's answer to WriteSnapshotStream: the chunk
// of the history stream of the leader's snapshot at index written at
// offset (ok), or refused (a stream that fails its checks: it starts
// over).
func (r *Replica) SnapshotStreamWritten(index, offset uint64, ok bool) {
	in := r.incoming
	if r.failed != nil || in == nil || in.index != index || in.writing == 0 || in.got-in.stateLen != offset {
		return // a stream since abandoned
	}
	if !ok {
		// The leader's next resend (of the chunk it last sent) is
		// answered "start again": restarts come a resend interval apart,
		// not as fast as a damaged stream fails.
		r.incoming = nil
		return
	}
	in.got += in.writing
	in.writing = 0
	if r.role == Follower && r.leader != NoLeader {
		r.snapshotTaken(r.leader)
	}
}

// snapshotTaken asks leader for the incoming snapshot's next chunk, or,
// once every byte has come, installs it.
func (r *Replica) snapshotTaken(leader uint32) {
	in := r.incoming
	if in.got < in.total {
		r.sendPeer(leader, &message{typ: msgSnapshotReply, term: r.term, index: in.index, offset: in.got})
		return
	}
	r.incoming = nil
	r.installSnapshot(in.index, in.term, in.data)
}

// decodingSnapshot is a leader's snapshot being decoded beside the loop.
// decode writes state and err; the loop reads them after SnapshotDecoded.
type decodingSnapshot struct {
	index, term uint64
	data        []byte
	state       decodedState
	err         error
}

// installSnapshot replaces this follower's state and log with the leader's
// snapshot: it has IO decode it beside the loop (a large state takes
// seconds), installs it when decoded (SnapshotDecoded) and acknowledges it
// once it is durable (SnapshotSaved). Meanwhile installing is set: the
// follower takes no entries and acknowledges nothing, and its state and
// log stay as they were.
func (r *Replica) installSnapshot(index, term uint64, data []byte) {
	d := &decodingSnapshot{index: index, term: term, data: data}
	r.decoding, r.installing = d, index
	maxSessions := r.cfg.MaxSessions
	r.io.DecodeSnapshot(index, func() { d.err = d.state.decode(data, maxSessions) })
}

// SnapshotDecoded is IO's answer to DecodeSnapshot: the leader's snapshot
// at index is decoded, and replaces the state and log.
func (r *Replica) SnapshotDecoded(index uint64) {
	d := r.decoding
	if r.failed != nil || d == nil || d.index != index {
		return
	}
	r.decoding = nil
	if d.err != nil || r.role == Leader {
		// A damaged snapshot: the leader starts over when it hears
		// nothing. (A leader cannot have been elected meanwhile: its log
		// ends before the snapshot's committed entries.)
		r.installing = 0
		return
	}
	index, term, data := d.index, d.term, d.data
	r.takeState(&d.state)
	r.dropWaitersFrom(r.applied + 1)
	r.resetLog(index, term)
	r.queued = nil
	r.lowerSyncs(index)
	r.sinceSnapshot, r.bytesSince, r.lastSnapBytes = 0, 0, uint64(len(data))
	r.snapRecords = r.sm.RecordBytes()
	r.lastTS = max(r.lastTS, r.lastOpTS)
	r.installing = index
	r.io.SaveSnapshot(index, term, data)
}
