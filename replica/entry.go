package replica

import (
	"encoding/binary"
	"slices"

	"github.com/geoevent/geoevent/core"
)

// entryKind says what a log entry does when applied.
type entryKind uint8

const (
	kindNoop      entryKind = 1 // appended by a new leader; commits earlier terms
	kindRegister  entryKind = 2 // opens a client session; its index is the session id
	kindOperation entryKind = 3 // one operation of a session (or of the leader itself)
)

// entry is the decoded Data of a log entry. Layout, little-endian:
//
//	offset size field
//	     0    1 kind
//	     1    8 timestamp_ns: the operation's time, assigned by the leader
//	     9    8 session id (0 for the leader's own entries)
//	    17    4 request number
//	    21    1 operation (kindOperation only; 0 otherwise)
//	    22    n the operation's request, encoded by core.AppendRequest
//
// Everything that applying needs is in the entry, including the S2 cell of
// every event (set by the leader), so applying never reads a clock or
// recomputes geometry.
type entry struct {
	kind      entryKind
	timestamp uint64
	session   uint64
	request   uint32
	op        core.Operation
	payload   []byte
}

const entryHeaderSize = 22

func (e *entry) appendTo(b []byte) []byte {
	n := len(b)
	b = slices.Grow(b, entryHeaderSize+len(e.payload))[:n+entryHeaderSize]
	e.putHeader(b[n:])
	return append(b, e.payload...)
}

// putHeader writes e's header (all but its payload) into
// b[:entryHeaderSize].
func (e *entry) putHeader(b []byte) {
	b[0] = byte(e.kind)
	binary.LittleEndian.PutUint64(b[1:9], e.timestamp)
	binary.LittleEndian.PutUint64(b[9:17], e.session)
	binary.LittleEndian.PutUint32(b[17:21], e.request)
	b[21] = byte(e.op)
}

func decodeEntry(b []byte) (entry, error) {
	if len(b) < entryHeaderSize {
		return entry{}, core.Errorf(core.Corruption, "log entry of %d bytes is shorter than its header", len(b))
	}
	e := entry{
		kind:      entryKind(b[0]),
		timestamp: binary.LittleEndian.Uint64(b[1:9]),
		session:   binary.LittleEndian.Uint64(b[9:17]),
		request:   binary.LittleEndian.Uint32(b[17:21]),
		op:        core.Operation(b[21]),
		payload:   b[entryHeaderSize:],
	}
	switch e.kind {
	case kindNoop, kindRegister:
	case kindOperation:
		if !e.op.Valid() {
			return entry{}, core.Errorf(core.Corruption, "log entry has unknown operation %d", e.op)
		}
	default:
		return entry{}, core.Errorf(core.Corruption, "log entry has unknown kind %d", e.kind)
	}
	return e, nil
}
