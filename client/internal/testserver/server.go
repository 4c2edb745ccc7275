// Package testserver runs a one-replica GeoEvent cluster in process, on a
// real TCP listener on 127.0.0.1, for the client's tests and examples. It
// wraps a [replica.Replica] with an in-memory [core.IO] whose Sync completes
// at once, calls the replica from one goroutine only, and offers fault
// injection: dropped, rewritten or delayed replies, connections closed after
// a write is applied but before its reply is sent, and requests answered
// with a chosen error code.
//
// Stop closes the listener and every connection and waits for every
// goroutine the server started.
package testserver

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/replica"
	"github.com/geoevent/geoevent/statemachine"
)

// DefaultCluster is the cluster id used when Config.Replica.Cluster is zero.
var DefaultCluster = core.Uint128{Hi: 0x6e0e, Lo: 0x7e57}

// Config configures a test server. Replica is passed to replica.New after
// the server fills in Cluster (DefaultCluster when zero) and Addresses (the
// listener's address).
type Config struct {
	Replica replica.Config
	// TickEvery is how often the replica's Tick runs (default 50 ms).
	TickEvery time.Duration
}

// Server is a running test server.
type Server struct {
	ln      net.Listener
	cluster core.Uint128
	r       *replica.Replica
	io      *memIO

	in   chan inbound
	done chan struct{}
	wg   sync.WaitGroup
	stop sync.Once

	mu         sync.Mutex
	stopped    bool
	conns      map[core.ConnID]*conn
	nextConn   core.ConnID
	accepted   int
	registers  int
	requests   int
	perOp      map[core.Operation]int
	dropN      int
	closeN     int
	failN      int
	failCode   core.CodeInfo
	rewriteN   int
	rewrite    func([]byte) []byte
	delay      time.Duration
	replicaErr error
}

type inbound struct {
	c       *conn
	closed  bool
	h       core.Header
	payload []byte
}

type outbound struct {
	frame []byte
	delay time.Duration
}

type conn struct {
	id     core.ConnID
	nc     net.Conn
	out    chan outbound
	closed chan struct{}
	once   sync.Once
}

func (c *conn) close() {
	c.once.Do(func() {
		close(c.closed)
		_ = c.nc.Close()
	})
}

// Start listens on 127.0.0.1:0 and starts the replica.
func Start(cfg Config) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	rc := cfg.Replica
	if rc.Cluster.IsZero() {
		rc.Cluster = DefaultCluster
	}
	rc.Addresses = []string{ln.Addr().String()}
	s := &Server{
		ln:       ln,
		cluster:  rc.Cluster,
		io:       &memIO{hist: statemachine.NewMemStore()},
		in:       make(chan inbound, 64),
		done:     make(chan struct{}),
		conns:    make(map[core.ConnID]*conn),
		perOp:    make(map[core.Operation]int),
		failCode: core.ClusterBusy,
	}
	s.io.s = s
	r, err := replica.New(rc, s.io, &realClock{start: time.Now()}, rand.New(rand.NewPCG(1, 2)), replica.Recovered{})
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	s.r = r
	s.drain()
	tick := cfg.TickEvery
	if tick <= 0 {
		tick = 50 * time.Millisecond
	}
	s.wg.Add(2)
	go s.acceptLoop()
	go s.loop(tick)
	return s, nil
}

// Addr is the listener's address, host:port.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Cluster is the cluster id clients must register with.
func (s *Server) Cluster() core.Uint128 { return s.cluster }

// Stop closes the listener and every connection and waits until every
// goroutine of the server has returned. It may be called more than once.
func (s *Server) Stop() {
	s.stop.Do(func() {
		s.mu.Lock()
		s.stopped = true
		conns := make([]*conn, 0, len(s.conns))
		for _, c := range s.conns {
			conns = append(conns, c)
		}
		s.mu.Unlock()
		close(s.done)
		_ = s.ln.Close()
		for _, c := range conns {
			c.close()
		}
		s.wg.Wait()
	})
}

// Err is the replica's failure, if it stopped.
func (s *Server) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replicaErr
}

// Fault injection. Each counter applies to the next frames of its kind, in
// the order the server handles them.

// DropReplies drops the next n replies (MsgReply or MsgError frames) the
// replica sends: the operation ran, the client never hears of it.
func (s *Server) DropReplies(n int) { s.mu.Lock(); s.dropN = n; s.mu.Unlock() }

// CloseAfterApply closes the connection instead of sending the next n
// replies of mutating operations: each write was applied, its reply is lost
// with the connection.
func (s *Server) CloseAfterApply(n int) {
	s.mu.Lock()
	s.closeN = n
	s.mu.Unlock()
}

// FailNext answers the next n requests (MsgRequest frames) with a MsgError of
// the given code, without passing them to the replica.
func (s *Server) FailNext(n int, code core.CodeInfo) {
	s.mu.Lock()
	s.failN, s.failCode = n, code
	s.mu.Unlock()
}

// RewriteReplies passes each of the next n reply frames (MsgReply or
// MsgError, whole frames with length and checksum) through f and sends what
// f returns instead; nil sends nothing.
func (s *Server) RewriteReplies(n int, f func(frame []byte) []byte) {
	s.mu.Lock()
	s.rewriteN, s.rewrite = n, f
	s.mu.Unlock()
}

