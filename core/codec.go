package core

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// The operation codec: a compact binary encoding of every operation's request
// and reply value, used in MsgRequest and MsgReply payloads and in the
// replicated log. Every integer is little-endian; encodings have no padding
// and no version byte of their own (the frame and the log carry versions).
//
// Elements:
//
//	u8, u16, u32, u64, i64   fixed-size integers
//	bool                     u8, exactly 0 or 1
//	id                       Uint128, 16 bytes, Lo then Hi (Uint128.PutLE)
//	coord                    i64 lat_nano, i64 lon_nano
//	event                    the 128-byte GeoEvent record (GeoEvent.PutRecord)
//	events                   u32 count (<= MaxEnvelopeEvents), count events
//	ids                      u32 count, count ids
//	ring                     u16 count, count coords
//	str                      u16 length (<= MaxCodecString), bytes
//	group                    bool set, u64 group_id (both always present)
//	page                     u32 limit, str cursor
//	filter                   u64 since_ns, u16 flags_all, u16 flags_any
//	[filter]                 an optional trailing filter: present exactly when it is
//	                         not all zero (so an encoding without one is as before)
//
// Each operation's codecs are an entry of the operation table (optable.go:
// Insert, QueryRadius, ...), typed by the Go types below; AppendRequest,
// DecodeRequest, AppendReply and DecodeReply are its untyped view.
//
// Requests (AppendRequest / DecodeRequest; the value's Go type):
//
//	insert, upsert        *InsertRequest      events
//	delete_entities       *DeleteRequest      ids
//	ttl_set               *TTLSetRequest      id, u32 ttl_seconds
//	ttl_extend            *TTLExtendRequest   id, u32 extend_by_seconds
//	ttl_clear             *TTLClearRequest    id
//	cleanup_expired       *CleanupRequest     u32 max_entries
//	query_radius          *RadiusQuery        coord center, u64 radius_mm, group, page, [filter]
//	query_polygon         *PolygonQuery       ring vertices, u16 hole count, hole count rings, group, page,
//	                                          [filter, u8 edges] (present exactly when either is not zero;
//	                                          edges 0 geodesic, 1 planar)
//	get_latest            *Uint128            id
//	get_latest_batch      *IDList             ids
//	query_latest          *LatestQuery        u64 since_ns, group, page
//	entity_history        *HistoryQuery       id, u64 since_ns, u64 until_ns, page
//	stats, status,        nil                 empty
//	topology, ping
//	query_bbox            *BBoxQuery          coord min (lat, lon), coord max (lat, lon), group, filter, page
//	query_nearest         *NearestQuery       coord center, u64 max_distance_mm, group, filter, page
//	put_fence             *Fence              fence (see Fence's encoder in fences.go)
//	get_fence,            *FenceName          str name
//	delete_fence
//	list_fences           *FenceListRequest   str after, u32 limit
//	read_feed             *FeedRequest        u64 after, u16 count, count str fences, u8 types, u32 limit
//	put_hook              *Hook               hook (see Hook's encoder in hooks.go)
//	get_hook,             *HookName           str name
//	delete_hook
//	list_hooks            *HookListRequest    str after, u32 limit
//	hook_delivered        *HookDelivered      str name, u64 version, u64 seq
//	set_feed_retention    *FeedRetention      u64 max_age_s, u64 max_notifications
//	get_feed_retention    nil                 empty
//
// Replies (AppendReply / DecodeReply):
//
//	insert, upsert        *InsertReply        bool committed, u32 count (<= MaxEnvelopeEvents),
//	                                          count x (u32 index, u16 code, bool updated, u64 timestamp_ns)
//	delete_entities       *DeleteReply        u32 deleted, u32 not_found
//	ttl_set               *TTLSetReply        u64 expires_at_ns
//	ttl_extend            *TTLExtendReply     u64 previous_expires_at_ns, u64 new_expires_at_ns
//	ttl_clear             *TTLClearReply      u64 previous_expires_at_ns, bool had_ttl
//	cleanup_expired       *CleanupReply       u32 scanned, u32 removed
//	query_radius,         *QueryResult        events, then one u64 distance_mm per event, bool has_more, str cursor
//	query_nearest
//	query_polygon,        *QueryResult        events, bool has_more, str cursor (DistancesMM must be empty)
//	query_latest,
//	entity_history,
//	query_bbox
//	get_latest            *LatestResult       bool found, and the event only when found
//	get_latest_batch      *LatestResults      u32 count, count x (bool found, event when found)
//	stats                 *Stats              u64 event_count, u64 entity_count, u64 storage_bytes, u64 index_bytes,
//	                                          u64 replication_lag_ms
//	status                *StatusReply        u64 events_count, u64 entities_count, u64 index_bytes,
//	                                          u64 uptime_seconds, str version, str cluster_state, str node_id,
//	                                          id cluster_id
//	topology              *TopologyReply      u64 version, u32 replica_count, u32 primary,
//	                                          u16 node count, count x (str node_id, str address, str status,
//	                                          u64 last_contact_ms, u64 lag_ms), id cluster_id
//	ping                  *PingReply          bool pong, str reason
//	put_fence             *PutFenceReply      bool created
//	get_fence             *Fence              fence
//	list_fences           *FenceList          u32 count, count fences, bool has_more, u32 total
//	delete_fence          *DeleteFenceReply   bool deleted
//	read_feed             *FeedPage           u32 count, count x (u64 seq, u8 type, str fence, event,
//	                                          bool has_prev, coord prev, u64 op_ns), u64 start, u64 next,
//	                                          bool has_more, [u64 last] (present exactly when not 0)
//	put_hook              *PutHookReply       bool created
//	get_hook              *Hook               hook
//	list_hooks            *HookList           u32 count, count hooks, bool has_more, u32 total, u64 feed_last
//	delete_hook           *DeleteHookReply    bool deleted
//	hook_delivered        *HookDeliveredReply u64 delivered, bool advanced
//	set_feed_retention,   *FeedRetentionReply u64 max_age_s, u64 max_notifications, u64 start, u64 last
//	get_feed_retention
//
// The Append functions accept the value type or a pointer to it (and, for
// get_latest_batch, a plain []Uint128 or []LatestResult); the Decode
// functions return the pointer type of the table. On error, Append returns
// dst unchanged.
//
// Decoders are strict, never panic, and accept exactly the encodings the
// Append functions produce, so an accepted payload re-encodes to the same
// bytes: a truncated element, a count that the remaining bytes cannot hold,
// a bool byte other than 0 or 1, a string over MaxCodecString, more than
// MaxEnvelopeEvents events or trailing bytes are MALFORMED_REQUEST; an
// unknown operation is UNKNOWN_OPERATION; an event record whose reserved
// bytes are not zero is RESERVED_NOT_ZERO (DecodeRecord's code). Counts are
// not checked against the spec's per-operation limits (10,000 events or
// ids, 1,000 vertices, 100 holes): a batch of 10,001 events decodes, and the
// state machine refuses it with its proper code (300, 102).
//
// Decoded values never alias the input.
const (
	// MaxEnvelopeEvents is the most events a native request carries
	// (SPEC.md "Limits": a 10 MiB envelope, up to 81,916 records).
	MaxEnvelopeEvents = 81_916
	// MaxEnvelopeIDs is the most ids a request carries: as many as fit,
	// with the operation byte and count, in MaxFramePayload.
	MaxEnvelopeIDs = (MaxFramePayload - 5) / 16
	// MaxCodecString is the longest string (cursor, status and topology
	// strings, ping reason) the codec carries.
	MaxCodecString = 256
	// maxU16Count is the most elements a u16 count can name.
	maxU16Count = 1<<16 - 1
)

