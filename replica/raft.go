package replica

import (
	"bytes"
	"fmt"

	"github.com/geoevent/geoevent/core"
)

// Roles, terms and elections: Raft (Ongaro and Ousterhout), with pre-vote
// and check-quorum (Ongaro's dissertation, 9.6).
//
//   - A follower or candidate that hears no leader for a random time in
//     [ElectionTimeoutNS, 2*ElectionTimeoutNS) (drawn from the injected,
//     seeded Rand) starts a pre-vote: it asks for votes in term+1 without
//     changing its term. Only with a majority of pre-votes does it start a
//     real election (term+1, vote for itself). A replica grants a pre-vote
//     only when it has not heard from a leader within ElectionTimeoutNS and
//     the candidate's log is at least as up to date as its own; so a
//     replica cut off from the cluster never raises its term and never
//     disrupts a working leader when it comes back.
//   - A replica persists its term and vote before it grants a vote, and a
//     candidate sends its vote requests only once its own vote is durable.
//   - A replica that has heard from a leader within ElectionTimeoutNS
//     ignores vote requests of higher terms (the leader's lease).
//   - Check-quorum: every ElectionTimeoutNS the leader counts the
//     replicas it heard from since the last check; without a majority it
//     steps down, so a leader cut off from the majority stops serving.

// NoLeader is Status.Leader when the replica knows no leader.
const NoLeader = ^uint32(0)

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
	return Status{Role: r.role, Term: r.term, Leader: r.leader, Commit: r.commit, Applied: r.applied, LastIndex: r.lastIndex}
}

// ReceivePeer handles one replica-to-replica frame (type 64..127, its
// checksum already verified by the IO layer); h.ClientID is the sender's
// replica index. The payload is not kept after the call.
func (r *Replica) ReceivePeer(h core.Header, payload []byte) {
	if r.failed != nil || h.ClientID >= uint64(r.cfg.ReplicaCount) || uint32(h.ClientID) == r.self {
		return
	}
	m, err := decodeMessage(h, payload)
	if err != nil {
		return // checksummed on the wire: a sender's bug; Raft copes with loss
	}
	switch m.typ {
	case msgForward:
		r.receiveClient(dest{via: m.from, conn: m.conn}, m.client, m.frame, nil)
		return
	case msgForwardReply:
		if r.forwardAnswered(m.conn, m.frame) {
			r.answered(m.conn, m.frame)
			r.io.SendClient(m.conn, bytes.Clone(m.frame)) // the payload is the IO layer's buffer
		}
		return
	case msgVote:
		r.receiveVote(&m)
		return
	case msgHealth:
		r.receiveHealth(&m) // of this term's leader only: it changes no term
		return
	case msgVoteReply:
		if m.pre && m.ok { // its term is the one this replica would campaign in
			r.receiveVoteReply(&m)
			return
		}
	}
	if m.term > r.term || (m.term == r.term && r.role == Candidate && !isReply(m.typ)) {
		// A message from the leader of a newer term, or of this term while
		// campaigning (it won): follow it. Replies of a newer term (a
		// refused vote, a rejected append) only raise the term.
		leader := NoLeader
		if !isReply(m.typ) {
			leader = m.from
		}
		r.becomeFollower(m.term, leader)
	}
	if m.term < r.term {
		// A deposed leader learns of the newer term from the rejection.
		switch m.typ {
		case msgAppend:
			r.sendPeer(m.from, &message{typ: msgAppendReply, term: r.term, index: m.prevIndex})
		case msgHeartbeat:
			r.sendPeer(m.from, &message{typ: msgHeartbeatReply, term: r.term})
		case msgSnapshot:
			r.sendPeer(m.from, &message{typ: msgSnapshotReply, term: r.term, index: m.index})
		}
		return
	}
	switch m.typ {
	case msgVoteReply:
		r.receiveVoteReply(&m)
	case msgAppend, msgHeartbeat, msgSnapshot:
		if r.role == Leader {
			r.fail(core.Errorf(core.InternalError, "two leaders in term %d: %d and %d", r.term, r.self, m.from))
			return
		}
		if r.leader != m.from {
			r.leader = m.from
		}
		r.leaderContact = r.raftNow()
		r.resetElectionTimer()
		switch m.typ {
		case msgAppend:
			r.receiveAppend(&m)
		case msgHeartbeat:
			r.receiveHeartbeat(&m)
		case msgSnapshot:
			r.receiveSnapshot(&m)
		}
	case msgAppendReply, msgHeartbeatReply, msgSnapshotReply:
		if r.role == Leader {
			r.receiveFollowerReply(&m)
		}
	}
}

