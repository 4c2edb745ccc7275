package core

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// allOps is every valid operation, in code order.
func allOps() []Operation {
	return Operations()
}

// tb is what codeOf needs of *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

// codeOf returns the code of a *Error, failing the test for any other error.
func codeOf(t tb, err error) Code {
	t.Helper()
	if err == nil {
		return 0
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *core.Error", err, err)
	}
	return e.Code
}

// wantCode fails unless err is a *Error with code want.
func wantCode(t tb, err error, want CodeInfo) {
	t.Helper()
	if got := codeOf(t, err); got != want.Code {
		t.Fatalf("got code %d (%v), want %d %s", got, err, want.Code, want.Name)
	}
}

// decodeCodeOK reports whether code is one a decoder may return.
func decodeCodeOK(c Code) bool {
	return c == MalformedRequest.Code || c == UnknownOperation.Code || c == ReservedBytesNotZero.Code
}

// normalize makes every empty slice reachable from v nil, in place, so
// values compare with reflect.DeepEqual whatever their nil-ness. v must be
// a pointer.
func normalize(v any) any {
	if v != nil {
		normalizeValue(reflect.ValueOf(v))
	}
	return v
}

func normalizeValue(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			normalizeValue(v.Elem())
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			normalizeValue(v.Field(i))
		}
	case reflect.Slice:
		if v.Len() == 0 {
			if v.CanSet() {
				v.Set(reflect.Zero(v.Type()))
			}
			return
		}
		for i := 0; i < v.Len(); i++ {
			normalizeValue(v.Index(i))
		}
	}
}

func genSmallEvents(t *rapid.T, label string) []GeoEvent {
	return rapid.SliceOfN(genEvent(), 0, 6).Draw(t, label)
}

func genCoord() *rapid.Generator[Coordinate] {
	return rapid.Custom(func(t *rapid.T) Coordinate {
		return Coordinate{LatNano: rapid.Int64().Draw(t, "lat"), LonNano: rapid.Int64().Draw(t, "lon")}
	})
}

func genGroup(t *rapid.T) GroupFilter {
	return GroupFilter{Set: rapid.Bool().Draw(t, "group_set"), ID: rapid.Uint64().Draw(t, "group_id")}
}

// genBytesString draws any bytes, valid UTF-8 or not, up to max.
func genBytesString(t *rapid.T, max int, label string) string {
	return string(rapid.SliceOfN(rapid.Byte(), 0, max).Draw(t, label))
}

func genPage(t *rapid.T) Page {
	return Page{Limit: rapid.Uint32().Draw(t, "limit"), Cursor: genBytesString(t, MaxCodecString, "cursor")}
}

func genIDs(t *rapid.T) []Uint128 { return rapid.SliceOfN(genUint128(), 0, 8).Draw(t, "ids") }

// genRequest draws a request of op in its canonical (pointer) type.
func genRequest(t *rapid.T, op Operation) any {
	switch op {
	case OpInsert, OpUpsert:
		return &InsertRequest{Events: genSmallEvents(t, "events")}
	case OpDeleteEntities:
		return &DeleteRequest{EntityIDs: genIDs(t)}
	case OpTTLSet:
		return &TTLSetRequest{EntityID: genUint128().Draw(t, "id"), TTLSeconds: rapid.Uint32().Draw(t, "ttl")}
	case OpTTLExtend:
		return &TTLExtendRequest{EntityID: genUint128().Draw(t, "id"), ExtendBySeconds: rapid.Uint32().Draw(t, "by")}
	case OpTTLClear:
		return &TTLClearRequest{EntityID: genUint128().Draw(t, "id")}
	case OpCleanupExpired:
		return &CleanupRequest{MaxEntries: rapid.Uint32().Draw(t, "max")}
	case OpQueryRadius:
		return &RadiusQuery{Center: genCoord().Draw(t, "center"), RadiusMM: rapid.Uint64().Draw(t, "radius"), Group: genGroup(t), Filter: genFilter(t), Page: genPage(t)}
	case OpQueryPolygon:
		return &PolygonQuery{
			Vertices: rapid.SliceOfN(genCoord(), 0, 12).Draw(t, "vertices"),
			Holes:    rapid.SliceOfN(rapid.SliceOfN(genCoord(), 0, 5), 0, 4).Draw(t, "holes"),
			Group:    genGroup(t),
			Filter:   genFilter(t),
			Edges:    Edges(rapid.SampledFrom([]uint8{0, 0, 1, 7}).Draw(t, "edges")),
			Page:     genPage(t),
		}
	case OpQueryBBox:
		lo, hi := genCoord().Draw(t, "min"), genCoord().Draw(t, "max")
		return &BBoxQuery{MinLatNano: lo.LatNano, MinLonNano: lo.LonNano, MaxLatNano: hi.LatNano, MaxLonNano: hi.LonNano,
			Group: genGroup(t), Filter: genFilter(t), Page: genPage(t)}
	case OpQueryNearest:
		return &NearestQuery{Center: genCoord().Draw(t, "center"), MaxDistanceMM: rapid.Uint64().Draw(t, "max_distance"),
			Group: genGroup(t), Filter: genFilter(t), Page: genPage(t)}
	case OpGetLatest:
		id := genUint128().Draw(t, "id")
		return &id
	case OpGetLatestBatch:
		ids := IDList(genIDs(t))
		return &ids
	case OpQueryLatest:
		return &LatestQuery{SinceNS: rapid.Uint64().Draw(t, "since"), Group: genGroup(t), Page: genPage(t)}
	case OpEntityHistory:
		return &HistoryQuery{EntityID: genUint128().Draw(t, "id"), SinceNS: rapid.Uint64().Draw(t, "since"), UntilNS: rapid.Uint64().Draw(t, "until"), Page: genPage(t)}
	case OpStats, OpStatus, OpTopology, OpPing:
		return nil
	case OpPutFence, OpGetFence, OpListFences, OpDeleteFence, OpReadFeed:
		return genFenceRequest(t, op)
	case OpPutHook, OpGetHook, OpListHooks, OpDeleteHook, OpHookDelivered:
		return genHookRequest(t, op)
	case OpSetFeedRetention, OpGetFeedRetention:
		return genRetentionRequest(t, op)
	}
	panic("no generator for " + op.String())
}

