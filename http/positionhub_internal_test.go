package http

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/statemachine"
	"pgregory.net/rapid"
)

// idleFeed is a LocalFeed with nothing applied: the hub's goroutine waits
// on it until the hub stops, and the tests dispatch by hand.
type idleFeed struct{ never chan struct{} }

func (idleFeed) FeedNews() (uint64, <-chan struct{}) { return 0, nil }
func (idleFeed) PositionsListen() uint64             { return 0 }
func (idleFeed) PositionsUnlisten()                  {}
func (f idleFeed) PositionsAfter(cursor uint64, dst []core.AppliedWrites) ([]core.AppliedWrites, uint64, <-chan struct{}, bool) {
	return dst, cursor, f.never, false
}

// refStream is the reference for one stream: every write filtered by the
// stream itself, as each stream did before the hub.
type refStream struct {
	inArea func(int64, int64, uint64) bool
	group  core.GroupFilter
	formA  bool
	shown  map[core.Uint128]bool
	out    []byte
}

func (r *refStream) apply(b *core.AppliedWrites) {
	for i := range b.Writes {
		hw := &b.Writes[i]
		switch hw.Kind {
		case core.HistoryPut:
			ev := &hw.Event
			inside := (!r.group.Set || r.group.ID == ev.GroupID) && r.inArea(ev.LatNano, ev.LonNano, ev.GroupID)
			was := r.shown[ev.EntityID]
			switch {
			case inside && !was && len(r.shown) < positionsTracked:
				r.shown[ev.EntityID] = true
			case !inside && was:
				delete(r.shown, ev.EntityID)
			case !inside:
				continue
			}
			w := jw{formA: r.formA}
			w.event(ev, nil)
			r.out = appendSSE(r.out, b.Index, "position", w.b)
		case core.HistoryDeleteEntity:
			if r.shown[hw.EntityID] {
				delete(r.shown, hw.EntityID)
				var w jw
				w.open()
				w.key("entity_id")
				w.id(hw.EntityID)
				w.close()
				r.out = appendSSE(r.out, b.Index, "delete", w.b)
			}
		}
	}
}

