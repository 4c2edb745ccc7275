package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/geoevent/geoevent/core"
)

// Client is a GeoEvent client: a pool of sessions over the binary protocol.
// It is safe for concurrent use; up to Options.PoolSize calls run in
// parallel and further calls wait for a free session.
type Client struct {
	addrs []string
	opts  Options

	// The pool: a call takes a token from slots, then the session on top
	// of free, and gives them back in reverse. The most recently used
	// session goes first, so that calls one after another use one session
	// (registered once; on a replica that can write nothing, registering
	// waits, and reads on a registered session still go) rather than
	// every session in turn.
	slots    chan struct{}
	freeMu   sync.Mutex
	free     []*session
	sessions []*session

	closeCtx context.Context
	closeFn  context.CancelCauseFunc

	mu     sync.Mutex
	closed bool
	calls  sync.WaitGroup

	muxMu sync.Mutex
	muxes map[string]*muxSlot // the shared connection to each address

	// requests holds buffers (*[]byte) that calls encode their requests
	// into, when the client's own connections carry them (Options.Dial
	// nil): those copy a frame before Exchange returns, so the buffer is
	// free once the call is over. Another Conn may keep reading a payload
	// after an Exchange that gave up (the HTTP gateway's hands it to the
	// replica's loop), so with Options.Dial every call encodes afresh. A
	// 10,000-event batch is 1.28 MB: allocated for each call, it cost the
	// load generator more than encoding it (zeroing new memory, and
	// handing it back to the system between calls). Reuse is the pool's
	// best effort: a collection empties it, and a buffer put back on one
	// processor is not always found from another.
	requests sync.Pool
}

// maxReusedRequest bounds the request buffers a client keeps for reuse.
const maxReusedRequest = 4 << 20

// New makes a client for the replicas at addresses (host:port, their
// binary-protocol addresses). List every replica of the cluster: a call
// moves on to the next address when one fails (see "Retries").
//
// Options.Cluster is required: the cluster's id, which a session registers
// with (a replica of another cluster answers 204 WRONG_CLUSTER). It is
//
//   - the id that `replica dev` prints in its banner ("register with
//     cluster id ..."), when it formats a new data directory and at every
//     start;
//   - the id given to `replica format --cluster` (every replica of a
//     cluster has the same);
//   - the cluster_id field of the HTTP API's GET /status (and GET
//     /topology).
//
// core.ParseUUID turns its text into a core.Uint128 (core.ParseID also takes
// a decimal id, as `replica format` does).
//
// New does not connect: each session connects and registers on its first
// use.
func New(addresses []string, opts Options) (*Client, error) {
	if len(addresses) == 0 {
		return nil, errors.New("geoevent client: no addresses")
	}
	for _, a := range addresses {
		if a == "" {
			return nil, errors.New("geoevent client: empty address")
		}
	}
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	c := &Client{
		addrs: append([]string(nil), addresses...),
		opts:  opts,
		slots: make(chan struct{}, opts.PoolSize),
		muxes: make(map[string]*muxSlot),
	}
	c.closeCtx, c.closeFn = context.WithCancelCause(context.Background())
	for i := range opts.PoolSize {
		c.sessions = append(c.sessions, &session{c: c, addr: i % len(addresses)})
	}
	for i := range c.sessions { // the first session on top
		c.free = append(c.free, c.sessions[len(c.sessions)-1-i])
	}
	return c, nil
}

// Close interrupts calls in flight (they fail with ErrClosed as their
// reason), waits for them to return and closes every connection. Later calls
// fail with ErrClosed. Close is idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.closeFn(ErrClosed)
	for _, s := range c.sessions {
		s.interrupt()
	}
	c.calls.Wait()
	for _, s := range c.sessions {
		s.closeConn()
	}
	c.closeMuxes()
	return nil
}

// begin registers a call, or fails when the client is closed.
func (c *Client) begin() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	c.calls.Add(1)
	return nil
}

