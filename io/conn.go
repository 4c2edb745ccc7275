package io

import (
	"errors"
	stdio "io"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/replica"
)

const (
	// readChunk is the size of the buffers connections read frames into,
	// taken from a pool that all connections share (chunkPool) and counted
	// against the server's read budget. A frame longer than one grows a
	// buffer of its own as its bytes arrive, never to more than the
	// frame's length, and that buffer is dropped once the loop is done
	// with the frame.
	readChunk = 64 << 10

	// idleReadSize is the buffer of a connection's own that its reader
	// waits in for the next frame once it has given its chunk back: what
	// an idle connection holds to read with. The bytes it brings are
	// copied into a chunk.
	idleReadSize = 512

	// readLinger is how long a reader keeps an empty chunk to read the
	// next frame into (one read, no copy) before it gives the chunk back
	// and waits in its own small buffer.
	readLinger = 200 * time.Millisecond

	// readAhead is how many events a connection's reader may have handed
	// to the loop without the loop being done with them: with two, the
	// next frame is read while the loop handles one, so a connection that
	// carries many sessions' large batches keeps the loop busy.
	readAhead = 2

	// closeGrace bounds how long a connection closed with an error frame
	// (a bad frame, a busy server, one connection too many) takes to
	// write it and to read, and drop, what its client still sends before
	// the close (see lingerClose).
	closeGrace = time.Second
	// maxLingerBytes bounds what lingerClose reads and drops.
	maxLingerBytes = 1 << 20
	// maxRefusing bounds the refused connections (over MaxConnections)
	// that are being closed gracefully at once; beyond it they are closed
	// at once, without the error frame.
	maxRefusing = 64
)

// chunkPool holds the read chunks (*[readChunk]byte) that no connection
// holds: the garbage collector frees what stays unused.
var chunkPool = sync.Pool{New: func() any { return new([readChunk]byte) }}

func getChunk() []byte { return chunkPool.Get().(*[readChunk]byte)[:0] }

// grownPools hold the grown read buffers of the sizes 4 and 16 and 64
// times readChunk (256 KiB, 1 MiB, 4 MiB), as *[]byte, for the next long
// frames: a client that sends large batches does not allocate (and make
// garbage of) a buffer for each. A longer frame gets a buffer of its
// length, which is not kept.
var grownPools [3]sync.Pool

// maxPooledRead is the largest grown buffer kept in grownPools.
const maxPooledRead = 64 * readChunk

// grownPool is the pool for buffers of capacity size, or nil.
func grownPool(size int) *sync.Pool {
	switch size {
	case 4 * readChunk:
		return &grownPools[0]
	case 16 * readChunk:
		return &grownPools[1]
	case 64 * readChunk:
		return &grownPools[2]
	}
	return nil
}

// getGrown returns an empty buffer of capacity size.
func getGrown(size int) []byte {
	if p := grownPool(size); p != nil {
		if b, ok := p.Get().(*[]byte); ok {
			return (*b)[:0]
		}
	}
	return make([]byte, 0, size)
}

// putBuffer keeps b, a read buffer no longer used, for reuse when it has
// a size that is kept.
func putBuffer(b []byte) {
	if cap(b) == readChunk {
		chunkPool.Put((*[readChunk]byte)(b[:readChunk]))
	} else if p := grownPool(cap(b)); p != nil {
		b = b[:0]
		p.Put(&b)
	}
}

// readBudget bounds the bytes of read buffers held at once across all of a
// server's connections: the chunks and grown buffers the readers are
// filling and those whose frames the loop has not yet handled.
type readBudget struct {
	mu    sync.Mutex
	limit int
	used  int
	// changed is closed (and dropped) when bytes are given back while a
	// reader waits; nil when none waits.
	changed chan struct{}
	waiting atomic.Int32 // readers in take, waiting (for tests)
	// drained, if set, is called (without the lock) when the bytes in use
	// fall below an eighth of the limit after they were above half of it.
	drained func()
	high    bool
}

