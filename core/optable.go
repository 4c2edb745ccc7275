package core

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
)

// The operation table: every operation is one package-level Op value with
// its code, name, whether it writes, and the typed codecs of its request
// and reply (the encodings of codec.go's table). Code that knows the
// operation at compile time uses the Op (Insert.AppendRequest takes an
// *InsertRequest, so a type mistake does not compile); code that reads an
// operation's code off the wire or out of the log looks it up (Lookup),
// and gets the untyped view, OpCodec, of the same entry. Adding an
// operation is a code in ops.go, a variable here and its slot in opTable;
// CONTRIBUTING.md walks through the rest.

// None is the request of the operations that carry none (stats, status,
// topology, ping): it encodes as no bytes. Typed callers pass nil; the
// untyped view's request is nil.
type None struct{}

// Op is one operation of the table: Req and Rep are its request and reply
// types. The zero Op is not an operation; use the table's values.
type Op[Req, Rep any] struct {
	Code   Operation
	Name   string
	Writes bool // the operation changes the state machine's state (it goes through the log)

	// The codecs take and return their encoder or decoder by value: an
	// indirect call's pointer argument escapes, and would cost every
	// encoding and decoding an allocation.
	encReq func(encoder, *Req) encoder
	decReq func(decoder) (*Req, decoder)
	encRep func(encoder, *Rep) encoder
	decRep func(decoder) (*Rep, decoder)
}

// AppendRequest appends the encoding of req to dst. On error it returns
// dst unchanged. A nil req is an INTERNAL_ERROR, except for None.
func (o *Op[Req, Rep]) AppendRequest(dst []byte, req *Req) ([]byte, error) {
	if req == nil && !isNone[Req]() {
		return dst, Errorf(InternalError, "%s request: nil", o.Code)
	}
	e := encoder{b: dst, op: o.Code, what: "request"}
	e = o.encReq(e, req)
	if e.err != nil {
		return dst, e.err
	}
	return e.b, nil
}

// DecodeRequest decodes a request of o from b (see codec.go for what a
// decoder refuses). A None request decodes to nil.
func (o *Op[Req, Rep]) DecodeRequest(b []byte) (*Req, error) {
	d := decoder{b: b, op: o.Code, what: "request"}
	r, d := o.decReq(d)
	if err := d.finish(); err != nil {
		return nil, err
	}
	return r, nil
}

// AppendReply appends the encoding of reply to dst. On error it returns
// dst unchanged; a nil reply is an INTERNAL_ERROR.
func (o *Op[Req, Rep]) AppendReply(dst []byte, reply *Rep) ([]byte, error) {
	if reply == nil {
		return dst, Errorf(InternalError, "%s reply: nil", o.Code)
	}
	e := encoder{b: dst, op: o.Code, what: "reply"}
	e = o.encRep(e, reply)
	if e.err != nil {
		return dst, e.err
	}
	return e.b, nil
}

// DecodeReply decodes a reply of o from b.
func (o *Op[Req, Rep]) DecodeReply(b []byte) (*Rep, error) {
	d := decoder{b: b, op: o.Code, what: "reply"}
	r, d := o.decRep(d)
	if err := d.finish(); err != nil {
		return nil, err
	}
	return r, nil
}

// AppendRequestMessage appends a MsgRequest payload of o: the operation
// byte, then req's encoding. On error dst is returned unchanged.
func (o *Op[Req, Rep]) AppendRequestMessage(dst []byte, req *Req) ([]byte, error) {
	out, err := o.AppendRequest(append(dst, byte(o.Code)), req)
	if err != nil {
		return dst, err
	}
	return out, nil
}

// AppendReplyMessage appends a MsgReply payload of o, as the package's
// AppendReplyMessage does.
func (o *Op[Req, Rep]) AppendReplyMessage(dst []byte, reply *Rep, opErr error) ([]byte, error) {
	out, failed := appendReplyHead(dst, o.Code, opErr)
	if failed {
		return out, nil
	}
	out, err := o.AppendReply(out, reply)
	if err != nil {
		return dst, err
	}
	return out, nil
}