// genFilter draws a filter, zero half the time (the optional trailing
// filter's two encodings).
func genFilter(t *rapid.T) Filter {
	if !rapid.Bool().Draw(t, "filtered") {
		return Filter{}
	}
	return Filter{SinceNS: rapid.Uint64().Draw(t, "since"), FlagsAll: rapid.Uint16().Draw(t, "flags_all"), FlagsAny: rapid.Uint16().Draw(t, "flags_any")}
}

func genLatest(t *rapid.T) LatestResult {
	if rapid.Bool().Draw(t, "found") {
		return LatestResult{Event: genEvent().Draw(t, "event"), Found: true}
	}
	return LatestResult{}
}

// genReply draws a reply of op in its canonical (pointer) type.
func genReply(t *rapid.T, op Operation) any {
	switch op {
	case OpInsert, OpUpsert:
		results := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) EventResult {
			return EventResult{
				Index: rapid.Uint32().Draw(t, "index"), Code: Code(rapid.Uint16().Draw(t, "code")),
				Updated: rapid.Bool().Draw(t, "updated"), TimestampNS: rapid.Uint64().Draw(t, "ts"),
			}
		}), 0, 8).Draw(t, "results")
		return &InsertReply{Committed: rapid.Bool().Draw(t, "committed"), Results: results}
	case OpDeleteEntities:
		return &DeleteReply{Deleted: rapid.Uint32().Draw(t, "deleted"), NotFound: rapid.Uint32().Draw(t, "not_found")}
	case OpTTLSet:
		return &TTLSetReply{ExpiresAtNS: rapid.Uint64().Draw(t, "expires")}
	case OpTTLExtend:
		return &TTLExtendReply{PreviousExpiresAtNS: rapid.Uint64().Draw(t, "prev"), NewExpiresAtNS: rapid.Uint64().Draw(t, "new")}
	case OpTTLClear:
		return &TTLClearReply{PreviousExpiresAtNS: rapid.Uint64().Draw(t, "prev"), HadTTL: rapid.Bool().Draw(t, "had")}
	case OpCleanupExpired:
		return &CleanupReply{Scanned: rapid.Uint32().Draw(t, "scanned"), Removed: rapid.Uint32().Draw(t, "removed")}
	case OpQueryRadius, OpQueryPolygon, OpQueryLatest, OpEntityHistory, OpQueryBBox, OpQueryNearest:
		r := &QueryResult{Events: genSmallEvents(t, "events"), HasMore: rapid.Bool().Draw(t, "has_more"), Cursor: genBytesString(t, MaxCodecString, "cursor")}
		if op == OpQueryRadius || op == OpQueryNearest {
			r.DistancesMM = rapid.SliceOfN(rapid.Uint64(), len(r.Events), len(r.Events)).Draw(t, "distances")
		}
		return r
	case OpGetLatest:
		r := genLatest(t)
		return &r
	case OpGetLatestBatch:
		rs := LatestResults(rapid.SliceOfN(rapid.Custom(genLatest), 0, 6).Draw(t, "results"))
		return &rs
	case OpStats:
		return &Stats{EventCount: rapid.Uint64().Draw(t, "events"), EntityCount: rapid.Uint64().Draw(t, "entities"), StorageBytes: rapid.Uint64().Draw(t, "storage"), IndexBytes: rapid.Uint64().Draw(t, "index"), ReplicationLagMS: rapid.Uint64().Draw(t, "lag")}
	case OpStatus:
		return &StatusReply{
			EventsCount: rapid.Uint64().Draw(t, "events"), EntitiesCount: rapid.Uint64().Draw(t, "entities"),
			IndexBytes: rapid.Uint64().Draw(t, "index"), UptimeSeconds: rapid.Uint64().Draw(t, "uptime"),
			Version: genBytesString(t, MaxCodecString, "version"), ClusterState: rapid.StringN(0, 20, MaxCodecString).Draw(t, "state"),
			NodeID:    rapid.StringN(0, 20, MaxCodecString).Draw(t, "node"),
			ClusterID: Uint128{Hi: rapid.Uint64().Draw(t, "cluster_hi"), Lo: rapid.Uint64().Draw(t, "cluster_lo")},
		}
	case OpTopology:
		nodes := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) NodeInfo {
			return NodeInfo{NodeID: rapid.StringN(0, 10, MaxCodecString).Draw(t, "id"), Address: rapid.StringN(0, 30, MaxCodecString).Draw(t, "addr"), Status: genBytesString(t, 20, "status"),
				LastContactMS: rapid.Uint64().Draw(t, "contact"), LagMS: rapid.Uint64().Draw(t, "lag")}
		}), 0, 5).Draw(t, "nodes")
		return &TopologyReply{Version: rapid.Uint64().Draw(t, "version"), ReplicaCount: rapid.Uint32().Draw(t, "count"), Primary: rapid.Uint32().Draw(t, "primary"), Nodes: nodes,
			ClusterID: Uint128{Hi: rapid.Uint64().Draw(t, "cluster_hi"), Lo: rapid.Uint64().Draw(t, "cluster_lo")}}
	case OpPing:
		return &PingReply{Pong: rapid.Bool().Draw(t, "pong"), Reason: genBytesString(t, MaxCodecString, "reason")}
	case OpPutFence, OpGetFence, OpListFences, OpDeleteFence, OpReadFeed:
		return genFenceReply(t, op)
	case OpPutHook, OpGetHook, OpListHooks, OpDeleteHook, OpHookDelivered:
		return genHookReply(t, op)
	case OpSetFeedRetention, OpGetFeedRetention:
		return genRetentionReply(t, op)
	}
	panic("no generator for " + op.String())
}

// elem returns the value a canonical pointer points to, or nil.
func elem(v any) any {
	if v == nil {
		return nil
	}
	return reflect.ValueOf(v).Elem().Interface()
}

type (
	appendFunc func([]byte, Operation, any) ([]byte, error)
	decodeFunc func(Operation, []byte) (any, error)
)