// IDList is the request of get_latest_batch: entity ids in request order.
type IDList []Uint128

// LatestResults is the reply of get_latest_batch: one result per requested
// id, in request order.
type LatestResults []LatestResult

// StatusReply is the reply of status (SPEC.md "Status").
type StatusReply struct {
	EventsCount   uint64
	EntitiesCount uint64
	IndexBytes    uint64
	UptimeSeconds uint64
	Version       string
	ClusterState  string
	NodeID        string
	ClusterID     Uint128 // the cluster the replica belongs to (clients register with it)
}

// TopologyReply is the reply of topology. GeoEvent has one shard whose
// replicas are Nodes in replica order; Primary indexes Nodes. SPEC.md's
// shape follows from it: num_shards 1, replication_factor ReplicaCount, one
// shard with primary Nodes[Primary] and the other nodes as replicas.
type TopologyReply struct {
	Version      uint64
	ReplicaCount uint32
	Primary      uint32
	Nodes        []NodeInfo
	ClusterID    Uint128
}

// NodeInfo is one replica of a topology, as the answering replica knows
// it (package replica's topology says what each status means).
type NodeInfo struct {
	NodeID  string
	Address string // host:port
	Status  string
	// LastContactMS is how long before the answer the replica was last
	// known to be up (it answered the leader; for the leader, it was heard
	// by the answering replica; 0 for the answering replica itself).
	// LagMS is how long, as the leader last told, the replica had not
	// held every entry of the leader's log (0: it held them all). Both are
	// Unknown when the answering replica does not know.
	LastContactMS uint64
	LagMS         uint64
}