// Call runs the operation op (an entry of core's operation table) with
// req as one request, with retries (see the package documentation), and
// returns its reply: every operation's method is one Call. Unlike Insert
// and Upsert, it never splits a batch.
func Call[Req, Rep any](ctx context.Context, c *Client, op *core.Op[Req, Rep], req *Req) (*Rep, error) {
	oc := opCall[Req, Rep]{op: op, req: req}
	if err := c.run(ctx, op.Code, &oc); err != nil {
		return nil, err
	}
	return oc.reply, nil
}

// request is what run needs of one call: its MsgRequest payload, and the
// decoding of its MsgReply payload.
type request interface {
	appendTo(dst []byte) ([]byte, error)
	// decode takes the reply of p, or returns the operation's failure
	// (opErr) or the payload's (err).
	decode(p []byte) (opErr *core.Error, err error)
}

// opCall is the request of one call of an entry of core's table.
type opCall[Req, Rep any] struct {
	op    *core.Op[Req, Rep]
	req   *Req
	reply *Rep
}

func (oc *opCall[Req, Rep]) appendTo(dst []byte) ([]byte, error) {
	return oc.op.AppendRequestMessage(dst, oc.req)
}

func (oc *opCall[Req, Rep]) decode(p []byte) (opErr *core.Error, err error) {
	oc.reply, opErr, err = oc.op.DecodeReplyMessage(p)
	return opErr, err
}

// run runs one operation, req, with retries.
func (c *Client) run(ctx context.Context, op core.Operation, req request) error {
	if err := c.begin(); err != nil {
		return err
	}
	defer c.calls.Done()

	var buf *[]byte // see requests
	var payload []byte
	if c.opts.Dial == nil {
		if buf, _ = c.requests.Get().(*[]byte); buf == nil {
			buf = new([]byte)
		}
		payload = (*buf)[:0]
	}
	// A read may go without a session: its payload is then the cluster id
	// and the request (core.AppendSessionlessRead). Both are encoded once,
	// the request after room for the id.
	prefix := 0
	if !op.Mutates() {
		payload = core.AppendSessionlessRead(payload, c.opts.Cluster, nil)
		prefix = len(payload)
	}
	payload, err := req.appendTo(payload)
	if buf != nil && cap(payload) <= maxReusedRequest {
		defer func() {
			*buf = payload[:0]
			c.requests.Put(buf)
		}()
	}
	if err != nil {
		return err // the request cannot be encoded: the caller's error
	}

	// One context of the call's own: Close cancels it, and it carries
	// TotalTimeout when that ends before the caller's deadline.
	totalDL := time.Now().Add(c.opts.TotalTimeout)
	var cancel context.CancelFunc
	if dl, ok := ctx.Deadline(); !ok || dl.After(totalDL) {
		ctx, cancel = context.WithDeadlineCause(ctx, totalDL, ErrTotalTimeout)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()

	select {
	case c.slots <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("geoevent client: waiting for a session: %w", context.Cause(ctx))
	case <-c.closeCtx.Done():
		return fmt.Errorf("geoevent client: waiting for a session: %w", ErrClosed)
	}
	c.freeMu.Lock()
	s := c.free[len(c.free)-1]
	c.free = c.free[:len(c.free)-1]
	c.freeMu.Unlock()
	defer func() {
		c.freeMu.Lock()
		c.free = append(c.free, s)
		c.freeMu.Unlock()
		<-c.slots
	}()
	// Close interrupts the call through its session (a registration on
	// closeCtx itself would make every call contend for its lock).
	s.setInterrupt(cancel)
	defer s.setInterrupt(nil)
	if c.closeCtx.Err() != nil {
		cancel() // Close ran before the registration
	}

	st := callState{op: op, payload: payload[prefix:], call: req}
	if prefix > 0 {
		st.sessionless = payload
	}
	retries := 0
	hops := 0 // moves to the next address at once since the last wait
	for {
		st.attempts++
		err := s.attempt(ctx, &st)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return &RetryError{Attempts: st.attempts, Err: err, Reason: c.closedOr(context.Cause(ctx))}
		}
		var ce *core.Error
		moved := false // the session moved to the next address: a dial failed, or the replica said to
		if cerr, ok := err.(*connError); ok && cerr.op == opConnect {
			moved = true
		}
		if errors.As(err, &ce) {
			switch {
			case ce.Code == core.SessionExpired.Code:
				// The session is gone (evicted, or unknown to this
				// cluster): register a new one and resend once, at once.
				// The new session has no record of this request, so a
				// write whose reply was lost before the eviction may be
				// applied twice (SPEC.md: a new client id loses dedupe).
				s.id = 0 // the next attempt or call registers again
				if st.reregistered || c.opts.DisableRetries {
					return err
				}
				st.reregistered = true
				c.retrying(err)
				continue
			case rotates(ce.Code):
				s.closeConn()
				s.next()
				moved = true
			case ce.Retryable:
			default:
				return err // validation, limits and other final answers
			}
		}
		// A connection error or timeout (the session has closed the
		// connection and moved to the next address), or a retryable code.
		if c.opts.DisableRetries {
			return err
		}
		if moved && hops < len(c.addrs)-1 {
			// A replica that is down or knows no leader says so at once:
			// try the next one at once, and wait only once every address
			// has been tried (so a failover costs the election, not a
			// backoff for each dead address on the way).
			hops++
			c.retrying(err)
			continue
		}
		hops = 0
		if retries >= c.opts.MaxRetries {
			return &RetryError{Attempts: st.attempts, Err: err}
		}
		if reason := sleep(ctx, c.backoff(retries), totalDL); reason != nil {
			return &RetryError{Attempts: st.attempts, Err: err, Reason: c.closedOr(reason)}
		}
		retries++
		c.retrying(err)
	}
}

