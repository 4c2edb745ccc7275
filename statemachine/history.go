package statemachine

import (
	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/statemachine/internal/btree"
)

// older is what memory keeps of one entity's older events, which live in
// the history store (see core/history.go): facts that settle most writes
// without reading the store.
//
//   - n is exact: the older events stored, expired ones too until cleanup
//     removes them.
//   - first is at most the oldest older event's timestamp (exact until
//     cleanup removes events, a lower bound after): no older event lies
//     below it, so a client timestamp below it needs no read.
//   - due is at most the soonest removal due (core.RemovalDue) of the
//     older events, 0 when none has a TTL: exact while events are only
//     added, a lower bound once an upsert replaces an older event (the one
//     replaced may have been the soonest). Cleanup reads the store for the
//     exact value before it counts the entity (see CleanupExpired).
type older struct {
	n     int
	first uint64
	due   uint64
}

// len is the number of older events; 0 for a nil one.
func (h *older) len() int {
	if h == nil {
		return 0
	}
	return h.n
}

// add counts a new older event ev.
func (h *older) add(ev *core.GeoEvent) {
	if h.n == 0 || ev.TimestampNS < h.first {
		h.first = ev.TimestampNS
	}
	h.n++
	h.due = core.SoonerDue(h.due, core.RemovalDue(ev))
}

// expiredAt reports whether an older event has expired at t.
func expiredAt(ev *core.GeoEvent, t uint64) bool { return core.HistoryExpiredAt(ev, t) }

// The history writes and reads of one operation. Applying an operation
// appends the writes it makes to the store to writes, in order; the
// caller takes them (TakeHistoryWrites) and queues them to the store
// after those of earlier operations. An operation whose outcome depends on
// what the store holds gets its answers first: the caller asks the state
// machine what it needs (WriteNeeds, CleanupNeeds), has the store answer
// at that operation's place in the log, hands the answers in (Provide),
// then applies the operation, which reads them alone: applying is a pure
// function of the state, the operation and the answers.
type historyIO struct {
	writes []core.HistoryWrite

	// applied is what the operations applied since TakeApplied did to
	// entities' events (core.AppliedWrites): a put of every event put, the
	// latest included, and an entity deletion of every entity removed.
	// The slice is reused: TakeApplied's result holds until the next
	// operation.
	applied []core.HistoryWrite

	// The answers provided for the next operation: gets by key, scans by
	// entity. Cleared after each operation that reads them.
	gets  map[eventKey]core.HistoryAnswer
	scans map[core.Uint128]core.HistoryAnswer

	// What an upsert batch has done so far to keys and entities, which
	// overrides the store's answers (as of before the batch): by key, the
	// event it put at a client timestamp, or none where it replaced the
	// latest event by one at a fresh timestamp (nil map until the first);
	// the entities it removed (expired).
	batchKeys map[eventKey]batchKey
	removed   map[core.Uint128]struct{}
}

// batchKey is what a batch left at a key: an event, or none (!present).
type batchKey struct {
	ev      core.GeoEvent
	present bool
}

// TakeHistoryWrites returns the history writes of the operations applied
// since the last call, in order, and forgets them. The slice is the
// caller's.
func (sm *StateMachine) TakeHistoryWrites() []core.HistoryWrite {
	w := sm.hio.writes
	sm.hio.writes = nil
	return w
}

// TakeApplied returns what the operations applied since the last call
// did to entities' events (see historyIO.applied), and forgets it. The
// slice holds until the next operation is applied.
func (sm *StateMachine) TakeApplied() []core.HistoryWrite {
	a := sm.hio.applied
	sm.hio.applied = a[:0]
	return a
}

// putWrite is the write that stores ev under its entity and timestamp.
func putWrite(ev *core.GeoEvent) core.HistoryWrite {
	return core.HistoryWrite{Kind: core.HistoryPut, EntityID: ev.EntityID, TS: ev.TimestampNS, Event: *ev}
}

func (sm *StateMachine) histPut(ev *core.GeoEvent) {
	sm.hio.writes = append(sm.hio.writes, putWrite(ev))
}

func (sm *StateMachine) histDelete(kind core.HistoryWriteKind, id core.Uint128, ts uint64) {
	sm.hio.writes = append(sm.hio.writes, core.HistoryWrite{Kind: kind, EntityID: id, TS: ts})
}

// Provide hands in the answers to reads (answers[i] answers reads[i]) that
// the next operation applied needs (WriteNeeds, CleanupNeeds). Answers of
// reads it did not ask are ignored.
func (sm *StateMachine) Provide(reads []core.HistoryRead, answers []core.HistoryAnswer) {
	for i, rd := range reads {
		if i >= len(answers) {
			break
		}
		switch rd.Kind {
		case core.HistoryGet:
			if sm.hio.gets == nil {
				sm.hio.gets = make(map[eventKey]core.HistoryAnswer)
			}
			sm.hio.gets[eventKey{rd.EntityID, rd.TS}] = answers[i]
		case core.HistoryScan:
			if sm.hio.scans == nil {
				sm.hio.scans = make(map[core.Uint128]core.HistoryAnswer)
			}
			sm.hio.scans[rd.EntityID] = answers[i]
		}
	}
}

