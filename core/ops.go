package core

// Operation names one operation of SPEC.md (plus entity history, an
// addition). Values are stable: they travel in the log and on the wire.
type Operation uint8

const (
	OpInvalid        Operation = 0
	OpInsert         Operation = 1  // POST /events, mode insert
	OpUpsert         Operation = 2  // POST /events, mode upsert
	OpDeleteEntities Operation = 3  // DELETE /entities
	OpTTLSet         Operation = 4  // POST /ttl/set
	OpTTLExtend      Operation = 5  // POST /ttl/extend
	OpTTLClear       Operation = 6  // POST /ttl/clear
	OpCleanupExpired Operation = 7  // POST /cleanup/expired
	OpQueryRadius    Operation = 8  // POST /query/radius
	OpQueryPolygon   Operation = 9  // POST /query/polygon
	OpGetLatest      Operation = 10 // GET /entity/{id}
	OpGetLatestBatch Operation = 11 // POST /entities/batch
	OpQueryLatest    Operation = 12 // POST /query/latest
	OpEntityHistory  Operation = 13 // GET /entity/{id}/history
	OpStats          Operation = 14 // GET /stats
	OpStatus         Operation = 15 // GET /status
	OpTopology       Operation = 16 // GET /topology
	OpPing           Operation = 17 // GET /ping
	OpQueryBBox      Operation = 18 // POST /query/bbox
	OpQueryNearest   Operation = 19 // POST /query/nearest
)

// String returns the operation's name in the table (Op.Name).
func (op Operation) String() string {
	if op.Valid() {
		return opName(op)
	}
	if op == OpInvalid {
		return "invalid"
	}
	return "unknown"
}

// Valid reports whether op is a known operation: one with an entry in the
// operation table.
func (op Operation) Valid() bool { return int(op) < len(opTable) && opTable[op] != nil }

// Mutates reports whether op changes the state machine's state (Op.Writes).
func (op Operation) Mutates() bool { return op.Valid() && opWrites(op) }