// SetReplyDelay delays every frame sent to a client from now on by d (0:
// no delay). The delay runs on the connection's writer, so frames to one
// connection stay in order.
func (s *Server) SetReplyDelay(d time.Duration) { s.mu.Lock(); s.delay = d; s.mu.Unlock() }

// Counters.

// Requests is the number of MsgRequest frames received (every attempt of
// every operation, including those answered by FailNext).
func (s *Server) Requests() int { s.mu.Lock(); defer s.mu.Unlock(); return s.requests }

// RequestsFor is the number of MsgRequest frames received for op.
func (s *Server) RequestsFor(op core.Operation) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.perOp[op]
}

// Registers is the number of MsgRegister frames received.
func (s *Server) Registers() int { s.mu.Lock(); defer s.mu.Unlock(); return s.registers }

// Accepted is the number of connections accepted.
func (s *Server) Accepted() int { s.mu.Lock(); defer s.mu.Unlock(); return s.accepted }

// OpenConns is the number of connections currently open.
func (s *Server) OpenConns() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.conns) }

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return // closed by Stop
		}
		s.mu.Lock()
		if s.stopped {
			s.mu.Unlock()
			_ = nc.Close()
			return
		}
		s.nextConn++
		c := &conn{id: s.nextConn, nc: nc, out: make(chan outbound, 1024), closed: make(chan struct{})}
		s.conns[c.id] = c
		s.accepted++
		s.wg.Add(2)
		s.mu.Unlock()
		go s.readLoop(c)
		go s.writeLoop(c)
	}
}

func (s *Server) readLoop(c *conn) {
	defer s.wg.Done()
	br := bufio.NewReaderSize(c.nc, 64<<10)
	for {
		h, payload, err := core.ReadFrame(br, nil) // a fresh buffer per frame: payload is ours
		if err != nil {
			c.close()
			select {
			case s.in <- inbound{c: c, closed: true}:
			case <-s.done:
			}
			return
		}
		select {
		case s.in <- inbound{c: c, h: h, payload: payload}:
		case <-s.done:
			return
		}
	}
}

func (s *Server) writeLoop(c *conn) {
	defer s.wg.Done()
	for {
		select {
		case f := <-c.out:
			if f.delay > 0 {
				t := time.NewTimer(f.delay)
				select {
				case <-t.C:
				case <-c.closed:
					t.Stop()
					return
				case <-s.done:
					t.Stop()
					return
				}
			}
			if _, err := c.nc.Write(f.frame); err != nil {
				c.close()
				return
			}
		case <-c.closed:
			return
		case <-s.done:
			return
		}
	}
}

// loop is the only goroutine that calls the replica.
func (s *Server) loop(tick time.Duration) {
	defer s.wg.Done()
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			s.r.Tick()
		case m := <-s.in:
			s.handle(m)
		}
		s.drain()
		if err := s.r.Err(); err != nil {
			s.mu.Lock()
			s.replicaErr = err
			s.mu.Unlock()
		}
	}
}

func (s *Server) handle(m inbound) {
	if m.closed {
		s.mu.Lock()
		delete(s.conns, m.c.id)
		s.mu.Unlock()
		s.r.Closed(m.c.id)
		return
	}
	s.mu.Lock()
	switch m.h.Type {
	case core.MsgRegister:
		s.registers++
	case core.MsgRequest:
		s.requests++
		if _, req, err := core.CutSessionlessRead(m.payload); m.h.ClientID == 0 && err == nil {
			s.perOp[core.Operation(req[0])]++
		} else if len(m.payload) > 0 {
			s.perOp[core.Operation(m.payload[0])]++
		}
		if s.failN > 0 {
			s.failN--
			code := s.failCode
			s.mu.Unlock()
			h := core.Header{ClientID: m.h.ClientID, Request: m.h.Request, Type: core.MsgError}
			frame := core.AppendFrame(nil, h, core.AppendErrorMessage(nil, code.Code, "injected by the test server"))
			s.enqueue(m.c, frame)
			return
		}
	}
	s.mu.Unlock()
	s.r.Receive(m.c.id, m.h, m.payload)
}

// drain completes storage requests the replica made; it runs outside the
// replica's IO callbacks.
func (s *Server) drain() {
	for s.io.syncs > 0 || len(s.io.snaps) > 0 || len(s.io.beside) > 0 || s.r.Backlog() {
		if s.r.Backlog() {
			s.r.ApplyMore()
			continue
		}
		if s.io.syncs > 0 {
			s.io.syncs--
			s.r.Synced(s.io.last, 1)
			continue
		}
		if len(s.io.beside) > 0 {
			f := s.io.beside[0]
			s.io.beside = s.io.beside[1:]
			f(s.r)
			continue
		}
		idx := s.io.snaps[0]
		s.io.snaps = s.io.snaps[1:]
		s.r.SnapshotSaved(idx)
	}
}

