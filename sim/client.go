package sim

import (
	"github.com/geoevent/geoevent/core"
)

// A simulated client of the binary protocol. It holds one connection, to
// any replica of the cluster, and at most one outstanding operation. It
// registers for a session; a timed out request is resent with the same
// session and request number (the replica deduplicates), on the same
// connection or a new one (in a cluster, to another replica); a retryable
// error (212 CLUSTER_BUSY, 211 CLUSTER_UNAVAILABLE from a replica that
// knows no leader, 215 PRIMARY_UNREACHABLE for a request whose entry a
// leader change overwrote) is resent after a backoff, after 211 and 215
// perhaps to another replica; 201 SESSION_EXPIRED ends the operation (a
// write's outcome is then unknown) and the client registers again; 205
// SESSION_LIMIT for a register (its connection holds registrations whose
// answers were lost) makes it register on a new connection. A client whose
// replica is down connects to another one.

type cstate uint8

const (
	csIdle        cstate = iota // no outstanding operation
	csRegistering               // waiting for a register reply
	csBusy                      // an operation is outstanding
	csBackoff                   // an operation waits to be resent after a retryable error
)

// maxBackoffTicks caps the backoff (SPEC.md's client defaults: 100 ms base,
// 1600 ms max, jitter up to half the delay).
const maxBackoffTicks = 1600

type client struct {
	w     *world
	id    int
	probe bool // the checker's client: a perfect link, scripted reads

	conn        *conn
	target      int // the replica it connects to next
	reconnectAt int64
	switchNext  bool // connect to another replica before resending

	session  uint64
	state    cstate
	regNonce uint32
	regFrame []byte

	reqNo     uint32
	cur       *opRec
	frame     []byte
	timeoutAt int64
	retryAt   int64
	backoffs  int
	nextOpAt  int64

	cont   *opRec       // the page a paged query continues from
	rounds []probeRound // the checker's planned reads
}

type probeRound struct {
	why string
	ops []*opRec // built lazily: nil until the round starts
	i   int
}

func newClient(w *world, id int, probe bool) *client {
	return &client{w: w, id: id, probe: probe, target: w.rng.IntN(len(w.nodes))}
}

// otherReplica is a random replica other than i (i itself when alone).
func (w *world) otherReplica(i int) int {
	if len(w.nodes) == 1 {
		return i
	}
	return (i + 1 + w.rng.IntN(len(w.nodes)-1)) % len(w.nodes)
}

// moveOn closes the client's connection; it connects again at once, to
// another replica.
func (c *client) moveOn(why string) {
	w := c.w
	w.closeConn(c.conn, why)
	c.conn = nil
	c.switchNext = false
	c.reconnectAt = w.now
	c.target = w.otherReplica(c.target)
}

// retryable notes a retryable error: after 211 or 215, a client in a
// cluster may resend to another replica.
func (c *client) retryable(code core.Code) {
	if len(c.w.nodes) > 1 && (code == core.ClusterUnavailable.Code || code == core.PrimaryUnreachable.Code) {
		c.switchNext = c.w.rng.Float64() < c.w.cfg.switchOnError
	}
}

func (c *client) timeout() int64 {
	if c.probe {
		return 300
	}
	return c.w.cfg.requestTimeout
}

func (c *client) tick() {
	w := c.w
	if c.conn == nil {
		if w.now < c.reconnectAt {
			return
		}
		if c.conn = w.openConn(c, w.nodes[c.target]); c.conn == nil {
			c.reconnectAt = w.now + 1 + w.rng.Int64N(w.cfg.reconnectMax)
			c.target = w.otherReplica(c.target)
			return
		}
		switch c.state {
		case csRegistering:
			c.sendRegister()
		case csBusy, csBackoff:
			c.resend()
		}
	}
	switch c.state {
	case csIdle:
		if c.session == 0 {
			if c.probe || w.acceptingOps() {
				c.register()
			}
			return
		}
		if w.now < c.nextOpAt {
			return
		}
		var op *opRec
		if c.probe {
			op = c.nextProbeOp()
		} else if w.acceptingOps() {
			op = w.wl.next(c)
		}
		if op != nil {
			c.start(op)
		}
	case csRegistering:
		if w.now >= c.timeoutAt {
			if c.switchNext {
				c.moveOn("closed by its client to try another replica")
				return
			}
			c.sendRegister()
		}
	case csBusy:
		if w.now >= c.timeoutAt {
			if c.newConnOnTimeout() {
				c.moveOn("closed by its client after a timeout")
				return
			}
			w.tracef("client %d times out on op %d", c.id, c.cur.id)
			c.resend()
		}
	case csBackoff:
		if w.now >= c.retryAt {
			if c.switchNext {
				c.moveOn("closed by its client to try another replica")
				return
			}
			c.resend()
		}
	}
}