// DecodeReplyMessage decodes a MsgReply payload that answers o, as the
// package's DecodeReplyMessage does; a reply of another operation is
// MALFORMED_REQUEST.
func (o *Op[Req, Rep]) DecodeReplyMessage(p []byte) (reply *Rep, opErr *Error, err error) {
	op, rest, opErr, err := cutReplyHead(p)
	switch {
	case err != nil:
		return nil, nil, err
	case op != o.Code:
		return nil, nil, Errorf(MalformedRequest, "reply for operation %s, want %s", op, o.Code)
	case opErr != nil:
		return nil, opErr, nil
	}
	if reply, err = o.DecodeReply(rest); err != nil {
		return nil, nil, err
	}
	return reply, nil, nil
}

// OpCodec is the untyped view of a table entry, for code that dispatches
// on an operation code read at run time. Its values are the Op's Req and
// Rep as pointers (the append functions also take them by value); a None
// request is nil.
type OpCodec interface {
	Operation() Operation
	AppendRequestValue(dst []byte, req any) ([]byte, error)
	DecodeRequestValue(b []byte) (any, error)
	AppendReplyValue(dst []byte, reply any) ([]byte, error)
	DecodeReplyValue(b []byte) (any, error)

	name() string // the table's entries are the only implementations
	writes() bool
}

// Operation returns o's code.
func (o *Op[Req, Rep]) Operation() Operation { return o.Code }

// AppendRequestValue is AppendRequest for a request of type Req or *Req
// (nil for None).
func (o *Op[Req, Rep]) AppendRequestValue(dst []byte, req any) ([]byte, error) {
	if isNone[Req]() {
		switch req.(type) {
		case nil, None, *None:
			return o.AppendRequest(dst, nil)
		}
		return dst, wrongType("request", o.Code, req, "nil")
	}
	r, ok := valueOf[Req](req)
	if !ok {
		return dst, wrongType("request", o.Code, req, "*"+typeName[Req]())
	}
	return o.AppendRequest(dst, r)
}

// DecodeRequestValue is DecodeRequest with the result as an any (nil for
// None).
func (o *Op[Req, Rep]) DecodeRequestValue(b []byte) (any, error) {
	r, err := o.DecodeRequest(b)
	if err != nil || r == nil {
		return nil, err
	}
	return r, nil
}

// AppendReplyValue is AppendReply for a reply of type Rep or *Rep.
func (o *Op[Req, Rep]) AppendReplyValue(dst []byte, reply any) ([]byte, error) {
	r, ok := valueOf[Rep](reply)
	if !ok {
		return dst, wrongType("reply", o.Code, reply, "*"+typeName[Rep]())
	}
	return o.AppendReply(dst, r)
}

