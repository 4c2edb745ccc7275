package io

import (
	"bufio"
	"encoding/binary"
	"errors"
	stdio "io"
	"net"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/geoevent/geoevent/core"
)

const (
	readBufferSize       = 64 << 10 // bufio.Reader under core.ReadFrame
	initialFrameBuffer   = 64 << 10 // a connection's reused frame buffer
	maxReusedFrameBuffer = 2 << 20  // larger frames get a buffer of their own each time (a 10,000-event batch fits)

	// readAhead is how many events a connection's reader may have handed
	// to the loop without the loop being done with them: with two, the
	// next frame is read while the loop handles one, so a connection that
	// carries many sessions' large batches keeps the loop busy.
	readAhead = 2

	// batchedFrameBytes bounds the frames that ride along with a
	// connection's event (netEvent.more): the complete frames that one
	// read from the socket brought in behind the first, copied out of the
	// read buffer. Many sessions' small requests on one connection then
	// cost the loop one wake-up, not one each.
	batchedFrameBytes = 64 << 10
)

// sendQueue is a connection's bounded queue of outgoing frames, filled by
// the loop (never blocking) and drained by the connection's writer.
type sendQueue struct {
	mu        sync.Mutex
	frames    [][]byte // the queued frames' pieces, in order
	count     int      // how many frames they are
	bytes     int
	closed    bool
	wake      chan struct{} // capacity 1
	maxBytes  int
	maxFrames int
	// hardBytes, when above maxBytes, lets the queue hold up to that many
	// bytes while the writer keeps taking frames (it took some within
	// drainGrace): a client whose many sessions share the connection may
	// have an answer pending for each of them at once, and is not cut off
	// for that while it reads.
	hardBytes int
	lastTake  time.Time
	// reusable are the frames queued whose memory may serve again once
	// written (pushFrame); written, those the writer took with its last
	// poll, which only the writer reads.
	reusable [][]byte
	written  [][]byte
}

// clientQueueSlack is how many times SendQueueBytes a client connection's
// queue may hold while its writer keeps draining it.
const clientQueueSlack = 8

// drainGrace is how recently a connection's writer must have taken frames
// for its queue to grow past maxBytes (up to hardBytes).
const drainGrace = time.Second

type pushResult uint8

const (
	pushed pushResult = iota
	queueFull
	queueClosed
)

// push queues the frame f, given as pieces to be written back to back
// (all or none of them), unless the queue is closed, or full: it holds
// maxFrames frames, or f would take it over maxBytes (over hardBytes, or
// over maxBytes when the writer has taken nothing for drainGrace). An empty
// queue always takes a frame, however large.
func (q *sendQueue) push(f ...[]byte) pushResult { return q.pushPieces(f, false) }

// pushFrame queues the one-piece frame f as push does; when reuse is set,
// the writer hands its memory back to the server once it is written.
func (q *sendQueue) pushFrame(f []byte, reuse bool) pushResult {
	return q.pushPieces([][]byte{f}, reuse)
}

func (q *sendQueue) pushPieces(f [][]byte, reuse bool) pushResult {
	size := 0
	for _, p := range f {
		size += len(p)
	}
	q.mu.Lock()
	switch {
	case q.closed:
		q.mu.Unlock()
		return queueClosed
	case q.count > 0 && (q.count >= q.maxFrames || q.overBytes(size)):
		q.mu.Unlock()
		return queueFull
	}
	q.frames = append(q.frames, f...)
	if reuse {
		q.reusable = append(q.reusable, f[0])
	}
	q.count++
	q.bytes += size
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return pushed
}

// overBytes reports whether n more bytes take the queue over its bound.
func (q *sendQueue) overBytes(n int) bool {
	switch b := q.bytes + n; {
	case b <= q.maxBytes:
		return false
	case b > q.hardBytes:
		return true
	default:
		return time.Since(q.lastTake) > drainGrace
	}
}

