package io

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/geoevent/geoevent/core"
)

// The peer transport: how replicas reach each other.
//
// Every replica listens on one address (its entry of Options.Addresses) for
// clients and replicas alike. For each other replica it keeps one outbound
// connection that it dials itself and that carries frames one way only: the
// replica's messages to that peer (core.IO.SendPeer). Replies come back
// over the peer's own outbound connection to this replica. So between two
// replicas there are two connections, one per direction, and neither side
// ever has to decide which of two crossing dials wins.
//
// The first frame on an outbound connection is a peer hello:
//
//	header   client id = the sender's replica index, type MsgPeerHello (127)
//	payload  16  cluster id (Uint128.PutLE)
//	          4  the sender's replica index, u32
//
// The accepting replica checks it (its own cluster, an index below the
// replica count that is not its own, the header's client id equal to the
// index); a bad hello closes the connection with a warning. After a good
// one every frame must be a replica-to-replica message (type 64..126) whose
// client id is that index, or the connection is closed; each goes to the
// loop, which hands it to Replica.ReceivePeer. A replica-to-replica frame
// on a connection that did not open with a hello closes it too.
//
// SendPeer never blocks the loop: it queues the frame on the peer's bounded
// queue (Options.PeerQueueBytes, PeerQueueFrames) and a writer goroutine
// writes everything queued with one writev. A full queue drops the frame
// (counted, and logged at most every peerDropLogEvery). While the peer is
// unreachable the dialer retries with a backoff from peerBackoffMin
// doubling to peerBackoffMax, and SendPeer drops its frames at once: they
// would be stale by the time a connection opens. Raft tolerates lost,
// delayed, duplicated and reordered messages, so none of this needs
// acknowledgements or retransmission here.

// MsgPeerHello is the first frame of a replica's outbound connection to
// another replica. It is the last type of the replica-to-replica range,
// which package replica must therefore leave unused.
const MsgPeerHello core.MessageType = core.MsgReplicaLast

const (
	peerHelloSize    = 16 + 4
	peerBackoffMin   = 50 * time.Millisecond
	peerBackoffMax   = time.Second
	peerDialTimeout  = 2 * time.Second
	peerDropLogEvery = 10 * time.Second
)

// appendPeerHello appends the hello frame of replica from of cluster.
func appendPeerHello(dst []byte, cluster core.Uint128, from uint32) []byte {
	var p [peerHelloSize]byte
	cluster.PutLE(p[:16])
	binary.LittleEndian.PutUint32(p[16:], from)
	return core.AppendFrame(dst, core.Header{ClientID: uint64(from), Type: MsgPeerHello}, p[:])
}

// peerRefused is why a connection was refused as, or on the way to
// becoming, a replica connection.
type peerRefused struct{ reason string }

func (e *peerRefused) Error() string { return "refused replica connection: " + e.reason }

func peerRefusedf(format string, args ...any) error {
	return &peerRefused{reason: fmt.Sprintf(format, args...)}
}

// checkPeerHello checks a hello frame and returns the sender's index.
func (s *Server) checkPeerHello(h core.Header, p []byte) (uint32, error) {
	if len(p) != peerHelloSize {
		return 0, peerRefusedf("peer hello payload of %d bytes, want %d", len(p), peerHelloSize)
	}
	cluster := core.Uint128FromLE(p[:16])
	from := binary.LittleEndian.Uint32(p[16:])
	switch {
	case cluster != s.info.Cluster:
		return 0, peerRefusedf("peer hello from replica %d of cluster %s, but this replica belongs to cluster %s", from, cluster, s.info.Cluster)
	case from >= s.info.ReplicaCount:
		return 0, peerRefusedf("peer hello from replica %d, but the cluster has %d replica(s) (0..%d)", from, s.info.ReplicaCount, s.info.ReplicaCount-1)
	case from == s.info.ReplicaIndex:
		return 0, peerRefusedf("peer hello from replica %d, which is this replica's own index: two processes run the same replica, or --addresses lists one address twice", from)
	case h.ClientID != uint64(from):
		return 0, peerRefusedf("peer hello from replica %d with client id %d in its header", from, h.ClientID)
	}
	return from, nil
}

// checkPeerFrame checks a frame on replica from's connection, after its
// hello.
func checkPeerFrame(from uint32, h core.Header) error {
	switch {
	case !h.Type.Replica() || h.Type == MsgPeerHello:
		return peerRefusedf("a frame of type %v after the peer hello: only replica-to-replica messages (types %d..%d) may follow it",
			h.Type, core.MsgReplicaFirst, MsgPeerHello-1)
	case h.ClientID != uint64(from):
		return peerRefusedf("a frame from replica %d on replica %d's connection", h.ClientID, from)
	}
	return nil
}

// peer is the outbound side of the transport to one other replica.
type peer struct {
	index uint32
	addr  string
	q     sendQueue

	dropped     atomic.Uint64 // frames refused by a full queue
	lastDropLog atomic.Int64  // UnixNano of the last drop warning
	// unreachable is set while dialing fails: SendPeer then drops frames
	// at once (they would be stale by the next attempt) without warning.
	unreachable atomic.Bool

	mu     sync.Mutex
	nc     net.Conn // the current connection, closed at shutdown
	closed bool
}

