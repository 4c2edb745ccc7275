package io

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	stdio "io"
	"net"
	"slices"
	"strings"
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
// The first frame on an outbound connection is a peer hello, version 2:
//
//	header   client id = the sender's replica index, type MsgPeerHello (127)
//	payload  16  cluster id (Uint128.PutLE)
//	          4  the sender's replica index, u32
//	          1  the hello's version, 2 (version 1 was the 20 bytes above)
//	          4  the replica the sender means to reach: the index of the
//	             address it dialed in its list, u32
//	          1  n, the number of addresses in the sender's list, 1..255
//	          n  addresses, each a u16 length (1..maxHelloAddress) and that
//	             many bytes: the sender's Options.Addresses (--addresses), as given
//
// The accepting replica checks it: its own cluster, an index below the
// replica count that is not its own, the header's client id equal to the
// index, the same address list as its own, entry by entry, and its own
// index as the one the sender meant to reach. Replicas whose lists differ
// (in order, say) would each take another replica for the one at an index,
// and Raft's messages would go astray; so a mismatch, which only the
// operator can mend, is refused, on every connection between the two, for
// as long as it lasts. A refused hello is answered with a MsgError naming
// the reason (for a list, both lists; for a cluster, both cluster ids), and
// the connection is closed: the acceptor logs the reason as a warning, and
// so does the dialer on reading it, each at most once per
// peerRefusedLogEvery for the same reason. Both replicas keep running and
// the dialer keeps dialing with its backoff, so the cluster mends itself
// once the operator restarts a replica with the right list. After a good
// hello every frame must be a replica-to-replica message (type 64..126)
// whose client id is that index, or the connection is closed; each goes to
// the loop, which hands it to Replica.ReceivePeer. A replica-to-replica
// frame on a connection that did not open with a hello closes it too.
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
	peerHelloV1Size     = 16 + 4             // version 1: cluster id and sender index
	peerHelloVersion    = 2                  // the version this replica writes and accepts
	peerHelloFixed      = 16 + 4 + 1 + 4 + 1 // version 2 before its addresses
	maxHelloAddress     = 1024               // bytes of one address in a hello
	peerRefusedLogEvery = 10 * time.Second
	peerBackoffMin      = 50 * time.Millisecond
	peerBackoffMax      = time.Second
	peerDialTimeout     = 2 * time.Second
	peerDropLogEvery    = 10 * time.Second
)

// peerHello is a decoded peer hello (version 2).
type peerHello struct {
	cluster core.Uint128
	from    uint32   // the sender's index
	to      uint32   // the index the sender dialed
	addrs   []string // the sender's address list
}

// appendPeerHello appends the hello frame of h.
func appendPeerHello(dst []byte, h peerHello) []byte {
	p := make([]byte, peerHelloFixed, 64)
	h.cluster.PutLE(p[:16])
	binary.LittleEndian.PutUint32(p[16:], h.from)
	p[20] = peerHelloVersion
	binary.LittleEndian.PutUint32(p[21:], h.to)
	p[25] = byte(len(h.addrs))
	for _, a := range h.addrs {
		p = binary.LittleEndian.AppendUint16(p, uint16(len(a)))
		p = append(p, a...)
	}
	return core.AppendFrame(dst, core.Header{ClientID: uint64(h.from), Type: MsgPeerHello}, p)
}