// take waits for frames and returns all of them, handing spare (emptied)
// to the queue for reuse. ok is false once the queue is closed: frames
// still queued then are dropped.
func (q *sendQueue) take(spare [][]byte) (frames [][]byte, ok bool) {
	for {
		if frames, ok = q.poll(spare); !ok || len(frames) > 0 {
			return frames, ok
		}
		<-q.wake
	}
}

// poll is take without the wait: it returns no frames when none are
// queued. A caller that waits itself waits on q.wake. The frames come as
// their pieces, in order.
func (q *sendQueue) poll(spare [][]byte) (frames [][]byte, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil, false
	}
	if q.count == 0 {
		return nil, true
	}
	frames, q.frames, q.count, q.bytes = q.frames, spare[:0], 0, 0
	q.written, q.reusable = q.reusable, q.written[:0]
	if q.hardBytes > q.maxBytes {
		q.lastTake = time.Now()
	}
	return frames, true
}

// drop discards the frames queued so far and returns how many there were.
func (q *sendQueue) drop() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := q.count
	clear(q.frames)
	q.frames, q.count, q.bytes = q.frames[:0], 0, 0
	return n
}

func (q *sendQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.frames, q.count, q.bytes = nil, 0, 0
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// conn is one accepted connection: a client's, or another replica's
// outbound connection to this one (which only carries frames in); or an
// in-process client's (see LocalConn), which has local and neither nc, q
// nor ack.
type conn struct {
	id  core.ConnID
	nc  net.Conn
	q   sendQueue
	ack chan struct{} // capacity 1: the loop has handled the reader's frame
	// local receives the frames the replica sends to an in-process
	// connection (capacity 1: one answer per exchange).
	local chan []byte
	// dead is set by the loop (and read only by it) when it closed the
	// connection itself: frames still arriving from it are dropped.
	dead bool
}

type netEventKind uint8

const (
	evOpened    netEventKind = iota
	evFrame                  // a client frame
	evPeerFrame              // a replica-to-replica frame, on a connection opened with a peer hello
	evClosed
	evLocalFrame // a client frame of an in-process connection (LocalConn)
)

// netEvent is an input from the network to the loop. One channel carries
// all kinds, so that a connection's opened event precedes its frames and
// its frames precede its closed event. A frame event may carry more frames
// of the same kind from the same connection, to be handled after the
// first, in order; the loop acks the event once.
type netEvent struct {
	kind netEventKind
	c    *conn
	netFrame
	more []netFrame // alias the reader's buffers until the loop acks
}

// netFrame is one frame of a netEvent.
type netFrame struct {
	h        core.Header
	payload  []byte // aliases the reader's buffer until the loop acks
	prepared []byte // what replica.PrepareRequest made of a client frame, if anything
}

// accept accepts connections until the listener is closed.
func (s *Server) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Warn("accept failed; retrying", zap.Error(err))
			select {
			case <-s.loopDone:
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		c := &conn{id: s.newConnID(), nc: nc, ack: make(chan struct{}, readAhead)}
		c.q = sendQueue{wake: make(chan struct{}, 1), maxBytes: s.opts.SendQueueBytes, maxFrames: s.opts.SendQueueFrames,
			hardBytes: clientQueueSlack * s.opts.SendQueueBytes, lastTake: time.Now()}
		if !s.track(c) {
			nc.Close()
			return
		}
		select {
		case s.events <- netEvent{kind: evOpened, c: c}:
		case <-s.loopDone:
			s.untrack(c)
			nc.Close()
			return
		}
		s.log.Debug("connection opened", zap.Uint64("conn", uint64(c.id)), zap.Stringer("remote", nc.RemoteAddr()))
		s.wg.Add(2)
		go s.read(c)
		go s.write(c)
	}
}

// track registers c among the live connections that shutdown closes; false
// when the server is shutting down.
func (s *Server) track(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.live[c] = struct{}{}
	return true
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	delete(s.live, c)
	s.mu.Unlock()
}

