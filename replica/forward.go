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
	}
}

// send answers a client.
func (r *Replica) send(to dest, h core.Header, payload []byte) {
	r.sendFrame(to, core.AppendFrame(nil, h, payload))
}

// sendFrame answers a client with a whole frame, which is not modified
// afterwards.
func (r *Replica) sendFrame(to dest, frame []byte) {
	if to.via == r.self {
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