// newConnOnTimeout decides whether a timed out request is resent on a new
// connection (in a cluster, to another replica). The checker's client does
// so only in a cluster, half the time.
func (c *client) newConnOnTimeout() bool {
	if c.probe {
		return len(c.w.nodes) > 1 && c.w.rng.IntN(2) == 0
	}
	return c.w.rng.Float64() < c.w.cfg.newConnOnTimeout
}

func (c *client) register() {
	c.backoffs = 0
	c.w.nonce++
	c.regNonce = c.w.nonce
	c.regFrame = core.AppendFrame(nil, core.Header{Request: c.regNonce, Type: core.MsgRegister}, core.AppendRegister(nil, clusterID))
	c.sendRegister()
}

func (c *client) sendRegister() {
	c.state = csRegistering
	c.timeoutAt = c.w.now + c.timeout()
	c.w.tracef("client %d registers (nonce %d)", c.id, c.regNonce)
	c.w.send(c.conn, true, c.regFrame)
}

func (c *client) start(op *opRec) {
	w := c.w
	if op.id == 0 {
		w.addOp(op)
	}
	c.reqNo++
	op.reqNo = c.reqNo
	payload, err := core.AppendRequestMessage(nil, op.kind, op.req)
	if err != nil {
		w.fail("the workload built a request that does not encode: %s: %v", op.kind, err)
		return
	}
	c.frame = core.AppendFrame(nil, core.Header{ClientID: c.session, Request: c.reqNo, Type: core.MsgRequest}, payload)
	c.cur = op
	c.backoffs = 0
	w.invoke(op)
	c.resend()
}

func (c *client) resend() {
	c.state = csBusy
	c.timeoutAt = c.w.now + c.timeout()
	c.w.send(c.conn, true, c.frame)
}

func (c *client) backoff() {
	c.backoffs++
	d := min(int64(100)<<min(c.backoffs-1, 10), maxBackoffTicks)
	d += c.w.rng.Int64N(d/2 + 1)
	c.retryAt = c.w.now + d
	c.w.tracef("client %d backs off %d ticks", c.id, d)
}

// connDown: the client's connection is gone; it connects again shortly.
func (c *client) connDown(cn *conn) {
	if c.conn != cn {
		return
	}
	c.conn = nil
	c.reconnectAt = c.w.now + c.w.rng.Int64N(20)
}

