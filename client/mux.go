package client

import (
	"bufio"
	"context"
	"errors"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/geoevent/geoevent/core"
)

// A muxConn is the one TCP connection a Client keeps to a replica. Every
// session talking to that replica sends its frames over it, so that under
// load one read or write system call carries the frames of many sessions on
// both ends, instead of one each.
//
// Frames are matched to the exchanges waiting for them by their header:
//
//   - A request's answer (MsgReply, or MsgError with a non-zero client id)
//     carries the session id and request number of the request. A session
//     has at most one exchange in flight, so the pair names one exchange.
//   - A register, and a read sent without a session (client id 0), carry
//     no session id: the connection gives each a request number of its own
//     (a nonce, unique on the connection), which the replica echoes in its
//     answer (MsgRegisterReply, MsgReply or MsgError, client id 0).
//
// Invariants:
//   - waiters holds exactly the exchanges that have sent a frame and wait
//     for its answer; the reader removes one before delivering to it, and
//     an exchange that gives up removes itself, so each is answered at most
//     once.
//   - A frame that answers no waiter is dropped when it answers an exchange
//     that gave up (a late answer, remembered in abandoned, the last
//     maxAbandoned of them); any other unmatched frame is a protocol
//     violation and fails the connection. A retry of a request that gave
//     up waits under the same key, and takes whichever answer comes first:
//     the replica answers every attempt alike (sessions deduplicate).
//   - Once failed (err set, done closed) the connection is closed and stays
//     failed: every waiting and later exchange gets the error, and the
//     client dials a new connection for the next exchange.
type muxConn struct {
	addr string
	nc   net.Conn

	// wmu guards pending and spare. An exchange appends its frame to
	// pending and wakes the connection's writer goroutine, which writes
	// all that is pending at once: under load, the frames of many sessions
	// that answers set off together go out in one write.
	wmu     sync.Mutex
	pending []byte
	spare   []byte
	wake    chan struct{} // capacity 1

	mu        sync.Mutex
	waiters   map[replyKey]*muxStream
	abandoned map[replyKey]struct{}
	abandonQ  []replyKey // abandoned in insertion order, to bound it
	err       error
	done      chan struct{}

	born     time.Time     // when the connection was made: the origin of lastRead
	lastRead atomic.Int64  // when bytes last arrived, as time since born: shows that the connection is alive
	nonce    atomic.Uint32 // the last nonce (see replyKey)
}

// replyKey names the exchange a frame answers.
type replyKey struct {
	session  uint64 // 0 for a nonce's exchange
	request  uint32 // the request number, or the nonce
	register bool   // numbered by the connection's nonce: a register or a read without a session
}

// maxAbandoned bounds the late answers a connection remembers; an answer
// later than that many abandoned exchanges fails the connection, which
// costs a reconnect and nothing else.
const maxAbandoned = 4096

func newMuxConn(addr string, nc net.Conn) *muxConn {
	m := &muxConn{
		addr:      addr,
		nc:        nc,
		born:      time.Now(),
		waiters:   make(map[replyKey]*muxStream),
		abandoned: make(map[replyKey]struct{}),
		done:      make(chan struct{}),
		wake:      make(chan struct{}, 1),
	}
	go m.read()
	go m.write()
	return m
}

// sentKey is the key of the exchange that sends the frame h.
func sentKey(h core.Header) replyKey {
	if h.Type == core.MsgRegister || h.ClientID == 0 {
		return replyKey{request: h.Request, register: true}
	}
	return replyKey{session: h.ClientID, request: h.Request}
}

// keyOf is the key of the exchange the frame h answers.
func keyOf(h core.Header) replyKey {
	if h.Type == core.MsgRegisterReply || h.ClientID == 0 {
		return replyKey{request: h.Request, register: true}
	}
	return replyKey{session: h.ClientID, request: h.Request}
}

// since is the time since the connection was made.
func (m *muxConn) since() int64 { return int64(time.Since(m.born)) }