// read reads c's frames and hands each to the loop. It reads into
// readAhead buffers in turn, and before it reads into one it waits for the
// loop to be done with the frame that buffer held (the loop acks frames in
// order, one ack each). Any error, a bad frame included, closes the
// connection.
//
// A connection whose first frame is a valid MsgPeerHello is another
// replica's outbound connection (see peers.go): every later frame must be a
// replica-to-replica message from that replica, and goes to the loop as
// evPeerFrame. On any other connection a replica-to-replica frame closes
// the connection.
func (s *Server) read(c *conn) {
	defer s.wg.Done()
	br := bufio.NewReaderSize(c.nc, readBufferSize)
	var (
		bufs  [readAhead][]byte     // each event's first frame
		extra [readAhead][]byte     // the frames batched behind it, back to back
		more  [readAhead][]netFrame // and their headers
	)
	for i := range bufs {
		bufs[i] = make([]byte, initialFrameBuffer)
	}
	var (
		err     error
		isPeer  bool
		from    uint32 // the peer's replica index, once isPeer
		unacked int    // frames handed to the loop that it has not acked
	)
	for i, first := 0, true; ; i, first = (i+1)%readAhead, false {
		if unacked == readAhead {
			// bufs[i] still holds the oldest of them.
			select {
			case <-c.ack:
				unacked--
			case <-s.loopDone:
				err = net.ErrClosed
			}
			if err != nil {
				break
			}
		}
		var h core.Header
		var payload []byte
		h, payload, err = core.ReadFrame(br, bufs[i])
		if err != nil {
			break
		}
		if size := len(payload) + core.FrameOverhead; size > cap(bufs[i]) && cap(bufs[i]) < maxReusedFrameBuffer {
			// That frame had a buffer of its own; grow the reused one.
			bufs[i] = make([]byte, min(max(size, 2*cap(bufs[i])), maxReusedFrameBuffer))
		}
		kind := evFrame
		if isPeer {
			kind = evPeerFrame
		}
		if first && h.Type == MsgPeerHello {
			if from, err = s.checkPeerHello(h, payload); err == nil {
				isPeer = true
				s.log.Debug("replica connection opened", zap.Uint64("conn", uint64(c.id)),
					zap.Uint32("peer", from), zap.Stringer("remote", c.nc.RemoteAddr()))
				continue
			}
			err = s.refusePeer(c.nc, err) // answers the dialer, rate-limits the warning
		} else {
			err = checkFrame(kind, from, h)
		}
		if err != nil {
			break
		}
		ev := netEvent{kind: kind, c: c, netFrame: s.netFrame(kind, h, payload)}
		// The frames that arrived with this one go with it; a bad one
		// among them closes the connection once the good ones before it
		// are handed over.
		var batchErr error
		ev.more, extra[i], batchErr = s.readBuffered(br, kind, from, more[i][:0], extra[i][:0])
		more[i] = ev.more
		select {
		case s.events <- ev:
			unacked++
		case <-s.loopDone:
			err = net.ErrClosed
		}
		if err == nil {
			err = batchErr
		}
		if err != nil {
			break
		}
	}
	var bad *core.Error
	var refused *peerRefused
	switch {
	case errors.As(err, &refused):
		fields := []zap.Field{zap.Uint64("conn", uint64(c.id)), zap.Stringer("remote", c.nc.RemoteAddr()), zap.String("reason", refused.reason)}
		if isPeer {
			fields = append(fields, zap.Uint32("peer", from))
		}
		s.log.Warn("closing a replica connection", fields...)
	case errors.As(err, &bad):
		s.log.Warn("bad frame; closing the connection", zap.Uint64("conn", uint64(c.id)),
			zap.Stringer("remote", c.nc.RemoteAddr()), zap.String("code", bad.Name), zap.String("reason", bad.Message))
	case errors.Is(err, stdio.EOF), errors.Is(err, net.ErrClosed):
		s.log.Debug("connection closed", zap.Uint64("conn", uint64(c.id)))
	default:
		s.log.Debug("connection closed", zap.Uint64("conn", uint64(c.id)), zap.Error(err))
	}
	c.nc.Close()
	// The socket is gone, so nothing queued can be delivered: stop the
	// writer here rather than rely on the loop, which may already have
	// exited (then the event below sits in the channel unread).
	c.q.close()
	s.untrack(c)
	select {
	case s.events <- netEvent{kind: evClosed, c: c}:
	case <-s.loopDone:
	}
}