func isReply(t core.MessageType) bool {
	return t == msgAppendReply || t == msgHeartbeatReply || t == msgSnapshotReply || t == msgVoteReply
}

func (r *Replica) fail(err error) {
	if r.failed == nil {
		r.failed = err
	}
}

// sendPeer sends m to replica `to`.
//
// An append identical to the last one encoded (the same entries after the
// same place, with the same commit and read round: what followers that keep
// up with the leader are sent in turn) reuses its frame, so a batch is
// encoded once rather than once per follower. A leader never changes its
// log within its term, so the same term and indexes mean the same entries.
func (r *Replica) sendPeer(to uint32, m *message) {
	if m.typ != msgAppend || len(m.entries) == 0 {
		r.io.SendPeer(to, m.encode(r.self)...)
		return
	}
	k := appendKey{term: m.term, prevIndex: m.prevIndex, prevTerm: m.prevTerm, commit: m.commit, seq: m.seq,
		last: m.entries[len(m.entries)-1].Index}
	if r.lastAppend.frame == nil || r.lastAppend.key != k {
		r.lastAppend = encodedAppend{k, m.encode(r.self)}
	}
	r.io.SendPeer(to, r.lastAppend.frame...)
}

// appendKey identifies an append message: entries prevIndex+1..last.
type appendKey struct {
	term, prevIndex, prevTerm, commit, seq, last uint64
}

// encodedAppend is the last append message encoded, for sendPeer.
type encodedAppend struct {
	key   appendKey
	frame [][]byte // its pieces
}

// broadcast sends a message built per peer to every other replica.
func (r *Replica) eachPeer(f func(p uint32)) {
	for p := uint32(0); p < r.cfg.ReplicaCount; p++ {
		if p != r.self {
			f(p)
		}
	}
}

func (r *Replica) resetElectionTimer() {
	et := r.cfg.ElectionTimeoutNS
	r.electionDeadline = r.raftNow() + et + r.rng.Uint64()%et
}

// leaderHeard reports whether a leader was heard from within the election
// timeout (or this replica leads).
func (r *Replica) leaderHeard(now uint64) bool {
	if r.role == Leader {
		return true
	}
	return r.leader != NoLeader && now-r.leaderContact < r.cfg.ElectionTimeoutNS
}

// raftNow is the time Raft's timers run on: the monotonic clock, except
// that it advances by at most maxTickGap between two ticks. A replica that
// did not run for a while (a long apply, a snapshot, a GC pause, a stopped
// process) had no chance to hear its leader or followers, whose messages
// wait in its queue: counting that time would start needless elections
// and make a leader step down for messages it has simply not read yet.
func (r *Replica) raftNow() uint64 {
	return r.raftClock + min(r.clock.MonotonicNS()-r.lastTickNS, r.maxTickGap())
}

func (r *Replica) maxTickGap() uint64 { return r.cfg.ElectionTimeoutNS / 4 }

// PeerLost is the input that says the connection to replica p broke: it
// was reset or closed, or a dial to it was refused, as when p was killed.
// A follower whose leader p is takes it for gone at once rather than after
// the election timeout: it forgets the leader (so it grants pre-votes, and
// answers clients 211 or 215 at once, as forward.go says) and campaigns
// after a random delay in [0, ElectionTimeoutNS/4), drawn like the
// election timer, which spreads the two followers' pre-votes apart. Where
// the leader lives on for another replica, that one refuses the pre-vote
// (it heard the leader within the timeout), so a broken connection to a
// working leader costs no election, only this follower's lease.
func (r *Replica) PeerLost(p uint32) {
	if r.failed != nil || r.role != Follower || p != r.leader || r.repairing {
		return
	}
	r.leader = NoLeader
	r.expireForwarded()
	et := r.cfg.ElectionTimeoutNS
	r.electionDeadline = min(r.electionDeadline, r.raftNow()+r.rng.Uint64()%max(et/4, 1))
}

// advanceRaftClock moves raftNow's base to this tick.
func (r *Replica) advanceRaftClock() uint64 {
	r.raftClock = r.raftNow()
	r.lastTickNS = r.clock.MonotonicNS()
	return r.raftClock
}

