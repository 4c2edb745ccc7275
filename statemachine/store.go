package statemachine

import (
	"slices"
	"unsafe"

	"github.com/geoevent/geoevent/core"
)

// entityStore keeps entities in fixed chunks so that growth never copies
// (and never doubles) the whole store; freed slots are reused LIFO. Older
// events live in a table of histories (history.go), one per entity that
// has any, whose entries are reused LIFO too.
//
// Copy-on-write, for snapshots encoded away from the state machine's owner
// (see Frozen). Freeze lends the view the chunks and the histories as they
// are; the store then never writes what it lent:
//
//   - A chunk is held by the newest unreleased view when copiedAt[c] <
//     frozenGen (frozenGen is 0 when there is none). mut copies such a
//     chunk before handing out a pointer into it; at reads the current
//     chunk either way. Every write to an entity goes through a pointer
//     from mut taken after the last Freeze; Freeze happens only between
//     operations, so a pointer from mut stays good for a whole operation.
//   - While a view is out, writes may copy every chunk once: up to twice
//     the entities' memory until Release (older events are copied only
//     when written in place, which appends never do).
//   - The view has its own copy of the table of histories. While any view
//     is unreleased, a history is written in place only past its length
//     (see history): appends are, replacing or inserting an older event
//     copies what it changes first.
type entityStore struct {
	chunks   [][]entity
	copiedAt []uint64 // per chunk: the generation at which it was made or copied
	n        uint32   // slots ever handed out
	free     []uint32

	hists    []history
	histFree []uint32

	gen       uint64 // incremented by every Freeze
	frozenGen uint64 // the newest unreleased view's generation; 0: none
	views     int    // unreleased views
}

// A chunk is 64 entities, 8 KiB: the unit that a write copies while a
// view is out. Random writes right after a Freeze copy one chunk each, so
// the chunk's size bounds that burst by the batch rather than by the
// state: at 10 million entities the first 10,000-event upsert batch after
// a Freeze took 0.63-0.92 s with 4,096-entity chunks (every chunk copied
// at once, past the 500 ms election timeout), and 95-105 ms with these,
// each batch after it copying as much until the view is released (17-52
// ms in session 7, whose upserts are cheaper). The benchmarks showed no
// difference between the two sizes. 16-entity chunks cut that burst to
// about 20 ms but made every upsert batch 15% slower without a view.
const chunkBits = 6
const chunkSize = 1 << chunkBits

// at returns the entity in slot, for reading only.
func (s *entityStore) at(slot uint32) *entity {
	return &s.chunks[slot>>chunkBits][slot&(chunkSize-1)]
}

// mut returns the entity in slot for writing: its chunk is copied first if
// a frozen view holds it.
func (s *entityStore) mut(slot uint32) *entity {
	c := slot >> chunkBits
	if s.copiedAt[c] < s.frozenGen {
		s.chunks[c] = slices.Clone(s.chunks[c])
		s.copiedAt[c] = s.gen
	}
	return &s.chunks[c][slot&(chunkSize-1)]
}

func (s *entityStore) alloc() uint32 {
	if k := len(s.free); k > 0 {
		slot := s.free[k-1]
		s.free = s.free[:k-1]
		return slot
	}
	if int(s.n>>chunkBits) == len(s.chunks) {
		s.chunks = append(s.chunks, make([]entity, chunkSize))
		s.copiedAt = append(s.copiedAt, s.gen)
	}
	s.n++
	return s.n - 1
}

func (s *entityStore) release(slot uint32) {
	e := s.mut(slot)
	s.dropOlder(e)
	*e = entity{}
	s.free = append(s.free, slot)
}

// older returns the entity's older events, for reading only; nil when it
// has none.
func (s *entityStore) older(e *entity) *history {
	if e.hist == 0 {
		return nil
	}
	return &s.hists[e.hist-1]
}

// pushOlder appends ev to the older events of e, which must come from mut.
func (s *entityStore) pushOlder(e *entity, ev *core.GeoEvent) { s.historyFor(e).push(ev) }

// historyFor returns e's history, giving e an empty one first if it has
// none.
func (s *entityStore) historyFor(e *entity) *history {
	if e.hist == 0 {
		if k := len(s.histFree); k > 0 {
			e.hist = s.histFree[k-1] + 1
			s.histFree = s.histFree[:k-1]
		} else {
			s.hists = append(s.hists, history{})
			e.hist = uint32(len(s.hists))
		}
	}
	return &s.hists[e.hist-1]
}

// setOlder replaces older event i of e, which must come from mut.
func (s *entityStore) setOlder(e *entity, i int, ev *core.GeoEvent) {
	s.hists[e.hist-1].set(i, ev, s.views > 0)
}

// insertOlder inserts ev as older event i of e (0 <= i <= its count),
// which must come from mut.
func (s *entityStore) insertOlder(e *entity, i int, ev *core.GeoEvent) {
	s.historyFor(e).insert(i, ev, s.views > 0)
}

// dropOlder removes all of e's older events.
func (s *entityStore) dropOlder(e *entity) {
	if e.hist == 0 {
		return
	}
	s.hists[e.hist-1] = history{}
	s.histFree = append(s.histFree, e.hist-1)
	e.hist = 0
}

func (s *entityStore) eventCount(e *entity) uint64 { return uint64(s.older(e).len()) + 1 }

func (s *entityStore) bytes() uint64 {
	const entityBytes = 128
	return uint64(len(s.chunks))*chunkSize*entityBytes + uint64(cap(s.free))*4 +
		uint64(cap(s.hists))*uint64(unsafe.Sizeof(history{})) + uint64(cap(s.histFree))*4
}

// storeView is what a snapshot in storage order reads: the store's tables
// as they are, or as a Frozen view keeps them.
type storeView struct {
	lastTS   uint64
	entities int    // live entities
	n        uint32 // slots handed out; released ones are zeroed
	chunks   [][]entity
	hists    []history
}

func (sm *StateMachine) liveView() storeView {
	s := &sm.store
	return storeView{lastTS: sm.lastTS, entities: sm.ids.len(), n: s.n, chunks: s.chunks, hists: s.hists}
}

func (v *storeView) at(slot uint32) *entity {
	return &v.chunks[slot>>chunkBits][slot&(chunkSize-1)]
}

func (v *storeView) older(e *entity) *history {
	if e.hist == 0 {
		return nil
	}
	return &v.hists[e.hist-1]
}