// retrying tells Options.OnRetry, if set, that a call retries after err.
func (c *Client) retrying(err error) {
	if c.opts.OnRetry != nil {
		c.opts.OnRetry(err)
	}
}

// closedOr is err, the reason a call's context ended, or ErrClosed when
// that was Close interrupting the call (the context then says only that it
// was cancelled).
func (c *Client) closedOr(err error) error {
	if errors.Is(err, context.Canceled) && c.closeCtx.Err() != nil {
		return ErrClosed
	}
	return err
}

// rotates reports whether a code means "this replica cannot serve you; try
// another": no primary or no quorum known here.
func rotates(c core.Code) bool {
	switch c {
	case core.ClusterUnavailable.Code, core.StaleFollower.Code, core.PrimaryUnreachable.Code, core.NotShardLeader.Code:
		return true
	}
	return false
}

// backoff is the wait before retry number retry (0 for the first):
// min(MaxBackoff, BaseBackoff*2^retry) plus a jitter uniform in
// [0, BaseBackoff/2].
func (c *Client) backoff(retry int) time.Duration {
	d := c.opts.MaxBackoff
	if retry < 62 {
		if b := c.opts.BaseBackoff << retry; b > 0 && b>>retry == c.opts.BaseBackoff && b < d {
			d = b
		}
	}
	if j := int64(c.opts.BaseBackoff / 2); j > 0 {
		d += time.Duration(rand.Int64N(j + 1))
	}
	return d
}

// sleep waits d, or returns the reason the call must stop: the context ends
// first, or its deadline lies before the wait would end (then waiting is
// pointless and the call gives up at once; totalDL tells whether that
// deadline is the call's TotalTimeout or the caller's).
func sleep(ctx context.Context, d time.Duration, totalDL time.Time) error {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		if dl.Equal(totalDL) {
			return ErrTotalTimeout
		}
		return context.DeadlineExceeded
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