// decodePeerHello decodes a hello's payload. Version 1, which lacks the
// address list, is refused: the replicas run different versions.
func decodePeerHello(p []byte) (peerHello, error) {
	if len(p) == peerHelloV1Size {
		return peerHello{}, peerRefusedf("peer hello of version 1 from replica %d, which sends no address list to check: run the same GeoEvent version on every replica",
			binary.LittleEndian.Uint32(p[16:]))
	}
	if len(p) < peerHelloFixed {
		return peerHello{}, peerRefusedf("peer hello payload of %d bytes, want at least %d", len(p), peerHelloFixed)
	}
	if p[20] != peerHelloVersion {
		return peerHello{}, peerRefusedf("peer hello of version %d, want %d: run the same GeoEvent version on every replica", p[20], peerHelloVersion)
	}
	h := peerHello{
		cluster: core.Uint128FromLE(p[:16]),
		from:    binary.LittleEndian.Uint32(p[16:]),
		to:      binary.LittleEndian.Uint32(p[21:]),
	}
	n := int(p[25])
	if n == 0 {
		return peerHello{}, peerRefusedf("peer hello with no address")
	}
	h.addrs = make([]string, 0, n)
	rest := p[peerHelloFixed:]
	for i := range n {
		if len(rest) < 2 {
			return peerHello{}, peerRefusedf("peer hello cut short in address %d of %d", i, n)
		}
		l := int(binary.LittleEndian.Uint16(rest))
		rest = rest[2:]
		if l == 0 || l > maxHelloAddress || l > len(rest) {
			return peerHello{}, peerRefusedf("peer hello address %d of %d bytes (%d left), want 1..%d", i, l, len(rest), maxHelloAddress)
		}
		h.addrs = append(h.addrs, string(rest[:l]))
		rest = rest[l:]
	}
	if len(rest) != 0 {
		return peerHello{}, peerRefusedf("peer hello with %d bytes after its addresses", len(rest))
	}
	return h, nil
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
	hello, err := decodePeerHello(p)
	if err != nil {
		return 0, err
	}
	cluster, from, ours := hello.cluster, hello.from, s.opts.Addresses
	sameList := slices.Equal(hello.addrs, ours)
	switch {
	case cluster != s.info.Cluster && !sameList:
		return 0, peerRefusedf("peer hello from replica %d of cluster %s with addresses %s, but replica %d belongs to cluster %s with addresses %s",
			from, cluster, addressList(hello.addrs), s.info.ReplicaIndex, s.info.Cluster, addressList(ours))
	case cluster != s.info.Cluster:
		return 0, peerRefusedf("peer hello from replica %d of cluster %s, but this replica belongs to cluster %s", from, cluster, s.info.Cluster)
	case from >= s.info.ReplicaCount:
		return 0, peerRefusedf("peer hello from replica %d, but the cluster has %d replica(s) (0..%d)", from, s.info.ReplicaCount, s.info.ReplicaCount-1)
	case from == s.info.ReplicaIndex:
		return 0, peerRefusedf("peer hello from replica %d, which is this replica's own index: two processes run the same replica, or --addresses lists one address twice", from)
	case h.ClientID != uint64(from):
		return 0, peerRefusedf("peer hello from replica %d with client id %d in its header", from, h.ClientID)
	case !sameList:
		return 0, peerRefusedf("replica %d lists the replicas' addresses as %s, but replica %d lists them as %s: start every replica with the same --addresses, in replica order",
			from, addressList(hello.addrs), s.info.ReplicaIndex, addressList(ours))
	case hello.to != s.info.ReplicaIndex:
		return 0, peerRefusedf("replica %d dialed %s as replica %d's address, but it reached replica %d: does another process listen there?",
			from, ours[min(int(hello.to), len(ours)-1)], hello.to, s.info.ReplicaIndex)
	}
	return from, nil
}

// addressList is an address list as --addresses takes it.
func addressList(addrs []string) string { return strings.Join(addrs, ",") }

// refusals rate-limits the warnings of refused peer connections: a replica
// with another address list is refused at every redial, about once a
// second, and the same reason is logged at most once per
// peerRefusedLogEvery.
type refusals struct {
	mu   sync.Mutex
	last map[string]time.Time // by reason; cleared when it grows past maxRefusalReasons
}

const maxRefusalReasons = 64

// due reports whether reason is to be logged now, and notes it if so.
func (rf *refusals) due(reason string) bool {
	rf.mu.Lock()
	defer rf.mu.Unlock()
	now := time.Now()
	if t, ok := rf.last[reason]; ok && now.Sub(t) < peerRefusedLogEvery {
		return false
	}
	if rf.last == nil || len(rf.last) >= maxRefusalReasons {
		rf.last = make(map[string]time.Time)
	}
	rf.last[reason] = now
	return true
}