// newPeers makes the outbound side for every replica but this one (whose
// entry stays nil).
func (s *Server) newPeers() []*peer {
	ps := make([]*peer, s.info.ReplicaCount)
	for i := range ps {
		if uint32(i) == s.info.ReplicaIndex {
			continue
		}
		ps[i] = &peer{index: uint32(i), addr: s.opts.Addresses[i]}
		ps[i].q = sendQueue{wake: make(chan struct{}, 1), maxBytes: s.opts.PeerQueueBytes, maxFrames: s.opts.PeerQueueFrames}
	}
	return ps
}

// sendPeer queues frame (its pieces) for replica to; it is SendPeer. It
// never blocks and is safe from any goroutine.
func (s *Server) sendPeer(to uint32, frame ...[]byte) {
	if int(to) >= len(s.peers) || s.peers[to] == nil {
		return // this replica, or no replica: a bug in the caller, and harmless
	}
	p := s.peers[to]
	if p.unreachable.Load() {
		return
	}
	if p.q.push(frame...) != queueFull {
		return // queued, or shutting down
	}
	n := p.dropped.Add(1)
	now := time.Now().UnixNano()
	if last := p.lastDropLog.Load(); now-last >= int64(peerDropLogEvery) && p.lastDropLog.CompareAndSwap(last, now) {
		s.log.Warn("dropping messages to a replica: its send queue is full (the replica or the network is slow)",
			zap.Uint32("peer", p.index), zap.String("address", p.addr), zap.Uint64("dropped_total", n))
	}
}

// setConn records nc as p's connection (nil: none); false when p is closed
// and nc must not be used.
func (p *peer) setConn(nc net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed && nc != nil {
		return false
	}
	p.nc = nc
	return true
}

// close stops p for good: its queue and its connection.
func (p *peer) close() {
	p.mu.Lock()
	p.closed = true
	if p.nc != nil {
		p.nc.Close()
	}
	p.mu.Unlock()
	p.q.close()
}

// runPeer keeps a connection to p open until shutdown: it dials, sends the
// hello, writes what the replica queues, and after a failure dials again.
func (s *Server) runPeer(p *peer) {
	defer s.wg.Done()
	lg := s.log.With(zap.Uint32("peer", p.index), zap.String("address", p.addr))
	hello := appendPeerHello(nil, s.info.Cluster, s.info.ReplicaIndex)
	d := net.Dialer{Timeout: peerDialTimeout}
	backoff := peerBackoffMin
	warned := false // about the peer being unreachable, since the last connection
	for {
		nc, err := d.DialContext(s.peerCtx, "tcp", p.addr)
		if err == nil {
			_ = nc.SetWriteDeadline(time.Now().Add(peerDialTimeout))
			if _, err = nc.Write(hello); err != nil {
				nc.Close()
			}
		}
		if err != nil {
			if s.peerCtx.Err() != nil {
				return
			}
			p.unreachable.Store(true)
			stale := p.q.drop()
			if !warned {
				lg.Warn("cannot reach a replica; retrying", zap.Error(err))
				warned = true
			} else {
				lg.Debug("cannot reach a replica; retrying", zap.Error(err), zap.Int("dropped", stale))
			}
			if !s.sleepPeer(backoff) {
				return
			}
			backoff = min(2*backoff, peerBackoffMax)
			continue
		}
		lg.Info("connected to a replica")
		p.unreachable.Store(false)
		warned = false
		start := time.Now()
		err = s.servePeerConn(p, nc)
		if s.peerCtx.Err() != nil {
			return
		}
		lg.Info("lost the connection to a replica; reconnecting", zap.Error(err))
		if time.Since(start) >= peerBackoffMax {
			backoff = peerBackoffMin // it was up for a while: try again at once
			continue
		}
		// A connection that drops at once (a peer that refuses the hello)
		// must not make a busy loop.
		if !s.sleepPeer(backoff) {
			return
		}
		backoff = min(2*backoff, peerBackoffMax)
	}
}

// sleepPeer waits d; false when the server is shutting down.
func (s *Server) sleepPeer(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.peerCtx.Done():
		return false
	case <-t.C:
		return true
	}
}

// servePeerConn writes p's queued frames to nc, all that are queued with
// one writev, until a write fails, the peer closes the connection or p is
// closed. A watcher goroutine reads nc: the peer never writes on it, so a
// read that returns means the connection is over, and the writer goes to
// reconnect at once rather than at its next write.
func (s *Server) servePeerConn(p *peer, nc net.Conn) error {
	if !p.setConn(nc) {
		nc.Close()
		return net.ErrClosed
	}
	defer func() {
		p.setConn(nil)
		nc.Close()
	}()
	over := make(chan error, 1)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		var b [1]byte
		_, err := nc.Read(b[:])
		if err == nil {
			err = errors.New("the replica wrote on a connection that only carries frames to it")
		}
		nc.Close()
		over <- err
	}()
	var spare [][]byte
	for {
		frames, ok := p.q.poll(spare)
		if !ok {
			return net.ErrClosed
		}
		if len(frames) == 0 {
			select {
			case <-p.q.wake:
			case err := <-over:
				return err
			}
			continue
		}
		err := s.writeFrames(nc, frames)
		spare = frames[:0]
		if err != nil {
			return err
		}
	}
}
