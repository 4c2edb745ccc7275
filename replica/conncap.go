package replica

import (
	"encoding/binary"
	"slices"

	"github.com/geoevent/geoevent/core"
)

// A bound on the sessions one client connection may register.
//
// Every register evicts the session idle longest once the session table is
// full, and an evicted session loses its retry protection. Were
// registrations free, one connection could register as fast as it can
// write and evict every other client's session within a second. So the
// replica that holds a client's connection (which may be a follower that
// forwards the register; only it knows the connection) counts the
// registrations made through it: the sessions it was answered with that
// are still in the table, and the registers not yet answered. Beyond
// Config.MaxSessionsPerConn a register is refused with 205 SESSION_LIMIT
// and nothing is logged. A client that needs more sessions opens more
// connections; an evicted session, or the connection's close, frees its
// place.
//
// This state is the replica's own, not replicated: it is made of its
// inputs (the client frames it receives and the answers it sends on its
// own connections), so the simulator replays it like the rest.

// connRegs is what a replica knows of the registrations through one of its
// client connections.
type connRegs struct {
	live    []uint64     // session ids answered on the connection, evicted ones pruned lazily
	pending []pendingReg // registers not yet answered, oldest first
}

// pendingReg is a register not yet answered: its nonce (the frame's
// request number, which the answer echoes) and when it arrived.
type pendingReg struct {
	nonce uint32
	since uint64 // the replica's monotonic clock
}

// pendingRegisterNS is how long an unanswered register counts against its
// connection. Every register is answered, by the leader, by a follower that
// forwarded it or by a replica giving up on it; this bound only keeps a
// lost answer from holding a place for ever.
const pendingRegisterNS = 60_000_000_000

// admitRegister decides whether a register frame h on this replica's
// connection conn may go on, and counts it if so; when not, it answers the
// client with 205 SESSION_LIMIT.
func (r *Replica) admitRegister(conn core.ConnID, h core.Header) bool {
	c := r.conns[conn]
	if c == nil {
		c = &connRegs{}
		r.conns[conn] = c
	}
	now := r.clock.MonotonicNS()
	// Forget what no longer counts: sessions evicted from the table (a
	// session id above the applied index is a register this replica has
	// not applied yet, answered by the leader ahead of it: it counts), and
	// registers unanswered for too long.
	c.live = slices.DeleteFunc(c.live, func(id uint64) bool { return id <= r.applied && r.sessions.get(id) == nil })
	c.pending = slices.DeleteFunc(c.pending, func(p pendingReg) bool { return now-p.since >= pendingRegisterNS })
	for _, p := range c.pending {
		if p.nonce == h.Request {
			return true // a resend of a register not yet answered: counted once
		}
	}
	if n := len(c.live) + len(c.pending); n >= r.cfg.MaxSessionsPerConn {
		r.sendError(dest{via: r.self, conn: conn}, h, core.SessionLimit,
			"this connection has registered %d sessions that are live or being registered, the most one connection may (%d): use those sessions, or close the connection to free them",
			n, r.cfg.MaxSessionsPerConn)
		return false
	}
	c.pending = append(c.pending, pendingReg{nonce: h.Request, since: now})
	return true
}

// answered notes frame, an answer this replica writes to its own
// connection conn: the answer to a register (its session id, or a refusal)
// ends the register's pending count, and a session id counts as live.
func (r *Replica) answered(conn core.ConnID, frame []byte) {
	if len(r.conns) == 0 || len(frame) < core.FrameLengthSize+core.FrameHeaderSize {
		return
	}
	c := r.conns[conn]
	if c == nil {
		return
	}
	le := binary.LittleEndian
	client, request, typ := le.Uint64(frame[4:]), le.Uint32(frame[12:]), core.MessageType(frame[16])
	switch {
	case typ == core.MsgRegisterReply:
		c.live = append(c.live, client)
	case typ == core.MsgError && client == 0:
	default:
		return
	}
	if i := slices.IndexFunc(c.pending, func(p pendingReg) bool { return p.nonce == request }); i >= 0 {
		c.pending = slices.Delete(c.pending, i, i+1)
	}
}