// TestPositionHub: streams joining and leaving at random, over random
// moves, group changes and deletes in a small region, each receive from
// the hub exactly what filtering every write themselves gives; once all
// have left, the hub's index and its shown entities are empty.
func TestPositionHub(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var h positionHub
		src := idleFeed{never: make(chan struct{})}
		type open struct {
			sub *posSub
			ref *refStream
		}
		var streams []open
		// Boxes of 0.2 to 1.5 degrees and events in two degrees square:
		// entities move in and out of the areas and their coverings.
		deg := func(label string) int64 { return rapid.Int64Range(0, 2_000_000_000).Draw(t, label) }
		size := func(label string) int64 { return rapid.Int64Range(200_000_000, 1_500_000_000).Draw(t, label) }
		ids := []core.Uint128{{Lo: 1}, {Lo: 2}, {Lo: 3}, {Lo: 4}, {Lo: 5}}
		index := uint64(0)
		for step := range rapid.IntRange(1, 60).Draw(t, "steps") {
			switch rapid.IntRange(0, 5).Draw(t, "action") {
			case 0: // a stream opens
				lat, lon := deg("lat"), deg("lon")
				box := &core.Fence{Name: "bbox", Shape: core.FenceBBox,
					Min: core.Coordinate{LatNano: lat, LonNano: lon},
					Max: core.Coordinate{LatNano: lat + size("h"), LonNano: lon + size("w")}}
				inArea, covering, err := statemachine.FenceArea(box)
				if err != nil {
					t.Fatalf("box %+v: %v", box, err)
				}
				var g core.GroupFilter
				if rapid.Bool().Draw(t, "grouped") {
					g = core.GroupFilter{Set: true, ID: 7}
				}
				formA := rapid.Bool().Draw(t, "formA")
				s := newPosSub(inArea, covering, g, formA, []byte("failed\n"))
				h.join(s, src, nil)
				streams = append(streams, open{s, &refStream{inArea: inArea, group: g, formA: formA, shown: map[core.Uint128]bool{}}})
			case 1: // a stream closes
				if len(streams) == 0 {
					continue
				}
				i := rapid.IntRange(0, len(streams)-1).Draw(t, "close")
				h.leave(streams[i].sub)
				streams = append(streams[:i], streams[i+1:]...)
			default: // an applied entry
				index++
				b := core.AppliedWrites{Index: index}
				for range rapid.IntRange(1, 4).Draw(t, "writes") {
					id := rapid.SampledFrom(ids).Draw(t, "entity")
					if rapid.IntRange(0, 4).Draw(t, "delete") == 0 {
						b.Writes = append(b.Writes, core.HistoryWrite{Kind: core.HistoryDeleteEntity, EntityID: id})
						continue
					}
					ev := []core.GeoEvent{{EntityID: id, TimestampNS: uint64(step + 1),
						LatNano: deg("ev lat"), LonNano: deg("ev lon"),
						GroupID: rapid.SampledFrom([]uint64{0, 7}).Draw(t, "group")}}
					statemachine.AssignCells(ev)
					b.Writes = append(b.Writes, core.HistoryWrite{Kind: core.HistoryPut, Event: ev[0]})
				}
				h.mu.Lock()
				h.dispatch(&b)
				h.woken = h.woken[:0]
				h.mu.Unlock()
				for _, s := range streams {
					s.ref.apply(&b)
				}
			}
			for i, s := range streams {
				got, failed := s.sub.take(nil)
				if failed || !bytes.Equal(got, s.ref.out) {
					t.Fatalf("step %d, stream %d: got (failed %v)\n%s\nwant\n%s", step, i, failed, got, s.ref.out)
				}
				s.ref.out = nil
			}
		}
		for _, s := range streams {
			h.leave(s.sub)
		}
		if len(h.index) != 0 || len(h.showing) != 0 || h.levels != 0 || h.run != nil || len(h.all) != 0 {
			t.Fatalf("after every stream left: %d cells, %d shown entities, levels %b, run %v", len(h.index), len(h.showing), h.levels, h.run)
		}
	})
}

// TestPositionHubBoundsPending: a stream whose client takes nothing fails
// once positionsPendingMax bytes wait for it: its bytes end with its error
// event, nothing is added after it, and the other streams go on.
func TestPositionHubBoundsPending(t *testing.T) {
	var h positionHub
	src := idleFeed{never: make(chan struct{})}
	box := &core.Fence{Name: "bbox", Shape: core.FenceBBox, Max: core.Coordinate{LatNano: 1_000_000_000, LonNano: 1_000_000_000}}
	inArea, covering, err := statemachine.FenceArea(box)
	if err != nil {
		t.Fatal(err)
	}
	slow := newPosSub(inArea, covering, core.GroupFilter{}, false, []byte("event: error\n\n"))
	fast := newPosSub(inArea, covering, core.GroupFilter{}, false, nil)
	h.join(slow, src, nil)
	h.join(fast, src, nil)
	defer h.leave(fast)
	defer h.leave(slow)
	ev := []core.GeoEvent{{EntityID: core.Uint128{Lo: 9}, LatNano: 500_000_000, LonNano: 500_000_000}}
	statemachine.AssignCells(ev)
	sent := 0
	for i := uint64(1); ; i++ {
		ev[0].TimestampNS = i
		h.mu.Lock()
		h.dispatch(&core.AppliedWrites{Index: i, Writes: []core.HistoryWrite{{Kind: core.HistoryPut, Event: ev[0]}}})
		h.mu.Unlock()
		if b, _ := fast.take(nil); !bytes.Contains(b, []byte("event: position")) {
			t.Fatalf("entry %d: the fast stream got %q", i, b)
		}
		slow.mu.Lock()
		failed, n := slow.failed, len(slow.pending)
		slow.mu.Unlock()
		if failed {
			sent = n
			break
		}
		if n > positionsPendingMax+4096 {
			t.Fatalf("%d bytes pending and the stream has not failed", n)
		}
	}
	b, failed := slow.take(nil)
	if !failed || !bytes.HasSuffix(b, []byte("event: error\n\n")) || len(b) != sent || len(b) < positionsPendingMax {
		t.Fatalf("slow stream: failed %v, %d bytes ending %q", failed, len(b), b[max(0, len(b)-40):])
	}
	h.mu.Lock()
	h.dispatch(&core.AppliedWrites{Index: 1 << 40, Writes: []core.HistoryWrite{{Kind: core.HistoryPut, Event: ev[0]}}})
	h.mu.Unlock()
	if b, failed := slow.take(nil); len(b) != 0 || !failed {
		t.Fatalf("after failing, the slow stream got %q", b)
	}
}

