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
//
// Requests (AppendRequest / DecodeRequest; the value's Go type):
//
//	insert, upsert        *InsertRequest      events
//	delete_entities       *DeleteRequest      ids
//	ttl_set               *TTLSetRequest      id, u32 ttl_seconds
//	ttl_extend            *TTLExtendRequest   id, u32 extend_by_seconds
//	ttl_clear             *TTLClearRequest    id
//	cleanup_expired       *CleanupRequest     u32 max_entries
//	query_radius          *RadiusQuery        coord center, u64 radius_mm, group, page
//	query_polygon         *PolygonQuery       ring vertices, u16 hole count, hole count rings, group, page
//	get_latest            *Uint128            id
//	get_latest_batch      *IDList             ids
//	query_latest          *LatestQuery        u64 since_ns, group, page
//	entity_history        *HistoryQuery       id, u64 since_ns, u64 until_ns, page
//	stats, status,        nil                 empty
//	topology, ping
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
//	query_radius          *QueryResult        events, then one u64 distance_mm per event, bool has_more, str cursor
//	query_polygon,        *QueryResult        events, bool has_more, str cursor (DistancesMM must be empty)
//	query_latest,
//	entity_history
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
// table above), to dst.
func AppendRequest(dst []byte, op Operation, req any) ([]byte, error) {
	e := encoder{b: dst, op: op, what: "request"}
	switch op {
	case OpInsert, OpUpsert:
		r, ok := value[InsertRequest](req)
		if !ok {
			return dst, wrongType("request", op, req, "*InsertRequest")
		}
		e.events(r.Events)
	case OpDeleteEntities:
		r, ok := value[DeleteRequest](req)
		if !ok {
			return dst, wrongType("request", op, req, "*DeleteRequest")
		}
		e.ids(r.EntityIDs)
	case OpTTLSet:
		r, ok := value[TTLSetRequest](req)
		if !ok {
			return dst, wrongType("request", op, req, "*TTLSetRequest")
		}
		e.id(r.EntityID)
		e.u32(r.TTLSeconds)
	case OpTTLExtend:
		r, ok := value[TTLExtendRequest](req)
		if !ok {
			return dst, wrongType("request", op, req, "*TTLExtendRequest")
		}
		e.id(r.EntityID)
		e.u32(r.ExtendBySeconds)
	case OpTTLClear:
		r, ok := value[TTLClearRequest](req)
		if !ok {
			return dst, wrongType("request", op, req, "*TTLClearRequest")
		}
		e.id(r.EntityID)
	case OpCleanupExpired:
		r, ok := value[CleanupRequest](req)
		if !ok {
			return dst, wrongType("request", op, req, "*CleanupRequest")
		}
		e.u32(r.MaxEntries)
	case OpQueryRadius:
		r, ok := value[RadiusQuery](req)
		if !ok {
			return dst, wrongType("request", op, req, "*RadiusQuery")
		}
		e.coord(r.Center)
		e.u64(r.RadiusMM)
		e.group(r.Group)
		e.page(r.Page)
	case OpQueryPolygon:
		r, ok := value[PolygonQuery](req)
		if !ok {
			return dst, wrongType("request", op, req, "*PolygonQuery")
		}
		e.ring(r.Vertices, "vertices")
		if len(r.Holes) > maxU16Count {
			e.fail(PolygonTooComplex, "%d holes; the encoding carries at most %d", len(r.Holes), maxU16Count)
		}
		e.u16(uint16(len(r.Holes)))
		for _, h := range r.Holes {
			e.ring(h, "hole")
		}
		e.group(r.Group)
		e.page(r.Page)
	case OpGetLatest:
		r, ok := value[Uint128](req)
		if !ok {
			return dst, wrongType("request", op, req, "*Uint128")
		}
		e.id(*r)
	case OpGetLatestBatch:
		var ids []Uint128
		if r, ok := value[IDList](req); ok {
			ids = *r
		} else if r, ok := value[[]Uint128](req); ok {
			ids = *r
		} else {
			return dst, wrongType("request", op, req, "*IDList")
		}
		e.ids(ids)
	case OpQueryLatest:
		r, ok := value[LatestQuery](req)
		if !ok {
			return dst, wrongType("request", op, req, "*LatestQuery")
		}
		e.u64(r.SinceNS)
		e.group(r.Group)
		e.page(r.Page)
	case OpEntityHistory:
		r, ok := value[HistoryQuery](req)
		if !ok {
			return dst, wrongType("request", op, req, "*HistoryQuery")
		}
		e.id(r.EntityID)
		e.u64(r.SinceNS)
		e.u64(r.UntilNS)
		e.page(r.Page)
	case OpStats, OpStatus, OpTopology, OpPing:
		if req != nil {
			return dst, wrongType("request", op, req, "nil")
		}
	default:
		return dst, Errorf(UnknownOperation, "unknown operation %d", op)
	}
	if e.err != nil {
		return dst, e.err
	}
	return e.b, nil
}

