package statemachine

import (
	"slices"
	"unsafe"

	"github.com/geoevent/geoevent/core"
)

// entityStore keeps entities in fixed chunks so that growth never copies
// (and never doubles) the whole store; freed slots are reused LIFO. Each
// chunk of entities may have a chunk of their entityExts beside it,
// allocated when the first entity of the chunk needs one (a field of its
// latest event beyond entity's, or older events) and kept from then on;
// without it every entity of the chunk has the zero entityExt. Older
// events live in a table of histories (history.go), one per entity that
// has any, whose entries are reused LIFO too.
//
// Copy-on-write, for snapshots encoded away from the state machine's owner
// (see Frozen). Freeze lends the view the chunks and the histories as they
// are; the store then never writes what it lent:
//
//   - A chunk (of entities, and of their exts) is held by the newest
//     unreleased view when copiedAt[c] < frozenGen (frozenGen is 0 when
//     there is none). mut copies such a chunk, both parts, before handing
//     out a pointer into it; at and ext read the current chunk either way.
//     An ext chunk allocated after the Freeze is the store's alone. Every
//     write to an entity goes through a pointer from mut (or mutExt, which
//     calls it) taken after the last Freeze; Freeze happens only between
//     operations, so such a pointer stays good for a whole operation.
//   - While a view is out, writes may copy every chunk once: up to twice
//     the entities' memory until Release (older events are copied only
//     when written in place, which appends never do).
//   - The view has its own copy of the table of histories. While any view
//     is unreleased, a history is written in place only past its length
//     (see history): appends are, replacing or inserting an older event
//     copies what it changes first.
type entityStore struct {
	chunks    [][]entity
	exts      []*[chunkSize]entityExt // per chunk: its entities' exts; nil when all are zero
	hasExts   []uint64                // bit c%64 of word c/64: exts[c] is not nil
	copiedAt  []uint64                // per chunk: the generation at which it was made or copied
	extChunks int                     // chunks with exts
	n         uint32                  // slots ever handed out
	free      []uint32

	hists    []history
	histFree []uint32

	gen       uint64 // incremented by every Freeze
	frozenGen uint64 // the newest unreleased view's generation; 0: none
	views     int    // unreleased views
}

// A chunk is 64 entities, 4 KiB (and 3.5 KiB of exts when it has them): the
// unit that a write copies while a
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
		if x := s.exts[c]; x != nil {
			cp := *x
			s.exts[c] = &cp
		}
		s.copiedAt[c] = s.gen
	}
	return &s.chunks[c][slot&(chunkSize-1)]
}

// ext returns the ext of the entity in slot, for reading only; nil when it
// is the zero value. It reads the table of exts only for a chunk that has
// them: hasExts (2 KiB for a million entities) stays in cache, the table
// (128 KiB) would cost a query a cache miss per entity.
func (s *entityStore) ext(slot uint32) *entityExt {
	c := slot >> chunkBits
	if s.hasExts[c/64]>>(c%64)&1 == 0 {
		return nil
	}
	return &s.exts[c][slot&(chunkSize-1)]
}

// mutExt returns the ext of the entity in slot for writing, giving its
// chunk exts first if it has none.
func (s *entityStore) mutExt(slot uint32) *entityExt {
	s.mut(slot)
	c := slot >> chunkBits
	if s.exts[c] == nil {
		s.exts[c] = new([chunkSize]entityExt)
		s.hasExts[c/64] |= 1 << (c % 64)
		s.extChunks++
	}
	return &s.exts[c][slot&(chunkSize-1)]
}

// event returns the latest event of the entity in slot.
func (s *entityStore) event(slot uint32) core.GeoEvent {
	var ev core.GeoEvent
	fillEvent(&ev, s.at(slot), s.ext(slot))
	return ev
}

// setLatest makes ev the latest event of the entity in slot (e, from mut),
// keeping its expiry and its older events.
func (s *entityStore) setLatest(slot uint32, e *entity, ev *core.GeoEvent) {
	e.id, e.ts, e.cell, e.lat, e.lon, e.group = ev.EntityID, ev.TimestampNS, ev.CellID, ev.LatNano, ev.LonNano, ev.GroupID
	if !hasExt(ev) && s.ext(slot) == nil {
		return
	}
	x := s.mutExt(slot)
	x.correlation, x.userData = ev.CorrelationID, ev.UserData
	x.altitude, x.velocity, x.ttl, x.accuracy = ev.AltitudeMM, ev.VelocityMMS, ev.TTLSeconds, ev.AccuracyMM
	x.heading, x.flags = ev.HeadingCdeg, ev.Flags
}

