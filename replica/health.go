package replica

import "github.com/geoevent/geoevent/core"

// Node statuses in a topology (core.NodeInfo.Status), as the answering
// replica knows them. The bound is Config.ElectionTimeoutNS (default
// 500 ms), the time after which Raft gives up on a silent replica:
//
//   - "healthy": the node was heard from within the election timeout
//     (see core.NodeInfo.LastContactMS), and is not recovering.
//   - "recovering": it was heard from within the election timeout, but it
//     lacks committed entries and has for at least the election timeout
//     (its lag is at least that), or the leader is sending it a snapshot,
//     or (for the answering replica itself) it is repairing a damaged log.
//   - "unreachable": it was not heard from within the election timeout:
//     down, cut off, or too busy to answer. A follower reports its leader
//     so when it has not heard from it; the leader, a follower that has not
//     answered it since it leads or for the election timeout.
//   - "unknown": the answering replica has no fresh knowledge of it: a
//     follower that has no leader, or whose leader's health report (below)
//     is older than the election timeout, knows only itself.
//
// The answering replica is always at least "healthy" to itself (it is
// answering). Who knows what: the leader knows every follower from their
// acknowledgements; a follower knows its leader from the leader's
// messages, and the other followers from the leader's health report: with
// each heartbeat round (every HeartbeatNS) the leader sends every
// follower a msgHealth with, for each replica, how long ago it last
// answered, its lag and whether it is recovering; the follower adds the
// time since the report came. So on a follower a node that stops
// answering turns "unreachable" an election timeout after its last
// answer to the leader, within a heartbeat interval and a tick, as it does
// on the leader.
const (
	StatusHealthy     = "healthy"
	StatusRecovering  = "recovering"
	StatusUnreachable = "unreachable"
	StatusUnknown     = "unknown"
)

// nodeHealth is the leader's view of one replica, as msgHealth carries it.
type nodeHealth struct {
	contactAgeNS uint64 // since it last answered the leader; unknownNS: not since the leader leads
	lagNS        uint64 // how long it has not held the leader's whole log; 0: it holds it
	recovering   bool
}

// unknownNS is nodeHealth's contactAgeNS for a replica that has not
// answered.
const unknownNS = ^uint64(0)

// healthReport is the last msgHealth a follower took from its leader.
type healthReport struct {
	term  uint64
	from  uint32
	at    uint64 // when it came, on the monotonic clock
	nodes []nodeHealth
}

// leaderView is the leader's view of every replica now (mono: the
// monotonic clock), itself included.
func (r *Replica) leaderView(mono uint64) []nodeHealth {
	nodes := make([]nodeHealth, r.cfg.ReplicaCount)
	nodes[r.self] = nodeHealth{recovering: r.repairing}
	r.eachPeer(func(p uint32) {
		pr := &r.peers[p]
		h := nodeHealth{contactAgeNS: unknownNS}
		if pr.lastReplyNS != 0 {
			h.contactAgeNS = mono - pr.lastReplyNS
		}
		if pr.match < r.lastIndex {
			h.lagNS = mono - min(pr.caughtUpNS, mono)
		}
		h.recovering = pr.state == stateSnapshot || (pr.match < r.commit && h.lagNS >= r.cfg.ElectionTimeoutNS)
		nodes[p] = h
	})
	return nodes
}

// sendHealth sends every follower the leader's view (leader only).
func (r *Replica) sendHealth() {
	if r.cfg.ReplicaCount == 1 {
		return
	}
	m := message{typ: msgHealth, term: r.term, health: r.leaderView(r.clock.MonotonicNS())}
	frame := m.encode(r.self)
	r.eachPeer(func(p uint32) { r.io.SendPeer(p, frame...) })
}

// receiveHealth keeps the report of this term's leader.
func (r *Replica) receiveHealth(m *message) {
	if r.role != Follower || m.term != r.term || m.from != r.leader || len(m.health) != int(r.cfg.ReplicaCount) {
		return // of another term or leader: the next report will do
	}
	r.health = healthReport{term: m.term, from: m.from, at: r.clock.MonotonicNS(), nodes: append(r.health.nodes[:0], m.health...)}
}

// nodeStatus is the status of a node last heard from age ago.
func (r *Replica) nodeStatus(age uint64, recovering bool) string {
	switch {
	case age >= r.cfg.ElectionTimeoutNS:
		return StatusUnreachable
	case recovering:
		return StatusRecovering
	}
	return StatusHealthy
}