// checkRoundTrip encodes v, decodes it back, and checks: the value is equal
// (nil and empty slices alike), the value and pointer forms encode the same,
// the decoded value re-encodes to the same bytes, appending to a non-empty
// dst works, every proper prefix and the payload with a trailing byte are
// refused with a decoder code.
func checkRoundTrip(t *rapid.T, op Operation, v any, enc appendFunc, dec decodeFunc) {
	b, err := enc(nil, op, v)
	if err != nil {
		t.Fatalf("%s: encode %+v: %v", op, v, err)
	}
	if b2, err := enc(nil, op, elem(v)); err != nil || !bytes.Equal(b, b2) {
		t.Fatalf("%s: value form encodes differently: %v", op, err)
	}
	prefix := []byte("prefix")
	if b3, err := enc(prefix, op, v); err != nil || !bytes.Equal(b3[:len(prefix)], prefix) || !bytes.Equal(b3[len(prefix):], b) {
		t.Fatalf("%s: append to non-empty dst differs: %v", op, err)
	}
	got, err := dec(op, b)
	if err != nil {
		t.Fatalf("%s: decode %x: %v", op, b, err)
	}
	if again, err := enc(nil, op, got); err != nil || !bytes.Equal(again, b) {
		t.Fatalf("%s: decoded value re-encodes differently: %v\n%x\n%x", op, err, b, again)
	}
	if !reflect.DeepEqual(normalize(got), normalize(v)) {
		t.Fatalf("%s: round trip\n got %#v\nwant %#v", op, got, v)
	}
	for n := 0; n < len(b); n++ {
		if optionalTail(op, got) == len(b)-n {
			continue // the encoding without its optional trailing filter
		}
		if _, err := dec(op, b[:n]); err == nil || !decodeCodeOK(codeOf(t, err)) {
			t.Fatalf("%s: prefix of %d/%d bytes: %v", op, n, len(b), err)
		}
	}
	if _, err := dec(op, append(b[:len(b):len(b)], 0)); err == nil || codeOf(t, err) != MalformedRequest.Code {
		t.Fatalf("%s: a trailing byte is accepted: %v", op, err)
	}
}

// filterSize is the size of an encoded filter.
const filterSize = 12

// optionalTail returns the size of the optional trailing elements of v, a
// request of op, when they are present (0 when not): a radius query's
// filter, a polygon query's filter and edges.
func optionalTail(op Operation, v any) int {
	switch r := v.(type) {
	case *RadiusQuery:
		if !r.Filter.IsZero() {
			return filterSize
		}
	case *PolygonQuery:
		if !r.Filter.IsZero() || r.Edges != EdgesGeodesic {
			return filterSize + 1
		}
	}
	return 0
}

func TestRequestRoundTrip(t *testing.T) {
	for _, op := range allOps() {
		t.Run(op.String(), func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				checkRoundTrip(t, op, genRequest(t, op), AppendRequest, DecodeRequest)
			})
		})
	}
}

func TestReplyRoundTrip(t *testing.T) {
	for _, op := range allOps() {
		t.Run(op.String(), func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				checkRoundTrip(t, op, genReply(t, op), AppendReply, DecodeReply)
			})
		})
	}
}

// TestDecodedTypes pins the op -> Go type table of the codec's doc comment.
func TestDecodedTypes(t *testing.T) {
	reqs := map[Operation]any{
		OpInsert: &InsertRequest{}, OpUpsert: &InsertRequest{}, OpDeleteEntities: &DeleteRequest{},
		OpTTLSet: &TTLSetRequest{}, OpTTLExtend: &TTLExtendRequest{}, OpTTLClear: &TTLClearRequest{},
		OpCleanupExpired: &CleanupRequest{}, OpQueryRadius: &RadiusQuery{}, OpQueryPolygon: &PolygonQuery{},
		OpGetLatest: &Uint128{}, OpGetLatestBatch: &IDList{}, OpQueryLatest: &LatestQuery{},
		OpEntityHistory: &HistoryQuery{}, OpStats: nil, OpStatus: nil, OpTopology: nil, OpPing: nil,
		OpQueryBBox: &BBoxQuery{}, OpQueryNearest: &NearestQuery{},
		OpPutFence: &Fence{}, OpGetFence: &FenceName{}, OpListFences: &FenceListRequest{}, OpDeleteFence: &FenceName{},
		OpReadFeed: &FeedRequest{},
		OpPutHook:  &Hook{}, OpGetHook: &HookName{}, OpListHooks: &HookListRequest{}, OpDeleteHook: &HookName{},
		OpHookDelivered: &HookDelivered{}, OpSetFeedRetention: &FeedRetention{}, OpGetFeedRetention: nil,
	}
	replies := map[Operation]any{
		OpInsert: &InsertReply{}, OpUpsert: &InsertReply{}, OpDeleteEntities: &DeleteReply{},
		OpTTLSet: &TTLSetReply{}, OpTTLExtend: &TTLExtendReply{}, OpTTLClear: &TTLClearReply{},
		OpCleanupExpired: &CleanupReply{}, OpQueryRadius: &QueryResult{}, OpQueryPolygon: &QueryResult{},
		OpGetLatest: &LatestResult{}, OpGetLatestBatch: &LatestResults{}, OpQueryLatest: &QueryResult{},
		OpQueryBBox: &QueryResult{}, OpQueryNearest: &QueryResult{},
		OpEntityHistory: &QueryResult{}, OpStats: &Stats{}, OpStatus: &StatusReply{}, OpTopology: &TopologyReply{},
		OpPing: &PingReply{}, OpPutFence: &PutFenceReply{}, OpGetFence: &Fence{}, OpListFences: &FenceList{},
		OpDeleteFence: &DeleteFenceReply{}, OpReadFeed: &FeedPage{},
		OpPutHook: &PutHookReply{}, OpGetHook: &Hook{}, OpListHooks: &HookList{}, OpDeleteHook: &DeleteHookReply{},
		OpHookDelivered: &HookDeliveredReply{}, OpSetFeedRetention: &FeedRetentionReply{}, OpGetFeedRetention: &FeedRetentionReply{},
	}
	for _, op := range allOps() {
		b, err := AppendRequest(nil, op, reqs[op])
		if err != nil {
			t.Fatalf("%s request: %v", op, err)
		}
		v, err := DecodeRequest(op, b)
		if err != nil || reflect.TypeOf(v) != reflect.TypeOf(reqs[op]) {
			t.Errorf("%s request decodes to %T (%v), want %T", op, v, err, reqs[op])
		}
		b, err = AppendReply(nil, op, replies[op])
		if err != nil {
			t.Fatalf("%s reply: %v", op, err)
		}
		v, err = DecodeReply(op, b)
		if err != nil || reflect.TypeOf(v) != reflect.TypeOf(replies[op]) {
			t.Errorf("%s reply decodes to %T (%v), want %T", op, v, err, replies[op])
		}
	}
	// get_latest_batch also takes the plain slices the state machine uses.
	ids := []Uint128{{Lo: 1}, {Hi: 2}}
	a, _ := AppendRequest(nil, OpGetLatestBatch, IDList(ids))
	if b, err := AppendRequest(nil, OpGetLatestBatch, ids); err != nil || !bytes.Equal(a, b) {
		t.Errorf("[]Uint128 request: %v", err)
	}
	rs := []LatestResult{{Found: true, Event: GeoEvent{EntityID: Uint128{Lo: 1}}}, {}}
	a, _ = AppendReply(nil, OpGetLatestBatch, LatestResults(rs))
	if b, err := AppendReply(nil, OpGetLatestBatch, rs); err != nil || !bytes.Equal(a, b) {
		t.Errorf("[]LatestResult reply: %v", err)
	}
}

