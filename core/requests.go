package core

// The request and reply values of every state-machine operation. The state
// machine executes them; the wire protocol and the HTTP gateway translate to
// and from them. Zero values mean "not given" where a field is optional.

// Coordinate is a point in nanodegrees (Form B's shape).
type Coordinate struct {
	LatNano, LonNano int64
}

// InsertRequest is a batch for OpInsert or OpUpsert. An event's TimestampNS
// of 0 asks the server to assign one; a non-zero value names (upsert) or sets
// (insert, imports) the event's timestamp. CellID must be set by the leader
// before the request is applied.
type InsertRequest struct {
	Events []GeoEvent
}

// EventResult is the outcome of one event of a batch.
type EventResult struct {
	Index       uint32
	Code        Code
	Updated     bool   // upsert: an existing event was replaced
	TimestampNS uint64 // the event's timestamp as stored (0 when not committed)
}

// InsertReply reports a batch: Committed is false when any event failed, and
// then nothing was written and Results carries every event's code.
type InsertReply struct {
	Committed bool
	Results   []EventResult
}

// DeleteRequest lists entities to erase with their whole history.
type DeleteRequest struct {
	EntityIDs []Uint128
}

// DeleteReply counts the entities deleted and the ones that were not there.
type DeleteReply struct {
	Deleted  uint32
	NotFound uint32
}

// TTLSetRequest sets an entity's expiry to the operation's time plus
// TTLSeconds; 0 means it never expires.
type TTLSetRequest struct {
	EntityID   Uint128
	TTLSeconds uint32
}

// TTLSetReply gives the new expiry (0 = never).
type TTLSetReply struct {
	ExpiresAtNS uint64
}

// TTLExtendRequest moves an entity's expiry later by ExtendBySeconds.
type TTLExtendRequest struct {
	EntityID        Uint128
	ExtendBySeconds uint32
}

// TTLExtendReply gives the expiry before and after.
type TTLExtendReply struct {
	PreviousExpiresAtNS, NewExpiresAtNS uint64
}

// TTLClearRequest makes an entity never expire.
type TTLClearRequest struct {
	EntityID Uint128
}

// TTLClearReply gives the previous expiry; HadTTL is false (JSON null) when
// the entity had none.
type TTLClearReply struct {
	PreviousExpiresAtNS uint64
	HadTTL              bool
}

// CleanupRequest removes expired entities, examining at most MaxEntries
// entries of the expiry index (0 = the default, 10,000).
type CleanupRequest struct {
	MaxEntries uint32
}

// CleanupReply counts the entries examined and the events removed.
type CleanupReply struct {
	Scanned uint32
	Removed uint32
}

// Page is the paging part of every query: Limit 0 means the default (1,000);
// Cursor is the opaque string a previous page returned, or "".
type Page struct {
	Limit  uint32
	Cursor string
}

// GroupFilter restricts a query to one group_id when Set.
type GroupFilter struct {
	Set bool
	ID  uint64
}

// Filter restricts a spatial query's matches by their entity's latest
// event: SinceNS keeps events with timestamps after it (0 = all); FlagsAll
// keeps events whose flags have every one of its bits set; FlagsAny, when
// not 0, keeps events whose flags have at least one of its bits set. The
// zero Filter keeps everything.
type Filter struct {
	SinceNS  uint64
	FlagsAll uint16
	FlagsAny uint16
}

// IsZero reports whether f keeps everything.
func (f Filter) IsZero() bool { return f == Filter{} }

// Match reports whether an event of timestamp ts and flags passes f.
func (f Filter) Match(ts uint64, flags uint16) bool {
	return (f.SinceNS == 0 || ts > f.SinceNS) && flags&f.FlagsAll == f.FlagsAll && (f.FlagsAny == 0 || flags&f.FlagsAny != 0)
}

// RadiusQuery finds the latest positions within RadiusMM of Center.
type RadiusQuery struct {
	Center   Coordinate
	RadiusMM uint64
	Group    GroupFilter
	Filter   Filter
	Page
}

// BBoxQuery finds the latest positions in a box bounded by two parallels
// (MinLatNano <= lat <= MaxLatNano) and two meridians (from MinLonNano
// eastward to MaxLonNano: a box whose MinLonNano exceeds its MaxLonNano
// crosses the antimeridian).
type BBoxQuery struct {
	MinLatNano, MinLonNano int64
	MaxLatNano, MaxLonNano int64
	Group                  GroupFilter
	Filter                 Filter
	Page
}

// NearestQuery finds the Limit (k: 1 to MaxQueryLimit) latest positions
// nearest Center, ordered by distance then entity id, within MaxDistanceMM
// when it is not 0. A page's Cursor continues with the next-nearest.
type NearestQuery struct {
	Center        Coordinate
	MaxDistanceMM uint64
	Group         GroupFilter
	Filter        Filter
	Page
}

// PolygonQuery finds the latest positions inside a polygon with holes.
// Rings may be open or closed (first vertex repeated) and wind either way.
type PolygonQuery struct {
	Vertices []Coordinate
	Holes    [][]Coordinate
	Group    GroupFilter
	Filter   Filter
	Edges    Edges
	Page
}

// Edges says what a polygon's edges are.
type Edges uint8

const (
	// EdgesGeodesic: great-circle arcs, the shortest paths on the sphere
	// (as S2 reads a polygon). The default.
	EdgesGeodesic Edges = 0
	// EdgesPlanar: straight lines in longitude and latitude (as GeoJSON,
	// PostGIS geometry, Turf and Tile38 read a polygon): an edge between
	// two points of one parallel follows the parallel.
	EdgesPlanar Edges = 1
)

// LatestQuery lists entities' latest positions, newest first, with
// timestamps after SinceNS (0 = all).
type LatestQuery struct {
	SinceNS uint64
	Group   GroupFilter
	Page
}

// HistoryQuery lists one entity's events with SinceNS <= timestamp <=
// UntilNS (UntilNS 0 = no upper bound), oldest first.
type HistoryQuery struct {
	EntityID Uint128
	SinceNS  uint64
	UntilNS  uint64
	Page
}

// QueryResult is one page of a query. DistancesMM is parallel to Events in
// radius and nearest query results and nil otherwise. Cursor is set when HasMore.
type QueryResult struct {
	Events      []GeoEvent
	DistancesMM []uint64
	HasMore     bool
	Cursor      string
}

// LatestResult is one entity's latest event, or Found false.
type LatestResult struct {
	Event GeoEvent
	Found bool
}

// Stats are the state machine's counts. StorageBytes counts stored event
// records at RecordSize bytes each; IndexBytes estimates index memory.
// ReplicationLagMS is the leader's: how long the furthest-behind replica
// has not held every entry of the leader's log (0 when all do).
type Stats struct {
	EventCount       uint64
	EntityCount      uint64
	StorageBytes     uint64
	IndexBytes       uint64
	ReplicationLagMS uint64
}
