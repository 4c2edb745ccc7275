package statemachine

import (
	"bytes"
	"cmp"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/statemachine/internal/geom"
	"pgregory.net/rapid"
)

// The fence model: entities' latest positions and groups in a map, every
// fence tested against every move (no index), notifications in the order
// the feed promises (per write, per event, by fence name).

type fenceModelEntity struct {
	lat, lon  int64
	group     uint64
	expiresAt uint64
	ev        core.GeoEvent
}

type fenceModel struct {
	fences map[string]core.Fence
	polys  map[string]*geom.Polygon
	ents   map[core.Uint128]*fenceModelEntity
	notes  []core.Notification // every notification expected, in order (Seq and OpNS unset)
}

func (m *fenceModel) inside(f core.Fence, lat, lon int64, group uint64) bool {
	if f.Group.Set && f.Group.ID != group {
		return false
	}
	switch f.Shape {
	case core.FenceBBox:
		return lat >= f.Min.LatNano && lat <= f.Max.LatNano && lon >= f.Min.LonNano && lon <= f.Max.LonNano
	case core.FenceCircle:
		return geom.DistanceMM(f.Center.LatNano, f.Center.LonNano, lat, lon) <= f.RadiusMM
	case core.FencePolygon:
		return m.polys[f.Name].ContainsPoint(lat, lon)
	}
	return false
}