// tryTake takes n bytes when they fit under the limit.
func (b *readBudget) tryTake(n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit {
		return false
	}
	b.used += n
	b.high = b.high || b.used > b.limit/2
	return true
}

// take takes n bytes, waiting until they fit under the limit (or nothing
// is held at all), unless stop is closed first (false).
func (b *readBudget) take(n int, stop <-chan struct{}) bool {
	for counted := false; ; {
		b.mu.Lock()
		if b.used+n <= b.limit || b.used == 0 {
			b.used += n
			b.high = b.high || b.used > b.limit/2
			b.mu.Unlock()
			if counted {
				b.waiting.Add(-1)
			}
			return true
		}
		if b.changed == nil {
			b.changed = make(chan struct{})
		}
		ch := b.changed
		b.mu.Unlock()
		if !counted {
			counted = true
			b.waiting.Add(1)
		}
		select {
		case <-ch:
		case <-stop:
			b.waiting.Add(-1)
			return false
		}
	}
}

// give gives back n bytes taken.
func (b *readBudget) give(n int) {
	b.mu.Lock()
	b.used -= n
	ch := b.changed
	b.changed = nil
	drained := b.high && b.used < b.limit/8
	if drained {
		b.high = false
	}
	b.mu.Unlock()
	if ch != nil {
		close(ch)
	}
	if drained && b.drained != nil {
		b.drained()
	}
}

// inUse is how many bytes are taken.
func (b *readBudget) inUse() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// release gives a read buffer back: its bytes to the budget, and a chunk
// to the pool.
func (b *readBudget) release(buf []byte) {
	if cap(buf) == 0 {
		return
	}
	b.give(cap(buf))
	putBuffer(buf)
}

// rateLog lets a kind of log line through at most once per interval, and
// counts those it held back, for the next line that goes through to report.
type rateLog struct {
	mu         sync.Mutex
	interval   time.Duration
	last       time.Time
	suppressed int
}

// allow reports whether a line may be logged now and, if so, how many were
// held back since the last one.
func (r *rateLog) allow() (ok bool, suppressed int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if !r.last.IsZero() && now.Sub(r.last) < r.interval {
		r.suppressed++
		return false, 0
	}
	r.last, suppressed, r.suppressed = now, r.suppressed, 0
	return true, suppressed
}

// log logs msg at level warn through lg when r allows it, with the count
// of lines held back since the last.
func (r *rateLog) warn(lg *zap.Logger, msg string, fields ...zap.Field) {
	if ok, n := r.allow(); ok {
		lg.Warn(msg, append(fields, zap.Int("suppressed", n))...)
	}
}

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
	ack chan struct{} // capacity readAhead: the loop has handled one of the reader's events
	// local receives the frames the replica sends to an in-process
	// connection (capacity 1: one answer per exchange).
	local chan []byte
	// dead is set by the loop (and read only by it) when it closed the
	// connection itself: frames still arriving from it are dropped.
	dead bool
	// inFlight counts the client's registers and requests that the reader
	// handed to the loop and the replica has not answered (the reader adds,
	// the loop takes away for each frame it sends); lastWrite is when the
	// writer last wrote (UnixNano). A connection is idle only with none
	// in flight and nothing read or written for IdleTimeout.
	inFlight  atomic.Int64
	lastWrite atomic.Int64
	// times times the client's requests (nil without metrics): metrics.go.
	times *opTimes
}

// answered notes that the replica sent c a frame: a request is answered.
func (c *conn) answered() {
	for {
		n := c.inFlight.Load()
		if n <= 0 || c.inFlight.CompareAndSwap(n, n-1) {
			return
		}
	}
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
	// buf is the read buffer the frames alias, which the loop gives back
	// (readBudget.release) once it has handled them; nil when the reader
	// keeps it, and waits for the ack to read into it again.
	buf []byte
}