func (s *entityStore) alloc() uint32 {
	if k := len(s.free); k > 0 {
		slot := s.free[k-1]
		s.free = s.free[:k-1]
		return slot
	}
	if int(s.n>>chunkBits) == len(s.chunks) {
		s.chunks = append(s.chunks, make([]entity, chunkSize))
		s.exts = append(s.exts, nil)
		if len(s.chunks) > 64*len(s.hasExts) {
			s.hasExts = append(s.hasExts, 0)
		}
		s.copiedAt = append(s.copiedAt, s.gen)
	}
	s.n++
	return s.n - 1
}

func (s *entityStore) release(slot uint32) {
	e := s.mut(slot)
	s.dropOlder(slot)
	*e = entity{}
	if x := s.ext(slot); x != nil {
		*x = entityExt{} // (the chunk is the store's: mut copied it)
	}
	s.free = append(s.free, slot)
}

// older returns the older events of the entity in slot, for reading only;
// nil when it has none.
func (s *entityStore) older(slot uint32) *history {
	if x := s.ext(slot); x != nil && x.hist != 0 {
		return &s.hists[x.hist-1]
	}
	return nil
}

// pushOlder appends ev to the older events of the entity in slot.
func (s *entityStore) pushOlder(slot uint32, ev *core.GeoEvent) { s.historyFor(slot).push(ev) }

// historyFor returns the history of the entity in slot, giving it an empty
// one first if it has none.
func (s *entityStore) historyFor(slot uint32) *history {
	x := s.mutExt(slot)
	if x.hist == 0 {
		if k := len(s.histFree); k > 0 {
			x.hist = s.histFree[k-1] + 1
			s.histFree = s.histFree[:k-1]
		} else {
			s.hists = append(s.hists, history{})
			x.hist = uint32(len(s.hists))
		}
	}
	return &s.hists[x.hist-1]
}

// setOlder replaces older event i of the entity in slot.
func (s *entityStore) setOlder(slot uint32, i int, ev *core.GeoEvent) {
	s.historyFor(slot).set(i, ev, s.views > 0)
}

// insertOlder inserts ev as older event i of the entity in slot (0 <= i <=
// its count).
func (s *entityStore) insertOlder(slot uint32, i int, ev *core.GeoEvent) {
	s.historyFor(slot).insert(i, ev, s.views > 0)
}

// dropOlder removes all older events of the entity in slot.
func (s *entityStore) dropOlder(slot uint32) {
	x := s.ext(slot)
	if x == nil || x.hist == 0 {
		return
	}
	x = s.mutExt(slot)
	s.hists[x.hist-1] = history{}
	s.histFree = append(s.histFree, x.hist-1)
	x.hist = 0
}

func (s *entityStore) eventCount(slot uint32) uint64 { return uint64(s.older(slot).len()) + 1 }

func (s *entityStore) bytes() uint64 {
	return uint64(len(s.chunks))*chunkSize*uint64(unsafe.Sizeof(entity{})) +
		uint64(s.extChunks)*chunkSize*uint64(unsafe.Sizeof(entityExt{})) + uint64(cap(s.exts))*8 +
		uint64(cap(s.free))*4 + uint64(cap(s.hists))*uint64(unsafe.Sizeof(history{})) + uint64(cap(s.histFree))*4
}

// storeView is what a snapshot in storage order reads: the store's tables
// as they are, or as a Frozen view keeps them.
type storeView struct {
	lastTS   uint64
	entities int    // live entities
	n        uint32 // slots handed out; released ones are zeroed
	chunks   [][]entity
	exts     []*[chunkSize]entityExt
	hists    []history
}

func (sm *StateMachine) liveView() storeView {
	s := &sm.store
	return storeView{lastTS: sm.lastTS, entities: sm.ids.len(), n: s.n, chunks: s.chunks, exts: s.exts, hists: s.hists}
}

func (v *storeView) at(slot uint32) *entity {
	return &v.chunks[slot>>chunkBits][slot&(chunkSize-1)]
}

func (v *storeView) ext(slot uint32) *entityExt {
	if x := v.exts[slot>>chunkBits]; x != nil {
		return &x[slot&(chunkSize-1)]
	}
	return nil
}

func (v *storeView) older(slot uint32) *history {
	if x := v.ext(slot); x != nil && x.hist != 0 {
		return &v.hists[x.hist-1]
	}
	return nil
}
