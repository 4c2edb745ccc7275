package core

import (
	"maps"
	"testing"

	"pgregory.net/rapid"
)

func genFence(t *rapid.T) Fence {
	return Fence{
		Name:     genBytesString(t, 40, "name"),
		Shape:    FenceShape(rapid.Uint8().Draw(t, "shape")),
		Vertices: rapid.SliceOfN(genCoord(), 0, 8).Draw(t, "vertices"),
		Holes:    rapid.SliceOfN(rapid.SliceOfN(genCoord(), 0, 4), 0, 3).Draw(t, "holes"),
		Center:   genCoord().Draw(t, "center"),
		RadiusMM: rapid.Uint64().Draw(t, "radius"),
		Min:      genCoord().Draw(t, "min"),
		Max:      genCoord().Draw(t, "max"),
		Group:    genGroup(t),
		Report:   NotifyMask(rapid.Uint8().Draw(t, "report")),
	}
}

func genFenceRequest(t *rapid.T, op Operation) any {
	switch op {
	case OpPutFence:
		f := genFence(t)
		return &f
	case OpGetFence, OpDeleteFence:
		return &FenceName{Name: genBytesString(t, MaxCodecString, "name")}
	case OpListFences:
		return &FenceListRequest{After: genBytesString(t, 70, "after"), Limit: rapid.Uint32().Draw(t, "limit")}
	case OpReadFeed:
		return &FeedRequest{
			After:  rapid.Uint64().Draw(t, "after"),
			Fences: rapid.SliceOfN(rapid.StringN(0, 10, 64), 0, 4).Draw(t, "fences"),
			Types:  NotifyMask(rapid.Uint8().Draw(t, "types")),
			Limit:  rapid.Uint32().Draw(t, "limit"),
		}
	}
	panic("no generator for " + op.String())
}

func genFenceReply(t *rapid.T, op Operation) any {
	switch op {
	case OpPutFence:
		return &PutFenceReply{Created: rapid.Bool().Draw(t, "created")}
	case OpGetFence:
		f := genFence(t)
		return &f
	case OpDeleteFence:
		return &DeleteFenceReply{Deleted: rapid.Bool().Draw(t, "deleted")}
	case OpListFences:
		return &FenceList{Fences: rapid.SliceOfN(rapid.Custom(genFence), 0, 3).Draw(t, "fences"),
			HasMore: rapid.Bool().Draw(t, "more"), Total: rapid.Uint32().Draw(t, "total")}
	case OpReadFeed:
		ns := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) Notification {
			return Notification{
				Seq: rapid.Uint64().Draw(t, "seq"), Type: NotifyType(rapid.Uint8().Draw(t, "type")),
				Fence: rapid.StringN(0, 10, 64).Draw(t, "fence"), Event: genEvent().Draw(t, "event"),
				Prev: genCoord().Draw(t, "prev"), HasPrev: rapid.Bool().Draw(t, "has_prev"), OpNS: rapid.Uint64().Draw(t, "op_ns"),
			}
		}), 0, 4).Draw(t, "notifications")
		return &FeedPage{Notifications: ns, Start: rapid.Uint64().Draw(t, "start"), Next: rapid.Uint64().Draw(t, "next"), HasMore: rapid.Bool().Draw(t, "more")}
	}
	panic("no generator for " + op.String())
}

func withFenceSamples(extra, m map[Operation]any) map[Operation]any {
	maps.Copy(m, extra)
	return m
}

func fenceSampleRequests() map[Operation]any {
	return map[Operation]any{
		OpPutFence: &Fence{Name: "depot", Shape: FencePolygon, Vertices: []Coordinate{{0, 0}, {0, 10}, {10, 10}},
			Group: GroupFilter{Set: true, ID: 3}, Report: AllNotify},
		OpGetFence: &FenceName{Name: "depot"}, OpDeleteFence: &FenceName{Name: "depot"},
		OpListFences: &FenceListRequest{After: "a", Limit: 10},
		OpReadFeed:   &FeedRequest{After: 1 << 32, Fences: []string{"depot", "yard"}, Types: DefaultNotify, Limit: 100},
	}
}

func fenceSampleReplies() map[Operation]any {
	ev := GeoEvent{EntityID: Uint128{Lo: 9}, TimestampNS: 1_700_000_000_000_000_000, CellID: 0x1234567890abcdef, LatNano: -5}
	circle := Fence{Name: "c", Shape: FenceCircle, Center: Coordinate{1, 2}, RadiusMM: 5000}
	return map[Operation]any{
		OpPutFence: &PutFenceReply{Created: true}, OpGetFence: &circle, OpDeleteFence: &DeleteFenceReply{Deleted: true},
		OpListFences: &FenceList{Fences: []Fence{circle, {Name: "b", Shape: FenceBBox, Min: Coordinate{1, 2}, Max: Coordinate{3, 4}}}, Total: 2},
		OpReadFeed: &FeedPage{Notifications: []Notification{{Seq: 1<<32 + 1, Type: NotifyEnter, Fence: "c", Event: ev, HasPrev: true, Prev: Coordinate{5, 6}, OpNS: 7}},
			Start: 1 << 32, Next: 1<<32 + 1},
	}
}

func TestFenceNames(t *testing.T) {
	for _, ok := range []string{"a", "depot-7", "Zone_1.north", string(make([]byte, 0)) + "x"} {
		if !ValidFenceName(ok) {
			t.Errorf("%q refused", ok)
		}
	}
	long := make([]byte, MaxFenceNameLen+1)
	for i := range long {
		long[i] = 'a'
	}
	for _, bad := range []string{"", "a b", "a,b", "a/b", "é", string(long), "a%2F"} {
		if ValidFenceName(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
	if !ValidFenceName(string(long[:MaxFenceNameLen])) {
		t.Error("a name of the longest length refused")
	}
}

func TestNotifyMask(t *testing.T) {
	if !DefaultNotify.Has(NotifyEnter) || !DefaultNotify.Has(NotifyExit) || DefaultNotify.Has(NotifyInside) {
		t.Errorf("DefaultNotify = %b", DefaultNotify)
	}
	if NotifyMask(0xff).Has(NotifyType(7)) {
		t.Error("an unknown type is in a mask")
	}
	for _, n := range []string{"enter", "exit", "inside"} {
		if ty, ok := ParseNotifyType(n); !ok || ty.String() != n {
			t.Errorf("ParseNotifyType(%q) = %v, %v", n, ty, ok)
		}
	}
}
