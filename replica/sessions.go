package replica

import (
	"cmp"
	"encoding/binary"
	"slices"

	"github.com/geoevent/geoevent/core"
)

// session is one client session of the replicated session table
// (Ongaro's dissertation, 6.3). It remembers the last request applied for
// the client, its checksum and its encoded reply, so that a retried request
// gets the same reply instead of running twice, and a request number used
// again for another request is refused (core.RequestMismatch).
type session struct {
	id           uint64 // the index of the register entry
	lastRequest  uint32
	lastActivity uint64 // index of the last entry applied for it
	summed       bool   // sum is lastRequest's checksum (requestSum); not for entries logged without one
	sum          uint32
	reply        []byte // payload of the reply to lastRequest
	replyType    core.MessageType

	// older and newer link the table's sessions in lastActivity order.
	older, newer *session
}

// sessionTable is part of the replicated state: every replica applies the
// same entries to it and so holds the same table. When it is full, a
// register evicts the session idle longest: the smallest lastActivity, the
// log index of its last applied request (or of its register), ties (only a
// snapshot written by other code could hold them) going to the smaller id.
// That is the same on every replica. The sessions are kept in that order in
// a list, so that a register finds its victim at once: lastActivity only
// ever becomes the index being applied, the largest yet, so a touched or
// new session goes to the newest end.
type sessionTable struct {
	max            int
	sessions       map[uint64]*session // for lookups only: nothing iterates it
	oldest, newest *session
}

func newSessionTable(max int) *sessionTable {
	return &sessionTable{max: max, sessions: make(map[uint64]*session)}
}

func (t *sessionTable) get(id uint64) *session { return t.sessions[id] }

func (t *sessionTable) len() int { return len(t.sessions) }

// register opens session id (the register entry's index), evicting the
// session idle longest when the table is full; it returns the evicted
// session's id, or 0.
func (t *sessionTable) register(id uint64) (evicted uint64) {
	if len(t.sessions) >= t.max && t.oldest != nil {
		victim := t.oldest
		t.unlink(victim)
		delete(t.sessions, victim.id)
		evicted = victim.id
	}
	s := &session{id: id, lastActivity: id}
	t.sessions[id] = s
	t.pushNewest(s)
	return evicted
}

// touch records that an entry at index, the newest applied, was applied
// for s.
func (t *sessionTable) touch(s *session, index uint64) {
	s.lastActivity = index
	if t.newest != s {
		t.unlink(s)
		t.pushNewest(s)
	}
}

func (t *sessionTable) unlink(s *session) {
	if s.older != nil {
		s.older.newer = s.newer
	} else {
		t.oldest = s.newer
	}
	if s.newer != nil {
		s.newer.older = s.older
	} else {
		t.newest = s.older
	}
	s.older, s.newer = nil, nil
}

func (t *sessionTable) pushNewest(s *session) {
	s.older, s.newer = t.newest, nil
	if t.newest != nil {
		t.newest.newer = s
	} else {
		t.oldest = s
	}
	t.newest = s
}

// idleOrder returns the sessions' ids from the longest idle to the most
// recently active: the order in which registers evict them.
func (t *sessionTable) idleOrder() []uint64 {
	ids := make([]uint64, 0, len(t.sessions))
	for s := t.oldest; s != nil; s = s.newer {
		ids = append(ids, s.id)
	}
	return ids
}

// appendTo encodes the table in ascending session id order (the state's
// version 2, see stateMagic): count u32, then per session: id u64,
// lastRequest u32, lastActivity u64, flags u8 (bit 0: summed), sum u32,
// replyType u8, reply length u32, reply bytes.
func (t *sessionTable) appendTo(b []byte) []byte {
	ids := make([]uint64, 0, len(t.sessions))
	for s := t.oldest; s != nil; s = s.newer {
		ids = append(ids, s.id)
	}
	slices.Sort(ids)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(ids)))
	for _, id := range ids {
		s := t.sessions[id]
		b = binary.LittleEndian.AppendUint64(b, s.id)
		b = binary.LittleEndian.AppendUint32(b, s.lastRequest)
		b = binary.LittleEndian.AppendUint64(b, s.lastActivity)
		var flags byte
		if s.summed {
			flags = 1
		}
		b = append(b, flags)
		b = binary.LittleEndian.AppendUint32(b, s.sum)
		b = append(b, byte(s.replyType))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(s.reply)))
		b = append(b, s.reply...)
	}
	return b
}

// decodeSessions reads what appendTo wrote (version 2) or its version 1,
// which had no flags and sum, and returns the rest of b.
func decodeSessions(b []byte, max int, version int) (*sessionTable, []byte, error) {
	bad := core.Errorf(core.Corruption, "snapshot session table is damaged")
	if len(b) < 4 {
		return nil, nil, bad
	}
	n := binary.LittleEndian.Uint32(b)
	b = b[4:]
	fixed := 25 // id, lastRequest, lastActivity, replyType, reply length
	if version >= 2 {
		fixed += 5 // flags, sum
	}
	if uint64(n)*uint64(fixed) > uint64(len(b)) {
		return nil, nil, bad
	}
	t := newSessionTable(max)
	all := make([]*session, 0, n)
	for range n {
		if len(b) < fixed {
			return nil, nil, bad
		}
		s := &session{
			id:           binary.LittleEndian.Uint64(b),
			lastRequest:  binary.LittleEndian.Uint32(b[8:]),
			lastActivity: binary.LittleEndian.Uint64(b[12:]),
		}
		b = b[20:]
		if version >= 2 {
			if b[0] > 1 {
				return nil, nil, bad
			}
			s.summed, s.sum = b[0] == 1, binary.LittleEndian.Uint32(b[1:])
			b = b[5:]
		}
		s.replyType = core.MessageType(b[0])
		l := binary.LittleEndian.Uint32(b[1:])
		b = b[5:]
		if uint64(len(b)) < uint64(l) {
			return nil, nil, bad
		}
		s.reply = slices.Clone(b[:l])
		b = b[l:]
		if t.sessions[s.id] != nil {
			return nil, nil, bad
		}
		t.sessions[s.id] = s
		all = append(all, s)
	}
	slices.SortFunc(all, func(x, y *session) int {
		return cmp.Or(cmp.Compare(x.lastActivity, y.lastActivity), cmp.Compare(x.id, y.id))
	})
	for _, s := range all {
		t.pushNewest(s)
	}
	return t, b, nil
}