// netFrame is one frame of a netEvent.
type netFrame struct {
	h        core.Header
	payload  []byte                // aliases the reader's buffer until the loop acks
	prepared []byte                // what replica.PrepareRequest made of a client frame, if anything
	read     *replica.PreparedRead // what replica.PrepareRead or PreparePeer made of it, if anything
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
		c := &conn{id: s.newConnID(), nc: nc, ack: make(chan struct{}, readAhead), times: newOpTimes(s.metrics)}
		c.q = sendQueue{wake: make(chan struct{}, 1), maxBytes: s.opts.SendQueueBytes, maxFrames: s.opts.SendQueueFrames,
			hardBytes: clientQueueSlack * s.opts.SendQueueBytes, lastTake: time.Now()}
		switch s.track(c) {
		case trackClosing:
			nc.Close()
			return
		case trackFull:
			s.refuseConn(nc)
			continue
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

type trackResult uint8

const (
	tracked trackResult = iota
	trackClosing
	trackFull
)

// track registers c among the live connections that shutdown closes,
// unless the server is shutting down or already has MaxConnections.
func (s *Server) track(c *conn) trackResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closing:
		return trackClosing
	case s.opts.MaxConnections > 0 && len(s.live) >= s.opts.MaxConnections:
		return trackFull
	}
	s.live[c] = struct{}{}
	return tracked
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	s.peakLive = max(s.peakLive, len(s.live))
	delete(s.live, c)
	drained := s.peakLive >= reliefConnections && len(s.live) < s.peakLive/4
	if drained {
		s.peakLive = 0
	}
	s.mu.Unlock()
	if drained {
		s.relieve()
	}
}

const (
	// reliefConnections is how many connections must have been open for
	// their closing (to a quarter of them) to call for relieve.
	reliefConnections = 1000
	// reliefEvery is how often relieve gives memory back at most.
	reliefEvery = 30 * time.Second
)

// relieve gives the memory freed by a burst that has passed (many
// connections closed, or a read budget that was more than half spent and
// is nearly empty again) back to the system at once, on a goroutine of its
// own (debug.FreeOSMemory: a garbage collection, then the freed pages
// returned), rather than over the minutes the runtime takes on its own;
// at most once every reliefEvery.
func (s *Server) relieve() {
	now := time.Now().UnixNano()
	last := s.lastRelief.Load()
	if now-last < int64(reliefEvery) || !s.lastRelief.CompareAndSwap(last, now) {
		return
	}
	go debug.FreeOSMemory()
}

// refuseConn turns away a connection over MaxConnections: it sends a
// MsgError CLUSTER_BUSY (client id and request number 0: nothing was read)
// and closes, from a goroutine of its own so that accepting goes on; when
// maxRefusing such goroutines are already at it, it closes at once.
func (s *Server) refuseConn(nc net.Conn) {
	s.limitLog.warn(s.log, "refusing a connection: the server has its maximum of connections",
		zap.Stringer("remote", nc.RemoteAddr()), zap.Int("max_connections", s.opts.MaxConnections))
	select {
	case s.refusing <- struct{}{}:
	default:
		abort(nc)
		return
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		<-s.refusing
		nc.Close()
		return
	}
	s.refused[nc] = struct{}{} // shutdown closes it
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			delete(s.refused, nc)
			s.mu.Unlock()
			<-s.refusing
		}()
		var buf [idleReadSize]byte
		closeWithError(nc, core.Header{}, core.ClusterBusy,
			"the server has its maximum of connections: retry later, or on another replica", buf[:])
	}()
}

// closeWithError writes a MsgError frame with code and msg, answering the
// frame h (its client id and request number), and closes nc gracefully
// (lingerClose, with buf to read into); within closeGrace, or it resets
// the connection.
func closeWithError(nc net.Conn, h core.Header, code core.CodeInfo, msg string, buf []byte) {
	frame := core.AppendFrame(nil, core.Header{ClientID: h.ClientID, Request: h.Request, Type: core.MsgError},
		core.AppendErrorMessage(nil, code.Code, msg))
	_ = nc.SetWriteDeadline(time.Now().Add(closeGrace))
	if _, err := nc.Write(frame); err != nil {
		abort(nc)
		return
	}
	lingerClose(nc, buf)
}