// Unknown is NodeInfo's LastContactMS or LagMS when the answering replica
// does not know it.
const Unknown = ^uint64(0)

// PingReply is the reply of ping: Pong false with a Reason when unhealthy.
type PingReply struct {
	Pong   bool
	Reason string
}

// value returns v as a *T when it is a T or a non-nil *T.
func value[T any](v any) (*T, bool) {
	switch x := v.(type) {
	case *T:
		return x, x != nil
	case T:
		return &x, true
	}
	return nil, false
}

func wrongType(what string, op Operation, v any, want string) error {
	return Errorf(InternalError, "%s %s: got %T, want %s", op, what, v, want)
}

// AppendRequest appends the encoding of req, the request of op (see the
// table above), to dst: the untyped form of the table's AppendRequest.
func AppendRequest(dst []byte, op Operation, req any) ([]byte, error) {
	o, ok := Lookup(op)
	if !ok {
		return dst, Errorf(UnknownOperation, "unknown operation %d", op)
	}
	return o.AppendRequestValue(dst, req)
}

// DecodeRequest decodes the request of op from b (see the table above for
// the type of the value): the untyped form of the table's DecodeRequest.
func DecodeRequest(op Operation, b []byte) (any, error) {
	o, ok := Lookup(op)
	if !ok {
		return nil, Errorf(UnknownOperation, "unknown operation %d", op)
	}
	return o.DecodeRequestValue(b)
}

// DecodeBatch decodes the request of an insert or upsert (op) from b, as
// DecodeRequest does, into scratch's memory when it is large enough: the
// events alias scratch, so a caller that decodes batch after batch, and
// keeps none of them past the next, allocates nothing per batch (a
// 10,000-event batch decodes into 1.28 MB).
func DecodeBatch(op Operation, b []byte, scratch []GeoEvent) (*InsertRequest, error) {
	d := decoder{b: b, op: op, what: "request", evBuf: scratch}
	req := &InsertRequest{Events: d.events()}
	if err := d.finish(); err != nil {
		return nil, err
	}
	return req, nil
}

// EventRecords returns the event records of an insert or upsert request
// body b (the request of DecodeRequest, without the operation byte) when b
// is well formed: a u32 count of at most MaxEnvelopeEvents, then exactly
// that many RecordSize-byte records, each with its reserved bytes zero.
// The records alias b. When ok is false, DecodeRequest tells what is wrong.
//
// It lets the leader copy a batch into its log entry without decoding and
// re-encoding every event.
func EventRecords(b []byte) (records []byte, n int, ok bool) {
	if len(b) < 4 {
		return nil, 0, false
	}
	c := binary.LittleEndian.Uint32(b)
	if uint64(c) > MaxEnvelopeEvents || uint64(len(b)-4) != uint64(c)*RecordSize {
		return nil, 0, false
	}
	records = b[4:]
	for off := 0; off < len(records); off += RecordSize {
		r := records[off : off+RecordSize]
		if binary.LittleEndian.Uint64(r[108:]) != 0 || binary.LittleEndian.Uint64(r[116:]) != 0 || binary.LittleEndian.Uint32(r[124:]) != 0 {
			return nil, 0, false
		}
	}
	return records, int(c), true
}

// AppendReply appends the encoding of reply, the reply of op (see the
// table above), to dst: the untyped form of the table's AppendReply.
func AppendReply(dst []byte, op Operation, reply any) ([]byte, error) {
	o, ok := Lookup(op)
	if !ok {
		return dst, Errorf(UnknownOperation, "unknown operation %d", op)
	}
	return o.AppendReplyValue(dst, reply)
}

// insertResultSize is the encoded size of one EventResult: u32 index, u16
// code, bool updated, u64 timestamp_ns.
const insertResultSize = 4 + 2 + 1 + 8

// DecodeReply decodes the reply of op from b (see the table above for the
// type of the value): the untyped form of the table's DecodeReply.
func DecodeReply(op Operation, b []byte) (any, error) {
	o, ok := Lookup(op)
	if !ok {
		return nil, Errorf(UnknownOperation, "unknown operation %d", op)
	}
	return o.DecodeReplyValue(b)
}