// DropAnswers forgets the answers provided: the caller did not apply the
// operation they were for (a duplicate of a session's request).
func (sm *StateMachine) DropAnswers() { sm.endOperation() }

// endOperation forgets the answers and the batch's puts.
func (sm *StateMachine) endOperation() {
	clear(sm.hio.gets)
	clear(sm.hio.scans)
	sm.hio.batchKeys, sm.hio.removed = nil, nil
}

// WriteNeeds appends to dst the reads that applying an insert or upsert
// of events needs, and returns it: a point get
// for each client timestamp that lies among an entity's older events
// stored before the batch, [first, latest). Any other timestamp is
// settled by memory: a fresh one is above every stored one, the latest's
// is memory's, one above the latest or below the first lies where no
// event is, and the batch's own earlier events (an upsert batch's puts,
// and the latest events it made older ones) are the state machine's to
// remember.
func (sm *StateMachine) WriteNeeds(events []core.GeoEvent, dst []core.HistoryRead) []core.HistoryRead {
	for i := range events {
		ev := &events[i]
		if ev.TimestampNS == 0 {
			continue
		}
		slot, ok := sm.ids.get(ev.EntityID)
		if !ok {
			continue
		}
		e := sm.store.at(slot)
		h := sm.store.older(slot)
		if ev.TimestampNS >= e.ts || h.len() == 0 || ev.TimestampNS < h.first {
			continue
		}
		dst = append(dst, core.HistoryRead{Kind: core.HistoryGet, EntityID: ev.EntityID, TS: ev.TimestampNS})
	}
	return dst
}

// olderAt returns the older event of the entity (stored before the
// operation, unless removed during it) at key k, as the operation's puts
// and the answers provided say.
func (sm *StateMachine) olderAt(k eventKey) (core.GeoEvent, bool) {
	if b, ok := sm.hio.batchKeys[k]; ok {
		return b.ev, b.present
	}
	if _, gone := sm.hio.removed[k.id]; gone {
		return core.GeoEvent{}, false
	}
	a, ok := sm.hio.gets[k]
	if !ok || !a.Found {
		return core.GeoEvent{}, false
	}
	return a.Event, true
}

// CleanupNeeds appends to dst the reads that applying a cleanup at opTS
// with req needs, given the answers provided so far, and returns it; nil
// when it needs no more. The caller asks again after providing answers,
// until it needs none: a scan may show that an entity's removal due, of
// which memory keeps a lower bound, has not come, and cleanup then takes
// the next entity in its place.
func (sm *StateMachine) CleanupNeeds(opTS uint64, req *core.CleanupRequest, dst []core.HistoryRead) []core.HistoryRead {
	budget, err := cleanupBudget(req)
	if err != nil {
		return dst
	}
	start := len(dst)
	taken := uint32(0)
	it := sm.olderDue.SeekGE(btree.Key{})
	ex := sm.expiry.SeekGE(btree.Key{})
	for taken+uint32(len(dst)-start) < budget {
		var id core.Uint128
		switch {
		case ex.Valid() && ex.Key().A <= opTS && (!it.Valid() || ex.Key().Less(it.Key())):
			ex.Next()
			taken++
			continue
		case it.Valid() && it.Key().A <= opTS:
			id = it.Key().ID
			slot := it.Value()
			it.Next()
			if !sm.store.at(slot).visible(opTS) {
				continue // taken by its expiry key
			}
			a, ok := sm.hio.scans[id]
			if !ok {
				dst = append(dst, core.HistoryRead{Kind: core.HistoryScan, EntityID: id, TS: opTS, Below: sm.store.at(slot).ts})
				continue
			}
			if a.Err == nil && (a.SoonestDue == 0 || a.SoonestDue > opTS) {
				continue // not due: not taken
			}
			taken++
		default:
			return dst
		}
	}
	return dst
}

// SyncStore is a history store that answers at once: a test's, or a
// tool's that keeps history in memory. A state machine given one (Attach)
// reads and writes it itself in Insert, Upsert, DeleteEntities and
// CleanupExpired, so that they need no WriteNeeds, Provide or
// TakeHistoryWrites around them. A replica never gives it one: its store
// answers later, as inputs.
type SyncStore interface {
	Apply(writes []core.HistoryWrite)
	Answer(reads []core.HistoryRead) []core.HistoryAnswer
}

// Attach makes s the state machine's SyncStore (nil: none).
func (sm *StateMachine) Attach(s SyncStore) { sm.sync = s }

// syncBegin starts an operation of a state machine with a SyncStore: it
// forgets what earlier operations applied, which nobody takes there
// (TakeApplied then reports the last operation's alone) and which, kept,
// would grow with every event applied.
func (sm *StateMachine) syncBegin() { sm.hio.applied = sm.hio.applied[:0] }

func (sm *StateMachine) syncProvide(reads []core.HistoryRead) {
	if len(reads) > 0 {
		sm.Provide(reads, sm.sync.Answer(reads))
	}
}

func (sm *StateMachine) syncWrites() {
	if w := sm.TakeHistoryWrites(); len(w) > 0 {
		sm.sync.Apply(w)
	}
}