// tickRaft runs the timers.
func (r *Replica) tickRaft(now uint64) {
	if r.role != Leader {
		if now >= r.electionDeadline {
			switch {
			case r.repairing:
				r.resetElectionTimer() // it may lack entries it acknowledged: no campaign
			case r.quorum > 1 && r.commit-r.applied > uint64(r.cfg.MaxApplyEntries):
				// Replaying its log (after a restart) or catching up: more
				// committed entries wait than one input applies. As leader
				// it would hold every client until it had applied them all,
				// which takes seconds for a large log. It votes, and leaves
				// campaigning to a replica that is ready, looking again a
				// little later; caught up, it campaigns like any other. (The
				// few entries a follower has just been told are committed
				// do not count.)
				r.electionDeadline = now + r.cfg.ElectionTimeoutNS/8
			default:
				r.startPreVote()
			}
		}
		return
	}
	if now >= r.quorumCheckDue {
		r.quorumCheckDue = now + r.cfg.ElectionTimeoutNS
		heard := 1
		r.eachPeer(func(p uint32) {
			if r.peers[p].heard {
				heard++
			}
			r.peers[p].heard = false
		})
		if heard < r.quorum {
			r.becomeFollower(r.term, NoLeader) // check-quorum: cut off from the majority
			return
		}
	}
	if now >= r.heartbeatDue {
		r.heartbeatDue = now + r.cfg.HeartbeatNS
		mono := r.clock.MonotonicNS() // progress timings are on the plain clock
		r.markLag(mono)
		r.startRound()
		r.sendHealth()
		r.eachPeer(func(p uint32) { r.retryStalled(p, mono) })
	}
	r.dropIdleSnapshot()
}

func (r *Replica) lastLogIsUpToDate(lastIndex, lastTerm uint64) bool {
	mine := r.lastTerm()
	return lastTerm > mine || (lastTerm == mine && lastIndex >= r.lastIndex)
}

// startPreVote asks the others whether they would vote for this replica in
// the next term.
func (r *Replica) startPreVote() {
	r.resetElectionTimer()
	r.role, r.leader, r.preVote = Candidate, NoLeader, true
	r.votes = make([]int8, r.cfg.ReplicaCount)
	r.votes[r.self] = 1
	if r.quorum == 1 {
		r.startElection()
		return
	}
	m := message{typ: msgVote, term: r.term + 1, pre: true, lastIndex: r.lastIndex, lastTerm: r.lastTerm()}
	r.eachPeer(func(p uint32) { r.sendPeer(p, &m) })
}

// startElection starts a real election: a new term, a vote for itself.
func (r *Replica) startElection() {
	r.resetElectionTimer()
	r.role, r.leader, r.preVote = Candidate, NoLeader, false
	r.term++
	r.vote = r.self
	r.votes = make([]int8, r.cfg.ReplicaCount)
	r.votes[r.self] = 1
	r.saveHardState()
	if r.quorum == 1 {
		r.becomeLeader()
		return
	}
	m := message{typ: msgVote, term: r.term, lastIndex: r.lastIndex, lastTerm: r.lastTerm()}
	r.eachPeer(func(p uint32) { r.sendAfterHardState(p, m) })
	r.flush()
}

func (r *Replica) receiveVote(m *message) {
	now := r.raftNow()
	reply := message{typ: msgVoteReply, term: r.term, pre: m.pre}
	if m.pre {
		if m.term > r.term && !r.repairing && !r.leaderHeard(now) && r.lastLogIsUpToDate(m.lastIndex, m.lastTerm) {
			reply.term, reply.ok = m.term, true
		}
		r.sendPeer(m.from, &reply)
		return
	}
	if m.term > r.term {
		if r.leaderHeard(now) {
			return // the leader's lease: a working leader is not disrupted
		}
		r.becomeFollower(m.term, NoLeader)
		reply.term = r.term
	}
	if m.term == r.term && !r.repairing && (r.vote == core.NoVote || r.vote == m.from) && r.lastLogIsUpToDate(m.lastIndex, m.lastTerm) {
		r.vote = m.from
		r.saveHardState()
		r.resetElectionTimer()
		reply.ok = true
		r.sendAfterHardState(m.from, reply)
		r.flush()
		return
	}
	r.sendPeer(m.from, &reply)
}