// nodesHealth is what this replica knows of every replica now: each one's
// status, the age of its last contact and its lag (core.Unknown when it
// does not know).
func (r *Replica) nodesHealth() []core.NodeInfo {
	mono := r.clock.MonotonicNS()
	nodes := make([]core.NodeInfo, r.cfg.ReplicaCount)
	for i := range nodes {
		nodes[i] = core.NodeInfo{Status: StatusUnknown, LastContactMS: core.Unknown, LagMS: core.Unknown}
	}
	fromView := func(i uint32, view []nodeHealth, elapsed uint64) {
		h := view[i]
		n := &nodes[i]
		n.LagMS = h.lagNS / 1e6
		if h.contactAgeNS == unknownNS {
			n.Status = StatusUnreachable
			return
		}
		age := h.contactAgeNS + elapsed
		n.Status, n.LastContactMS = r.nodeStatus(age, h.recovering), age/1e6
	}
	switch {
	case r.role == Leader:
		view := r.leaderView(mono)
		for i := range view {
			fromView(uint32(i), view, 0)
		}
	default:
		if r.leader != NoLeader {
			// Its leader: from the leader's own messages.
			age := r.raftNow() - r.leaderContact
			n := &nodes[r.leader]
			n.Status, n.LastContactMS = r.nodeStatus(age, false), age/1e6
			if n.Status != StatusUnreachable {
				n.LagMS = 0 // the leader holds its whole log
			}
		}
		if rep := &r.health; r.role == Follower && rep.term == r.term && rep.from == r.leader &&
			len(rep.nodes) == int(r.cfg.ReplicaCount) && mono-rep.at < r.cfg.ElectionTimeoutNS {
			// The others: from the leader's last report, aged by the
			// time since it came.
			for i := range rep.nodes {
				if uint32(i) != r.leader && uint32(i) != r.self {
					fromView(uint32(i), rep.nodes, mono-rep.at)
				}
			}
			nodes[r.self].LagMS = rep.nodes[r.self].lagNS / 1e6
			if rep.nodes[r.self].recovering {
				nodes[r.self].Status = StatusRecovering
			}
		}
	}
	self := &nodes[r.self]
	self.LastContactMS = 0
	switch {
	case r.repairing:
		self.Status = StatusRecovering
	case self.Status != StatusRecovering:
		self.Status = StatusHealthy
	}
	if r.role == Leader {
		self.LagMS = 0
	}
	return nodes
}

// Probe is what health probes and metrics read of the replica: a copy
// taken on the loop (Replica.Probe), which the IO layer publishes for
// other goroutines, so that a probe never waits for the loop or a leader.
type Probe struct {
	Status
	// LeaderHeard is ping's test: this replica leads, or knows a leader
	// and heard from it within the election timeout.
	LeaderHeard bool
	// Repairing: the replica is getting back entries it cut from a
	// damaged log, and neither votes nor campaigns meanwhile.
	Repairing bool
	// ClusterState is status's cluster_state ("healthy" or "no_leader").
	ClusterState string
}

// Probe reports the replica's state for probes and metrics. It reads the
// clock and changes nothing.
func (r *Replica) Probe() Probe {
	return Probe{Status: r.Status(), LeaderHeard: r.leaderHeard(r.raftNow()), Repairing: r.repairing, ClusterState: r.clusterState()}
}

// StatusReply is what the status operation answers now, with data's
// counts (Data's, which the caller may have taken earlier).
func (r *Replica) StatusReply(data core.Stats) core.StatusReply {
	return core.StatusReply{
		EventsCount: data.EventCount, EntitiesCount: data.EntityCount, IndexBytes: data.IndexBytes,
		UptimeSeconds: (r.clock.MonotonicNS() - r.startNS) / 1_000_000_000,
		Version:       r.cfg.Version, ClusterState: r.clusterState(), NodeID: r.nodeID(r.self),
		ClusterID: r.cfg.Cluster,
	}
}

// Data reports the state machine's counts now, as the stats operation
// does (entities and events not yet expired, index bytes).
func (r *Replica) Data() core.Stats {
	return r.sm.Stats(max(r.clock.RealtimeNS(), r.lastOpTS))
}
