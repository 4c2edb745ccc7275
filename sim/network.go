package sim

import (
	"fmt"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/replica"
)

// The network between replicas. Every ordered pair of replicas is a link.
// A frame a replica sends (core.IO.SendPeer) is checked (one whole frame of
// a replica message type, naming its sender), and then, unless its link is
// cut, lost or duplicated and delayed: each copy arrives after its own
// random delay, so frames reorder, and now and then a straggler is held
// back for up to two election timeouts, so that a frame of an old term
// arrives long after newer ones. A frame is delivered to whichever
// incarnation of its addressee is up when it arrives (a frame sent by an
// earlier incarnation of its sender is still a valid message); to a crashed
// replica it is lost, and so it is when its link is cut when it is sent or
// when it arrives.
//
// Partitions cut links, one direction at a time. At most one partition is
// on at a time; it heals after its duration, and at the start of the quiet
// period at the latest. The kinds (partitionKinds):
//
//   - split: the replicas fall into two groups, a minority and a majority,
//     that do not hear each other;
//   - isolate leader: the replica that leads (the one of the highest term
//     that says it leads; a random one when none does) hears nobody and is
//     heard by nobody;
//   - leader deaf: the leader's inbound links are cut: its heartbeats go
//     out, no answer comes back (check-quorum must make it step down);
//   - leader mute: the leader's outbound links are cut: it hears everyone,
//     nobody hears it;
//   - one way: one replica's inbound or outbound links are cut;
//   - flaky: each directed link is cut with probability 1/3 (partial
//     connectivity, where no replica may see a majority both ways).
//
// Client connections are not affected by partitions: a client that talks
// to a replica cut off from the leader times out or is told 211
// CLUSTER_UNAVAILABLE, and tries another replica.

type partitionKind uint8

const (
	partSplit partitionKind = iota
	partIsolateLeader
	partLeaderDeaf
	partLeaderMute
	partOneWay
	partFlaky
	partitionKinds
)

func (k partitionKind) String() string {
	return [...]string{"split", "isolate leader", "leader deaf", "leader mute", "one way", "flaky"}[k]
}

// network is the state of the links between replicas.
type network struct {
	cut       [][]bool // cut[from][to]: frames from `from` to `to` are lost
	partUntil int64    // the tick the current partition heals; 0 when none

	sentAt     int64 // the tick of sentInTick
	sentInTick int   // frames sent in tick sentAt
}

// stormFrames bounds the frames a replica may send, on average, in one
// tick. Raft sends a few per heartbeat and per client request (healthy
// runs of five replicas peak below 20 frames in a tick in all); more means
// messages that beget messages (a reply answered by a resend, multiplied
// by duplicates), which would grow without bound and stall the run.
const stormFrames = 50

func newNetwork(n int) *network {
	nw := &network{cut: make([][]bool, n)}
	for i := range nw.cut {
		nw.cut[i] = make([]bool, n)
	}
	return nw
}

func (nw *network) partitioned() bool { return nw.partUntil != 0 }

// sendPeer is a replica's SendPeer.
func (w *world) sendPeer(n *node, to uint32, frame []byte) {
	h, _, rest, err := core.DecodeFrame(frame)
	switch {
	case err != nil || len(rest) != 0:
		w.fail("replica %d sent replica %d a malformed frame (%d trailing bytes): %v", n.idx, to, len(rest), err)
		return
	case !h.Type.Replica():
		w.fail("replica %d sent replica %d a frame of type %s", n.idx, to, h.Type)
		return
	case h.ClientID != uint64(n.idx):
		w.fail("replica %d sent replica %d a frame that names replica %d as its sender", n.idx, to, h.ClientID)
		return
	case int(to) >= len(w.nodes) || int(to) == n.idx:
		w.fail("replica %d sent a frame to replica %d, in a cluster of %d", n.idx, to, len(w.nodes))
		return
	}
	w.peerSent++
	if w.net.sentAt != w.now {
		w.net.sentAt, w.net.sentInTick = w.now, 0
	}
	w.net.sentInTick++
	w.peerPeak = max(w.peerPeak, w.net.sentInTick)
	if w.net.sentInTick > stormFrames*len(w.nodes) {
		w.fail("message storm: the replicas sent more than %d frames to each other in tick %d (the last from replica %d to %d, a %s)",
			stormFrames*len(w.nodes), w.now, n.idx, to, h.Type.String())
		return
	}
	if w.net.cut[n.idx][to] {
		w.peerLost++
		w.tracef("peer %d -> %d: %s cut", n.idx, to, h.Type.String())
		return
	}
	copies := 1
	if w.faultsOn() {
		if w.cfg.peerLoss > 0 && w.rng.Float64() < w.cfg.peerLoss {
			copies = 0
		} else if w.cfg.peerDup > 0 && w.rng.Float64() < w.cfg.peerDup {
			copies = 2
		}
	}
	if copies == 0 {
		w.peerLost++
	}
	for range copies {
		delay := w.cfg.peerMinDelay + w.rng.Int64N(w.cfg.peerMaxDelay-w.cfg.peerMinDelay+1)
		if w.faultsOn() && w.cfg.peerStraggle > 0 && w.rng.Float64() < w.cfg.peerStraggle {
			delay += w.rng.Int64N(w.cfg.straggleMax + 1)
		}
		w.schedule(w.now+delay, &event{kind: evToPeer, from: n.idx, node: w.nodes[to], frame: frame})
	}
	if h.Type == snapshotFrame {
		// Its chunk and sizes are pebble's files (see EncodeSnapshot).
		w.tracef("peer %d -> %d: %s, %d copies", n.idx, to, h.Type.String(), copies)
		return
	}
	w.tracef("peer %d -> %d: %s %d bytes, %d copies", n.idx, to, h.Type.String(), len(frame), copies)
	w.hashBytes(frame)
}

