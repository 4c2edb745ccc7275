package replica

import (
	"encoding/binary"

	"github.com/geoevent/geoevent/core"
)

// Replica-to-replica messages travel in core frames (checksummed by the
// frame) whose header carries the sender's replica index as client id and
// request number 0. Every payload is little-endian; every message but the
// two forwarding ones starts with the sender's term.
//
//	type               payload after term
//	64 append          prevIndex u64, prevTerm u64, commit u64, seq u64,
//	                   count u32, count × (term u64, length u32, data)
//	                   (entry i has index prevIndex+1+i)
//	65 appendReply     seq u64, ok u8, index u64, hint u64, hintTerm u64
//	                   ok: the follower's log matches the leader's and is
//	                   durable through index; not ok: index is the rejected
//	                   prevIndex, hint/hintTerm where the leader should try
//	66 vote            pre u8, lastIndex u64, lastTerm u64
//	67 voteReply       pre u8, granted u8
//	68 heartbeat       prevIndex u64, prevTerm u64, commit u64, seq u64
//	                   (an append of no entries: prevIndex is the
//	                   follower's match, commit at most that)
//	69 heartbeatReply  seq u64
//	70 snapshot        index u64, snapTerm u64, offset u64, total u64,
//	                   stateLen u64, chunk (bytes offset.. of total: the
//	                   state's stateLen bytes, then the history stream)
//	71 snapshotReply   index u64, offset u64, ok u8 (ok: installed and
//	                   durable; else offset is the next byte it wants)
//	72 forward         conn u64, then a client frame's header fields
//	                   (client id u64, request u32, type u8) and payload
//	73 forwardReply    conn u64, then a whole client frame to write to conn
//	74 health          count u8, count × (contactAge u64, lag u64,
//	                   recovering u8): the leader's view of every replica,
//	                   in replica order (health.go); a replica that does
//	                   not know the type drops it
//
// seq numbers the leader's rounds: a reply echoes the highest seq it has
// seen from the leader in the term, which confirms that the leader still
// led when it sent it (linearizable reads, see reads.go).
const (
	msgAppend         core.MessageType = 64
	msgAppendReply    core.MessageType = 65
	msgVote           core.MessageType = 66
	msgVoteReply      core.MessageType = 67
	msgHeartbeat      core.MessageType = 68
	msgHeartbeatReply core.MessageType = 69
	msgSnapshot       core.MessageType = 70
	msgSnapshotReply  core.MessageType = 71
	msgForward        core.MessageType = 72
	msgForwardReply   core.MessageType = 73
	msgHealth         core.MessageType = 74
)

// message is one decoded replica-to-replica message; each type uses the
// fields its layout above names.
type message struct {
	typ  core.MessageType
	from uint32
	term uint64

	prevIndex, prevTerm, commit, seq uint64
	entries                          []core.LogEntry

	ok             bool
	index          uint64
	hint, hintTerm uint64

	pre                 bool
	lastIndex, lastTerm uint64

	snapTerm, offset, total uint64
	stateLen                uint64 // snapshot: the state's bytes, before the history stream
	data                    []byte // snapshot chunk

	health []nodeHealth // health

	conn   core.ConnID
	client core.Header // forward: the client frame's header
	frame  []byte      // forward: the client payload; forwardReply: a whole frame
}

// encode returns the message as a frame from replica `from`, in pieces to be
// written back to back (core.IO.SendPeer). An append's entry data is not
// copied into the frame: each entry's Data is a piece of its own, read
// from the log's memory (a batch is over a megabyte, and the copy cost
// the leader a sixth of its CPU). That is safe because an entry's Data
// never changes once it is in the log.
func (m *message) encode(from uint32) [][]byte {
	var pieces [][]byte
	if m.typ == msgAppend && len(m.entries) > 0 {
		pieces = make([][]byte, 0, 2*len(m.entries)+2)
	}
	b, start := core.BeginFrame(make([]byte, 0, core.FrameOverhead+64+len(m.data)+len(m.frame)+12*len(m.entries)))
	u8 := func(v bool) {
		if v {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	u64 := func(vs ...uint64) {
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint64(b, v)
		}
	}
	switch m.typ {
	case msgForward:
		u64(uint64(m.conn), m.client.ClientID)
		b = binary.LittleEndian.AppendUint32(b, m.client.Request)
		b = append(b, byte(m.client.Type))
		b = append(b, m.frame...)
	case msgForwardReply:
		u64(uint64(m.conn))
		b = append(b, m.frame...)
	default:
		u64(m.term)
	}
	switch m.typ {
	case msgAppend:
		u64(m.prevIndex, m.prevTerm, m.commit, m.seq)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(m.entries)))
		for _, e := range m.entries {
			// b's capacity holds every entry's 12 bytes: the pieces
			// cut from it never move.
			at := len(b)
			u64(e.Term)
			b = binary.LittleEndian.AppendUint32(b, uint32(len(e.Data)))
			if len(pieces) == 0 {
				at = 0 // the first piece starts with the frame's head
			}
			pieces = append(pieces, b[at:len(b):len(b)], e.Data)
		}
	case msgAppendReply:
		u64(m.seq)
		u8(m.ok)
		u64(m.index, m.hint, m.hintTerm)
	case msgVote:
		u8(m.pre)
		u64(m.lastIndex, m.lastTerm)
	case msgVoteReply:
		u8(m.pre)
		u8(m.ok)
	case msgHeartbeat:
		u64(m.prevIndex, m.prevTerm, m.commit, m.seq)
	case msgHeartbeatReply:
		u64(m.seq)
	case msgSnapshot:
		u64(m.index, m.snapTerm, m.offset, m.total, m.stateLen)
		b = append(b, m.data...)
	case msgSnapshotReply:
		u64(m.index, m.offset)
		u8(m.ok)
	case msgHealth:
		b = append(b, byte(len(m.health)))
		for _, n := range m.health {
			u64(n.contactAgeNS, n.lagNS)
			u8(n.recovering)
		}
	}
	h := core.Header{ClientID: uint64(from), Type: m.typ}
	if pieces == nil {
		return [][]byte{core.FinishFrame(b, start, h)}
	}
	return core.FinishFramePieces(pieces, h)
}