// scriptFeed is a LocalFeed whose next read can be made to fall behind
// and whose applied entries the test pushes.
type scriptFeed struct {
	mu     sync.Mutex
	behind bool
	queue  []core.AppliedWrites
	ch     chan struct{}
}

func (*scriptFeed) FeedNews() (uint64, <-chan struct{}) { return 0, nil }
func (*scriptFeed) PositionsListen() uint64             { return 0 }
func (*scriptFeed) PositionsUnlisten()                  {}
func (f *scriptFeed) PositionsAfter(cursor uint64, dst []core.AppliedWrites) ([]core.AppliedWrites, uint64, <-chan struct{}, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.behind:
		f.behind = false
		return dst, cursor, nil, true
	case len(f.queue) > 0:
		dst = append(dst, f.queue...)
		f.queue = nil
		return dst, cursor + 1, nil, false
	}
	if f.ch == nil {
		f.ch = make(chan struct{})
	}
	return dst, cursor, f.ch, false
}

func (f *scriptFeed) push(b core.AppliedWrites) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queue = append(f.queue, b)
	if f.ch != nil {
		close(f.ch)
		f.ch = nil
	}
}

// TestPositionHubFallsBehind: when the hub's own read falls behind the
// ring, every stream open fails with its error; the hub reads on from
// the ring's end, and a stream opened after it gets what is applied.
func TestPositionHubFallsBehind(t *testing.T) {
	var h positionHub
	src := &scriptFeed{behind: true}
	box := &core.Fence{Name: "bbox", Shape: core.FenceBBox, Max: core.Coordinate{LatNano: 1_000_000_000, LonNano: 1_000_000_000}}
	inArea, covering, err := statemachine.FenceArea(box)
	if err != nil {
		t.Fatal(err)
	}
	wait := func(s *posSub, what string) ([]byte, bool) {
		select {
		case <-s.wake:
			return s.take(nil)
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no wake-up", what)
			return nil, false
		}
	}
	first := newPosSub(inArea, covering, core.GroupFilter{}, false, []byte("event: error\n\n"))
	h.join(first, src, nil)
	defer h.leave(first)
	if b, failed := wait(first, "the stream open as the hub fell behind"); !failed || string(b) != "event: error\n\n" {
		t.Fatalf("the stream open as the hub fell behind: failed %v, %q", failed, b)
	}
	second := newPosSub(inArea, covering, core.GroupFilter{}, false, []byte("event: error\n\n"))
	h.join(second, src, nil)
	defer h.leave(second)
	ev := []core.GeoEvent{{EntityID: core.Uint128{Lo: 9}, TimestampNS: 1, LatNano: 500_000_000, LonNano: 500_000_000}}
	statemachine.AssignCells(ev)
	src.push(core.AppliedWrites{Index: 5, Writes: []core.HistoryWrite{{Kind: core.HistoryPut, Event: ev[0]}}})
	if b, failed := wait(second, "the stream opened after"); failed || !bytes.HasPrefix(b, []byte("id: 5\nevent: position\n")) {
		t.Fatalf("the stream opened after: failed %v, %q", failed, b)
	}
}