// progressReader notes in lastRead when bytes arrive on the connection: a
// large answer arriving slowly keeps its connection alive while it
// arrives, not only once it is whole.
type progressReader struct{ m *muxConn }

func (r progressReader) Read(p []byte) (int, error) {
	k, err := r.m.nc.Read(p)
	if k > 0 {
		r.m.lastRead.Store(r.m.since())
	}
	return k, err
}

func (m *muxConn) read() {
	br := bufio.NewReaderSize(progressReader{m}, 64<<10)
	buf := make([]byte, 64<<10)
	for {
		h, p, err := core.ReadFrame(br, buf)
		if err != nil {
			m.fail(err)
			return
		}
		k := keyOf(h)
		m.mu.Lock()
		s := m.waiters[k]
		delete(m.waiters, k)
		_, late := m.abandoned[k]
		m.mu.Unlock()
		if s == nil {
			if late {
				continue // the answer to an exchange that gave up
			}
			if h.Type == core.MsgError && h.ClientID == 0 && h.Request == 0 {
				// The server refused the connection itself before closing
				// it (212 CLUSTER_BUSY over its connection limit): every
				// exchange on it fails with that code.
				if e, err := core.DecodeErrorMessage(p); err == nil {
					m.fail(&connRefused{e})
					return
				}
			}
			m.fail(protocolf("a %s frame for session %d request %d that nothing waits for", h.Type, h.ClientID, h.Request))
			return
		}
		s.h = h
		s.buf = append(s.buf[:0], p...)
		s.answered <- struct{}{}
	}
}

// fail closes the connection for good; every exchange waiting on it fails
// with err.
func (m *muxConn) fail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return
	}
	m.err = err
	close(m.done)
	_ = m.nc.Close()
}

func (m *muxConn) failed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err != nil
}

func (m *muxConn) error() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// send queues the frame for the writer. A write error fails the
// connection (and so the exchange, which watches done).
func (m *muxConn) send(h core.Header, payload []byte) {
	m.wmu.Lock()
	m.pending = core.AppendFrame(m.pending, h, payload)
	m.wmu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default: // the writer is awake already and will see the frame
	}
}

// write writes what is pending, all of it at once, until the connection
// fails.
func (m *muxConn) write() {
	for {
		select {
		case <-m.wake:
		case <-m.done:
			return
		}
		// Let the goroutines that are ready to run first: answers wake
		// many sessions at once, and their next frames then go out in
		// this write rather than one write each.
		runtime.Gosched()
		m.wmu.Lock()
		if len(m.pending) == 0 {
			m.wmu.Unlock()
			continue // a wake for frames an earlier round wrote
		}
		// pending and spare are two buffers, never the same one: out is
		// written while senders append to the other.
		out := m.pending
		m.pending, m.spare = m.spare[:0], nil
		m.wmu.Unlock()
		if _, err := m.nc.Write(out); err != nil {
			m.fail(err)
			return
		}
		m.wmu.Lock()
		if cap(out) <= maxReusedRequest+core.FrameOverhead {
			m.spare = out[:0] // keep a buffer for the next round (a 10,000-event batch's fits), unless it is huge
		} else {
			m.spare = nil
		}
		m.wmu.Unlock()
	}
}

// abandon records that the exchange k gave up, if it still waited; false
// when the reader has already taken it (its answer is being delivered).
func (m *muxConn) abandon(k replyKey, s *muxStream) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.waiters[k] != s {
		return false
	}
	delete(m.waiters, k)
	if _, ok := m.abandoned[k]; !ok {
		if len(m.abandonQ) >= maxAbandoned {
			delete(m.abandoned, m.abandonQ[0])
			m.abandonQ = m.abandonQ[1:]
		}
		m.abandoned[k] = struct{}{}
		m.abandonQ = append(m.abandonQ, k)
	}
	return true
}

// errSilentConnection fails a connection on which nothing arrived during
// the second half of an exchange that reached the client's timeout.
var errSilentConnection = errors.New("nothing arrived on the connection during the second half of a request timeout: the replica, or the way to it, is taken for dead")