// reader decodes a payload; the first failure sticks.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) u64() uint64 {
	if len(r.b) < 8 {
		r.bad = true
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *reader) u32() uint32 {
	if len(r.b) < 4 {
		r.bad = true
		return 0
	}
	v := binary.LittleEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

func (r *reader) bool() bool {
	if len(r.b) < 1 || r.b[0] > 1 {
		r.bad = true
		return false
	}
	v := r.b[0] == 1
	r.b = r.b[1:]
	return v
}

func (r *reader) bytes(n uint64) []byte {
	if uint64(len(r.b)) < n {
		r.bad = true
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

// decodeMessage decodes a replica-to-replica frame's payload. Slices in the
// result alias payload. It never panics: a message that does not decode is
// an error (the caller drops it; the frame's checksum makes this a bug in
// the sender, not noise on the wire).
func decodeMessage(h core.Header, payload []byte) (message, error) {
	m := message{typ: h.Type, from: uint32(h.ClientID)}
	r := &reader{b: payload}
	switch m.typ {
	case msgForward:
		m.conn = core.ConnID(r.u64())
		m.client.ClientID = r.u64()
		m.client.Request = r.u32()
		if t := r.bytes(1); t != nil {
			m.client.Type = core.MessageType(t[0])
		}
		m.frame, r.b = r.b, nil
	case msgForwardReply:
		m.conn = core.ConnID(r.u64())
		m.frame, r.b = r.b, nil
	case msgAppend, msgAppendReply, msgVote, msgVoteReply, msgHeartbeat, msgHeartbeatReply, msgSnapshot, msgSnapshotReply, msgHealth:
		m.term = r.u64()
	default:
		return m, core.Errorf(core.MalformedRequest, "unknown replica message type %d", m.typ)
	}
	switch m.typ {
	case msgAppend:
		m.prevIndex, m.prevTerm, m.commit, m.seq = r.u64(), r.u64(), r.u64(), r.u64()
		n := r.u32()
		if uint64(n) > uint64(len(r.b))/12 {
			r.bad = true
			break
		}
		m.entries = make([]core.LogEntry, 0, n)
		for i := range n {
			e := core.LogEntry{Index: m.prevIndex + 1 + uint64(i), Term: r.u64()}
			e.Data = r.bytes(uint64(r.u32()))
			if r.bad {
				break
			}
			m.entries = append(m.entries, e)
		}
	case msgAppendReply:
		m.seq = r.u64()
		m.ok = r.bool()
		m.index, m.hint, m.hintTerm = r.u64(), r.u64(), r.u64()
	case msgVote:
		m.pre = r.bool()
		m.lastIndex, m.lastTerm = r.u64(), r.u64()
	case msgVoteReply:
		m.pre = r.bool()
		m.ok = r.bool()
	case msgHeartbeat:
		m.prevIndex, m.prevTerm, m.commit, m.seq = r.u64(), r.u64(), r.u64(), r.u64()
	case msgHeartbeatReply:
		m.seq = r.u64()
	case msgSnapshot:
		m.index, m.snapTerm, m.offset, m.total, m.stateLen = r.u64(), r.u64(), r.u64(), r.u64(), r.u64()
		m.data, r.b = r.b, nil
		if m.offset > m.total || uint64(len(m.data)) > m.total-m.offset || m.stateLen > m.total {
			r.bad = true
		}
	case msgSnapshotReply:
		m.index, m.offset = r.u64(), r.u64()
		m.ok = r.bool()
	case msgHealth:
		n := uint64(0)
		if c := r.bytes(1); c != nil {
			n = uint64(c[0])
		}
		if n > uint64(len(r.b))/17 {
			r.bad = true
			break
		}
		m.health = make([]nodeHealth, n)
		for i := range m.health {
			m.health[i] = nodeHealth{contactAgeNS: r.u64(), lagNS: r.u64(), recovering: r.bool()}
		}
	}
	if r.bad || len(r.b) != 0 {
		return m, core.Errorf(core.MalformedRequest, "replica message type %d from %d does not decode", m.typ, m.from)
	}
	return m, nil
}
