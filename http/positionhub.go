package http

import (
	"math/bits"
	"slices"
	"sync"
	"time"

	"github.com/geoevent/geoevent/core"
	"github.com/golang/geo/s2"
)

// The position streams' hub. One goroutine, running while any position
// stream is open, reads the replica's applied writes (LocalFeed's ring)
// for all of them and hands each event only to the streams it concerns:
// those whose area's covering holds the event's leaf cell (an index of
// the coverings, by cell), and those that last showed the entity inside
// their area (for its last position and its delete). Each candidate gets
// the exact test. A stream's goroutine only writes the bytes the hub
// rendered for it. A stream that read the ring itself filtered every
// applied event: 1,000 streams at 100 k events/s made 10^8 tests a second
// whatever their areas; the hub makes one lookup an event, and renders an
// event's JSON once for all the streams that show it.
//
// Invariants, under hub.mu:
//   - a stream is in index under each cell of its covering, and in
//     showing under each entity of its shown set, while it is joined;
//   - cells counts index's cells at each level, so that a lookup visits
//     only the levels in use;
//   - run is the reading goroutine's run while a stream is joined, nil
//     otherwise; a run that finds itself replaced stops without
//     dispatching.
//
// A stream's pending bytes are bounded (positionsPendingMax): a client
// that reads its socket more slowly than its area's events come gets
// 245 STREAM_FELL_BEHIND, as a stream that falls more than the ring
// behind did, and the hub never waits for a client. The hub itself never
// writes to a socket; if it falls more than the ring behind (its
// process starved), every stream gets the error and the hub starts
// again at the ring's end.

// positionsPendingMax bounds the bytes the hub holds for one stream that
// its client has not yet taken: at about 300 bytes an event, some 28,000
// events, seconds of a busy area.
const positionsPendingMax = 8 << 20

// positionHub routes the applied writes to the position streams.
type positionHub struct {
	mu      sync.Mutex
	run     *hubRun
	index   map[uint64][]*posSub // covering cell -> the streams whose covering has it
	cells   [s2.MaxLevel + 1]int // index's cells at each level
	levels  uint32               // bit l: cells[l] > 0
	showing map[core.Uint128][]*posSub
	mark    uint64    // numbers the writes dispatched, for posSub.seen
	reads   uint64    // numbers the reads of the ring, for posSub.wokenIn
	all     []*posSub // the streams joined

	// Scratch of dispatch.
	cands []*posSub
	woken []*posSub
	data  [2]jw // the event's JSON in Form B and Form A, rendered on first use
	have  [2]bool
}

// hubRun is one run of the reading goroutine.
type hubRun struct {
	quit chan struct{} // closed when the last stream leaves
}

// posSub is one position stream as the hub holds it.
type posSub struct {
	inArea   func(latNano, lonNano int64, group uint64) bool
	group    core.GroupFilter
	formA    bool
	covering []uint64
	failBody []byte // its STREAM_FELL_BEHIND error event

	// The hub's, under hub.mu.
	shown   map[core.Uint128]struct{} // entities last shown inside the area
	seen    uint64                    // the last write it was a candidate of
	wokenIn uint64                    // the last read it is in woken for

	mu      sync.Mutex
	pending []byte // rendered, not yet taken by the stream
	failed  bool   // pending ends with failBody; nothing more is added
	wake    chan struct{}
}

func newPosSub(inArea func(int64, int64, uint64) bool, covering []uint64, group core.GroupFilter, formA bool, failBody []byte) *posSub {
	return &posSub{inArea: inArea, covering: covering, group: group, formA: formA, failBody: failBody,
		shown: map[core.Uint128]struct{}{}, wake: make(chan struct{}, 1)}
}

// take returns what the hub rendered for the stream since the last take
// (in a buffer the stream owns until its next take, swapped for spare)
// and whether the stream has failed: then b ends with its error.
func (s *posSub) take(spare []byte) (b []byte, failed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, s.pending = s.pending, spare[:0]
	return b, s.failed
}

// add appends one Server-Sent Event to the stream (b's owner: the hub),
// or fails the stream when its client is too far behind; it reports
// whether the stream is to be woken.
func (s *posSub) add(index uint64, event string, data []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed {
		return false
	}
	if len(s.pending) >= positionsPendingMax {
		s.fail()
		return true
	}
	s.pending = appendSSE(s.pending, index, event, data)
	return true
}

// fail ends the stream's events with its error (s.mu held).
func (s *posSub) fail() {
	s.pending = append(s.pending, s.failBody...)
	s.failed = true
}

// join adds s to the hub, starting its goroutine on src when s is the
// first: s sees what src applies from about then on.
func (h *positionHub) join(s *posSub, src LocalFeed, done <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.index == nil {
		h.index, h.showing = map[uint64][]*posSub{}, map[core.Uint128][]*posSub{}
	}
	for _, c := range s.covering {
		h.index[c] = append(h.index[c], s)
		l := s2.CellID(c).Level()
		h.cells[l]++
		h.levels |= 1 << l
	}
	if h.run == nil {
		h.run = &hubRun{quit: make(chan struct{})}
		go h.read(h.run, src, src.PositionsListen(), done)
	}
	h.all = append(h.all, s)
}

// leave takes s out of the hub, stopping its goroutine when s was the
// last.
func (h *positionHub) leave(s *posSub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range s.covering {
		h.index[c] = without(h.index[c], s)
		if len(h.index[c]) == 0 {
			delete(h.index, c)
		}
		l := s2.CellID(c).Level()
		if h.cells[l]--; h.cells[l] == 0 {
			h.levels &^= 1 << l
		}
	}
	for id := range s.shown {
		h.unshow(id, s)
	}
	if h.all = without(h.all, s); len(h.all) == 0 {
		close(h.run.quit)
		h.run = nil
	}
}