func (m *fenceModel) names() []string {
	var ns []string
	for n := range m.fences {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return ns
}

func reportOf(f core.Fence) core.NotifyMask {
	if f.Report == 0 {
		return core.DefaultNotify
	}
	return f.Report
}

func (m *fenceModel) gone(id core.Uint128) {
	e := m.ents[id]
	for _, n := range m.names() {
		f := m.fences[n]
		if reportOf(f).Has(core.NotifyExit) && m.inside(f, e.lat, e.lon, e.group) {
			m.notes = append(m.notes, core.Notification{Type: core.NotifyExit, Fence: n, Event: e.ev, HasPrev: true, Prev: core.Coordinate{LatNano: e.lat, LonNano: e.lon}})
		}
	}
	delete(m.ents, id)
}

func (m *fenceModel) move(ev core.GeoEvent, t uint64) {
	if e := m.ents[ev.EntityID]; e != nil && e.expiresAt != 0 && t >= e.expiresAt {
		m.gone(ev.EntityID)
	}
	prev := m.ents[ev.EntityID]
	for _, n := range m.names() {
		f := m.fences[n]
		was := prev != nil && m.inside(f, prev.lat, prev.lon, prev.group)
		now := m.inside(f, ev.LatNano, ev.LonNano, ev.GroupID)
		var ty core.NotifyType
		switch {
		case now && !was:
			ty = core.NotifyEnter
		case was && !now:
			ty = core.NotifyExit
		case was && now:
			ty = core.NotifyInside
		default:
			continue
		}
		if reportOf(f).Has(ty) {
			note := core.Notification{Type: ty, Fence: n, Event: ev}
			if prev != nil {
				note.HasPrev, note.Prev = true, core.Coordinate{LatNano: prev.lat, LonNano: prev.lon}
			}
			m.notes = append(m.notes, note)
		}
	}
	m.ents[ev.EntityID] = &fenceModelEntity{lat: ev.LatNano, lon: ev.LonNano, group: ev.GroupID, ev: ev}
}

// The area of the test: about 2 km square, so that fences of 100 m to 1 km
// overlap each other and the entities' moves.
const (
	fmLat  = 52_500_000_000
	fmLon  = 13_400_000_000
	fmSpan = 10_000_000 // nanodegrees, about 1.1 km of latitude
)

func drawFence(t *rapid.T, name string) core.Fence {
	f := core.Fence{Name: name, Report: core.NotifyMask(rapid.IntRange(0, 7).Draw(t, "report")) << 1 & core.AllNotify}
	if rapid.IntRange(0, 3).Draw(t, "grouped") == 0 {
		f.Group = core.GroupFilter{Set: true, ID: uint64(rapid.IntRange(1, 2).Draw(t, "group"))}
	}
	lat := fmLat + rapid.Int64Range(-fmSpan, fmSpan).Draw(t, "lat")
	lon := fmLon + rapid.Int64Range(-fmSpan, fmSpan).Draw(t, "lon")
	h := rapid.Int64Range(500_000, fmSpan).Draw(t, "h")
	v := rapid.Int64Range(500_000, fmSpan).Draw(t, "v")
	switch rapid.IntRange(1, 3).Draw(t, "shape") {
	case 1:
		f.Shape = core.FencePolygon
		f.Vertices = []core.Coordinate{{LatNano: lat - v, LonNano: lon - h}, {LatNano: lat - v, LonNano: lon + h}, {LatNano: lat + v, LonNano: lon}}
	case 2:
		f.Shape, f.Center, f.RadiusMM = core.FenceCircle, core.Coordinate{LatNano: lat, LonNano: lon}, uint64(v)/10
	default:
		f.Shape, f.Min, f.Max = core.FenceBBox, core.Coordinate{LatNano: lat - v, LonNano: lon - h}, core.Coordinate{LatNano: lat + v, LonNano: lon + h}
	}
	return f
}

// TestFencesAgainstModel applies random fence definitions, moves, deletes
// and expiries and checks that the feed holds exactly the model's
// notifications, with growing sequences, that filters select what they
// name, and that a snapshot carries fences and feed.
func TestFencesAgainstModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sm := New()
		m := &fenceModel{fences: map[string]core.Fence{}, polys: map[string]*geom.Polygon{}, ents: map[core.Uint128]*fenceModelEntity{}}
		ids := []core.Uint128{{Lo: 1}, {Lo: 2}, {Lo: 3}, {Lo: 4}}
		names := []string{"a", "b", "c", "d", "e"}
		now := uint64(1_700_000_000_000_000_000)
		index := uint64(0)
		var lastSeq uint64
		var got []core.Notification
		var retainNS, cut uint64 // set_feed_retention's age (0: the default's day); notifications before cut are dropped
		steps := rapid.IntRange(1, 60).Draw(t, "steps")
		for range steps {
			now += uint64(rapid.IntRange(1, 3).Draw(t, "dt")) * 1_000_000_000
			index += uint64(rapid.IntRange(1, 3).Draw(t, "di"))
			sm.BeginEntry(index, now)
			trims := false // the step may drop notifications by age
			switch rapid.IntRange(0, 10).Draw(t, "op") {
			case 10:
				retainNS = uint64(rapid.IntRange(60, 120).Draw(t, "retain_s")) * 1_000_000_000
				if _, err := sm.SetFeedRetention(now, &core.FeedRetention{MaxAgeS: retainNS / 1_000_000_000, MaxNotifications: 1000}); err != nil {
					t.Fatal(err)
				}
				trims = true
			case 0:
				f := drawFence(t, rapid.SampledFrom(names).Draw(t, "name"))
				if _, err := sm.PutFence(now, &f); err != nil {
					t.Fatalf("put %+v: %v", f, err)
				}
				if f.Shape == core.FencePolygon {
					p, err := geom.NewPolygon(f.Vertices, f.Holes)
					if err != nil {
						t.Fatal(err)
					}
					m.polys[f.Name] = p
				}
				m.fences[f.Name] = f
			case 1:
				name := rapid.SampledFrom(names).Draw(t, "name")
				_, err := sm.DeleteFence(now, &core.FenceName{Name: name})
				if _, ok := m.fences[name]; ok != (err == nil) {
					t.Fatalf("delete %s: %v, model has it: %v", name, err, ok)
				}
				delete(m.fences, name)
			case 2:
				id := rapid.SampledFrom(ids).Draw(t, "id")
				if _, err := sm.DeleteEntities(now, &core.DeleteRequest{EntityIDs: []core.Uint128{id}}); err != nil {
					t.Fatal(err)
				}
				if m.ents[id] != nil {
					m.gone(id)
				}
			case 3:
				id := rapid.SampledFrom(ids).Draw(t, "id")
				_, err := sm.TTLSet(now, &core.TTLSetRequest{EntityID: id, TTLSeconds: 2})
				if e := m.ents[id]; e != nil && (e.expiresAt == 0 || now < e.expiresAt) {
					if err != nil {
						t.Fatal(err)
					}
					e.expiresAt = now + 2_000_000_000
				}
			case 4:
				if _, err := sm.CleanupExpired(now, &core.CleanupRequest{}); err != nil {
					t.Fatal(err)
				}
				// Soonest expiry first, then lowest id, as the expiry index.
				var due []core.Uint128
				for _, id := range ids {
					if e := m.ents[id]; e != nil && e.expiresAt != 0 && now >= e.expiresAt {
						due = append(due, id)
					}
				}
				slices.SortStableFunc(due, func(a, b core.Uint128) int {
					return cmp.Compare(m.ents[a].expiresAt, m.ents[b].expiresAt)
				})
				for _, id := range due {
					m.gone(id)
				}
			default:
				n := rapid.IntRange(1, 3).Draw(t, "events")
				evs := make([]core.GeoEvent, n)
				for i := range evs {
					evs[i] = core.GeoEvent{
						EntityID: rapid.SampledFrom(ids).Draw(t, "id"),
						LatNano:  fmLat + rapid.Int64Range(-fmSpan-fmSpan/2, fmSpan+fmSpan/2).Draw(t, "lat"),
						LonNano:  fmLon + rapid.Int64Range(-fmSpan-fmSpan/2, fmSpan+fmSpan/2).Draw(t, "lon"),
						GroupID:  uint64(rapid.IntRange(1, 2).Draw(t, "group")),
					}
				}
				AssignCells(evs)
				upsert := rapid.Bool().Draw(t, "upsert")
				var reply core.InsertReply
				var err error
				if upsert {
					reply, err = sm.Upsert(now, &core.InsertRequest{Events: evs})
				} else {
					reply, err = sm.Insert(now, &core.InsertRequest{Events: evs})
				}
				if err != nil || !reply.Committed {
					t.Fatalf("write: %v %+v", err, reply)
				}
				for i := range evs {
					ev := evs[i]
					ev.TimestampNS = reply.Results[i].TimestampNS
					m.move(ev, now)
				}
			}
			page, err := sm.ReadFeed(now, &core.FeedRequest{After: lastSeq, Limit: core.MaxFeedLimit})
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range page.Notifications {
				if n.Seq <= lastSeq || n.Seq>>32 != index || n.OpNS != now {
					t.Fatalf("notification %+v after sequence %d, entry %d at %d", n, lastSeq, index, now)
				}
				lastSeq = n.Seq
				got = append(got, n)
			}
			if page.HasMore {
				t.Fatal("a page of at most 10,000 did not hold one step's notifications")
			}
			if (trims || len(page.Notifications) > 0) && retainNS != 0 && now >= retainNS {
				cut = max(cut, now-retainNS)
			}
		}
		kept := 0 // the first notification the feed retains, by the model's retention
		for kept < len(got) && got[kept].OpNS < cut {
			kept++
		}
		from := uint64(0)
		if kept > 0 {
			from = got[kept-1].Seq
			if _, err := sm.ReadFeed(now, &core.FeedRequest{}); err == nil {
				t.Fatalf("a read from 0 after %d notifications were dropped", kept)
			}
		}
		if len(got) != len(m.notes) {
			t.Fatalf("%d notifications, the model has %d:\n got %+v\nwant %+v", len(got), len(m.notes), got, m.notes)
		}
		for i := range got {
			g := got[i]
			g.Seq, g.OpNS = 0, 0
			if g != m.notes[i] {
				t.Fatalf("notification %d:\n got %+v\nwant %+v", i, g, m.notes[i])
			}
		}

		// Filters.
		want := rapid.SliceOfNDistinct(rapid.SampledFrom(names), 0, 3, func(s string) string { return s }).Draw(t, "filter")
		types := core.NotifyMask(rapid.IntRange(0, 7).Draw(t, "types")) << 1 & core.AllNotify
		page, err := sm.ReadFeed(now, &core.FeedRequest{After: from, Fences: want, Types: types, Limit: core.MaxFeedLimit})
		if err != nil {
			t.Fatal(err)
		}
		var exp []core.Notification
		for _, n := range got[kept:] {
			if (len(want) == 0 || slices.Contains(want, n.Fence)) && (types == 0 || types.Has(n.Type)) {
				exp = append(exp, n)
			}
		}
		if !slices.Equal(page.Notifications, exp) {
			t.Fatalf("filter %v %b: got %d notifications, want %d", want, types, len(page.Notifications), len(exp))
		}

		// A snapshot carries the fences and the feed, and the copy goes on
		// alike.
		cp, _ := restored(t, sm)
		if cp.Digest() != sm.Digest() {
			t.Fatal("the restored state has another digest")
		}
		ev := []core.GeoEvent{{EntityID: ids[0], LatNano: fmLat, LonNano: fmLon, GroupID: 1}}
		AssignCells(ev)
		for _, s := range []*StateMachine{sm, cp} {
			s.BeginEntry(index+1, now+1)
			if _, err := s.Upsert(now+1, &core.InsertRequest{Events: slices.Clone(ev)}); err != nil {
				t.Fatal(err)
			}
		}
		if cp.Digest() != sm.Digest() {
			t.Fatal("the restored state went on differently")
		}
	})
}