func (c *client) receive(cn *conn, frame []byte) {
	w := c.w
	if cn != c.conn {
		return
	}
	h, p, _, err := core.DecodeFrame(frame)
	if err != nil {
		return // reported when the replica sent it
	}
	outstanding := (c.state == csBusy || c.state == csBackoff) && h.ClientID == c.session && h.Request == c.cur.reqNo
	switch h.Type {
	case core.MsgRegisterReply:
		if c.state == csRegistering && h.Request == c.regNonce {
			c.session = h.ClientID
			c.state = csIdle
			w.tracef("client %d registered: session %d", c.id, c.session)
		}
	case core.MsgReply:
		if !outstanding {
			return
		}
		op, reply, opErr, err := core.DecodeReplyMessage(p)
		if err != nil {
			return // reported when the replica sent it
		}
		if op != c.cur.kind {
			w.fail("op %d (%s, client %d request %d) was answered with a reply of %s", c.cur.id, c.cur.kind, c.id, h.Request, op)
			return
		}
		if opErr != nil && opErr.Retryable {
			c.state = csBackoff
			c.backoff()
			c.retryable(opErr.Code)
			return
		}
		code := core.Code(0)
		if opErr != nil {
			code = opErr.Code
		}
		c.complete(stDone, code, reply)
	case core.MsgError:
		e, err := core.DecodeErrorMessage(p)
		if err != nil {
			return
		}
		switch {
		case c.state == csRegistering && h.ClientID == 0 && h.Request == c.regNonce && e.Code == core.SessionLimit.Code:
			// The connection holds as many sessions as it may: registers
			// of this client whose answers were lost. Closing it frees
			// them; the client registers again on a new one.
			c.moveOn("session limit")
		case c.state == csRegistering && h.ClientID == 0 && h.Request == c.regNonce:
			if !e.Retryable {
				w.fail("client %d: register answered with %v", c.id, e)
				return
			}
			c.backoff()
			c.retryable(e.Code)
			c.timeoutAt = c.retryAt // resend the register then
		case !outstanding:
		case e.Code == core.SessionExpired.Code:
			c.expire()
		case e.Retryable:
			c.state = csBackoff
			c.backoff()
			c.retryable(e.Code)
		default:
			w.fail("op %d (%s, client %d session %d request %d) was answered with the error %v", c.cur.id, c.cur.kind, c.id, c.session, h.Request, e)
		}
	}
}

// expire: the session is gone. A write may have happened before, so its
// outcome is unknown; a read is dropped. The client registers again.
func (c *client) expire() {
	op := c.cur
	st := stAbandoned
	if op.kind.Mutates() {
		st = stUnknown
	}
	c.w.finishOp(op, st, 0, nil)
	c.cur, c.cont = nil, nil
	c.session = 0
	c.state = csIdle
	if c.probe {
		c.requeueProbe(op)
	}
}

func (c *client) complete(st opStatus, code core.Code, reply any) {
	op := c.cur
	c.w.finishOp(op, st, code, reply)
	c.cur = nil
	c.state = csIdle
	c.nextOpAt = c.w.now
	if !c.probe {
		c.nextOpAt += c.w.rng.Int64N(c.w.cfg.thinkMax + 1)
		c.cont = nil
		if r, ok := reply.(*core.QueryResult); ok && code == 0 && r.HasMore && c.w.rng.IntN(10) < 7 {
			c.cont = op
		}
		if c.w.rng.Float64() < c.w.cfg.newInstance {
			// The client restarts as a new instance: a new session (and
			// the old one lingers in the table until it is evicted).
			c.w.tracef("client %d restarts as a new instance", c.id)
			c.session, c.cont = 0, nil
		}
	}
}

// planRound queues a round of the checker's reads: every entity's whole
// history, and every entity's latest position in one request. A round that
// is queued and not started yet serves for the new reason too (it starts
// after it), so that rounds do not pile up.
func (c *client) planRound(why string) {
	if k := len(c.rounds); k > 0 && c.rounds[k-1].ops == nil {
		c.rounds[k-1].why += ", " + why
		return
	}
	c.rounds = append(c.rounds, probeRound{why: why})
}

func (c *client) nextProbeOp() *opRec {
	for len(c.rounds) > 0 {
		r := &c.rounds[0]
		if r.ops == nil {
			r.ops = c.w.wl.probeOps(c)
			c.w.tracef("checker reads every entity (%s)", r.why)
		}
		if r.i < len(r.ops) {
			op := r.ops[r.i]
			r.i++
			return op
		}
		c.rounds = c.rounds[1:]
	}
	return nil
}

// requeueProbe: a read of the checker lost to an expired session is asked
// again, as a new operation.
func (c *client) requeueProbe(op *opRec) {
	if len(c.rounds) == 0 {
		return
	}
	r := &c.rounds[0]
	r.ops = append(r.ops, &opRec{client: c.id, kind: op.kind, req: op.req, entities: op.entities, region: op.region})
}
