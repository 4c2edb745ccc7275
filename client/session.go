package client

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/geoevent/geoevent/core"
)

// session is one connection and its server-side session. It belongs to one
// call at a time (it is checked out of the pool), so it needs no lock;
// Close touches it only after every call has returned.
type session struct {
	c    *Client
	addr int // index in c.addrs of the replica to (re)connect to

	conn Conn // nil: connect before the next exchange

	id      uint64 // session id; 0 = register before the next write
	lastReq uint32 // last request number used in this session

	sessionless uint32 // the last request number of a read sent without a session (id 0)

	// mu guards cancel, the context cancel of the call that holds the
	// session, which Close calls (from another goroutine).
	mu     sync.Mutex
	cancel context.CancelFunc
}

func (s *session) setInterrupt(cancel context.CancelFunc) {
	s.mu.Lock()
	s.cancel = cancel
	s.mu.Unlock()
}

// interrupt stops the call that holds the session, if any (it then
// reports ErrClosed).
func (s *session) interrupt() {
	s.mu.Lock()
	if s.cancel != nil {
		s.cancel()
	}
	s.mu.Unlock()
}

// callState is what one call keeps across its attempts.
type callState struct {
	op           core.Operation
	payload      []byte  // the MsgRequest payload, encoded once
	sessionless  []byte  // a read's payload without a session: the cluster id, then payload
	call         request // takes the reply
	session      uint64  // the session the request number belongs to
	req          uint32  // the request number, the same on every retry
	attempts     int
	reregistered bool
}

// next moves the session to the next address, round robin.
func (s *session) next() { s.addr = (s.addr + 1) % len(s.c.addrs) }

func (s *session) closeConn() {
	if s.conn != nil {
		_ = s.conn.Close()
		s.conn = nil
	}
}

// fail closes the connection after a connection error, moves to the next
// address and returns the error, wrapped.
func (s *session) fail(op string, err error) error {
	if ce, ok := err.(*core.Error); ok {
		// A frame that core refused: not an answer of the server, so it
		// must not look like one to errors.As.
		err = protocolf("%s", ce.Error())
	}
	addr := s.c.addrs[s.addr]
	if ms, ok := s.conn.(*muxStream); ok {
		if _, bad := err.(*protocolError); bad {
			ms.poison(err) // a frame the session cannot trust: others on the connection may not be either
		}
	}
	s.closeConn()
	s.next()
	return &connError{addr: addr, op: op, err: err}
}

// attempt sends the call's request once (connecting and registering first
// when needed) and reads its answer. A *core.Error return is the server's
// answer on a healthy connection; any other error has closed the connection.
// On success st.call has taken the reply.
func (s *session) attempt(ctx context.Context, st *callState) error {
	// One attempt lasts at most RequestTimeout: a context of its own only
	// when the caller's ends later.
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > s.c.opts.RequestTimeout {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, s.c.opts.RequestTimeout, errAttemptTimeout)
		defer cancel()
	}
	if s.conn == nil {
		if err := s.dial(ctx); err != nil {
			return err
		}
	}
	switch {
	case s.id == 0 && !st.op.Mutates():
		// A read needs no session (nothing to deduplicate), so it does not
		// register one: registering is a write, and a replica that can
		// write nothing (a full disk) still answers reads.
		s.sessionless++
		st.session, st.req = 0, s.sessionless
	case s.id == 0 || (st.session != s.id && s.lastReq == math.MaxUint32):
		// A new call on a session whose request numbers ran out opens a
		// new session; a retry keeps its session and number.
		if err := s.register(ctx); err != nil {
			return err
		}
	}
	if st.session != s.id {
		s.lastReq++
		st.session, st.req = s.id, s.lastReq
	}
	payload := st.payload
	if st.session == 0 {
		payload = st.sessionless
	}
	rh, p, err := s.exchange(ctx, core.Header{ClientID: s.id, Request: st.req, Type: core.MsgRequest}, payload)
	if err != nil {
		return err
	}
	switch rh.Type {
	case core.MsgReply:
		// A read without a session is numbered by a shared connection's
		// nonce, which the connection matched (muxConn).
		if (rh.Request != st.req && st.session != 0) || rh.ClientID != st.session {
			return s.fail("read from", protocolf("reply to session %d request %d, want session %d request %d", rh.ClientID, rh.Request, s.id, st.req))
		}
		opErr, err := st.call.decode(p)
		switch {
		case err != nil:
			return s.fail("read from", err) // a reply of another operation too
		case opErr != nil:
			return opErr
		}
		return nil
	case core.MsgError:
		if rh.Request != st.req && st.session != 0 {
			return s.fail("read from", protocolf("error for request %d, want %d", rh.Request, st.req))
		}
		e, err := core.DecodeErrorMessage(p)
		if err != nil {
			return s.fail("read from", err)
		}
		return e
	}
	return s.fail("read from", protocolf("unexpected %s frame", rh.Type))
}

func (s *session) dial(ctx context.Context) error {
	addr := s.c.addrs[s.addr]
	var conn Conn
	var err error
	if d := s.c.opts.Dial; d != nil {
		conn, err = d(ctx, addr)
	} else {
		conn, err = s.c.openStream(ctx, addr)
	}
	if err != nil {
		s.next()
		return &connError{addr: addr, op: opConnect, err: err}
	}
	s.conn = conn
	return nil
}

// exchange sends one frame and returns the answer. Any failure, a bad frame
// included, closes the connection.
func (s *session) exchange(ctx context.Context, h core.Header, payload []byte) (core.Header, []byte, error) {
	rh, p, err := s.conn.Exchange(ctx, h, payload)
	if err != nil {
		return rh, nil, s.fail("exchange frames with", err)
	}
	return rh, p, nil
}

// register opens a new session on the connection: request numbers restart.
func (s *session) register(ctx context.Context) error {
	h, p, err := s.exchange(ctx, core.Header{Type: core.MsgRegister}, core.AppendRegister(nil, s.c.opts.Cluster))
	if err != nil {
		return err
	}
	switch h.Type {
	case core.MsgRegisterReply:
		id, err := core.DecodeRegisterReply(p)
		if err != nil {
			return s.fail("read from", err)
		}
		if id == 0 {
			return s.fail("read from", protocolf("session id 0"))
		}
		s.id, s.lastReq = id, 0
		return nil
	case core.MsgError:
		e, err := core.DecodeErrorMessage(p)
		if err != nil {
			return s.fail("read from", err)
		}
		return e
	}
	return s.fail("read from", protocolf("unexpected %s frame in answer to register", h.Type))
}
