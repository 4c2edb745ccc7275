package replica

import (
	"encoding/binary"
	"hash/crc32"
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
//	     0    1 kind; bit 7 (entrySummed) set: the request checksum follows
//	            the header's first 22 bytes
//	     1    8 timestamp_ns: the operation's time, assigned by the leader
//	     9    8 session id (0 for the leader's own entries)
//	    17    4 request number
//	    21    1 operation (kindOperation only; 0 otherwise)
//	    22    4 request checksum (entrySummed only): requestSum of the
//	            client's payload, as the client sent it
//	 22/26    n the operation's request, encoded by core.AppendRequest
//
// Everything that applying needs is in the entry, including the S2 cell of
// every event (set by the leader), so applying never reads a clock or
// recomputes geometry. The leader writes every client operation summed;
// entries without the bit (the leader's own, and logs written before the
// checksum existed) decode with no checksum.
type entry struct {
	kind      entryKind
	timestamp uint64
	session   uint64
	request   uint32
	op        core.Operation
	summed    bool   // sum is the request's checksum
	sum       uint32 // see requestSum
	payload   []byte
}

const (
	entryBaseSize   = 22   // an entry's header without a request checksum
	entryHeaderSize = 26   // the header of a client operation's entry, summed
	entrySummed     = 0x80 // the kind byte's flag: the header holds a checksum
)

// requestSum is the checksum of a client's request payload (its operation
// byte and the request's encoding, as the client sent them) that a session
// keeps beside the cached reply, so that a request number reused for
// another request is told from a retry (core.RequestMismatch). It is
// CRC-32C, computed by the leader from the frame's bytes and carried in the
// log, so every replica holds the same.
func requestSum(payload []byte) uint32 { return crc32.Checksum(payload, castagnoli) }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// headerSize is the size of e's header.
func (e *entry) headerSize() int {
	if e.summed {
		return entryHeaderSize
	}
	return entryBaseSize
}

func (e *entry) appendTo(b []byte) []byte {
	n, hs := len(b), e.headerSize()
	b = slices.Grow(b, hs+len(e.payload))[:n+hs]
	e.putHeader(b[n:])
	return append(b, e.payload...)
}

// putHeader writes e's header (all but its payload) into
// b[:e.headerSize()].
func (e *entry) putHeader(b []byte) {
	b[0] = byte(e.kind)
	binary.LittleEndian.PutUint64(b[1:9], e.timestamp)
	binary.LittleEndian.PutUint64(b[9:17], e.session)
	binary.LittleEndian.PutUint32(b[17:21], e.request)
	b[21] = byte(e.op)
	if e.summed {
		b[0] |= entrySummed
		binary.LittleEndian.PutUint32(b[22:26], e.sum)
	}
}

func decodeEntry(b []byte) (entry, error) {
	short := func() (entry, error) {
		return entry{}, core.Errorf(core.Corruption, "log entry of %d bytes is shorter than its header", len(b))
	}
	if len(b) < entryBaseSize {
		return short()
	}
	e := entry{
		kind:      entryKind(b[0] &^ entrySummed),
		timestamp: binary.LittleEndian.Uint64(b[1:9]),
		session:   binary.LittleEndian.Uint64(b[9:17]),
		request:   binary.LittleEndian.Uint32(b[17:21]),
		op:        core.Operation(b[21]),
		summed:    b[0]&entrySummed != 0,
		payload:   b[entryBaseSize:],
	}
	if e.summed {
		if len(b) < entryHeaderSize {
			return short()
		}
		e.sum, e.payload = binary.LittleEndian.Uint32(b[22:26]), b[entryHeaderSize:]
	}
	switch e.kind {
	case kindNoop, kindRegister:
		if e.summed {
			return entry{}, core.Errorf(core.Corruption, "log entry of kind %d carries a request checksum", e.kind)
		}
	case kindOperation:
		if !e.op.Valid() {
			return entry{}, core.Errorf(core.Corruption, "log entry has unknown operation %d", e.op)
		}
	default:
		return entry{}, core.Errorf(core.Corruption, "log entry has unknown kind %d", e.kind)
	}
	return e, nil
}