// TestCodecLayout pins the byte layout of a few encodings.
func TestCodecLayout(t *testing.T) {
	id := Uint128{Hi: 0x0102030405060708, Lo: 0x1112131415161718}
	idHex := "1817161514131211" + "0807060504030201"
	ev := GeoEvent{EntityID: id, LatNano: 1}
	evHex := hex.EncodeToString(ev.AppendRecord(nil))
	cases := []struct {
		name  string
		reply bool
		op    Operation
		v     any
		want  string
	}{
		{"ttl_set", false, OpTTLSet, &TTLSetRequest{EntityID: id, TTLSeconds: 0x0a0b0c0d}, idHex + "0d0c0b0a"},
		{"get_latest", false, OpGetLatest, &id, idHex},
		{"stats", false, OpStats, nil, ""},
		{"insert", false, OpInsert, &InsertRequest{Events: []GeoEvent{ev}}, "01000000" + evHex},
		{"delete", false, OpDeleteEntities, &DeleteRequest{EntityIDs: []Uint128{id}}, "01000000" + idHex},
		{"radius", false, OpQueryRadius, &RadiusQuery{
			Center: Coordinate{LatNano: -1, LonNano: 2}, RadiusMM: 3, Group: GroupFilter{Set: true, ID: 4},
			Page: Page{Limit: 5, Cursor: "AB"},
		}, "ffffffffffffffff" + "0200000000000000" + "0300000000000000" + "01" + "0400000000000000" + "05000000" + "0200" + "4142"},
		{"polygon", false, OpQueryPolygon, &PolygonQuery{
			Vertices: []Coordinate{{1, 2}}, Holes: [][]Coordinate{{}, {{3, 4}}},
		}, "0100" + "0100000000000000" + "0200000000000000" + "0200" + "0000" + "0100" + "0300000000000000" + "0400000000000000" +
			"00" + "0000000000000000" + "00000000" + "0000"},
		{"radius, filtered", false, OpQueryRadius, &RadiusQuery{RadiusMM: 3, Filter: Filter{SinceNS: 6, FlagsAll: 7, FlagsAny: 8}},
			"0000000000000000" + "0000000000000000" + "0300000000000000" + "00" + "0000000000000000" + "00000000" + "0000" +
				"0600000000000000" + "0700" + "0800"},
		{"bbox", false, OpQueryBBox, &BBoxQuery{MinLatNano: 1, MinLonNano: 2, MaxLatNano: 3, MaxLonNano: -4, Filter: Filter{FlagsAny: 5}},
			"0100000000000000" + "0200000000000000" + "0300000000000000" + "fcffffffffffffff" + "00" + "0000000000000000" +
				"0000000000000000" + "0000" + "0500" + "00000000" + "0000"},
		{"nearest", false, OpQueryNearest, &NearestQuery{Center: Coordinate{1, 2}, MaxDistanceMM: 3, Page: Page{Limit: 4}},
			"0100000000000000" + "0200000000000000" + "0300000000000000" + "00" + "0000000000000000" +
				"0000000000000000" + "0000" + "0000" + "04000000" + "0000"},
		{"history", false, OpEntityHistory, &HistoryQuery{EntityID: id, SinceNS: 1, UntilNS: 2, Page: Page{Limit: 3}},
			idHex + "0100000000000000" + "0200000000000000" + "03000000" + "0000"},
		{"insert reply", true, OpInsert, &InsertReply{Committed: true, Results: []EventResult{{Index: 1, Code: 9, Updated: true, TimestampNS: 2}}},
			"01" + "01000000" + "01000000" + "0900" + "01" + "0200000000000000"},
		{"ttl_clear reply", true, OpTTLClear, &TTLClearReply{PreviousExpiresAtNS: 7, HadTTL: true}, "0700000000000000" + "01"},
		{"radius reply", true, OpQueryRadius, &QueryResult{Events: []GeoEvent{ev}, DistancesMM: []uint64{9}, HasMore: true, Cursor: "C"},
			"01000000" + evHex + "0900000000000000" + "01" + "0100" + "43"},
		{"latest reply", true, OpQueryLatest, &QueryResult{}, "00000000" + "00" + "0000"},
		{"get_latest reply, missing", true, OpGetLatest, &LatestResult{}, "00"},
		{"get_latest_batch reply", true, OpGetLatestBatch, &LatestResults{{Event: ev, Found: true}, {}}, "02000000" + "01" + evHex + "00"},
		{"topology reply", true, OpTopology, &TopologyReply{Version: 1, ReplicaCount: 3, Primary: 2, Nodes: []NodeInfo{{"n", "h:1", "ok", 5, Unknown}},
			ClusterID: Uint128{Hi: 0x0102030405060708, Lo: 0x1112131415161718}},
			"0100000000000000" + "03000000" + "02000000" + "0100" + "0100" + "6e" + "0300" + "683a31" + "0200" + "6f6b" +
				"0500000000000000" + "ffffffffffffffff" + "1817161514131211" + "0807060504030201"},
		{"ping reply", true, OpPing, &PingReply{Pong: false, Reason: "x"}, "00" + "0100" + "78"},
	}
	for _, c := range cases {
		enc := AppendRequest
		if c.reply {
			enc = AppendReply
		}
		b, err := enc(nil, c.op, c.v)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := hex.EncodeToString(b); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

// eventsPayload builds an insert request claiming count events with n
// records present.
func eventsPayload(count uint32, n int) []byte {
	b := binary.LittleEndian.AppendUint32(nil, count)
	ev := GeoEvent{EntityID: Uint128{Lo: 1}}
	r := ev.AppendRecord(nil)
	b = append(b, bytes.Repeat(r, n)...)
	return b
}

func TestBatchEdges(t *testing.T) {
	// Over the spec's 10,000 but within the envelope: decodes, so that the
	// state machine answers 300 BATCH_TOO_LARGE.
	v, err := DecodeRequest(OpInsert, eventsPayload(MaxBatchEvents+1, MaxBatchEvents+1))
	if err != nil || len(v.(*InsertRequest).Events) != MaxBatchEvents+1 {
		t.Fatalf("10,001 events: %v", err)
	}
	// The envelope's maximum decodes and fits in a frame.
	b := eventsPayload(MaxEnvelopeEvents, MaxEnvelopeEvents)
	v, err = DecodeRequest(OpUpsert, b)
	if err != nil || len(v.(*InsertRequest).Events) != MaxEnvelopeEvents {
		t.Fatalf("81,916 events: %v", err)
	}
	msg, err := AppendRequestMessage(nil, OpUpsert, v)
	if err != nil || len(msg) > MaxFramePayload {
		t.Fatalf("81,916 events: %d bytes, %v", len(msg), err)
	}
	// One more is malformed, even with every record present.
	_, err = DecodeRequest(OpInsert, eventsPayload(MaxEnvelopeEvents+1, MaxEnvelopeEvents+1))
	wantCode(t, err, MalformedRequest)
	// And cannot be encoded.
	v.(*InsertRequest).Events = append(v.(*InsertRequest).Events, GeoEvent{})
	out, err := AppendRequest([]byte("x"), OpInsert, v)
	wantCode(t, err, BatchTooLarge)
	if string(out) != "x" {
		t.Fatal("a failed append changed dst")
	}
	// Counts the bytes cannot hold.
	for _, c := range []struct {
		count uint32
		n     int
	}{{3, 2}, {1, 0}, {^uint32(0), 0}, {MaxEnvelopeEvents, 1}, {0, 1}} {
		_, err := DecodeRequest(OpInsert, eventsPayload(c.count, c.n))
		wantCode(t, err, MalformedRequest)
	}
	// An event with reserved bytes set keeps DecodeRecord's code.
	b = eventsPayload(2, 2)
	b[4+RecordSize+120] = 1
	_, err = DecodeRequest(OpInsert, b)
	wantCode(t, err, ReservedBytesNotZero)
	if !strings.Contains(err.Error(), "event 1") {
		t.Errorf("error does not name the event: %v", err)
	}

	// Id lists: over 10,000 decodes; a count the bytes cannot hold does not.
	ids := make(IDList, MaxBatchIDs+1)
	b, err = AppendRequest(nil, OpGetLatestBatch, &ids)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := DecodeRequest(OpGetLatestBatch, b); err != nil || len(*v.(*IDList)) != MaxBatchIDs+1 {
		t.Fatalf("10,001 ids: %v", err)
	}
	binary.LittleEndian.PutUint32(b, MaxBatchIDs+2)
	_, err = DecodeRequest(OpGetLatestBatch, b)
	wantCode(t, err, MalformedRequest)
	binary.LittleEndian.PutUint32(b, ^uint32(0))
	_, err = DecodeRequest(OpDeleteEntities, b)
	wantCode(t, err, MalformedRequest)
	_, err = AppendRequest(nil, OpDeleteEntities, &DeleteRequest{EntityIDs: make([]Uint128, MaxEnvelopeIDs+1)})
	wantCode(t, err, BatchTooLarge)
	if b, err := AppendRequestMessage(nil, OpDeleteEntities, &DeleteRequest{EntityIDs: make([]Uint128, MaxEnvelopeIDs)}); err != nil || len(b) > MaxFramePayload {
		t.Fatalf("MaxEnvelopeIDs ids: %d bytes, %v", len(b), err)
	}
}

func TestPolygonEdges(t *testing.T) {
	// Over the spec's limits: decodes, so the state machine answers 102.
	q := &PolygonQuery{Vertices: make([]Coordinate, MaxPolygonVertices+1), Holes: make([][]Coordinate, MaxPolygonHoles+1)}
	for i := range q.Holes {
		q.Holes[i] = make([]Coordinate, 3)
	}
	b, err := AppendRequest(nil, OpQueryPolygon, q)
	if err != nil {
		t.Fatal(err)
	}
	v, err := DecodeRequest(OpQueryPolygon, b)
	if err != nil || len(v.(*PolygonQuery).Vertices) != MaxPolygonVertices+1 || len(v.(*PolygonQuery).Holes) != MaxPolygonHoles+1 {
		t.Fatalf("1,001 vertices, 101 holes: %v", err)
	}
	// The encoding's own bound.
	_, err = AppendRequest(nil, OpQueryPolygon, &PolygonQuery{Vertices: make([]Coordinate, 1<<16)})
	wantCode(t, err, PolygonTooComplex)
	_, err = AppendRequest(nil, OpQueryPolygon, &PolygonQuery{Holes: make([][]Coordinate, 1<<16)})
	wantCode(t, err, PolygonTooComplex)
	_, err = AppendRequest(nil, OpQueryPolygon, &PolygonQuery{Holes: [][]Coordinate{make([]Coordinate, 1<<16)}})
	wantCode(t, err, PolygonTooComplex)
	// A hole count the bytes cannot hold.
	_, err = DecodeRequest(OpQueryPolygon, []byte{0, 0, 0xff, 0xff, 0, 0})
	wantCode(t, err, MalformedRequest)
}

func TestStringsAndBools(t *testing.T) {
	long := strings.Repeat("c", MaxCodecString)
	b, err := AppendRequest(nil, OpQueryLatest, &LatestQuery{Page: Page{Cursor: long}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeRequest(OpQueryLatest, b); err != nil {
		t.Fatalf("a %d-byte cursor: %v", MaxCodecString, err)
	}
	_, err = AppendRequest(nil, OpQueryLatest, &LatestQuery{Page: Page{Cursor: long + "c"}})
	wantCode(t, err, InvalidCursor)
	_, err = AppendReply(nil, OpPing, &PingReply{Reason: long + "c"})
	wantCode(t, err, InternalError)
	// A string length over the cap is malformed, even with the bytes present.
	b = binary.LittleEndian.AppendUint64(nil, 0)
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
	b = binary.LittleEndian.AppendUint16(b, MaxCodecString+1)
	b = append(b, long+"c"...)
	_, err = DecodeRequest(OpQueryLatest, b)
	wantCode(t, err, MalformedRequest)
	// Bool bytes other than 0 and 1.
	for _, c := range []byte{2, 0x80, 0xff} {
		_, err := DecodeReply(OpPing, []byte{c, 0, 0})
		wantCode(t, err, MalformedRequest)
		_, err = DecodeReply(OpGetLatest, []byte{c})
		wantCode(t, err, MalformedRequest)
	}
}

func TestCodecMisuse(t *testing.T) {
	for _, op := range []Operation{OpInvalid, OpQueryNearest + 1, 255} {
		_, err := AppendRequest(nil, op, nil)
		wantCode(t, err, UnknownOperation)
		_, err = DecodeRequest(op, nil)
		wantCode(t, err, UnknownOperation)
		_, err = AppendReply(nil, op, nil)
		wantCode(t, err, UnknownOperation)
		_, err = DecodeReply(op, nil)
		wantCode(t, err, UnknownOperation)
	}
	// Wrong types and nil pointers are the caller's bug.
	for _, op := range allOps() {
		_, err := AppendRequest(nil, op, struct{}{})
		wantCode(t, err, InternalError)
		_, err = AppendReply(nil, op, struct{}{})
		wantCode(t, err, InternalError)
		if out, err := AppendReplyMessage([]byte("keep"), op, struct{}{}, nil); err == nil || string(out) != "keep" {
			t.Fatalf("%s: failed reply message: %q %v", op, out, err)
		}
	}
	_, err := AppendRequest(nil, OpInsert, &DeleteRequest{})
	wantCode(t, err, InternalError)
	_, err = AppendRequest(nil, OpInsert, (*InsertRequest)(nil))
	wantCode(t, err, InternalError)
	_, err = AppendRequest(nil, OpInsert, nil)
	wantCode(t, err, InternalError)
	_, err = AppendRequest(nil, OpStats, &Stats{})
	wantCode(t, err, InternalError)
	_, err = AppendReply(nil, OpStats, &StatusReply{})
	wantCode(t, err, InternalError)
	// Distances belong to radius results only, one per event.
	_, err = AppendReply(nil, OpQueryRadius, &QueryResult{Events: make([]GeoEvent, 2), DistancesMM: []uint64{1}})
	wantCode(t, err, InternalError)
	_, err = AppendReply(nil, OpQueryPolygon, &QueryResult{DistancesMM: []uint64{1}})
	wantCode(t, err, InternalError)
	// Empty-payload requests carry nothing.
	_, err = DecodeRequest(OpPing, []byte{0})
	wantCode(t, err, MalformedRequest)
	// A not-found latest result drops whatever event it holds.
	b, _ := AppendReply(nil, OpGetLatest, &LatestResult{Event: GeoEvent{Flags: 1}})
	if !bytes.Equal(b, []byte{0}) {
		t.Fatalf("not found encodes as %x", b)
	}
}

// sampleRequests and sampleReplies are one fixed value per operation, for
// fuzz seeds.
func sampleRequests() map[Operation]any {
	id := Uint128{Hi: 1, Lo: 2}
	ev := GeoEvent{EntityID: id, LatNano: 38_110_000_000, LonNano: 13_360_000_000, TTLSeconds: 60, HeadingCdeg: 9000}
	page := Page{Limit: 10, Cursor: "AQEAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}
	ids := IDList{id, {Lo: 3}}
	return withFenceSamples(retentionSampleRequests(), withFenceSamples(hookSampleRequests(), withFenceSamples(fenceSampleRequests(), map[Operation]any{
		OpInsert: &InsertRequest{Events: []GeoEvent{ev, ev}}, OpUpsert: &InsertRequest{Events: []GeoEvent{ev}},
		OpDeleteEntities: &DeleteRequest{EntityIDs: []Uint128{id}},
		OpTTLSet:         &TTLSetRequest{EntityID: id, TTLSeconds: 60}, OpTTLExtend: &TTLExtendRequest{EntityID: id, ExtendBySeconds: 5},
		OpTTLClear: &TTLClearRequest{EntityID: id}, OpCleanupExpired: &CleanupRequest{MaxEntries: 100},
		OpQueryRadius: &RadiusQuery{Center: Coordinate{1, 2}, RadiusMM: 1000, Group: GroupFilter{Set: true, ID: 7}, Page: page},
		OpQueryPolygon: &PolygonQuery{
			Vertices: []Coordinate{{0, 0}, {0, 10}, {10, 10}, {10, 0}}, Holes: [][]Coordinate{{{1, 1}, {1, 2}, {2, 2}}}, Page: page,
		},
		OpGetLatest: &id, OpGetLatestBatch: &ids, OpQueryLatest: &LatestQuery{SinceNS: 5, Page: page},
		OpEntityHistory: &HistoryQuery{EntityID: id, SinceNS: 1, UntilNS: 2, Page: page},
		OpStats:         nil, OpStatus: nil, OpTopology: nil, OpPing: nil,
		OpQueryBBox: &BBoxQuery{MinLatNano: 1, MinLonNano: 179_000_000_000, MaxLatNano: 2, MaxLonNano: -179_000_000_000,
			Group: GroupFilter{Set: true, ID: 3}, Filter: Filter{SinceNS: 4, FlagsAll: 1, FlagsAny: 6}, Page: page},
		OpQueryNearest: &NearestQuery{Center: Coordinate{1, 2}, MaxDistanceMM: 5000, Filter: Filter{FlagsAll: 2}, Page: Page{Limit: 10}},
	})))
}

func sampleReplies() map[Operation]any {
	ev := GeoEvent{EntityID: Uint128{Lo: 9}, TimestampNS: 1_700_000_000_000_000_000, CellID: 0x1234567890abcdef, LatNano: -5}
	qr := &QueryResult{Events: []GeoEvent{ev, ev}, HasMore: true, Cursor: "AQEAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}
	latest := LatestResults{{Event: ev, Found: true}, {}}
	return withFenceSamples(retentionSampleReplies(), withFenceSamples(hookSampleReplies(), withFenceSamples(fenceSampleReplies(), map[Operation]any{
		OpInsert: &InsertReply{Committed: true, Results: []EventResult{{Index: 0, TimestampNS: 5}, {Index: 1, Code: 9}}},
		OpUpsert: &InsertReply{Results: []EventResult{{Updated: true}}}, OpDeleteEntities: &DeleteReply{Deleted: 1, NotFound: 2},
		OpTTLSet: &TTLSetReply{ExpiresAtNS: 9}, OpTTLExtend: &TTLExtendReply{PreviousExpiresAtNS: 1, NewExpiresAtNS: 2},
		OpTTLClear: &TTLClearReply{PreviousExpiresAtNS: 3, HadTTL: true}, OpCleanupExpired: &CleanupReply{Scanned: 4, Removed: 5},
		OpQueryRadius:  &QueryResult{Events: []GeoEvent{ev}, DistancesMM: []uint64{42}, Cursor: ""},
		OpQueryPolygon: qr, OpQueryLatest: qr, OpEntityHistory: &QueryResult{}, OpQueryBBox: qr,
		OpQueryNearest: &QueryResult{Events: []GeoEvent{ev, ev}, DistancesMM: []uint64{1, 2}, HasMore: true, Cursor: "AQUAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
		OpGetLatest:    &LatestResult{Event: ev, Found: true}, OpGetLatestBatch: &latest,
		OpStats:  &Stats{EventCount: 1, EntityCount: 2, StorageBytes: 128, IndexBytes: 4},
		OpStatus: &StatusReply{EventsCount: 1, Version: "1.0.0", ClusterState: "healthy", NodeID: "replica-0", ClusterID: Uint128{Hi: 1, Lo: 2}},
		OpTopology: &TopologyReply{Version: 3, ReplicaCount: 3, Primary: 1, Nodes: []NodeInfo{
			{"replica-0", "10.0.0.1:3001", "healthy", 0, 0}, {"replica-1", "10.0.0.2:3001", "healthy", 30, 0},
			{"replica-2", "10.0.0.3:3001", "unknown", Unknown, Unknown},
		}, ClusterID: Uint128{Hi: 1, Lo: 2}},
		OpPing: &PingReply{Pong: false, Reason: "no quorum"},
	})))
}

func addCodecSeeds(f *testing.F, samples map[Operation]any, enc appendFunc) {
	for _, op := range allOps() {
		b, err := enc(nil, op, samples[op])
		if err != nil {
			f.Fatalf("%s: %v", op, err)
		}
		f.Add(byte(op), b)
		if len(b) > 3 {
			f.Add(byte(op), b[:len(b)/2])
			bad := bytes.Clone(b)
			bad[len(bad)/2] ^= 0xff
			f.Add(byte(op), bad)
		}
	}
	f.Add(byte(0), []byte{})
	f.Add(byte(200), []byte{1, 2, 3})
	f.Add(byte(OpInsert), []byte{0xff, 0xff, 0xff, 0xff})
	f.Add(byte(OpQueryPolygon), []byte{0xff, 0xff})
}

func fuzzCodec(t *testing.T, op byte, b []byte, enc appendFunc, dec decodeFunc) {
	v, err := dec(Operation(op), b)
	if err != nil {
		if c := codeOf(t, err); !decodeCodeOK(c) {
			t.Fatalf("op %d: unexpected code %d: %v", op, c, err)
		}
		return
	}
	again, err := enc(nil, Operation(op), v)
	if err != nil {
		t.Fatalf("op %d: an accepted payload does not re-encode: %v", op, err)
	}
	if !bytes.Equal(again, b) {
		t.Fatalf("op %d: an accepted payload re-encodes differently:\n%x\n%x", op, b, again)
	}
}

func FuzzDecodeRequest(f *testing.F) {
	addCodecSeeds(f, sampleRequests(), AppendRequest)
	ins, err := AppendRequest(nil, OpInsert, sampleRequests()[OpInsert])
	if err != nil {
		f.Fatal(err)
	}
	reserved := bytes.Clone(ins)
	reserved[4+120] = 1 // a reserved byte of the first record
	f.Add(byte(OpUpsert), reserved)
	f.Fuzz(func(t *testing.T, op byte, b []byte) {
		fuzzCodec(t, op, b, AppendRequest, DecodeRequest)
		if o := Operation(op); o == OpInsert || o == OpUpsert {
			checkEventRecords(t, o, b)
			checkDecodeBatch(t, o, b)
		}
	})
}

// checkDecodeBatch checks that DecodeBatch gives what DecodeRequest gives,
// error included, whatever the scratch memory holds, and that it decodes
// into that memory when it is large enough.
func checkDecodeBatch(t *testing.T, op Operation, b []byte) {
	v, err := DecodeRequest(op, b)
	for _, scratch := range [][]GeoEvent{nil, make([]GeoEvent, 1), make([]GeoEvent, 3, 64)} {
		for i := range scratch[:cap(scratch)] {
			scratch[:cap(scratch)][i] = GeoEvent{EntityID: Uint128{Lo: 99}, LatNano: -1, Flags: 7} // left from an earlier batch
		}
		got, gotErr := DecodeBatch(op, b, scratch)
		if (err == nil) != (gotErr == nil) || (err != nil && err.Error() != gotErr.Error()) {
			t.Fatalf("DecodeBatch error %v, DecodeRequest error %v", gotErr, err)
		}
		if err != nil {
			continue
		}
		want := v.(*InsertRequest).Events
		if len(got.Events) != len(want) || (len(want) > 0 && !reflect.DeepEqual(got.Events, want)) {
			t.Fatalf("DecodeBatch gave %v, DecodeRequest %v", got.Events, want)
		}
		if n := len(want); n > 0 && n <= cap(scratch) && &got.Events[0] != &scratch[:1][0] {
			t.Fatalf("%d events did not decode into scratch memory of capacity %d", n, cap(scratch))
		}
	}
}

// checkEventRecords checks that EventRecords accepts exactly the batches
// DecodeRequest accepts, and returns their events' records.
func checkEventRecords(t *testing.T, op Operation, b []byte) {
	v, err := DecodeRequest(op, b)
	recs, n, ok := EventRecords(b)
	if ok != (err == nil) {
		t.Fatalf("EventRecords ok %v, DecodeRequest error %v", ok, err)
	}
	if !ok {
		return
	}
	evs := v.(*InsertRequest).Events
	var want []byte
	for i := range evs {
		want = evs[i].AppendRecord(want)
	}
	if n != len(evs) || !bytes.Equal(recs, want) {
		t.Fatalf("EventRecords gave %d events, %d bytes; DecodeRequest %d events", n, len(recs), len(evs))
	}
}

func FuzzDecodeReply(f *testing.F) {
	addCodecSeeds(f, sampleReplies(), AppendReply)
	f.Fuzz(func(t *testing.T, op byte, b []byte) { fuzzCodec(t, op, b, AppendReply, DecodeReply) })
}

// TestQueryReplyAllocatesOnce: a query result is sized before it is
// written, so a large radius reply (events, then distances, then the
// cursor) costs one allocation and no copy of the events.
func TestQueryReplyAllocatesOnce(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's build allocates what this counts")
	}
	res := &QueryResult{Events: make([]GeoEvent, 500), DistancesMM: make([]uint64, 500), HasMore: true, Cursor: "c2VlIHlvdSBvbiB0aGUgbmV4dCBwYWdl"}
	for i := range res.Events {
		res.Events[i] = GeoEvent{EntityID: Uint128{Lo: uint64(i + 1)}, TimestampNS: 1, CellID: 1}
		res.DistancesMM[i] = uint64(i)
	}
	var out []byte
	allocs := testing.AllocsPerRun(20, func() {
		var err error
		if out, err = AppendReply(nil, OpQueryRadius, res); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 1 {
		t.Fatalf("AppendReply allocates %.1f times for a 500-event radius result, want 1", allocs)
	}
	if want := 4 + 500*RecordSize + 500*8 + 1 + 2 + len(res.Cursor); len(out) != want {
		t.Fatalf("reply of %d bytes, want %d", len(out), want)
	}
}

// BenchmarkInsertReply10k encodes the reply frame of a 10,000-event batch,
// as every replica does when it applies one.
func BenchmarkInsertReply10k(b *testing.B) {
	r := &InsertReply{Committed: true, Results: make([]EventResult, 10_000)}
	for i := range r.Results {
		r.Results[i] = EventResult{Index: uint32(i), TimestampNS: uint64(i) * 1000}
	}
	b.ReportAllocs()
	for b.Loop() {
		buf, start := BeginFrame(make([]byte, 0, 512))
		buf, err := AppendReplyMessage(buf, OpInsert, r, nil)
		if err != nil {
			b.Fatal(err)
		}
		FinishFrame(buf, start, Header{Type: MsgReply})
	}
}

// TestOptionalFilter: radius and polygon requests carry a filter only when
// it is not zero, and a present zero filter is refused (it is not the
// canonical encoding), so old encodings decode as before.
func TestOptionalFilter(t *testing.T) {
	for _, c := range []struct {
		op   Operation
		tail int
	}{{OpQueryRadius, filterSize}, {OpQueryPolygon, filterSize + 1}} {
		plain, err := AppendRequest(nil, c.op, sampleRequests()[c.op])
		if err != nil {
			t.Fatal(err)
		}
		_, err = DecodeRequest(c.op, append(slices.Clone(plain), make([]byte, c.tail)...))
		wantCode(t, err, MalformedRequest)
		_, err = DecodeRequest(c.op, append(slices.Clone(plain), make([]byte, c.tail-1)...))
		wantCode(t, err, MalformedRequest)
		tail := []byte{1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 3, 0, 1}[:c.tail]
		v, err := DecodeRequest(c.op, append(slices.Clone(plain), tail...))
		if err != nil {
			t.Fatal(err)
		}
		var f Filter
		switch r := v.(type) {
		case *RadiusQuery:
			f = r.Filter
		case *PolygonQuery:
			f = r.Filter
			if r.Edges != EdgesPlanar {
				t.Fatalf("edges %d", r.Edges)
			}
		}
		if f != (Filter{SinceNS: 1, FlagsAll: 2, FlagsAny: 3}) {
			t.Fatalf("%s: filter %+v", c.op, f)
		}
	}
	// Planar edges alone.
	q := &PolygonQuery{Vertices: []Coordinate{{1, 2}}, Edges: EdgesPlanar}
	b, err := AppendRequest(nil, OpQueryPolygon, q)
	if err != nil {
		t.Fatal(err)
	}
	v, err := DecodeRequest(OpQueryPolygon, b)
	if err != nil || v.(*PolygonQuery).Edges != EdgesPlanar || !v.(*PolygonQuery).Filter.IsZero() {
		t.Fatalf("%+v %v", v, err)
	}
}

func TestFilterMatch(t *testing.T) {
	for _, c := range []struct {
		f     Filter
		ts    uint64
		flags uint16
		want  bool
	}{
		{Filter{}, 0, 0, true},
		{Filter{SinceNS: 5}, 5, 0, false},
		{Filter{SinceNS: 5}, 6, 0, true},
		{Filter{FlagsAll: 3}, 1, 7, true},
		{Filter{FlagsAll: 3}, 1, 5, false},
		{Filter{FlagsAny: 6}, 1, 1, false},
		{Filter{FlagsAny: 6}, 1, 4, true},
		{Filter{FlagsAll: 1, FlagsAny: 6}, 1, 5, true},
		{Filter{FlagsAll: 1, FlagsAny: 6}, 1, 4, false},
	} {
		if got := c.f.Match(c.ts, c.flags); got != c.want {
			t.Errorf("%+v.Match(%d, %#x) = %v", c.f, c.ts, c.flags, got)
		}
	}
}