// muxStream is a session's Conn over its client's muxConn to a replica.
// Closing it leaves the shared connection open.
type muxStream struct {
	m        *muxConn
	answered chan struct{} // capacity 1: the reader has filled h and buf
	h        core.Header
	buf      []byte
}

// Exchange sends the frame and waits for its answer, the connection's
// failure or ctx. An exchange that reaches the client's own timeout (the
// attempt's RequestTimeout or the call's TotalTimeout) fails the connection
// too when not one byte arrived on it during the second half of the
// exchange: the replica (or the path to it) is taken for dead, and the
// sessions on it move on. An answer still arriving, however slowly, keeps
// it; a frame cut short and then silence does not.
func (s *muxStream) Exchange(ctx context.Context, h core.Header, payload []byte) (core.Header, []byte, error) {
	m := s.m
	if h.Type == core.MsgRegister || h.ClientID == 0 {
		h.Request = m.nonce.Add(1)
	}
	k := sentKey(h)
	began := m.since()
	m.mu.Lock()
	if m.err != nil {
		m.mu.Unlock()
		return core.Header{}, nil, m.err
	}
	if m.waiters[k] != nil {
		m.mu.Unlock()
		return core.Header{}, nil, errors.New("another exchange of this session is in flight")
	}
	m.waiters[k] = s // an answer for k now goes here, a late one to an earlier attempt included
	m.mu.Unlock()

	m.send(h, payload)
	select {
	case <-s.answered:
		return s.h, s.buf, nil
	case <-m.done:
		select {
		case <-s.answered: // answered just before the failure
			return s.h, s.buf, nil
		default:
		}
		return core.Header{}, nil, m.error()
	case <-ctx.Done():
		if !m.abandon(k, s) {
			<-s.answered // the reader is delivering it
			return s.h, s.buf, nil
		}
		err := context.Cause(ctx)
		// Only the client's own timeouts judge the connection: a caller's
		// shorter deadline says nothing about it, and failing it would
		// fail every other session's exchange on it.
		clientTimeout := errors.Is(err, errAttemptTimeout) || errors.Is(err, ErrTotalTimeout)
		if now := m.since(); clientTimeout && m.lastRead.Load() < began+(now-began)/2 {
			m.fail(errSilentConnection)
		}
		return core.Header{}, nil, err
	}
}

// Close ends the session's use of the connection, which other sessions may
// go on using.
func (s *muxStream) Close() error { return nil }

// poison fails the shared connection: the session got a frame it cannot
// trust, so nothing else on the connection is trusted either.
func (s *muxStream) poison(err error) { s.m.fail(err) }

// muxSlot holds the client's connection to one address. lock (capacity 1)
// is held while dialing, so that sessions connecting at once share one
// dial, and can be waited for under a context.
type muxSlot struct {
	lock chan struct{}
	m    *muxConn
}

// openStream returns a stream over the client's connection to addr,
// dialing one when there is none or it failed.
func (c *Client) openStream(ctx context.Context, addr string) (Conn, error) {
	c.muxMu.Lock()
	slot := c.muxes[addr]
	if slot == nil {
		slot = &muxSlot{lock: make(chan struct{}, 1)}
		c.muxes[addr] = slot
	}
	c.muxMu.Unlock()
	select {
	case slot.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	defer func() { <-slot.lock }()
	if slot.m == nil || slot.m.failed() {
		nc, err := dialTCP(ctx, addr, c.opts.ConnectTimeout)
		if err != nil {
			return nil, err
		}
		slot.m = newMuxConn(addr, nc)
	}
	return &muxStream{m: slot.m, answered: make(chan struct{}, 1)}, nil
}

// closeMuxes closes every connection; calls must have returned.
func (c *Client) closeMuxes() {
	c.muxMu.Lock()
	defer c.muxMu.Unlock()
	for _, slot := range c.muxes {
		if slot.m != nil {
			slot.m.fail(ErrClosed)
		}
	}
}

func dialTCP(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	return nc, nil
}