// deliverPeer hands a frame to the incarnation of its addressee that is up.
// The replica gets a copy of the payload, which is overwritten once
// ReceivePeer returns: the replica must copy what it keeps (as with the
// production network, which reuses its buffers).
func (w *world) deliverPeer(e *event) {
	n := e.node
	if !n.up || w.net.cut[e.from][n.idx] {
		w.peerLost++
		w.tracef("peer %d -> %d: lost on arrival (up %v, cut %v)", e.from, n.idx, n.up, w.net.cut[e.from][n.idx])
		return
	}
	h, payload, _, err := core.DecodeFrame(e.frame)
	if err != nil {
		// It was checked when sent, and links never corrupt frames.
		w.fail("a frame from replica %d to replica %d changed after it was sent: %v", e.from, n.idx, err)
		return
	}
	w.tracef("deliver peer %d -> %d (epoch %d): %s", e.from, n.idx, n.epoch, h.Type.String())
	p := append(w.peerBuf[:0], payload...)
	if w.onPeer == nil || !w.onPeer(e.from, n.idx, h, p) {
		n.r.ReceivePeer(h, p)
	}
	for i := range p {
		p[i] = 0xa5
	}
	w.peerBuf = p[:0]
	w.afterInput(n)
}

// leader is the replica that leads the highest term among those that say
// they lead, or -1.
func (w *world) leader() int {
	best, term := -1, uint64(0)
	for _, n := range w.nodes {
		if !n.up {
			continue
		}
		if s := n.r.Status(); s.Role == replica.Leader && (best < 0 || s.Term > term) {
			best, term = n.idx, s.Term
		}
	}
	return best
}

// startPartition cuts links (see the kinds above) for a random duration.
func (w *world) startPartition() {
	nw, k := w.net, len(w.nodes)
	kind := partitionKind(w.rng.IntN(int(partitionKinds)))
	subject := w.leader()
	if subject < 0 {
		subject = w.rng.IntN(k)
	}
	var desc string
	switch kind {
	case partSplit:
		perm := w.rng.Perm(k)
		minority := perm[:1+w.rng.IntN(k/2)]
		in := make([]bool, k)
		for _, i := range minority {
			in[i] = true
		}
		for a := range k {
			for b := range k {
				nw.cut[a][b] = in[a] != in[b]
			}
		}
		desc = fmt.Sprintf("%v from the rest", minority)
	case partIsolateLeader, partLeaderDeaf, partLeaderMute, partOneWay:
		in, out := true, true
		switch kind {
		case partLeaderDeaf:
			out = false
		case partLeaderMute:
			in = false
		case partOneWay:
			subject = w.rng.IntN(k)
			in = w.rng.IntN(2) == 0
			out = !in
		}
		for o := range k {
			if o != subject {
				nw.cut[o][subject] = in
				nw.cut[subject][o] = out
			}
		}
		desc = fmt.Sprintf("replica %d (inbound cut %v, outbound cut %v)", subject, in, out)
	case partFlaky:
		for a := range k {
			for b := range k {
				nw.cut[a][b] = a != b && w.rng.IntN(3) == 0
			}
		}
		desc = fmt.Sprintf("%v", nw.cut)
	}
	d := w.cfg.partMin + w.rng.Int64N(w.cfg.partMax-w.cfg.partMin+1)
	nw.partUntil = w.now + d
	w.partitionsCut++
	w.tracef("partition (%s): %s, for %d ticks", kind.String(), desc, d)
}

func (w *world) healPartition() {
	nw := w.net
	for a := range nw.cut {
		clear(nw.cut[a])
	}
	nw.partUntil = 0
	w.tracef("partition heals")
}

// snapshotFrame is the type of the replica's snapshot chunks (package
// replica's msgSnapshot).
const snapshotFrame core.MessageType = 70
