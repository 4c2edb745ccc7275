package replica

import (
	"fmt"

	"github.com/geoevent/geoevent/core"
)

// Any replica accepts a client's frames. A follower forwards each to the
// leader it knows (a forward message naming the client's connection), and
// the leader answers through it (a forwardReply carrying the whole client
// frame, which the follower writes to that connection). A follower that
// knows no leader answers 211 CLUSTER_UNAVAILABLE, and a replica that is
// forwarded a frame but no longer leads answers 215 PRIMARY_UNREACHABLE:
// both are retryable, and the client's session makes the retry safe.
//
// A follower remembers what it forwarded until the answer passes through
// it. Should it learn of another leader or term first (the one it
// forwarded to died, or was deposed), that answer may never come: it
// answers 215 PRIMARY_UNREACHABLE itself, so that the client retries at
// once instead of at its request timeout (30 s by default). It relays an
// answer only to a request it remembers: one that comes after its own
// 215 (a deposed leader's, late) is dropped, and a client never gets two
// answers to one request.

// dest is where a client's answer goes: a connection of this replica
// (via == self) or of the follower that forwarded the request.
type dest struct {
	via  uint32
	conn core.ConnID
}

// forwardOverhead is what a forward message adds to the client's payload.
const forwardOverhead = 8 + 8 + 4 + 1

func (r *Replica) forward(to dest, h core.Header, payload []byte) {
	switch {
	case to.via != r.self:
		r.sendError(to, h, core.PrimaryUnreachable, "replica %d no longer leads; retry", r.self)
	case r.leader == NoLeader:
		r.sendError(to, h, core.ClusterUnavailable, "no leader is known to replica %d (an election is under way); retry", r.self)
	case len(payload)+forwardOverhead > core.MaxFramePayload:
		r.sendError(to, h, core.MalformedRequest, "a request of %d bytes is too large to forward; send it to the leader, replica %d", len(payload), r.leader)
	default:
		r.sendPeer(r.leader, &message{typ: msgForward, conn: to.conn, client: h, frame: payload})
		for _, f := range r.forwarded {
			if f.conn == to.conn && f.h == h {
				return // a resend: one answer is relayed, any second one dropped
			}
		}
		if len(r.forwarded) >= maxForwarded {
			r.answerForwarded(r.forwarded[0])
			r.forwarded = r.forwarded[1:]
		}
		r.forwarded = append(r.forwarded, forwardedReq{to.conn, h, r.leader, r.term})
	}
}

// forwardedReq is a client request this follower forwarded to leader (of
// term) and has not seen answered.
type forwardedReq struct {
	conn   core.ConnID
	h      core.Header
	leader uint32
	term   uint64
}

// maxForwarded bounds the forwarded requests a follower remembers (its
// clients have one request in flight per session); the oldest beyond it is
// answered 215 at once.
const maxForwarded = 4096

// forwardAnswered forgets the forwarded request that frame, an answer
// passing through this follower to conn, answers, and reports whether it
// remembered one: only then is the answer relayed.
func (r *Replica) forwardAnswered(conn core.ConnID, frame []byte) bool {
	h, _, _, err := core.DecodeFrame(frame)
	if err != nil {
		return false
	}
	for i, f := range r.forwarded {
		// A register's answer carries the new session id; its nonce,
		// in the request number, names it.
		if f.conn == conn && f.h.Request == h.Request && (f.h.ClientID == h.ClientID || f.h.Type == core.MsgRegister) {
			r.forwarded = append(r.forwarded[:i], r.forwarded[i+1:]...)
			return true
		}
	}
	return false
}

// expireForwarded answers the forwarded requests whose leader or term is
// no longer this replica's.
func (r *Replica) expireForwarded() {
	n := 0
	for _, f := range r.forwarded {
		if f.leader == r.leader && f.term == r.term {
			r.forwarded[n] = f
			n++
			continue
		}
		r.answerForwarded(f)
	}
	clear(r.forwarded[n:])
	r.forwarded = r.forwarded[:n]
}

func (r *Replica) answerForwarded(f forwardedReq) {
	r.sendError(dest{via: r.self, conn: f.conn}, f.h, core.PrimaryUnreachable,
		"the request went to replica %d, the leader of term %d, which may never answer it; retry", f.leader, f.term)
}

// send answers a client.
func (r *Replica) send(to dest, h core.Header, payload []byte) {
	r.sendFrame(to, core.AppendFrame(nil, h, payload))
}

// sendFrame answers a client with a whole frame, which is not modified
// afterwards.
func (r *Replica) sendFrame(to dest, frame []byte) {
	if to.via == r.self {
		r.answered(to.conn, frame)
		r.io.SendClient(to.conn, frame)
		return
	}
	if len(frame)+8 > core.MaxFramePayload {
		h, _, _, _ := core.DecodeFrame(frame)
		h.Type = core.MsgError
		frame = core.AppendFrame(nil, h, core.AppendErrorMessage(nil, core.InternalError.Code,
			fmt.Sprintf("a reply of %d bytes is too large to pass through a follower; ask the leader, replica %d", len(frame), r.self)))
	}
	r.sendPeer(to.via, &message{typ: msgForwardReply, conn: to.conn, frame: frame})
}

func (r *Replica) sendError(to dest, h core.Header, info core.CodeInfo, format string, args ...any) {
	h.Type = core.MsgError
	r.send(to, h, core.AppendErrorMessage(nil, info.Code, fmt.Sprintf(format, args...)))
}

// ForwardedFrame returns the client's header and payload that a
// replica-to-replica frame forwards (ok false for any other frame), so
// that the leader's IO can judge a forwarded request as it judges its own
// clients' (admission control) before the replica takes it. The payload
// aliases the frame's.
func ForwardedFrame(h core.Header, payload []byte) (client core.Header, clientPayload []byte, ok bool) {
	if h.Type != msgForward {
		return core.Header{}, nil, false
	}
	m, err := decodeMessage(h, payload)
	if err != nil {
		return core.Header{}, nil, false
	}
	return m.client, m.frame, true
}

// RefuseForwarded answers the request that a forward frame carries with
// an error, through the follower that forwarded it, instead of taking it:
// the leader's IO refuses it as it refuses its own clients' requests. The
// request is not proposed and changes nothing, so its retry (same session
// and request number) is a request like any other; the follower relays
// the answer and forgets the request. A frame that is not a forward from
// another replica is ignored.
func (r *Replica) RefuseForwarded(h core.Header, payload []byte, info core.CodeInfo, msg string) {
	if h.ClientID >= uint64(r.cfg.ReplicaCount) || uint32(h.ClientID) == r.self {
		return
	}
	m, err := decodeMessage(h, payload)
	if err != nil || m.typ != msgForward {
		return
	}
	r.sendError(dest{via: m.from, conn: m.conn}, m.client, info, "%s", msg)
}