// netFrame makes a frame of kind (evFrame or evPeerFrame) from its header
// and payload. A leader's log entry of a client's batch (a copy, with the
// per-event geometry) is made here, on the connection's goroutine.
func (s *Server) netFrame(kind netEventKind, h core.Header, payload []byte) netFrame {
	f := netFrame{h: h, payload: payload}
	if kind == evFrame {
		f.prepared = s.prepare(h, payload)
	}
	return f
}

// checkFrame checks a frame's type against its connection's kind: on a
// connection that opened with a peer hello (evPeerFrame) only replica
// from's messages, on a client's (evFrame) no replica-to-replica message.
func checkFrame(kind netEventKind, from uint32, h core.Header) error {
	switch {
	case kind == evPeerFrame:
		return checkPeerFrame(from, h)
	case h.Type.Replica():
		return peerRefusedf("a replica-to-replica frame (type %d) on a connection that did not open with a peer hello", h.Type)
	}
	return nil
}

// readBuffered takes from br the complete frames it already holds, as long
// as they fit in buf's capacity (batchedFrameBytes when it has none), copies
// them into buf and appends them to frames. They must be of kind: client frames
// (evFrame) or, on a connection that opened with a peer hello, replica
// from's frames (evPeerFrame). It returns the frames and buf, and an error
// for a bad frame, after the good ones before it.
func (s *Server) readBuffered(br *bufio.Reader, kind netEventKind, from uint32, frames []netFrame, buf []byte) ([]netFrame, []byte, error) {
	if cap(buf) == 0 {
		buf = make([]byte, 0, batchedFrameBytes)
	}
	for br.Buffered() >= core.FrameLengthSize {
		b, _ := br.Peek(core.FrameLengthSize)
		n := core.FrameLengthSize + int(binary.LittleEndian.Uint32(b))
		if n > br.Buffered() || n > cap(buf)-len(buf) {
			break // not all here, or no room: read on its own (which checks its length)
		}
		b, _ = br.Peek(n)
		start := len(buf)
		buf = append(buf, b...)
		_, _ = br.Discard(n)
		h, payload, _, err := core.DecodeFrame(buf[start:])
		if err == nil {
			err = checkFrame(kind, from, h)
		}
		if err != nil {
			return frames, buf, err
		}
		frames = append(frames, s.netFrame(kind, h, payload))
	}
	return frames, buf, nil
}

// write sends c's queued frames, all that are queued with one write
// (writev), until the queue is closed or a write fails.
func (s *Server) write(c *conn) {
	defer s.wg.Done()
	var spare [][]byte
	for {
		frames, ok := c.q.take(spare)
		if !ok {
			return
		}
		err := s.writeFrames(c.nc, frames)
		for i, b := range c.q.written {
			s.reuseReply(b)
			c.q.written[i] = nil
		}
		spare = frames[:0]
		if err != nil {
			s.log.Debug("write failed; resetting the connection", zap.Uint64("conn", uint64(c.id)), zap.Error(err))
			c.q.close()
			abort(c.nc) // the reader sees it and reports the close to the loop
			return
		}
	}
}

// abort closes a client's connection that this server gives up on because
// the client does not read (its replies pile up, or a write timed out)
// with a reset rather than the orderly close: the kernel then drops what
// the connection still had to send instead of holding it, for a client
// that reads slowly if at all, until the connection times out. The client
// sees the reset at once, rather than after what was queued for it.
func abort(nc net.Conn) {
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	nc.Close()
}

// writeFrames writes frames to nc with one write (writev), under the write
// timeout, and clears frames (dropping its references) for reuse.
func (s *Server) writeFrames(nc net.Conn, frames [][]byte) error {
	if s.opts.WriteTimeout > 0 {
		_ = nc.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
	}
	bufs := net.Buffers(frames)
	_, err := bufs.WriteTo(nc)
	clear(frames)
	return err
}