func (r *Replica) receiveVoteReply(m *message) {
	if r.role != Candidate || m.pre != r.preVote {
		return
	}
	want := r.term
	if r.preVote {
		want = r.term + 1
	}
	if m.term != want {
		return
	}
	if m.ok {
		r.votes[m.from] = 1
	} else {
		r.votes[m.from] = -1
	}
	granted := 0
	for _, v := range r.votes {
		if v == 1 {
			granted++
		}
	}
	if granted < r.quorum {
		return
	}
	if r.preVote {
		r.startElection()
	} else {
		r.becomeLeader()
	}
}

// becomeFollower moves to term (when newer: with no vote) and follows
// leader (NoLeader when unknown). A leader stepping down tells the clients
// it cannot answer to retry.
func (r *Replica) becomeFollower(term uint64, leader uint32) {
	if term > r.term {
		r.term, r.vote, r.leaderSeq = term, core.NoVote, 0
		r.saveHardState()
		r.flush()
	}
	wasLeader := r.role == Leader
	r.role, r.leader = Follower, leader
	r.verified = r.commit // re-established by the leader's appends
	if leader != NoLeader {
		r.leaderContact = r.raftNow()
	}
	r.resetElectionTimer()
	if wasLeader {
		r.stepDown()
	}
}

// becomeLeader takes over: every follower's position is probed from the
// end of the leader's log, and the term's no-op entry is appended.
func (r *Replica) becomeLeader() {
	now := r.raftNow()
	r.role, r.leader = Leader, r.self
	r.peers = make([]progress, r.cfg.ReplicaCount)
	mono := r.clock.MonotonicNS()
	r.eachPeer(func(p uint32) {
		r.peers[p] = progress{next: r.lastIndex + 1, heard: true, caughtUpNS: mono}
	})
	r.lagMarks = [2]lagMark{{r.lastIndex, mono}, {r.lastIndex, mono}}
	r.heartbeatDue, r.quorumCheckDue = now, now+r.cfg.ElectionTimeoutNS
	r.reads = readState{seq: r.reads.seq, confirmed: r.reads.seq, ready: r.reads.ready}
	// Requests already in the log (appended by an earlier leader) are in
	// flight: a retry waits for them instead of appending a duplicate.
	clear(r.inflight)
	for idx := r.applied + 1; idx <= r.lastIndex; idx++ {
		if e, err := decodeEntry(r.entryAt(idx).Data); err == nil && e.kind == kindOperation && e.session != 0 {
			r.inflight[e.session] = inflightReq{request: e.request, summed: e.summed, sum: e.sum}
		}
	}
	recovered := r.lastIndex
	r.termStart = r.appendEntry(entry{kind: kindNoop, timestamp: r.nextTimestamp()})
	if r.quorum == 1 {
		// Alone, this replica's durable log is the cluster's: every entry
		// in it is committed, and no other leader can have acknowledged
		// anything else. So client frames wait only for the entries before
		// the no-op, not for the no-op itself, which a full disk may keep
		// from being written: reads go on.
		r.commit = max(r.commit, min(recovered, r.durable))
		r.termStart = min(r.termStart, r.commit)
		// The caller applies them (Backlog, ApplyMore).
	}
}

// stepDown ends this replica's leadership: the reads it was confirming and
// the frames it held are answered or passed on.
func (r *Replica) stepDown() {
	r.failReads()
	clear(r.inflight)
	r.peers = nil
	r.setSnapshot(nil)
	r.rb.entries = nil
	held := r.held
	r.held = nil
	for _, f := range held {
		r.receiveClient(f.to, f.h, f.payload, f.prepared)
	}
}

// clusterState is status's cluster_state: "healthy" while a leader is known
// to this replica and (on the leader) a majority answers.
func (r *Replica) clusterState() string {
	if r.leaderHeard(r.raftNow()) {
		return "healthy"
	}
	return "no_leader"
}

// topology is this replica's view of the cluster: the leader it knows, and
// every replica's status as it knows it (health.go).
func (r *Replica) topology() *core.TopologyReply {
	t := &core.TopologyReply{Version: r.term, ReplicaCount: r.cfg.ReplicaCount, Primary: r.leader, ClusterID: r.cfg.Cluster}
	if r.leader == NoLeader {
		t.Primary = r.self // the wire has no "unknown"; cluster_state says it
	}
	t.Nodes = r.nodesHealth()
	for i := range t.Nodes {
		if i < len(r.cfg.Addresses) {
			t.Nodes[i].Address = r.cfg.Addresses[i]
		}
		t.Nodes[i].NodeID = r.nodeID(uint32(i))
	}
	return t
}
