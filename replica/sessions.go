package replica

import (
	"encoding/binary"
	"slices"

	"github.com/geoevent/geoevent/core"
)

// session is one client session of the replicated session table
// (Ongaro's dissertation, 6.3). It remembers the last request applied for
// the client and its encoded reply, so that a retried request gets the same
// reply instead of running twice.
type session struct {
	id           uint64 // the index of the register entry
	lastRequest  uint32
	lastActivity uint64 // index of the last entry applied for it
	reply        []byte // payload of the reply to lastRequest
	replyType    core.MessageType
}

// sessionTable is part of the replicated state: every replica applies the
// same entries to it and so holds the same table. When it is full, a
// register evicts the session idle longest (smallest lastActivity), which
// is the same on every replica.
type sessionTable struct {
	max      int
	sessions map[uint64]*session
}

func newSessionTable(max int) *sessionTable {
	return &sessionTable{max: max, sessions: make(map[uint64]*session)}
}

func (t *sessionTable) get(id uint64) *session { return t.sessions[id] }

// register opens session id (the register entry's index), evicting the
// least recently active session when the table is full.
func (t *sessionTable) register(id uint64) {
	if len(t.sessions) >= t.max {
		var victim *session
		for _, s := range t.sessions { // the minimum is unique: no map-order dependence
			if victim == nil || s.lastActivity < victim.lastActivity {
				victim = s
			}
		}
		delete(t.sessions, victim.id)
	}
	t.sessions[id] = &session{id: id, lastActivity: id}
}

// appendTo encodes the table in ascending session id order:
// count u32, then per session: id u64, lastRequest u32, lastActivity u64,
// replyType u8, reply length u32, reply bytes.
func (t *sessionTable) appendTo(b []byte) []byte {
	ids := make([]uint64, 0, len(t.sessions))
	for id := range t.sessions {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(ids)))
	for _, id := range ids {
		s := t.sessions[id]
		b = binary.LittleEndian.AppendUint64(b, s.id)
		b = binary.LittleEndian.AppendUint32(b, s.lastRequest)
		b = binary.LittleEndian.AppendUint64(b, s.lastActivity)
		b = append(b, byte(s.replyType))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(s.reply)))
		b = append(b, s.reply...)
	}
	return b
}

// decodeSessions reads what appendTo wrote and returns the rest of b.
func decodeSessions(b []byte, max int) (*sessionTable, []byte, error) {
	bad := core.Errorf(core.Corruption, "snapshot session table is damaged")
	if len(b) < 4 {
		return nil, nil, bad
	}
	n := binary.LittleEndian.Uint32(b)
	b = b[4:]
	t := newSessionTable(max)
	for range n {
		if len(b) < 25 {
			return nil, nil, bad
		}
		s := &session{
			id:           binary.LittleEndian.Uint64(b),
			lastRequest:  binary.LittleEndian.Uint32(b[8:]),
			lastActivity: binary.LittleEndian.Uint64(b[12:]),
			replyType:    core.MessageType(b[20]),
		}
		l := binary.LittleEndian.Uint32(b[21:])
		b = b[25:]
		if uint64(len(b)) < uint64(l) {
			return nil, nil, bad
		}
		s.reply = slices.Clone(b[:l])
		b = b[l:]
		t.sessions[s.id] = s
	}
	return t, b, nil
}