// DecodeReplyValue is DecodeReply with the result as an any.
func (o *Op[Req, Rep]) DecodeReplyValue(b []byte) (any, error) {
	r, err := o.DecodeReply(b)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func isNone[T any]() bool {
	_, ok := any((*T)(nil)).(*None)
	return ok
}

// valueOf returns v as a *T when it is a T or a non-nil *T; the batch
// types also come as the plain slices the state machine uses.
func valueOf[T any](v any) (*T, bool) {
	if r, ok := value[T](v); ok {
		return r, true
	}
	switch x := v.(type) {
	case []Uint128:
		l := IDList(x)
		r, ok := any(&l).(*T)
		return r, ok
	case []LatestResult:
		l := LatestResults(x)
		r, ok := any(&l).(*T)
		return r, ok
	}
	return nil, false
}

// typeName names T for the messages of a caller's type mistake.
func typeName[T any]() string {
	return strings.TrimPrefix(fmt.Sprintf("%T", *new(T)), "core.")
}

// Lookup returns the table entry of op, or false when op names no
// operation.
func Lookup(op Operation) (OpCodec, bool) {
	if !op.Valid() {
		return nil, false
	}
	return opTable[op], true
}

// The table's entries, in code order.
var (
	Insert = &Op[InsertRequest, InsertReply]{Code: OpInsert, Name: "insert", Writes: true,
		encReq: encInsertReq, decReq: decInsertReq, encRep: encInsertRep, decRep: decInsertRep}
	Upsert = &Op[InsertRequest, InsertReply]{Code: OpUpsert, Name: "upsert", Writes: true,
		encReq: encInsertReq, decReq: decInsertReq, encRep: encInsertRep, decRep: decInsertRep}
	DeleteEntities = &Op[DeleteRequest, DeleteReply]{Code: OpDeleteEntities, Name: "delete_entities", Writes: true,
		encReq: func(e encoder, r *DeleteRequest) encoder { e.ids(r.EntityIDs); return e },
		decReq: func(d decoder) (*DeleteRequest, decoder) { r := &DeleteRequest{EntityIDs: d.ids()}; return r, d },
		encRep: func(e encoder, r *DeleteReply) encoder { e.u32(r.Deleted); e.u32(r.NotFound); return e },
		decRep: func(d decoder) (*DeleteReply, decoder) {
			r := &DeleteReply{Deleted: d.u32(), NotFound: d.u32()}
			return r, d
		}}
	TTLSet = &Op[TTLSetRequest, TTLSetReply]{Code: OpTTLSet, Name: "ttl_set", Writes: true,
		encReq: func(e encoder, r *TTLSetRequest) encoder { e.id(r.EntityID); e.u32(r.TTLSeconds); return e },
		decReq: func(d decoder) (*TTLSetRequest, decoder) {
			r := &TTLSetRequest{EntityID: d.id(), TTLSeconds: d.u32()}
			return r, d
		},
		encRep: func(e encoder, r *TTLSetReply) encoder { e.u64(r.ExpiresAtNS); return e },
		decRep: func(d decoder) (*TTLSetReply, decoder) { r := &TTLSetReply{ExpiresAtNS: d.u64()}; return r, d }}
	TTLExtend = &Op[TTLExtendRequest, TTLExtendReply]{Code: OpTTLExtend, Name: "ttl_extend", Writes: true,
		encReq: func(e encoder, r *TTLExtendRequest) encoder { e.id(r.EntityID); e.u32(r.ExtendBySeconds); return e },
		decReq: func(d decoder) (*TTLExtendRequest, decoder) {
			r := &TTLExtendRequest{EntityID: d.id(), ExtendBySeconds: d.u32()}
			return r, d
		},
		encRep: func(e encoder, r *TTLExtendReply) encoder {
			e.u64(r.PreviousExpiresAtNS)
			e.u64(r.NewExpiresAtNS)
			return e
		},
		decRep: func(d decoder) (*TTLExtendReply, decoder) {
			r := &TTLExtendReply{PreviousExpiresAtNS: d.u64(), NewExpiresAtNS: d.u64()}
			return r, d
		}}
	TTLClear = &Op[TTLClearRequest, TTLClearReply]{Code: OpTTLClear, Name: "ttl_clear", Writes: true,
		encReq: func(e encoder, r *TTLClearRequest) encoder { e.id(r.EntityID); return e },
		decReq: func(d decoder) (*TTLClearRequest, decoder) { r := &TTLClearRequest{EntityID: d.id()}; return r, d },
		encRep: func(e encoder, r *TTLClearReply) encoder { e.u64(r.PreviousExpiresAtNS); e.bool(r.HadTTL); return e },
		decRep: func(d decoder) (*TTLClearReply, decoder) {
			r := &TTLClearReply{PreviousExpiresAtNS: d.u64(), HadTTL: d.bool()}
			return r, d
		}}
	CleanupExpired = &Op[CleanupRequest, CleanupReply]{Code: OpCleanupExpired, Name: "cleanup_expired", Writes: true,
		encReq: func(e encoder, r *CleanupRequest) encoder { e.u32(r.MaxEntries); return e },
		decReq: func(d decoder) (*CleanupRequest, decoder) { r := &CleanupRequest{MaxEntries: d.u32()}; return r, d },
		encRep: func(e encoder, r *CleanupReply) encoder { e.u32(r.Scanned); e.u32(r.Removed); return e },
		decRep: func(d decoder) (*CleanupReply, decoder) {
			r := &CleanupReply{Scanned: d.u32(), Removed: d.u32()}
			return r, d
		}}
	QueryRadius = &Op[RadiusQuery, QueryResult]{Code: OpQueryRadius, Name: "query_radius",
		encReq: func(e encoder, r *RadiusQuery) encoder {
			e.coord(r.Center)
			e.u64(r.RadiusMM)
			e.group(r.Group)
			e.page(r.Page)
			e.optFilter(r.Filter)
			return e
		},
		decReq: func(d decoder) (*RadiusQuery, decoder) {
			r := &RadiusQuery{Center: d.coord(), RadiusMM: d.u64(), Group: d.group(), Page: d.page()}
			r.Filter = d.optFilter()
			return r, d
		},
		encRep: func(e encoder, r *QueryResult) encoder { encQueryRep(&e, r, true); return e },
		decRep: func(d decoder) (*QueryResult, decoder) { r := decQueryRep(&d, true); return r, d }}
	QueryPolygon = &Op[PolygonQuery, QueryResult]{Code: OpQueryPolygon, Name: "query_polygon",
		encReq: encPolygonReq, decReq: decPolygonReq, encRep: encQueryRepPlain, decRep: decQueryRepPlain}
	GetLatest = &Op[Uint128, LatestResult]{Code: OpGetLatest, Name: "get_latest",
		encReq: func(e encoder, r *Uint128) encoder { e.id(*r); return e },
		decReq: func(d decoder) (*Uint128, decoder) { id := d.id(); return &id, d },
		encRep: func(e encoder, r *LatestResult) encoder { e.latest(r); return e },
		decRep: func(d decoder) (*LatestResult, decoder) { r := d.latest(0); return &r, d }}
	GetLatestBatch = &Op[IDList, LatestResults]{Code: OpGetLatestBatch, Name: "get_latest_batch",
		encReq: func(e encoder, r *IDList) encoder { e.ids(*r); return e },
		decReq: func(d decoder) (*IDList, decoder) { ids := IDList(d.ids()); return &ids, d },
		encRep: encLatestBatchRep, decRep: decLatestBatchRep}
	QueryLatest = &Op[LatestQuery, QueryResult]{Code: OpQueryLatest, Name: "query_latest",
		encReq: func(e encoder, r *LatestQuery) encoder { e.u64(r.SinceNS); e.group(r.Group); e.page(r.Page); return e },
		decReq: func(d decoder) (*LatestQuery, decoder) {
			r := &LatestQuery{SinceNS: d.u64(), Group: d.group(), Page: d.page()}
			return r, d
		},
		encRep: encQueryRepPlain, decRep: decQueryRepPlain}
	EntityHistory = &Op[HistoryQuery, QueryResult]{Code: OpEntityHistory, Name: "entity_history",
		encReq: func(e encoder, r *HistoryQuery) encoder {
			e.id(r.EntityID)
			e.u64(r.SinceNS)
			e.u64(r.UntilNS)
			e.page(r.Page)
			return e
		},
		decReq: func(d decoder) (*HistoryQuery, decoder) {
			r := &HistoryQuery{EntityID: d.id(), SinceNS: d.u64(), UntilNS: d.u64(), Page: d.page()}
			return r, d
		},
		encRep: encQueryRepPlain, decRep: decQueryRepPlain}
	StatsOp = &Op[None, Stats]{Code: OpStats, Name: "stats",
		encReq: encNone, decReq: decNone, encRep: encStatsRep, decRep: decStatsRep}
	Status = &Op[None, StatusReply]{Code: OpStatus, Name: "status",
		encReq: encNone, decReq: decNone, encRep: encStatusRep, decRep: decStatusRep}
	Topology = &Op[None, TopologyReply]{Code: OpTopology, Name: "topology",
		encReq: encNone, decReq: decNone, encRep: encTopologyRep, decRep: decTopologyRep}
	Ping = &Op[None, PingReply]{Code: OpPing, Name: "ping",
		encReq: encNone, decReq: decNone,
		encRep: func(e encoder, r *PingReply) encoder { e.bool(r.Pong); e.str(r.Reason); return e },
		decRep: func(d decoder) (*PingReply, decoder) {
			r := &PingReply{Pong: d.bool(), Reason: d.str("reason")}
			return r, d
		}}
	QueryBBox = &Op[BBoxQuery, QueryResult]{Code: OpQueryBBox, Name: "query_bbox",
		encReq: func(e encoder, r *BBoxQuery) encoder {
			e.coord(Coordinate{LatNano: r.MinLatNano, LonNano: r.MinLonNano})
			e.coord(Coordinate{LatNano: r.MaxLatNano, LonNano: r.MaxLonNano})
			e.group(r.Group)
			e.filter(r.Filter)
			e.page(r.Page)
			return e
		},
		decReq: func(d decoder) (*BBoxQuery, decoder) {
			lo, hi := d.coord(), d.coord()
			r := &BBoxQuery{MinLatNano: lo.LatNano, MinLonNano: lo.LonNano, MaxLatNano: hi.LatNano, MaxLonNano: hi.LonNano,
				Group: d.group(), Filter: d.filter(), Page: d.page()}
			return r, d
		},
		encRep: encQueryRepPlain, decRep: decQueryRepPlain}
	QueryNearest = &Op[NearestQuery, QueryResult]{Code: OpQueryNearest, Name: "query_nearest",
		encReq: func(e encoder, r *NearestQuery) encoder {
			e.coord(r.Center)
			e.u64(r.MaxDistanceMM)
			e.group(r.Group)
			e.filter(r.Filter)
			e.page(r.Page)
			return e
		},
		decReq: func(d decoder) (*NearestQuery, decoder) {
			r := &NearestQuery{Center: d.coord(), MaxDistanceMM: d.u64(), Group: d.group(), Filter: d.filter(), Page: d.page()}
			return r, d
		},
		encRep: func(e encoder, r *QueryResult) encoder { encQueryRep(&e, r, true); return e },
		decRep: func(d decoder) (*QueryResult, decoder) { r := decQueryRep(&d, true); return r, d }}
)

// opTable holds every entry at its code; OpInvalid's slot is nil.
var opTable = [...]OpCodec{
	OpInsert: Insert, OpUpsert: Upsert, OpDeleteEntities: DeleteEntities, OpTTLSet: TTLSet,
	OpTTLExtend: TTLExtend, OpTTLClear: TTLClear, OpCleanupExpired: CleanupExpired,
	OpQueryRadius: QueryRadius, OpQueryPolygon: QueryPolygon, OpGetLatest: GetLatest,
	OpGetLatestBatch: GetLatestBatch, OpQueryLatest: QueryLatest, OpEntityHistory: EntityHistory,
	OpStats: StatsOp, OpStatus: Status, OpTopology: Topology, OpPing: Ping,
	OpQueryBBox: QueryBBox, OpQueryNearest: QueryNearest,
	OpPutFence: PutFence, OpGetFence: GetFence, OpListFences: ListFences, OpDeleteFence: DeleteFence,
	OpReadFeed: ReadFeed,
	OpPutHook:  PutHook, OpGetHook: GetHook, OpListHooks: ListHooks, OpDeleteHook: DeleteHook,
	OpHookDelivered:    HookDeliveredOp,
	OpSetFeedRetention: SetFeedRetention, OpGetFeedRetention: GetFeedRetention,
}

func encNone(e encoder, _ *None) encoder               { return e }
func decNone(d decoder) (*None, decoder)               { return nil, d }
func encInsertReq(e encoder, r *InsertRequest) encoder { e.events(r.Events); return e }
func decInsertReq(d decoder) (*InsertRequest, decoder) {
	r := &InsertRequest{Events: d.events()}
	return r, d
}

func encInsertRep(e encoder, r *InsertReply) encoder {
	if len(r.Results) > MaxEnvelopeEvents {
		e.fail(InternalError, "%d results exceed %d", len(r.Results), MaxEnvelopeEvents)
	}
	// Grown once (with room for the checksum of the frame that usually
	// ends it): a 10,000-event batch's reply is 150 KB, which growing by
	// appends allocated about 4.5 times over.
	e.b = slices.Grow(e.b, 5+insertResultSize*len(r.Results)+FrameChecksumSize)
	e.bool(r.Committed)
	e.u32(uint32(len(r.Results)))
	for _, res := range r.Results {
		e.u32(res.Index)
		e.u16(uint16(res.Code))
		e.bool(res.Updated)
		e.u64(res.TimestampNS)
	}
	return e
}

func decInsertRep(d decoder) (*InsertReply, decoder) {
	r := &InsertReply{Committed: d.bool()}
	if n := d.count32(insertResultSize, MaxEnvelopeEvents, "results"); n > 0 {
		r.Results = make([]EventResult, n)
		for i := range r.Results {
			r.Results[i] = EventResult{Index: d.u32(), Code: Code(d.u16()), Updated: d.bool(), TimestampNS: d.u64()}
		}
	}
	v := r
	return v, d
}

func encPolygonReq(e encoder, r *PolygonQuery) encoder {
	e.polygon(r.Vertices, r.Holes)
	e.group(r.Group)
	e.page(r.Page)
	if !r.Filter.IsZero() || r.Edges != EdgesGeodesic {
		e.filter(r.Filter)
		e.b = append(e.b, byte(r.Edges))
	}
	return e
}

func decPolygonReq(d decoder) (*PolygonQuery, decoder) {
	q := &PolygonQuery{}
	q.Vertices, q.Holes = d.polygon()
	q.Group = d.group()
	q.Page = d.page()
	if d.err == nil && len(d.b) > 0 {
		// The optional trailing filter and edges, present exactly when
		// either is not zero.
		q.Filter, q.Edges = d.filter(), Edges(d.u8())
		if d.err == nil && q.Filter.IsZero() && q.Edges == EdgesGeodesic {
			d.fail("a trailing filter and edges that are zero")
		}
	}
	v := q
	return v, d
}

// encQueryRep encodes a query result; distances are radius results' only,
// one per event.
func encQueryRep(e *encoder, r *QueryResult, distances bool) {
	// Size the whole reply at once (and the checksum of the frame that
	// usually ends it): growing it by the distances after the events would
	// copy a result of up to a megabyte again.
	e.b = slices.Grow(e.b, 4+len(r.Events)*RecordSize+8*len(r.DistancesMM)+1+2+len(r.Cursor)+FrameChecksumSize)
	e.events(r.Events)
	if distances {
		if len(r.DistancesMM) != len(r.Events) {
			e.fail(InternalError, "%d distances for %d events", len(r.DistancesMM), len(r.Events))
		}
		for _, d := range r.DistancesMM {
			e.u64(d)
		}
	} else if len(r.DistancesMM) != 0 {
		e.fail(InternalError, "distances in a %s result", e.op)
	}
	e.bool(r.HasMore)
	e.str(r.Cursor)
}

func decQueryRep(d *decoder, distances bool) *QueryResult {
	r := &QueryResult{Events: d.events()}
	if distances && len(r.Events) > 0 {
		if d.need(8*len(r.Events), "distances") {
			r.DistancesMM = make([]uint64, len(r.Events))
			for i := range r.DistancesMM {
				r.DistancesMM[i] = d.u64()
			}
		}
	}
	r.HasMore = d.bool()
	r.Cursor = d.str("cursor")
	return r
}

func encQueryRepPlain(e encoder, r *QueryResult) encoder { encQueryRep(&e, r, false); return e }
func decQueryRepPlain(d decoder) (*QueryResult, decoder) {
	r := decQueryRep(&d, false)
	return r, d
}

func encLatestBatchRep(e encoder, r *LatestResults) encoder {
	rs := *r
	if len(rs) > MaxEnvelopeIDs {
		e.fail(InternalError, "%d results exceed %d", len(rs), MaxEnvelopeIDs)
	}
	e.b = slices.Grow(e.b, 4+len(rs)*(1+RecordSize)+FrameChecksumSize) // at most, once
	e.u32(uint32(len(rs)))
	for i := range rs {
		e.latest(&rs[i])
	}
	return e
}

func decLatestBatchRep(d decoder) (*LatestResults, decoder) {
	var rs LatestResults
	if n := d.count32(1, MaxEnvelopeIDs, "results"); n > 0 {
		rs = make(LatestResults, n)
		for i := range rs {
			rs[i] = d.latest(i)
		}
	}
	v := &rs
	return v, d
}

func encStatsRep(e encoder, r *Stats) encoder {
	e.u64(r.EventCount)
	e.u64(r.EntityCount)
	e.u64(r.StorageBytes)
	e.u64(r.IndexBytes)
	e.u64(r.ReplicationLagMS)
	return e
}

func decStatsRep(d decoder) (*Stats, decoder) {
	v := &Stats{EventCount: d.u64(), EntityCount: d.u64(), StorageBytes: d.u64(), IndexBytes: d.u64(), ReplicationLagMS: d.u64()}
	return v, d
}

func encStatusRep(e encoder, r *StatusReply) encoder {
	e.u64(r.EventsCount)
	e.u64(r.EntitiesCount)
	e.u64(r.IndexBytes)
	e.u64(r.UptimeSeconds)
	e.str(r.Version)
	e.str(r.ClusterState)
	e.str(r.NodeID)
	e.id(r.ClusterID)
	return e
}

func decStatusRep(d decoder) (*StatusReply, decoder) {
	v := &StatusReply{
		EventsCount: d.u64(), EntitiesCount: d.u64(), IndexBytes: d.u64(), UptimeSeconds: d.u64(),
		Version: d.str("version"), ClusterState: d.str("cluster_state"), NodeID: d.str("node_id"),
		ClusterID: d.id(),
	}
	return v, d
}

func encTopologyRep(e encoder, r *TopologyReply) encoder {
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
	return e
}

func decTopologyRep(d decoder) (*TopologyReply, decoder) {
	r := &TopologyReply{Version: d.u64(), ReplicaCount: d.u32(), Primary: d.u32()}
	if n := d.count16(22, "nodes"); n > 0 {
		r.Nodes = make([]NodeInfo, n)
		for i := range r.Nodes {
			r.Nodes[i] = NodeInfo{NodeID: d.str("node_id"), Address: d.str("address"), Status: d.str("status"),
				LastContactMS: d.u64(), LagMS: d.u64()}
		}
	}
	r.ClusterID = d.id()
	v := r
	return v, d
}

// appendReplyHead appends a MsgReply payload's operation and code, and,
// when opErr is an operation's failure, its message: failed says the
// payload is complete.
func appendReplyHead(dst []byte, op Operation, opErr error) (out []byte, failed bool) {
	if e, ok := opErr.(*Error); ok && e == nil {
		opErr = nil
	}
	out = append(dst, byte(op))
	if opErr != nil {
		code, msg := errorCode(opErr)
		out = binary.LittleEndian.AppendUint16(out, uint16(code))
		return appendMessage(out, msg), true
	}
	return binary.LittleEndian.AppendUint16(out, 0), false
}

// cutReplyHead splits a MsgReply payload into its operation and the
// reply's encoding, or returns the operation's failure.
func cutReplyHead(p []byte) (op Operation, rest []byte, opErr *Error, err error) {
	if len(p) < 3 {
		return OpInvalid, nil, nil, Errorf(MalformedRequest, "reply payload is %d bytes, want at least 3", len(p))
	}
	op = Operation(p[0])
	if !op.Valid() {
		return op, nil, nil, Errorf(UnknownOperation, "unknown operation %d", p[0])
	}
	code := Code(binary.LittleEndian.Uint16(p[1:3]))
	if code != 0 {
		msg, err := decodeMessage(p[3:])
		if err != nil {
			return op, nil, nil, err
		}
		return op, nil, &Error{CodeInfo: codeInfo(code), Message: msg}, nil
	}
	return op, p[3:], nil, nil
}

// opName and opWrites read the entry of a valid op.
func opName(op Operation) string { return opTable[op].name() }
func opWrites(op Operation) bool { return opTable[op].writes() }

func (o *Op[Req, Rep]) name() string { return o.Name }
func (o *Op[Req, Rep]) writes() bool { return o.Writes }

// Operations returns every operation of the table in code order. Codes
// need not be contiguous: a loop to the first invalid code would miss
// the operations after a gap.
func Operations() []Operation {
	var ops []Operation
	for op := range opTable {
		if opTable[op] != nil {
			ops = append(ops, Operation(op))
		}
	}
	return ops
}