// TestFeedRetention: the feed drops its oldest notifications beyond its
// count and age, and a read from before its start says where it starts.
func TestFeedRetention(t *testing.T) {
	sm := New()
	sm.setFeedRetention(10_000_000_000, 5)
	if _, err := sm.PutFence(0, &core.Fence{Name: "box", Shape: core.FenceBBox,
		Min: core.Coordinate{LatNano: 0, LonNano: 0}, Max: core.Coordinate{LatNano: 1_000_000_000, LonNano: 1_000_000_000}}); err != nil {
		t.Fatal(err)
	}
	id := core.Uint128{Lo: 7}
	move := func(i int, lat int64) {
		ts := uint64(1_000_000_000_000 + i*1_000_000_000)
		sm.BeginEntry(uint64(i), ts)
		evs := []core.GeoEvent{{EntityID: id, LatNano: lat, LonNano: 500_000_000}}
		AssignCells(evs)
		if _, err := sm.Upsert(ts, &core.InsertRequest{Events: evs}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 8; i++ {
		move(i, int64(i%2)*500_000_000+(1-int64(i%2))*2_000_000_000) // in, out, in, ...
	}
	page, err := sm.ReadFeed(0, &core.FeedRequest{After: 3<<32 + 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Notifications) != 5 || page.Start != 4<<32+1 || page.Notifications[0].Seq != 4<<32+1 {
		t.Fatalf("after 8 transitions with a count of 5: %+v", page)
	}
	_, err = sm.ReadFeed(0, &core.FeedRequest{After: 2 << 32})
	if e, ok := err.(*core.Error); !ok || e.Code != core.FeedTrimmed.Code || !strings.Contains(e.Message, "after=12884901889") {
		t.Fatalf("a read from before the start: %v", err)
	}
	// Age: 20 s later, the notifications older than 10 s go.
	move(30, 500_000_000)
	page, err = sm.ReadFeed(0, &core.FeedRequest{After: 8<<32 + 1})
	if err != nil || len(page.Notifications) != 1 || page.Start != 30<<32+1 {
		t.Fatalf("after a gap of 22 s: %+v, %v", page, err)
	}
}

// TestFenceErrors: definitions are validated as their shapes' queries, a
// rejected one changes nothing, and an unknown fence is 240.
func TestFenceErrors(t *testing.T) {
	sm := New()
	tri := []core.Coordinate{{LatNano: 0, LonNano: 0}, {LatNano: 0, LonNano: 1_000_000}, {LatNano: 1_000_000, LonNano: 0}}
	cases := []struct {
		f    core.Fence
		code core.Code
	}{
		{core.Fence{Name: "", Shape: core.FencePolygon, Vertices: tri}, core.InvalidFence.Code},
		{core.Fence{Name: "a b", Shape: core.FencePolygon, Vertices: tri}, core.InvalidFence.Code},
		{core.Fence{Name: "x", Shape: 9}, core.InvalidFence.Code},
		{core.Fence{Name: "x", Shape: core.FencePolygon, Vertices: tri, Report: 1}, core.InvalidFence.Code},
		{core.Fence{Name: "x", Shape: core.FencePolygon, Vertices: tri[:2]}, core.InvalidPolygon.Code},
		{core.Fence{Name: "x", Shape: core.FencePolygon, Vertices: tri, RadiusMM: 5}, core.InvalidFence.Code},
		{core.Fence{Name: "x", Shape: core.FenceCircle, RadiusMM: 0, Center: core.Coordinate{LatNano: 1}}, core.InvalidRadius.Code},
		{core.Fence{Name: "x", Shape: core.FenceCircle, RadiusMM: 5, Center: core.Coordinate{LatNano: 91e9}}, core.InvalidCoordinates.Code},
		{core.Fence{Name: "x", Shape: core.FenceBBox, Min: core.Coordinate{LatNano: 2}, Max: core.Coordinate{LatNano: 1}}, core.InvalidCoordinates.Code},
	}
	before := sm.Digest()
	for _, c := range cases {
		_, err := sm.PutFence(0, &c.f)
		if e, ok := err.(*core.Error); !ok || e.Code != c.code {
			t.Errorf("%q %s: %v, want code %d", c.f.Name, c.f.Shape, err, c.code)
		}
	}
	if sm.Digest() != before {
		t.Error("a rejected fence changed the state")
	}
	for _, err := range []error{
		func() error { _, err := sm.GetFence(0, &core.FenceName{Name: "nope"}); return err }(),
		func() error { _, err := sm.DeleteFence(0, &core.FenceName{Name: "nope"}); return err }(),
	} {
		if e, ok := err.(*core.Error); !ok || e.Code != core.FenceNotFound.Code {
			t.Errorf("an unknown fence: %v", err)
		}
	}
	if _, err := sm.ReadFeed(0, &core.FeedRequest{Fences: []string{"a,b"}}); err == nil {
		t.Error("a bad fence name in a filter was accepted")
	}
	if _, err := sm.ReadFeed(0, &core.FeedRequest{Limit: core.MaxFeedLimit + 1}); err == nil {
		t.Error("a limit over 10,000 was accepted")
	}
}

// TestFenceList pages fences in name order.
func TestFenceList(t *testing.T) {
	sm := New()
	for _, n := range []string{"c", "a", "b", "d"} {
		if r, err := sm.PutFence(0, &core.Fence{Name: n, Shape: core.FenceCircle, Center: core.Coordinate{LatNano: 1}, RadiusMM: 10}); err != nil || !r.Created {
			t.Fatal(r, err)
		}
	}
	if r, err := sm.PutFence(0, &core.Fence{Name: "a", Shape: core.FenceCircle, Center: core.Coordinate{LatNano: 2}, RadiusMM: 10}); err != nil || r.Created {
		t.Fatal("replacing a fence:", r, err)
	}
	p, err := sm.ListFences(0, &core.FenceListRequest{Limit: 3})
	if err != nil || len(p.Fences) != 3 || !p.HasMore || p.Total != 4 || p.Fences[0].Name != "a" || p.Fences[0].Center.LatNano != 2 || p.Fences[0].Report != core.DefaultNotify {
		t.Fatalf("first page: %+v %v", p, err)
	}
	p, err = sm.ListFences(0, &core.FenceListRequest{After: "c"})
	if err != nil || len(p.Fences) != 1 || p.HasMore || p.Fences[0].Name != "d" {
		t.Fatalf("after c: %+v %v", p, err)
	}
}

// TestRangesCells: the cells tiling a range cover exactly it.
func TestRangesCells(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := geom.LeafCell(rapid.Int64Range(-90e9, 90e9).Draw(t, "lat"), rapid.Int64Range(-180e9, 180e9).Draw(t, "lon"))
		span := rapid.Uint64Range(0, 1<<40).Draw(t, "span") &^ 1
		b := a + span
		cells := rangesCells(nil, []geom.CellRange{{Min: a, Max: b}})
		next := a
		for _, c := range cells {
			lsb := c & -c
			if c-lsb+1 != next {
				t.Fatalf("cell %x starts at %x, want %x", c, c-lsb+1, next)
			}
			next = c + lsb + 1
		}
		if next != b+2 {
			t.Fatalf("the cells end at %x, want %x", next-2, b)
		}
	})
}

// FuzzPutFence: any encoded fence definition is accepted or refused with
// a code, never a panic, and a refused one changes nothing; an accepted
// one reads back as it was put.
func FuzzPutFence(f *testing.F) {
	tri := []core.Coordinate{{LatNano: 0, LonNano: 0}, {LatNano: 0, LonNano: 1_000_000}, {LatNano: 1_000_000, LonNano: 0}}
	for _, def := range []core.Fence{
		{Name: "p", Shape: core.FencePolygon, Vertices: tri, Report: core.AllNotify},
		{Name: "c", Shape: core.FenceCircle, Center: core.Coordinate{LatNano: 5, LonNano: 6}, RadiusMM: 1000, Group: core.GroupFilter{Set: true, ID: 2}},
		{Name: "b", Shape: core.FenceBBox, Min: core.Coordinate{LatNano: -5, LonNano: 170e9}, Max: core.Coordinate{LatNano: 5, LonNano: -170e9}},
		{Name: "x y", Shape: 7},
	} {
		b, err := core.PutFence.AppendRequest(nil, &def)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		def, err := core.PutFence.DecodeRequest(b)
		if err != nil {
			return
		}
		sm := New()
		before := sm.Digest()
		if _, err := sm.PutFence(0, def); err != nil {
			if _, ok := err.(*core.Error); !ok {
				t.Fatalf("not a coded error: %v", err)
			}
			if sm.Digest() != before {
				t.Fatal("a refused fence changed the state")
			}
			return
		}
		got, err := sm.GetFence(0, &core.FenceName{Name: def.Name})
		if err != nil || got.Name != def.Name || got.Shape != def.Shape || len(got.Vertices) != len(def.Vertices) {
			t.Fatalf("put %+v, got %+v, %v", def, got, err)
		}
		ev := []core.GeoEvent{{EntityID: core.Uint128{Lo: 1}, LatNano: def.Center.LatNano, LonNano: def.Center.LonNano}}
		AssignCells(ev)
		if _, err := sm.Upsert(1, &core.InsertRequest{Events: ev}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFrozenFeed: a frozen view's snapshot is the state at Freeze, though
// the feed turns over (chunks dropped, notifications added) and fences
// change after it.
func TestFrozenFeed(t *testing.T) {
	sm := New()
	sm.setFeedRetention(0, feedChunkLen+10)
	if _, err := sm.PutFence(0, &core.Fence{Name: "box", Shape: core.FenceBBox, Report: core.AllNotify,
		Min: core.Coordinate{LatNano: 0, LonNano: 0}, Max: core.Coordinate{LatNano: 1_000_000_000, LonNano: 1_000_000_000}}); err != nil {
		t.Fatal(err)
	}
	step := 0
	moves := func(n int) {
		for range n {
			step++
			sm.BeginEntry(uint64(step), uint64(step))
			evs := []core.GeoEvent{{EntityID: core.Uint128{Lo: 1}, LatNano: int64(step%2) * 500_000_000, LonNano: 500_000_000}}
			AssignCells(evs)
			if _, err := sm.Upsert(uint64(step), &core.InsertRequest{Events: evs}); err != nil {
				t.Fatal(err)
			}
		}
	}
	moves(feedChunkLen + 100)
	var want bytes.Buffer
	if err := sm.WriteSnapshot(&want); err != nil {
		t.Fatal(err)
	}
	f := sm.Freeze()
	moves(2 * feedChunkLen)
	if _, err := sm.DeleteFence(0, &core.FenceName{Name: "box"}); err != nil {
		t.Fatal(err)
	}
	got := f.AppendSnapshot(nil)
	sm.Release(f)
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatal("the frozen snapshot differs from the state at Freeze")
	}
	cp, err := ReadSnapshot(bytes.NewReader(got))
	if err != nil {
		t.Fatal(err)
	}
	p, err := cp.ReadFeed(0, &core.FeedRequest{After: cp.watch.feed.dropped, Limit: core.MaxFeedLimit})
	if err != nil || len(p.Notifications) != feedChunkLen+10 {
		t.Fatalf("restored feed: %d notifications, %v", len(p.Notifications), err)
	}
}

// TestFenceIndex checks the index against the coverings: after puts and
// deletes of polygons of the benchmark's and circles from 1 m to 2 km
// (then to 500 km: wider ones are in big), the candidates of a leaf cell,
// alone or with another one (near it, in the same bucket or not, or far),
// are the fences one of whose covering cells holds either, each once and
// with the right marks.
func TestFenceIndex(t *testing.T) {
	t.Run("blocks", func(t *testing.T) { testFenceIndex(t, 12) })
	t.Run("big", func(t *testing.T) { testFenceIndex(t, 19) })
}

func testFenceIndex(t *testing.T, radiusShift int) {
	sm := New()
	r := rand.New(rand.NewPCG(3, 4))
	point := func() (int64, int64) {
		return fmLat + r.Int64N(2*fmSpan*100) - fmSpan*100, fmLon + r.Int64N(2*fmSpan*100) - fmSpan*100
	}
	var anchors []core.Coordinate // the fences' first vertices and centers
	for i := range 200 {
		lat, lon := point()
		anchors = append(anchors, core.Coordinate{LatNano: lat, LonNano: lon})
		f := &core.Fence{Name: "c" + strconv.Itoa(i%120), Shape: core.FenceCircle, Center: core.Coordinate{LatNano: lat, LonNano: lon}, RadiusMM: uint64(1_000) << r.IntN(radiusShift)}
		if i%2 == 0 { // about 900 m across
			f = &core.Fence{Name: f.Name, Shape: core.FencePolygon, Vertices: benchFencePolygon(lat, lon)}
		}
		if _, err := sm.PutFence(0, f); err != nil {
			t.Fatal(err)
		}
		if r.IntN(3) == 0 {
			name := "c" + strconv.Itoa(r.IntN(120))
			if _, ok := sm.watch.fences.byName[name]; ok {
				if _, err := sm.DeleteFence(0, &core.FenceName{Name: name}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	fs := &sm.watch.fences
	if (fs.bigMsk == 0) != (radiusShift <= 12) {
		t.Fatalf("big levels %#x with circles up to %d m", fs.bigMsk, 1<<(radiusShift-1))
	}
	type mark struct{ via, inner uint8 }
	covers := map[string]*fence{} // each fence's covering, made again
	for name, f := range fs.byName {
		c, err := checkFence(&f.def)
		if err != nil {
			t.Fatal(err)
		}
		covers[name] = c
	}
	brute := func(leaf uint64, bit uint8, into map[string]mark) {
		for name, f := range covers {
			for i, c := range f.cells {
				if half := c&-c - 1; leaf >= c-half && leaf <= c+half {
					m := into[name]
					m.via |= bit
					if f.inside[i] {
						m.inner |= bit
					}
					into[name] = m
				}
			}
		}
	}
	found := 0
	for k := range 2_000 {
		lat, lon := point()
		if r.IntN(4) != 0 { // near a fence: within about 600 m
			a := anchors[r.IntN(len(anchors))]
			lat, lon = a.LatNano+r.Int64N(fmSpan)-fmSpan/2, a.LonNano+r.Int64N(fmSpan)-fmSpan/2
		}
		evs := []core.GeoEvent{{LatNano: lat, LonNano: lon}, {LatNano: lat, LonNano: lon}}
		switch k % 4 {
		case 1: // up to about 50 m
			evs[1].LatNano += r.Int64N(900_001) - 450_000
			evs[1].LonNano += r.Int64N(900_001) - 450_000
		case 2:
			evs[1].LatNano, evs[1].LonNano = point()
		}
		AssignCells(evs)
		leaf, other := evs[0].CellID, evs[1].CellID
		if k%4 == 3 {
			other = 0
		}
		want := map[string]mark{}
		brute(leaf, candNew, want)
		if other != 0 {
			brute(other, candPrev, want)
		}
		got := map[string]mark{}
		for _, c := range fs.appendCandidates(nil, leaf, other) {
			if _, dup := got[c.f.def.Name]; dup {
				t.Fatalf("leaves %#x %#x: fence %s twice", leaf, other, c.f.def.Name)
			}
			got[c.f.def.Name] = mark{c.via, c.inner}
		}
		if !maps.Equal(got, want) {
			t.Fatalf("leaves %#x %#x: candidates %v, want %v", leaf, other, got, want)
		}
		found += len(got)
	}
	if found < 200 {
		t.Fatalf("only %d candidates: the test misses the fences", found)
	}
}