// refusePeer answers a connection whose hello checkPeerHello refused with
// a MsgError naming the reason, so that the dialing replica can log it too,
// and returns the error to close the connection with: err itself, which
// the connection logs as a warning, or, when the same reason was logged
// less than peerRefusedLogEvery ago, a plain error that it logs at debug
// level.
func (s *Server) refusePeer(nc net.Conn, err error) error {
	var refused *peerRefused
	if !errors.As(err, &refused) {
		return err
	}
	frame := core.AppendFrame(nil, core.Header{ClientID: uint64(s.info.ReplicaIndex), Type: core.MsgError},
		core.AppendErrorMessage(nil, core.WrongCluster.Code, refused.reason))
	_ = nc.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = nc.Write(frame) // best effort: the connection closes next
	if s.peerRefusals.due(refused.reason) {
		return err
	}
	return fmt.Errorf("%w (logged at most every %v)", errRefusedAgain, peerRefusedLogEvery)
}

var errRefusedAgain = errors.New("refused a replica connection for a reason logged a moment ago")

// peerRefusal is a dialer's connection that the peer refused: the reason
// of its MsgError.
type peerRefusal struct{ reason string }

func (e *peerRefusal) Error() string {
	return "the replica refused this replica's connection: " + e.reason
}

// readRefusal reads what a peer wrote on this replica's outbound
// connection, which carries frames only the other way: a MsgError is the
// peer refusing the hello (a peerRefusal); anything else, the peer
// misbehaving. It reads at most a few KiB.
func readRefusal(nc net.Conn) error {
	br := bufio.NewReader(stdio.LimitReader(nc, 4<<10))
	h, p, err := core.ReadFrame(br, nil)
	switch {
	case err != nil:
		if _, ok := err.(*core.Error); ok {
			return fmt.Errorf("the replica wrote on a connection that only carries frames to it: %w", err)
		}
		return err // the connection ended
	case h.Type != core.MsgError:
		return fmt.Errorf("the replica wrote a %v frame on a connection that only carries frames to it", h.Type)
	}
	e, err := core.DecodeErrorMessage(p)
	if err != nil {
		return fmt.Errorf("the replica refused this replica's connection with an undecodable error: %w", err)
	}
	return &peerRefusal{reason: e.Message}
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
	hello := appendPeerHello(nil, peerHello{cluster: s.info.Cluster, from: s.info.ReplicaIndex, to: p.index, addrs: s.opts.Addresses})
	var lastRefusal string // the reason last logged, at lastRefusalAt
	var lastRefusalAt time.Time
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
		var refusal *peerRefusal
		switch {
		case !errors.As(err, &refusal):
			lg.Info("lost the connection to a replica; reconnecting", zap.Error(err))
			s.notePeerLost(p.index)
		case refusal.reason != lastRefusal || time.Since(lastRefusalAt) >= peerRefusedLogEvery:
			lg.Warn("a replica refused this replica's connection; retrying", zap.String("reason", refusal.reason))
			lastRefusal, lastRefusalAt = refusal.reason, time.Now()
		default:
			lg.Debug("a replica refused this replica's connection; retrying", zap.String("reason", refusal.reason))
		}
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
// closed. A watcher goroutine reads nc: the peer writes on it only to
// refuse the hello (readRefusal), so a read that returns means the
// connection is over, and the writer goes to reconnect at once rather than
// at its next write.
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
		err := readRefusal(nc)
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
			// A peer that refused the hello wrote why before it closed the
			// connection, which may fail a write first: its reason is the
			// one to report.
			select {
			case werr := <-over:
				var refusal *peerRefusal
				if errors.As(werr, &refusal) {
					return werr
				}
			case <-time.After(peerRefusalWait):
			}
			return err
		}
	}
}

// peerRefusalWait is how long a dialer whose write failed waits for the
// peer's refusal, which the watcher may still be reading.
const peerRefusalWait = 100 * time.Millisecond

// notePeerLost tells the loop that the connection to replica index broke
// (Replica.PeerLost: a killed leader is noticed at once). It is a hint: it
// never blocks, and is dropped when the loop has not taken the last few.
func (s *Server) notePeerLost(index uint32) {
	select {
	case s.peerLost <- index:
	default:
	}
}