// lingerClose closes nc after it has sent what was written (FIN) and read
// and dropped what the client still sends, until the client closes its
// side, closeGrace passes or maxLingerBytes came. Closing a socket with
// bytes unread makes the kernel reset the connection, and a reset may
// discard, before the client reads it, the error frame written last.
func lingerClose(nc net.Conn, buf []byte) {
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	_ = nc.SetReadDeadline(time.Now().Add(closeGrace))
	for n := 0; n < maxLingerBytes; {
		k, err := nc.Read(buf)
		n += k
		if err != nil {
			break
		}
	}
	nc.Close()
}

// frameReader reads a connection's frames into buffers counted against the
// server's read budget: a chunk from the pool, grown for a long frame as its
// bytes arrive (never beyond the frame's length, never allocated up front).
// Holding no buffer it reads into small, its own.
type frameReader struct {
	src    stdio.Reader
	budget *readBudget
	buf    []byte // what has been read and not handed over; nil: holds no buffer
	small  [idleReadSize]byte
}

// errBudget is fill's answer when a frame needs more room than the read
// budget has left.
var errBudget = errors.New("the read budget is spent")

// fill reads once from src, after what buf holds, growing buf when it is
// full and its frame needs more room (errBudget when the budget cannot
// cover that). Holding no buffer, it reads into small, then takes a chunk
// from the budget, waiting for one (unless stop is closed: net.ErrClosed),
// and copies the bytes into it. An error comes only with no bytes read.
func (fr *frameReader) fill(stop <-chan struct{}) error {
	if fr.buf == nil {
		n, err := fr.src.Read(fr.small[:])
		if n == 0 {
			if err == nil {
				err = stdio.ErrNoProgress
			}
			return err
		}
		if !fr.budget.take(readChunk, stop) {
			return net.ErrClosed
		}
		fr.buf = append(getChunk(), fr.small[:n]...)
		return nil
	}
	if len(fr.buf) == cap(fr.buf) {
		// Full, so it holds less than a frame (complete frames were
		// handed over): grow it toward that frame's length, four times
		// as large each time (fewer copies than doubling), to the sizes
		// that grownPools keep, then to the frame's length. A buffer is
		// thus never more than four times the bytes that have arrived.
		need := core.FrameLengthSize + int(leUint32(fr.buf))
		size := 4 * cap(fr.buf)
		if size > maxPooledRead {
			size = need
		}
		if !fr.budget.tryTake(size - cap(fr.buf)) {
			return errBudget
		}
		old := fr.buf
		fr.buf = append(getGrown(size), old...)
		putBuffer(old)
	}
	n, err := fr.src.Read(fr.buf[len(fr.buf):cap(fr.buf)])
	fr.buf = fr.buf[:len(fr.buf)+n]
	if n > 0 {
		return nil
	}
	if err == nil {
		err = stdio.ErrNoProgress
	}
	return err
}

func leUint32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// detach gives up buf, whose first end bytes (complete frames) the caller
// hands to the loop, and keeps the bytes after end, the start of the next
// frame, in a fresh buffer (a chunk, or a grown buffer of the smallest size
// kept that holds them); or, with nothing after end, keeps a fresh chunk to
// read into when the budget allows (else none). ok is false when the bytes
// after end need a buffer and the budget cannot cover it: buf is then kept,
// and the caller must wait until the loop is done with its frames and call
// compact.
func (fr *frameReader) detach(end int) (old []byte, ok bool) {
	old = fr.buf
	tail := old[end:]
	size := readChunk
	for size < len(tail) && size < maxPooledRead {
		size *= 4
	}
	size = max(size, len(tail))
	switch {
	case fr.budget.tryTake(size):
		if size == readChunk {
			fr.buf = append(getChunk(), tail...)
		} else {
			fr.buf = append(getGrown(size), tail...)
		}
	case len(tail) == 0:
		fr.buf = nil
	default:
		return nil, false
	}
	return old[:end], true
}

// compact moves the bytes of buf after end to its start (see detach).
func (fr *frameReader) compact(end int) {
	fr.buf = fr.buf[:copy(fr.buf, fr.buf[end:])]
}