// encoder appends elements; the first failure sticks and stops output.
type encoder struct {
	b    []byte
	op   Operation
	what string
	err  error
}

func (e *encoder) fail(info CodeInfo, format string, args ...any) {
	if e.err == nil {
		e.err = Errorf(info, "%s %s: %s", e.op, e.what, fmt.Sprintf(format, args...))
	}
}

func (e *encoder) u16(v uint16) { e.b = binary.LittleEndian.AppendUint16(e.b, v) }
func (e *encoder) u32(v uint32) { e.b = binary.LittleEndian.AppendUint32(e.b, v) }
func (e *encoder) u64(v uint64) { e.b = binary.LittleEndian.AppendUint64(e.b, v) }

func (e *encoder) bool(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

func (e *encoder) id(v Uint128) {
	e.u64(v.Lo)
	e.u64(v.Hi)
}

func (e *encoder) coord(c Coordinate) {
	e.u64(uint64(c.LatNano))
	e.u64(uint64(c.LonNano))
}

func (e *encoder) events(evs []GeoEvent) {
	if len(evs) > MaxEnvelopeEvents {
		e.fail(BatchTooLarge, "%d events; a native request carries at most %d", len(evs), MaxEnvelopeEvents)
		return
	}
	e.u32(uint32(len(evs)))
	n := len(e.b)
	e.b = slices.Grow(e.b, len(evs)*RecordSize)[:n+len(evs)*RecordSize] // one allocation, no temporaries
	for i := range evs {
		evs[i].PutRecord(e.b[n+i*RecordSize:])
	}
}

func (e *encoder) ids(ids []Uint128) {
	if len(ids) > MaxEnvelopeIDs {
		e.fail(BatchTooLarge, "%d entity ids; a native request carries at most %d", len(ids), MaxEnvelopeIDs)
		return
	}
	e.u32(uint32(len(ids)))
	for _, id := range ids {
		e.id(id)
	}
}

func (e *encoder) ring(r []Coordinate, what string) {
	if len(r) > maxU16Count {
		e.fail(PolygonTooComplex, "%s: %d vertices; the encoding carries at most %d", what, len(r), maxU16Count)
		return
	}
	e.u16(uint16(len(r)))
	for _, c := range r {
		e.coord(c)
	}
}

func (e *encoder) str(s string) {
	if len(s) > MaxCodecString {
		info := InternalError
		if e.what == "request" {
			info = InvalidCursor // the only string of a request
		}
		e.fail(info, "a string of %d bytes exceeds %d", len(s), MaxCodecString)
		return
	}
	e.u16(uint16(len(s)))
	e.b = append(e.b, s...)
}

func (e *encoder) group(g GroupFilter) {
	e.bool(g.Set)
	e.u64(g.ID)
}

func (e *encoder) page(p Page) {
	e.u32(p.Limit)
	e.str(p.Cursor)
}

func (e *encoder) filter(f Filter) {
	e.u64(f.SinceNS)
	e.u16(f.FlagsAll)
	e.u16(f.FlagsAny)
}

// optFilter appends f as an optional trailing filter: nothing when it is
// zero.
func (e *encoder) optFilter(f Filter) {
	if !f.IsZero() {
		e.filter(f)
	}
}

func (e *encoder) latest(r *LatestResult) {
	e.bool(r.Found)
	if r.Found {
		e.b = r.Event.AppendRecord(e.b)
	}
}

// decoder consumes elements from b; the first failure sticks, and every
// later read returns zero values.
type decoder struct {
	b     []byte
	op    Operation
	what  string
	err   error
	evBuf []GeoEvent // events decodes into it when it is large enough
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = Errorf(MalformedRequest, "%s %s: %s", d.op, d.what, fmt.Sprintf(format, args...))
	}
	d.b = nil
}

// need reports whether n more bytes are present, failing when not.
func (d *decoder) need(n int, what string) bool {
	if d.err != nil {
		return false
	}
	if n > len(d.b) {
		d.fail("%s truncated: need %d bytes, %d left", what, n, len(d.b))
		return false
	}
	return true
}

