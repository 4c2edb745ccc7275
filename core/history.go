package core

// History on disk. An entity's latest event lives in the state machine's
// memory; every event it has stored, the latest included, lives in the
// history store, an LSM on disk keyed by (entity id, timestamp). The
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
	// HistoryDeleteEvent removes the event of EntityID at timestamp TS.
	HistoryDeleteEvent
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