// drop gives back the buffer fr holds.
func (fr *frameReader) drop() {
	fr.budget.release(fr.buf)
	fr.buf = nil
}

// scan decodes the complete frames at the start of buf and appends them to
// frames, up to the first that is incomplete, or bad (err: a *core.Error).
// end is where the frames appended end.
//
// A connection's first frame may be a peer hello (see read): scan then
// stops after it, with hello set and the frame not appended.
func scan(buf []byte, frames []netFrame, firstFrame bool) (out []netFrame, end int, hello bool, h core.Header, payload []byte, err error) {
	rest := buf
	for {
		fh, p, r, derr := core.DecodeFrame(rest)
		if derr == core.ErrIncomplete {
			return frames, len(buf) - len(rest), false, core.Header{}, nil, nil
		}
		if derr != nil {
			return frames, len(buf) - len(rest), false, core.Header{}, nil, derr
		}
		if firstFrame && fh.Type == MsgPeerHello {
			return frames, len(buf) - len(r), true, fh, p, nil
		}
		firstFrame = false
		frames = append(frames, netFrame{h: fh, payload: p})
		rest = r
	}
}

// rawHeader is the client id and request number that b, the start of a
// frame, holds, if it holds them (a bad frame's error echoes them; they
// are not verified).
func rawHeader(b []byte) core.Header {
	if len(b) < core.FrameLengthSize+core.FrameHeaderSize {
		return core.Header{}
	}
	var h core.Header
	for i := 7; i >= 0; i-- {
		h.ClientID = h.ClientID<<8 | uint64(b[4+i])
	}
	h.Request = leUint32(b[12:])
	return h
}

