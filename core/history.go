package core

import (
	"encoding/binary"
	"slices"
)

// History on disk. An entity's latest event lives in the state machine's
// memory, and only there; its older events live in the history store, an
// LSM on disk keyed by (entity id, timestamp): an event is written there
// when it becomes an older one (a newer event takes its place as the
// latest) or is one from the start (a client timestamp below the
// latest's), so a new entity, or a latest replaced in place, costs the
// store nothing. The
// replica does no IO: applying an entry produces HistoryWrites, which IO
// applies to the store in log order, and reads of the store are requests
// that IO answers later as inputs, each seeing exactly the writes queued
// before it.

// HistoryWriteKind says what a HistoryWrite does.
type HistoryWriteKind uint8

const (
	// HistoryPut stores Event under (Event.EntityID, Event.TimestampNS),
	// replacing the event stored there.
	HistoryPut HistoryWriteKind = iota + 1
	// HistoryDeleteEntity removes every event of EntityID (erasure: the
	// store also compacts the range, so that its bytes leave the disk).
	HistoryDeleteEntity
	// HistoryDeleteExpired removes the events of EntityID that have
	// expired at time TS: those with a TTL whose expiry
	// (GeoEvent.ExpiresAtNS) is at or before TS.
	HistoryDeleteExpired
)

// HistoryWrite is one change to the history store. Which fields count
// depends on Kind: Event for HistoryPut, EntityID (and TS) for the others.
type HistoryWrite struct {
	Kind     HistoryWriteKind
	EntityID Uint128
	TS       uint64
	Event    GeoEvent
}

// HistoryRange asks for the events of EntityID with SinceNS <= timestamp
// <= UntilNS, oldest first, skipping those expired at ExpiredAt (0: skip
// none), at most Limit of them (Limit > 0).
type HistoryRange struct {
	EntityID  Uint128
	SinceNS   uint64
	UntilNS   uint64
	ExpiredAt uint64
	Limit     int
}

// HistoryReadKind says what a HistoryRead asks.
type HistoryReadKind uint8

const (
	// HistoryGet asks for the event of EntityID at timestamp TS.
	HistoryGet HistoryReadKind = iota + 1
	// HistoryScan asks about the events of EntityID with a timestamp
	// below Below (an entity's older events, when Below is its latest
	// timestamp): how many have expired at TS (HistoryExpiredAt), the
	// soonest removal due (RemovalDue) among all of them, and the soonest
	// among those not expired.
	HistoryScan
	// HistoryRangeRead asks for the events Range names.
	HistoryRangeRead
)

// HistoryRead is one read of the history store. Which fields count
// depends on Kind.
type HistoryRead struct {
	Kind     HistoryReadKind
	EntityID Uint128
	TS       uint64
	Below    uint64
	Range    HistoryRange
}

// HistoryAnswer answers one HistoryRead.
//
//   - HistoryGet: Found, and Event when found.
//   - HistoryScan: Expired, SoonestDue (0: no event has a TTL) and
//     NextDue (the same among the events not expired).
//   - HistoryRangeRead: Events (oldest first) and More (the limit
//     stopped the range before its end).
//
// Err is set when the store could not answer (a damaged file): the
// answer is then no answer, and the caller must not act on it.
type HistoryAnswer struct {
	Found      bool
	Event      GeoEvent
	Expired    int
	SoonestDue uint64
	NextDue    uint64
	Events     []GeoEvent
	More       bool
	Err        error
}

// HistoryExpiredAt reports whether an older event (not its entity's
// latest) has expired at t: it has a TTL and its own expiry is at or
// before t. (An entity's latest event expires with the entity, whose
// expiry /ttl/* may have changed.)
func HistoryExpiredAt(ev *GeoEvent, t uint64) bool {
	return ev.TTLSeconds != 0 && ev.ExpiresAtNS() <= t
}

// RemovalDue is when cleanup takes an older event's entity for it: its
// expiry plus a sixteenth of its TTL (0 without one). Cleanup then removes
// every older event of the entity that has expired, so a long history
// that expires event by event loses them a sixteenth of its TTL's worth at
// a time, not one a cleanup. Expired events wait for it unseen.
func RemovalDue(ev *GeoEvent) uint64 {
	if ev.TTLSeconds == 0 {
		return 0
	}
	d := uint64(ev.TTLSeconds) * (1_000_000_000 + 1_000_000_000/16)
	if ev.TimestampNS > ^uint64(0)-d {
		return ^uint64(0)
	}
	return ev.TimestampNS + d
}

// SoonerDue returns the sooner of two times, 0 being never.
func SoonerDue(a, b uint64) uint64 {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}

// A history section: a history store's events as 128-byte records after
// other bytes. A leader no longer sends one (a follower gets the store's
// files as a history stream: IO.EncodeSnapshot), but a follower's snapshot
// file written before ends in one, which decoding a state skips
// (SplitHistory), and the tests' in-memory IO use a section as their
// history stream. Layout, little-endian, after the preceding bytes:
//
//	128*K  K events, each its record (GeoEvent.PutRecord), in (entity
//	       id, timestamp) order
//	    8  K
//	    8  the length of the state's bytes before the section
//	    8  magic "GEOHIST1"
//
// A snapshot without one (a state that storage saved itself) ends in its
// own checksum, never in the magic.
const historySectionMagic = "GEOHIST1"

