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
)

var opNames = [...]string{
	OpInvalid: "invalid", OpInsert: "insert", OpUpsert: "upsert", OpDeleteEntities: "delete_entities",
	OpTTLSet: "ttl_set", OpTTLExtend: "ttl_extend", OpTTLClear: "ttl_clear",
	OpCleanupExpired: "cleanup_expired", OpQueryRadius: "query_radius", OpQueryPolygon: "query_polygon",
	OpGetLatest: "get_latest", OpGetLatestBatch: "get_latest_batch", OpQueryLatest: "query_latest",
	OpEntityHistory: "entity_history", OpStats: "stats", OpStatus: "status", OpTopology: "topology",
	OpPing: "ping",
}

func (op Operation) String() string {
	if int(op) < len(opNames) {
		return opNames[op]
	}
	return "unknown"
}

// Valid reports whether op is a known operation.
func (op Operation) Valid() bool { return op > OpInvalid && op <= OpPing }

// Mutates reports whether op changes the state machine's state.
func (op Operation) Mutates() bool {
	switch op {
	case OpInsert, OpUpsert, OpDeleteEntities, OpTTLSet, OpTTLExtend, OpTTLClear, OpCleanupExpired:
		return true
	}
	return false
}