// read reads c's frames and hands them to the loop: with each event, all
// the complete frames the reader's buffer holds, in order, and the buffer
// itself, which the loop gives back once it has handled them. At most
// readAhead events are in the loop at once (the loop acks each). A bad
// frame is answered with a MsgError (the frame's code, MALFORMED_REQUEST or
// CHECKSUM_MISMATCH) and closes the connection; so does a frame that needs
// more room than the read budget has left (CLUSTER_BUSY); any other error
// closes it too.
//
// Deadlines: a frame whose first byte came ReadTimeout ago and that is not
// complete closes the connection; a client connection closes after
// IdleTimeout with nothing read or written and no request of it waiting
// for its answer.
//
// A connection whose first frame is a valid MsgPeerHello is another
// replica's outbound connection (see peers.go): every later frame must be a
// replica-to-replica message from that replica, and goes to the loop as
// evPeerFrame; it has no idle timeout. On any other connection a
// replica-to-replica frame closes the connection.
func (s *Server) read(c *conn) {
	defer s.wg.Done()
	fr := &frameReader{src: c.nc, budget: s.budget}
	var (
		frames   [readAhead][]netFrame // each event's frames, reused once acked
		err      error
		badFrame []byte // the start of the bad frame that err is about
		isPeer   bool
		from     uint32 // the peer's replica index, once isPeer
		unacked  int    // events handed to the loop that it has not acked
		slot     int
		first    = true

		lastRead = time.Now() // when bytes last came
		since    = lastRead   // the current frame's first byte, or the start of idleness
		lingerTo time.Time
		deadline time.Time // the socket's read deadline (zero: none)
	)
	// waitAck waits for one ack of the loop; false when the loop has ended.
	waitAck := func() bool {
		select {
		case <-c.ack:
			unacked--
			return true
		case <-s.loopDone:
			err = net.ErrClosed
			return false
		}
	}
	// setDeadline sets the socket's read deadline to t (zero: none) unless
	// the one set is within tol of it and not yet passed.
	setDeadline := func(t time.Time, tol time.Duration) {
		if t.IsZero() == deadline.IsZero() && (t.IsZero() ||
			(t.Sub(deadline) <= tol && deadline.Sub(t) <= tol && time.Until(deadline) > 0)) {
			return
		}
		deadline = t
		_ = c.nc.SetReadDeadline(t)
	}
	for err == nil {
		// The oldest event in the loop holds frames[slot]: wait until it
		// is done with it.
		if unacked == readAhead && !waitAck() {
			break
		}
		// Hand over the complete frames buffered, if any.
		var end int
		var hello bool
		var hh core.Header
		var hp []byte
		var serr error
		frames[slot], end, hello, hh, hp, serr = scan(fr.buf, frames[slot][:0], first)
		if hello {
			first = false
			if from, err = s.checkPeerHello(hh, hp); err != nil {
				err = s.refusePeer(c.nc, err) // answers the dialer, rate-limits the warning
				break
			}
			isPeer = true
			s.log.Debug("replica connection opened", zap.Uint64("conn", uint64(c.id)),
				zap.Uint32("peer", from), zap.Stringer("remote", c.nc.RemoteAddr()))
			fr.compact(end)
			lingerTo = time.Now().Add(readLinger)
			continue
		}
		kind := evFrame
		if isPeer {
			kind = evPeerFrame
		}
		good := frames[slot]
		for i := range good {
			if cerr := checkFrame(kind, from, good[i].h); cerr != nil {
				good, serr = good[:i], cerr
				break
			}
		}
		if serr != nil {
			err = serr
			// The bad frame starts after the good ones.
			off := 0
			for _, f := range good {
				off += len(f.payload) + core.FrameOverhead
			}
			badFrame = fr.buf[off:]
			end = off
		}
		if len(good) > 0 {
			first = false
			for i := range good {
				s.prepareFrame(kind, &good[i])
			}
			if kind == evFrame {
				var requests int64
				for i := range good {
					if t := good[i].h.Type; t == core.MsgRequest || t == core.MsgRegister {
						requests++
					}
				}
				c.inFlight.Add(requests)
				c.times.arrived(good, lastRead) // the fill that completed them
			}
			ev := netEvent{kind: kind, c: c, netFrame: good[0], more: good[1:]}
			kept := false
			if serr == nil {
				var ok bool
				ev.buf, ok = fr.detach(end)
				kept = !ok
			}
			// On a bad frame the buffer is kept: the reader stops and
			// gives it back after the loop's acks.
			select {
			case s.events <- ev:
				unacked++
			case <-s.loopDone:
				err = net.ErrClosed
			}
			slot = (slot + 1) % readAhead
			if kept {
				for unacked > 0 && waitAck() {
				}
				if err == nil {
					fr.compact(end)
				}
			}
			if err != nil {
				break
			}
			if len(fr.buf) > 0 {
				since = lastRead // the next frame began with the last read
			} else {
				since, lingerTo = lastRead, time.Now().Add(readLinger)
			}
			continue
		}
		if err != nil {
			break
		}

		// Read more.
		switch {
		case len(fr.buf) > 0:
			if s.opts.ReadTimeout > 0 {
				setDeadline(since.Add(s.opts.ReadTimeout), time.Second)
			} else {
				setDeadline(time.Time{}, 0)
			}
		default:
			var idleTo time.Time
			if s.opts.IdleTimeout > 0 && !isPeer {
				idleTo = since.Add(s.opts.IdleTimeout)
			}
			if fr.buf != nil && (idleTo.IsZero() || lingerTo.Before(idleTo)) {
				setDeadline(lingerTo, readLinger/4)
			} else {
				setDeadline(idleTo, time.Second)
			}
		}
		wasEmpty := len(fr.buf) == 0
		ferr := fr.fill(s.loopDone)
		if ferr == nil {
			lastRead = time.Now()
			if wasEmpty {
				since = lastRead
			}
			continue
		}
		if !errors.Is(ferr, os.ErrDeadlineExceeded) {
			if ferr == errBudget {
				badFrame = fr.buf
			}
			err = ferr
			break
		}
		switch {
		case len(fr.buf) > 0:
			err = errFrameTimeout
		case fr.buf != nil:
			// The linger (or the idle deadline, whichever came first) is
			// over: give the chunk back and wait in the small buffer,
			// under the idle deadline (which may have passed already).
			fr.drop()
		case c.inFlight.Load() > 0:
			since = time.Now() // a request is being answered: not idle
		case time.Unix(0, c.lastWrite.Load()).After(since):
			since = time.Unix(0, c.lastWrite.Load())
		default:
			err = errIdle
		}
	}
	s.closeRead(c, fr, err, badFrame, isPeer, from, unacked)
}