// HistorySectionWriter appends a history section to a snapshot's bytes.
type HistorySectionWriter struct {
	buf      []byte
	stateLen int
	n        uint64
}

// NewHistorySection starts a history section after state, which it
// appends to.
func NewHistorySection(state []byte) *HistorySectionWriter {
	return &HistorySectionWriter{buf: state, stateLen: len(state)}
}

// Add appends one event; events come in (entity id, timestamp) order.
func (w *HistorySectionWriter) Add(ev *GeoEvent) {
	var r [RecordSize]byte
	ev.PutRecord(r[:])
	w.buf = append(w.buf, r[:]...)
	w.n++
}

// Finish appends the section's trailer and returns the whole.
func (w *HistorySectionWriter) Finish() []byte {
	b := binary.LittleEndian.AppendUint64(w.buf, w.n)
	b = binary.LittleEndian.AppendUint64(b, uint64(w.stateLen))
	return append(b, historySectionMagic...)
}

// SplitHistory splits a snapshot's bytes into the state and its history
// section's events. ok is false when data has no history section (state is
// then data whole); an error is a section that is damaged.
func SplitHistory(data []byte) (state []byte, events []GeoEvent, ok bool, err error) {
	const trailer = 24
	if len(data) < trailer || string(data[len(data)-8:]) != historySectionMagic {
		return data, nil, false, nil
	}
	n := binary.LittleEndian.Uint64(data[len(data)-trailer:])
	stateLen := binary.LittleEndian.Uint64(data[len(data)-16:])
	body := uint64(len(data) - trailer)
	if stateLen > body || (body-stateLen)%RecordSize != 0 || (body-stateLen)/RecordSize != n {
		return nil, nil, true, Errorf(Corruption, "a snapshot's history section of %d events does not fit its %d bytes", n, len(data))
	}
	state = data[:stateLen]
	events = make([]GeoEvent, 0, n)
	for off := stateLen; off < body; off += RecordSize {
		ev, err := DecodeRecord(data[off : off+RecordSize])
		if err != nil {
			return nil, nil, true, Errorf(Corruption, "a snapshot's history section holds a bad event: %v", err)
		}
		events = append(events, ev)
	}
	return state, events, true, nil
}

// HistoryReader is a consistent view of a history store: io/history's
// View, or statemachine's MemStore.
type HistoryReader interface {
	// Get returns the event of id at ts.
	Get(id Uint128, ts uint64) (ev GeoEvent, found bool, err error)
	// Range answers r, appending to dst: more is set when r's limit
	// stopped it before the range's end.
	Range(r HistoryRange, dst []GeoEvent) (events []GeoEvent, more bool, err error)
}

// AnswerHistoryReads answers reads from v (HistoryAnswer says how).
func AnswerHistoryReads(v HistoryReader, reads []HistoryRead) []HistoryAnswer {
	out := make([]HistoryAnswer, len(reads))
	for i, rd := range reads {
		a := &out[i]
		switch rd.Kind {
		case HistoryGet:
			a.Event, a.Found, a.Err = v.Get(rd.EntityID, rd.TS)
		case HistoryScan:
			*a = scanOlder(v, rd)
		case HistoryRangeRead:
			a.Events, a.More, a.Err = v.Range(rd.Range, nil)
		default:
			a.Err = Errorf(InternalError, "unknown history read kind %d", rd.Kind)
		}
	}
	return out
}

// scanPage is how many events a scan reads a step.
const scanPage = 4096

// scanOlder answers a HistoryScan by reading the entity's events below Below.
func scanOlder(v HistoryReader, rd HistoryRead) HistoryAnswer {
	var a HistoryAnswer
	if rd.Below == 0 {
		return a
	}
	r := HistoryRange{EntityID: rd.EntityID, SinceNS: 0, UntilNS: rd.Below - 1, Limit: scanPage}
	buf := make([]GeoEvent, 0, scanPage)
	for {
		evs, more, err := v.Range(r, buf[:0])
		if err != nil {
			return HistoryAnswer{Err: err}
		}
		for i := range evs {
			d := RemovalDue(&evs[i])
			a.SoonestDue = SoonerDue(a.SoonestDue, d)
			if HistoryExpiredAt(&evs[i], rd.TS) {
				a.Expired++
			} else {
				a.NextDue = SoonerDue(a.NextDue, d)
			}
		}
		if !more || len(evs) == 0 {
			return a
		}
		last := evs[len(evs)-1].TimestampNS
		if last >= r.UntilNS {
			return a
		}
		r.SinceNS = last + 1
		buf = evs
	}
}

// AppendHistorySection appends a history section to state: the events of
// ids (which every event of v belongs to) from v. It sorts ids.
func AppendHistorySection(state []byte, v HistoryReader, ids []Uint128) ([]byte, error) {
	slices.SortFunc(ids, Uint128.Compare)
	w := NewHistorySection(state)
	for _, id := range ids {
		r := HistoryRange{EntityID: id, UntilNS: ^uint64(0), Limit: scanPage}
		for {
			evs, more, err := v.Range(r, nil)
			if err != nil {
				return nil, err
			}
			for i := range evs {
				w.Add(&evs[i])
			}
			if !more || len(evs) == 0 || evs[len(evs)-1].TimestampNS == ^uint64(0) {
				break
			}
			r.SinceNS = evs[len(evs)-1].TimestampNS + 1
		}
	}
	return w.Finish(), nil
}