func (d *decoder) take(n int, what string) []byte {
	if !d.need(n, what) {
		return nil
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) u8() byte {
	if p := d.take(1, "u8"); p != nil {
		return p[0]
	}
	return 0
}

func (d *decoder) u16() uint16 {
	if p := d.take(2, "u16"); p != nil {
		return binary.LittleEndian.Uint16(p)
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if p := d.take(4, "u32"); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if p := d.take(8, "u64"); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

func (d *decoder) bool() bool {
	switch c := d.u8(); c {
	case 0:
		return false
	case 1:
		return true
	default:
		d.fail("bool byte is %d, want 0 or 1", c)
		return false
	}
}

func (d *decoder) id() Uint128 {
	if p := d.take(16, "id"); p != nil {
		return Uint128FromLE(p)
	}
	return Uint128{}
}

func (d *decoder) coord() Coordinate {
	return Coordinate{LatNano: int64(d.u64()), LonNano: int64(d.u64())}
}

// count32 reads a u32 count of elements of at least elemSize bytes each,
// at most max, that the remaining bytes can hold.
func (d *decoder) count32(elemSize, max int, what string) int {
	n := d.u32()
	if d.err != nil {
		return 0
	}
	if uint64(n) > uint64(max) {
		d.fail("%d %s exceed %d", n, what, max)
		return 0
	}
	if uint64(n)*uint64(elemSize) > uint64(len(d.b)) {
		d.fail("%d %s cannot fit in %d bytes", n, what, len(d.b))
		return 0
	}
	return int(n)
}

// count16 reads a u16 count of elements of at least elemSize bytes each that
// the remaining bytes can hold.
func (d *decoder) count16(elemSize int, what string) int {
	n := int(d.u16())
	if d.err != nil {
		return 0
	}
	if n*elemSize > len(d.b) {
		d.fail("%d %s cannot fit in %d bytes", n, what, len(d.b))
		return 0
	}
	return n
}

// record decodes the request's or reply's event i into ev.
func (d *decoder) record(i int, ev *GeoEvent) bool {
	p := d.take(RecordSize, "event")
	if p == nil {
		return false
	}
	if err := ev.DecodeRecord(p); err != nil {
		if d.err == nil {
			info, msg := MalformedRequest, err.Error()
			if e, ok := err.(*Error); ok {
				info, msg = e.CodeInfo, e.Message
			}
			d.err = Errorf(info, "%s %s: event %d: %s", d.op, d.what, i, msg)
		}
		d.b = nil
		return false
	}
	return true
}

func (d *decoder) events() []GeoEvent {
	n := d.count32(RecordSize, MaxEnvelopeEvents, "events")
	if n == 0 {
		return nil
	}
	evs := d.evBuf[:0]
	if cap(evs) >= n {
		evs = evs[:n]
	} else {
		evs = make([]GeoEvent, n)
	}
	for i := range evs {
		if !d.record(i, &evs[i]) {
			return nil
		}
	}
	return evs
}

func (d *decoder) ids() []Uint128 {
	n := d.count32(16, MaxEnvelopeIDs, "ids")
	if n == 0 {
		return nil
	}
	ids := make([]Uint128, n)
	for i := range ids {
		ids[i] = d.id()
	}
	return ids
}

func (d *decoder) ring(what string) []Coordinate {
	n := d.count16(16, what+" vertices")
	if n == 0 {
		return nil
	}
	r := make([]Coordinate, n)
	for i := range r {
		r[i] = d.coord()
	}
	return r
}

func (d *decoder) str(what string) string {
	n := int(d.u16())
	if d.err != nil {
		return ""
	}
	if n > MaxCodecString {
		d.fail("%s of %d bytes exceeds %d", what, n, MaxCodecString)
		return ""
	}
	return string(d.take(n, what))
}

func (d *decoder) group() GroupFilter {
	return GroupFilter{Set: d.bool(), ID: d.u64()}
}

func (d *decoder) filter() Filter {
	return Filter{SinceNS: d.u64(), FlagsAll: d.u16(), FlagsAny: d.u16()}
}

// optFilter reads an optional trailing filter: the zero Filter when no
// bytes are left; a present filter that is zero is not canonical (its
// encoder writes none), and fails.
func (d *decoder) optFilter() Filter {
	if d.err != nil || len(d.b) == 0 {
		return Filter{}
	}
	f := d.filter()
	if d.err == nil && f.IsZero() {
		d.fail("a trailing filter that is zero")
	}
	return f
}

func (d *decoder) page() Page {
	return Page{Limit: d.u32(), Cursor: d.str("cursor")}
}

func (d *decoder) latest(i int) LatestResult {
	if !d.bool() {
		return LatestResult{}
	}
	var r LatestResult
	r.Found = d.record(i, &r.Event)
	return r
}

// finish fails on trailing bytes and returns the first failure.
func (d *decoder) finish() error {
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	return d.err
}