var (
	errFrameTimeout = errors.New("a frame was not completed within the read timeout")
	errIdle         = errors.New("idle for the idle timeout")
)

// closeRead ends c's reader, which stopped on err: it logs why (bad frames,
// frame timeouts and budget refusals at most once a second each,
// with a count of those held back), answers a bad frame or a frame the
// budget refused with a MsgError before it closes (not on a peer
// connection: nothing is written on those), gives back the read buffer
// once the loop has acked the unacked events, closes the connection and
// reports the close to the loop.
func (s *Server) closeRead(c *conn, fr *frameReader, err error, badFrame []byte, isPeer bool, from uint32, unacked int) {
	fields := []zap.Field{zap.Uint64("conn", uint64(c.id)), zap.Stringer("remote", c.nc.RemoteAddr())}
	if isPeer {
		fields = append(fields, zap.Uint32("peer", from))
	}
	var (
		bad     *core.Error
		refused *peerRefused
		answer  core.CodeInfo // the MsgError to send before closing, if Code is not 0
		message string
	)
	switch {
	case errors.As(err, &refused):
		// Not rate-limited: what the other replicas' connections do is
		// worth every line.
		s.log.Warn("closing a replica connection", append(fields, zap.String("reason", refused.reason))...)
	case errors.As(err, &bad):
		s.frameLog.warn(s.log, "bad frame; closing the connection", append(fields, zap.String("code", bad.Name), zap.String("reason", bad.Message))...)
		answer, message = bad.CodeInfo, bad.Message
	case err == errBudget:
		s.busyLog.warn(s.log, "a frame needs more memory than the read budget has left; closing the connection (CLUSTER_BUSY)",
			append(fields, zap.Int("read_budget_bytes", s.opts.ReadBudgetBytes))...)
		answer, message = core.ClusterBusy, "the server is reading more frames than its memory budget allows: retry later, or on another replica"
	case err == errFrameTimeout:
		s.timeoutLog.warn(s.log, "a frame was not completed within the read timeout; closing the connection",
			append(fields, zap.Duration("read_timeout", s.opts.ReadTimeout))...)
	case err == errIdle:
		s.log.Debug("closing an idle connection", append(fields, zap.Duration("idle_timeout", s.opts.IdleTimeout))...)
	case errors.Is(err, stdio.EOF), errors.Is(err, net.ErrClosed):
		s.log.Debug("connection closed", fields...)
	default:
		s.log.Debug("connection closed", append(fields, zap.Error(err))...)
	}
	h := rawHeader(badFrame)
	// The socket is going, so nothing queued can be delivered: stop the
	// writer here rather than rely on the loop, which may already have
	// exited (then the event below sits in the channel unread).
	c.q.close()
	for ; unacked > 0; unacked-- {
		select {
		case <-c.ack:
		case <-s.loopDone:
			unacked = 0
		}
	}
	fr.drop()
	if answer.Code != 0 && !isPeer {
		closeWithError(c.nc, h, answer, message, fr.small[:])
	} else {
		c.nc.Close()
	}
	s.untrack(c)
	select {
	case s.events <- netEvent{kind: evClosed, c: c}:
	case <-s.loopDone:
	}
}

// netFrame makes a frame of kind (evFrame or evPeerFrame) from its header
// and payload. A leader's log entry of a client's batch (a copy, with the
// per-event geometry), or a large polygon query's polygon, is made here,
// on the connection's goroutine (prepareFrame).
func (s *Server) netFrame(kind netEventKind, h core.Header, payload []byte) netFrame {
	f := netFrame{h: h, payload: payload}
	s.prepareFrame(kind, &f)
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
		c.times.replies(frames)
		err := s.writeFrames(c.nc, frames)
		if err == nil {
			now := time.Now()
			c.lastWrite.Store(now.UnixNano())
			c.times.written(now)
		}
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
