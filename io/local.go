package io

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/geoevent/geoevent/core"
)

// ErrLocalConnClosed is the error of an exchange on a LocalConn that was
// closed, by its owner or by the server.
var ErrLocalConnClosed = errors.New("io: local connection closed")

// LocalConn is an in-process client connection to the server's replica,
// for a client that runs in the same process (the HTTP gateway): what a TCP
// connection carries, without the socket. Frames go to the event loop as a
// TCP connection's do, so the replica sees an ordinary client connection
// (its own connection id, client frames with a session and request
// numbers, answers sent back with SendClient), but nothing is framed,
// copied or written: Exchange hands the header and the payload to the loop
// and waits for the frame the replica answers with.
//
// A LocalConn carries one exchange at a time (a session's). It is not safe
// for concurrent use.
type LocalConn struct {
	s      *Server
	c      *conn
	closed bool
	// broken is set when an exchange gave up before its answer came: the
	// answer may still arrive and must not be taken for the next one's.
	broken bool
}

// DialLocal opens an in-process client connection. It fails only once the
// server has stopped.
func (s *Server) DialLocal(ctx context.Context) (*LocalConn, error) {
	select {
	case <-s.loopDone:
		return nil, ErrServerClosed
	default:
	}
	c := &conn{id: s.newConnID(), local: make(chan []byte, 1)}
	select {
	case s.events <- netEvent{kind: evOpened, c: c}:
	case <-s.loopDone:
		return nil, ErrServerClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &LocalConn{s: s, c: c}, nil
}

func (s *Server) newConnID() core.ConnID { return core.ConnID(s.connID.Add(1)) }

// Exchange hands the client frame (h, payload) to the replica through the
// event loop and returns the frame it answers with: its header and payload
// (which Exchange owns no more: the caller may keep it). h.Type must be a
// client message type (register or request); payload must not be changed
// afterwards, even when Exchange returns early (the loop may still read
// it). Exchange gives up when ctx is done or the server stops; the
// connection is then unusable, like a TCP connection after a timeout: close
// it and open another.
func (lc *LocalConn) Exchange(ctx context.Context, h core.Header, payload []byte) (core.Header, []byte, error) {
	switch {
	case lc.closed || lc.broken:
		return core.Header{}, nil, ErrLocalConnClosed
	case !h.Type.Valid() || h.Type.Replica():
		return core.Header{}, nil, fmt.Errorf("io: a %s frame on a client connection", h.Type)
	case len(payload) > core.MaxFramePayload:
		return core.Header{}, nil, core.Errorf(core.MalformedRequest, "a frame payload of %d bytes exceeds %d", len(payload), core.MaxFramePayload)
	}
	s := lc.s
	var start time.Time // a request's arrival, with metrics: its latency is recorded when answered
	if s.metrics != nil && h.Type == core.MsgRequest {
		start = time.Now()
	}
	select {
	case s.events <- netEvent{kind: evLocalFrame, c: lc.c, netFrame: s.netFrame(evFrame, h, payload)}:
	case <-s.loopDone:
		lc.broken = true
		return core.Header{}, nil, ErrServerClosed
	case <-ctx.Done():
		lc.broken = true
		return core.Header{}, nil, context.Cause(ctx)
	}
	select {
	case f, ok := <-lc.c.local:
		if !ok {
			lc.broken = true
			return core.Header{}, nil, ErrLocalConnClosed
		}
		rh, p, _, err := core.DecodeFrame(f)
		if err != nil {
			lc.broken = true
			return core.Header{}, nil, err
		}
		if !start.IsZero() {
			if op, ok := requestOp(h, payload); ok {
				s.metrics.answered(op, time.Since(start))
			}
		}
		return rh, p, nil
	case <-s.loopDone:
		lc.broken = true
		return core.Header{}, nil, ErrServerClosed
	case <-ctx.Done():
		lc.broken = true
		return core.Header{}, nil, context.Cause(ctx)
	}
}

// Close closes the connection: the replica learns of it as of a closed TCP
// connection. It is safe to call more than once.
func (lc *LocalConn) Close() error {
	if lc.closed {
		return nil
	}
	lc.closed = true
	select {
	case lc.s.events <- netEvent{kind: evClosed, c: lc.c}:
	case <-lc.s.loopDone:
	}
	return nil
}

// sendLocal delivers a frame the replica sends to an in-process
// connection. It never blocks the loop: a connection holds one answer not
// yet taken; another closes it (its owner does not take its answers, or
// the replica answered one request twice), as a TCP client that does not
// read its replies is disconnected.
func (s *Server) sendLocal(c *conn, frame []byte) {
	select {
	case c.local <- frame:
	default:
		c.dead = true
		close(c.local)
		s.log.Warn("closing an in-process connection that holds an answer not yet taken", zap.Uint64("conn", uint64(c.id)))
	}
}