// DecodeRequest decodes the request of op from b (see the table above for
// the type of the value).
func DecodeRequest(op Operation, b []byte) (any, error) {
	d := decoder{b: b, op: op, what: "request"}
	var v any
	switch op {
	case OpInsert, OpUpsert:
		v = &InsertRequest{Events: d.events()}
	case OpDeleteEntities:
		v = &DeleteRequest{EntityIDs: d.ids()}
	case OpTTLSet:
		v = &TTLSetRequest{EntityID: d.id(), TTLSeconds: d.u32()}
	case OpTTLExtend:
		v = &TTLExtendRequest{EntityID: d.id(), ExtendBySeconds: d.u32()}
	case OpTTLClear:
		v = &TTLClearRequest{EntityID: d.id()}
	case OpCleanupExpired:
		v = &CleanupRequest{MaxEntries: d.u32()}
	case OpQueryRadius:
		v = &RadiusQuery{Center: d.coord(), RadiusMM: d.u64(), Group: d.group(), Page: d.page()}
	case OpQueryPolygon:
		q := &PolygonQuery{Vertices: d.ring("vertices")}
		if n := d.count16(2, "holes"); n > 0 {
			q.Holes = make([][]Coordinate, n)
			for i := range q.Holes {
				q.Holes[i] = d.ring("hole")
			}
		}
		q.Group = d.group()
		q.Page = d.page()
		v = q
	case OpGetLatest:
		id := d.id()
		v = &id
	case OpGetLatestBatch:
		ids := IDList(d.ids())
		v = &ids
	case OpQueryLatest:
		v = &LatestQuery{SinceNS: d.u64(), Group: d.group(), Page: d.page()}
	case OpEntityHistory:
		v = &HistoryQuery{EntityID: d.id(), SinceNS: d.u64(), UntilNS: d.u64(), Page: d.page()}
	case OpStats, OpStatus, OpTopology, OpPing:
		v = nil
	default:
		return nil, Errorf(UnknownOperation, "unknown operation %d", op)
	}
	if err := d.finish(); err != nil {
		return nil, err
	}
	return v, nil
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

// AppendReply appends the encoding of reply, the reply of op (see the table
// above), to dst.
func AppendReply(dst []byte, op Operation, reply any) ([]byte, error) {
	e := encoder{b: dst, op: op, what: "reply"}
	switch op {
	case OpInsert, OpUpsert:
		r, ok := value[InsertReply](reply)
		if !ok {
			return dst, wrongType("reply", op, reply, "*InsertReply")
		}
		if len(r.Results) > MaxEnvelopeEvents {
			e.fail(InternalError, "%d results exceed %d", len(r.Results), MaxEnvelopeEvents)
		}
		// Grown once (with room for the checksum of the frame that
		// usually ends it): a 10,000-event batch's reply is 150 KB,
		// which growing by appends allocated about 4.5 times over.
		e.b = slices.Grow(e.b, 5+insertResultSize*len(r.Results)+FrameChecksumSize)
		e.bool(r.Committed)
		e.u32(uint32(len(r.Results)))
		for _, res := range r.Results {
			e.u32(res.Index)
			e.u16(uint16(res.Code))
			e.bool(res.Updated)
			e.u64(res.TimestampNS)
		}
	case OpDeleteEntities:
		r, ok := value[DeleteReply](reply)
		if !ok {
			return dst, wrongType("reply", op, reply, "*DeleteReply")
		}
		e.u32(r.Deleted)
		e.u32(r.NotFound)
	case OpTTLSet:
		r, ok := value[TTLSetReply](reply)
		if !ok {
			return dst, wrongType("reply", op, reply, "*TTLSetReply")
		}
		e.u64(r.ExpiresAtNS)
	case OpTTLExtend:
		r, ok := value[TTLExtendReply](reply)
		if !ok {
			return dst, wrongType("reply", op, reply, "*TTLExtendReply")
		}
		e.u64(r.PreviousExpiresAtNS)
		e.u64(r.NewExpiresAtNS)
	case OpTTLClear:
		r, ok := value[TTLClearReply](reply)
		if !ok {
			return dst, wrongType("reply", op, reply, "*TTLClearReply")
		}
		e.u64(r.PreviousExpiresAtNS)
		e.bool(r.HadTTL)
	case OpCleanupExpired:
		r, ok := value[CleanupReply](reply)
		if !ok {
			return dst, wrongType("reply", op, reply, "*CleanupReply")
		}
		e.u32(r.Scanned)
		e.u32(r.Removed)
	case OpQueryRadius, OpQueryPolygon, OpQueryLatest, OpEntityHistory:
		r, ok := value[QueryResult](reply)
		if !ok {
			return dst, wrongType("reply", op, reply, "*QueryResult")
		}
		// Size the whole reply at once (and the checksum of the frame
		// that usually ends it): growing it by the distances after the
		// events would copy a result of up to a megabyte again.
		e.b = slices.Grow(e.b, 4+len(r.Events)*RecordSize+8*len(r.DistancesMM)+1+2+len(r.Cursor)+FrameChecksumSize)
		e.events(r.Events)
		if op == OpQueryRadius {
			if len(r.DistancesMM) != len(r.Events) {
				e.fail(InternalError, "%d distances for %d events", len(r.DistancesMM), len(r.Events))
			}
			for _, d := range r.DistancesMM {
				e.u64(d)
			}
		} else if len(r.DistancesMM) != 0 {
			e.fail(InternalError, "distances in a %s result", op)
		}
		e.bool(r.HasMore)
		e.str(r.Cursor)
	case OpGetLatest:
		r, ok := value[LatestResult](reply)
		if !ok {
			return dst, wrongType("reply", op, reply, "*LatestResult")
		}
		e.latest(r)
	case OpGetLatestBatch:
		var rs []LatestResult
		if r, ok := value[LatestResults](reply); ok {
			rs = *r
		} else if r, ok := value[[]LatestResult](reply); ok {
			rs = *r
		} else {
			return dst, wrongType("reply", op, reply, "*LatestResults")
		}
		if len(rs) > MaxEnvelopeIDs {
			e.fail(InternalError, "%d results exceed %d", len(rs), MaxEnvelopeIDs)
		}
		e.b = slices.Grow(e.b, 4+len(rs)*(1+RecordSize)+FrameChecksumSize) // at most, once
		e.u32(uint32(len(rs)))
		for i := range rs {
			e.latest(&rs[i])
		}
	case OpStats:
		r, ok := value[Stats](reply)
		if !ok {
			return dst, wrongType("reply", op, reply, "*Stats")
		}
		e.u64(r.EventCount)
		e.u64(r.EntityCount)
		e.u64(r.StorageBytes)
		e.u64(r.IndexBytes)
		e.u64(r.ReplicationLagMS)
	case OpStatus:
		r, ok := value[StatusReply](reply)
		if !ok {
			return dst, wrongType("reply", op, reply, "*StatusReply")
		}
		e.u64(r.EventsCount)
		e.u64(r.EntitiesCount)
		e.u64(r.IndexBytes)
		e.u64(r.UptimeSeconds)
		e.str(r.Version)
		e.str(r.ClusterState)
		e.str(r.NodeID)
		e.id(r.ClusterID)
	case OpTopology:
		r, ok := value[TopologyReply](reply)
		if !ok {
			return dst, wrongType("reply", op, reply, "*TopologyReply")
		}
		e.u64(r.Version)
		e.u32(r.ReplicaCount)
		e.u32(r.Primary)
		if len(r.Nodes) > maxU16Count {
			e.fail(InternalError, "%d nodes exceed %d", len(r.Nodes), maxU16Count)
		}
		e.u16(uint16(len(r.Nodes)))
		for _, n := range r.Nodes {
			e.str(n.NodeID)
			e.str(n.Address)
			e.str(n.Status)
			e.u64(n.LastContactMS)
			e.u64(n.LagMS)
		}
		e.id(r.ClusterID)
	case OpPing:
		r, ok := value[PingReply](reply)
		if !ok {
			return dst, wrongType("reply", op, reply, "*PingReply")
		}
		e.bool(r.Pong)
		e.str(r.Reason)
	default:
		return dst, Errorf(UnknownOperation, "unknown operation %d", op)
	}
	if e.err != nil {
		return dst, e.err
	}
	return e.b, nil
}

// insertResultSize is the encoded size of one EventResult: u32 index, u16
// code, bool updated, u64 timestamp_ns.
const insertResultSize = 4 + 2 + 1 + 8

// DecodeReply decodes the reply of op from b (see the table above for the
// type of the value).
func DecodeReply(op Operation, b []byte) (any, error) {
	d := decoder{b: b, op: op, what: "reply"}
	var v any
	switch op {
	case OpInsert, OpUpsert:
		r := &InsertReply{Committed: d.bool()}
		if n := d.count32(insertResultSize, MaxEnvelopeEvents, "results"); n > 0 {
			r.Results = make([]EventResult, n)
			for i := range r.Results {
				r.Results[i] = EventResult{Index: d.u32(), Code: Code(d.u16()), Updated: d.bool(), TimestampNS: d.u64()}
			}
		}
		v = r
	case OpDeleteEntities:
		v = &DeleteReply{Deleted: d.u32(), NotFound: d.u32()}
	case OpTTLSet:
		v = &TTLSetReply{ExpiresAtNS: d.u64()}
	case OpTTLExtend:
		v = &TTLExtendReply{PreviousExpiresAtNS: d.u64(), NewExpiresAtNS: d.u64()}
	case OpTTLClear:
		v = &TTLClearReply{PreviousExpiresAtNS: d.u64(), HadTTL: d.bool()}
	case OpCleanupExpired:
		v = &CleanupReply{Scanned: d.u32(), Removed: d.u32()}
	case OpQueryRadius, OpQueryPolygon, OpQueryLatest, OpEntityHistory:
		r := &QueryResult{Events: d.events()}
		if op == OpQueryRadius && len(r.Events) > 0 {
			if d.need(8*len(r.Events), "distances") {
				r.DistancesMM = make([]uint64, len(r.Events))
				for i := range r.DistancesMM {
					r.DistancesMM[i] = d.u64()
				}
			}
		}
		r.HasMore = d.bool()
		r.Cursor = d.str("cursor")
		v = r
	case OpGetLatest:
		r := d.latest(0)
		v = &r
	case OpGetLatestBatch:
		var rs LatestResults
		if n := d.count32(1, MaxEnvelopeIDs, "results"); n > 0 {
			rs = make(LatestResults, n)
			for i := range rs {
				rs[i] = d.latest(i)
			}
		}
		v = &rs
	case OpStats:
		v = &Stats{EventCount: d.u64(), EntityCount: d.u64(), StorageBytes: d.u64(), IndexBytes: d.u64(), ReplicationLagMS: d.u64()}
	case OpStatus:
		v = &StatusReply{
			EventsCount: d.u64(), EntitiesCount: d.u64(), IndexBytes: d.u64(), UptimeSeconds: d.u64(),
			Version: d.str("version"), ClusterState: d.str("cluster_state"), NodeID: d.str("node_id"),
			ClusterID: d.id(),
		}
	case OpTopology:
		r := &TopologyReply{Version: d.u64(), ReplicaCount: d.u32(), Primary: d.u32()}
		if n := d.count16(22, "nodes"); n > 0 {
			r.Nodes = make([]NodeInfo, n)
			for i := range r.Nodes {
				r.Nodes[i] = NodeInfo{NodeID: d.str("node_id"), Address: d.str("address"), Status: d.str("status"),
					LastContactMS: d.u64(), LagMS: d.u64()}
			}
		}
		r.ClusterID = d.id()
		v = r
	case OpPing:
		v = &PingReply{Pong: d.bool(), Reason: d.str("reason")}
	default:
		return nil, Errorf(UnknownOperation, "unknown operation %d", op)
	}
	if err := d.finish(); err != nil {
		return nil, err
	}
	return v, nil
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