// send is SendClient: fault injection, then the connection's writer.
func (s *Server) send(id core.ConnID, frame []byte) {
	s.mu.Lock()
	c := s.conns[id]
	if c == nil {
		s.mu.Unlock()
		return
	}
	typ := core.MessageType(frame[16])
	if typ == core.MsgReply || typ == core.MsgError {
		write := typ == core.MsgReply && len(frame) > 20 && core.Operation(frame[20]).Mutates()
		switch {
		case s.closeN > 0 && write:
			s.closeN--
			s.mu.Unlock()
			c.close()
			return
		case s.dropN > 0:
			s.dropN--
			s.mu.Unlock()
			return
		case s.rewriteN > 0:
			s.rewriteN--
			frame = s.rewrite(append([]byte(nil), frame...))
			if frame == nil {
				s.mu.Unlock()
				return
			}
		}
	}
	s.mu.Unlock()
	s.enqueue(c, frame)
}

func (s *Server) enqueue(c *conn, frame []byte) {
	s.mu.Lock()
	d := s.delay
	s.mu.Unlock()
	select {
	case c.out <- outbound{frame: frame, delay: d}:
	default: // a slow client loses frames, as core.IO allows
	}
}

// memIO is an in-memory core.IO. Storage keeps nothing (the server never
// restarts) but the history store, in memory; Sync, SaveSnapshot,
// WriteSnapshot, EncodeSnapshot, DecodeSnapshot and ReadHistory are
// completed by drain.
type memIO struct {
	s      *Server
	last   uint64
	syncs  int
	snaps  []uint64
	beside []func(*replica.Replica) // queued snapshot encodings and decodings, history reads
	hist   *statemachine.MemStore
}

// WriteHistory applies the writes at once, in the order of the calls.
func (m *memIO) WriteHistory(_ uint64, writes []core.HistoryWrite) { m.hist.Apply(writes) }
func (*memIO) PublishApplied(uint64, []core.HistoryWrite)          {}

// ReadHistory answers from the store as it is now, when drain completes it.
func (m *memIO) ReadHistory(token uint64, reads []core.HistoryRead) {
	answers := m.hist.Answer(reads)
	m.beside = append(m.beside, func(r *replica.Replica) { r.HistoryRead(token, answers) })
}

func (m *memIO) SendClient(id core.ConnID, frame []byte) { m.s.send(id, frame) }
func (m *memIO) SendReply(id core.ConnID, frame []byte)  { m.s.send(id, frame) }
func (m *memIO) ReplyBuffer() []byte                     { return nil }
func (m *memIO) SendPeer(uint32, ...[]byte)              {} // a cluster of one

func (m *memIO) AppendLog(entries []core.LogEntry) {
	if len(entries) > 0 {
		m.last = entries[len(entries)-1].Index
	}
}

func (m *memIO) SaveHardState(core.HardState) {}
func (m *memIO) Sync()                        { m.syncs++ }

func (m *memIO) SaveSnapshot(index, term uint64, data []byte) { m.snaps = append(m.snaps, index) }

// ReadLog answers that the log holds nothing: a cluster of one sends no
// entries, so its replica never reads them back.
func (m *memIO) ReadLog(from, _ uint64, _ int) {
	m.beside = append(m.beside, func(r *replica.Replica) { r.LogRead(from, nil) })
}

// WriteSnapshot encodes the snapshot (into nothing: storage keeps
// nothing) when drain completes it, then reports it saved.
func (m *memIO) WriteSnapshot(index, _ uint64, encode func(w io.Writer) error) {
	m.beside = append(m.beside, func(*replica.Replica) {
		if err := encode(io.Discard); err != nil {
			panic(fmt.Sprintf("testserver: encoding the snapshot at index %d: %v", index, err))
		}
		m.snaps = append(m.snaps, index)
	})
}

// EncodeSnapshot, and the history stream's calls, serve followers: a
// cluster of one has none, so its stream is empty and never read.
func (m *memIO) EncodeSnapshot(index uint64, encode func() []byte) {
	m.beside = append(m.beside, func(r *replica.Replica) { r.SnapshotEncoded(index, encode(), 0) })
}

func (m *memIO) ReadSnapshotStream(index, offset uint64, _ int) {
	m.beside = append(m.beside, func(r *replica.Replica) { r.SnapshotStreamRead(index, offset, nil) })
}

func (m *memIO) DropSnapshotStream(uint64) {}

func (m *memIO) WriteSnapshotStream(index, offset uint64, _ []byte) {
	m.beside = append(m.beside, func(r *replica.Replica) { r.SnapshotStreamWritten(index, offset, false) })
}

func (m *memIO) DecodeSnapshot(index uint64, decode func()) {
	m.beside = append(m.beside, func(r *replica.Replica) { decode(); r.SnapshotDecoded(index) })
}

type realClock struct{ start time.Time }

func (c *realClock) MonotonicNS() uint64 { return uint64(time.Since(c.start).Nanoseconds()) + 1 }
func (c *realClock) RealtimeNS() uint64  { return uint64(time.Now().UnixNano()) }

// String describes the server (for test logs).
func (s *Server) String() string { return fmt.Sprintf("testserver(%s)", s.Addr()) }