// without returns l without s (which it holds once), in l's storage.
func without(l []*posSub, s *posSub) []*posSub {
	i := slices.Index(l, s)
	if i < 0 {
		return l
	}
	l[i] = l[len(l)-1]
	l[len(l)-1] = nil
	return l[:len(l)-1]
}

// show and unshow keep s.shown and showing together (h.mu held).
func (h *positionHub) show(id core.Uint128, s *posSub) {
	s.shown[id] = struct{}{}
	h.showing[id] = append(h.showing[id], s)
}

func (h *positionHub) unshow(id core.Uint128, s *posSub) {
	delete(s.shown, id)
	l := without(h.showing[id], s)
	if len(l) == 0 {
		delete(h.showing, id)
	} else {
		h.showing[id] = l
	}
}

// read is the hub's goroutine: it reads the applied writes from cursor
// on and dispatches them, until run is over.
func (h *positionHub) read(run *hubRun, src LocalFeed, cursor uint64, done <-chan struct{}) {
	var batches []core.AppliedWrites
	defer src.PositionsUnlisten()
	for {
		var changed <-chan struct{}
		var behind bool
		batches, cursor, changed, behind = src.PositionsAfter(cursor, batches[:0])
		h.mu.Lock()
		if h.run != run {
			h.mu.Unlock()
			return
		}
		if behind {
			h.failAll()
			src.PositionsUnlisten()
			cursor = src.PositionsListen()
		}
		h.reads++
		for i := range batches {
			h.dispatch(&batches[i])
		}
		for _, s := range h.woken {
			select {
			case s.wake <- struct{}{}:
			default: // it has a wake-up coming
			}
		}
		clear(h.woken)
		h.woken = h.woken[:0]
		h.mu.Unlock()
		clear(batches) // the ring's writes are not held past their turn
		if behind {
			// After a pause: a listener behind at once again is starved.
			select {
			case <-run.quit:
				return
			case <-done:
				return
			case <-time.After(tailRetry):
			}
			continue
		}
		if changed == nil {
			continue
		}
		select {
		case <-changed:
		case <-run.quit:
			return
		case <-done:
			return
		}
	}
}

// failAll fails every stream: the hub fell behind (h.mu held).
func (h *positionHub) failAll() {
	for _, s := range h.all {
		s.mu.Lock()
		if !s.failed {
			s.fail()
		}
		s.mu.Unlock()
		h.woken = append(h.woken, s)
	}
}

// dispatch hands one applied entry's events to the streams they concern
// (h.mu held). For each stream, in the entry's order: an event of an
// entity inside the area (and the group) is shown, and so is the first
// event outside of one the stream showed inside; a delete is shown to
// the streams that last showed the entity inside.
func (h *positionHub) dispatch(b *core.AppliedWrites) {
	for i := range b.Writes {
		hw := &b.Writes[i]
		h.mark++
		h.have = [2]bool{}
		switch hw.Kind {
		case core.HistoryPut:
			ev := &hw.Event
			cands := h.lookup(ev.CellID, h.cands[:0])
			cands = append(cands, h.showing[ev.EntityID]...)
			for _, s := range cands {
				if s.seen == h.mark {
					continue
				}
				s.seen = h.mark
				inside := (!s.group.Set || s.group.ID == ev.GroupID) && s.inArea(ev.LatNano, ev.LonNano, ev.GroupID)
				_, was := s.shown[ev.EntityID]
				switch {
				case inside && !was && len(s.shown) < positionsTracked:
					h.show(ev.EntityID, s)
				case !inside && was:
					h.unshow(ev.EntityID, s) // its last position, then none
				case !inside:
					continue
				}
				h.send(s, b.Index, "position", h.eventJSON(ev, s.formA))
			}
			clear(cands)
			h.cands = cands[:0]
		case core.HistoryDeleteEntity:
			l := h.showing[hw.EntityID]
			if len(l) == 0 {
				continue
			}
			var w jw
			w.open()
			w.key("entity_id")
			w.id(hw.EntityID)
			w.close()
			delete(h.showing, hw.EntityID) // every stream that showed it
			for _, s := range l {
				delete(s.shown, hw.EntityID)
				h.send(s, b.Index, "delete", w.b)
			}
		}
	}
}

// send adds an event to s and notes it is to be woken once the read's
// entries are dispatched (h.mu held).
func (h *positionHub) send(s *posSub, index uint64, event string, data []byte) {
	if s.add(index, event, data) && s.wokenIn != h.reads {
		s.wokenIn = h.reads
		h.woken = append(h.woken, s)
	}
}

// eventJSON renders ev as GET /entity/{id} shows it, once a write for
// each form.
func (h *positionHub) eventJSON(ev *core.GeoEvent, formA bool) []byte {
	f := 0
	if formA {
		f = 1
	}
	if !h.have[f] {
		w := &h.data[f]
		w.b, w.formA = w.b[:0], formA
		w.event(ev, nil)
		h.have[f] = true
	}
	return h.data[f].b
}

// lookup appends the streams whose covering holds the leaf cell
// (h.mu held).
func (h *positionHub) lookup(leaf uint64, dst []*posSub) []*posSub {
	id := s2.CellID(leaf)
	for m := h.levels; m != 0; m &= m - 1 {
		l := bits.TrailingZeros32(m)
		dst = append(dst, h.index[uint64(id.Parent(l))]...)
	}
	return dst
}
