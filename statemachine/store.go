package statemachine

import (
	"slices"

	"github.com/geoevent/geoevent/core"
)

// entityStore keeps entities in fixed chunks so that growth never copies
// (and never doubles) the whole store; freed slots are reused LIFO. Older
// events live in a table of slices, one per entity that has any, whose
// entries are reused LIFO too.
//
// Copy-on-write, for snapshots encoded away from the state machine's owner
// (see Frozen). Freeze lends the view the chunks and the older-events
// arrays as they are; the store then never writes what it lent:
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
//   - The view has its own copy of the table of older-events slices.
//     While any view is unreleased, an older-events array is never written
//     within its length in place (olderForWrite copies it first); appends
//     write past the view's length, which the view does not read.
type entityStore struct {
	chunks   [][]entity
	copiedAt []uint64 // per chunk: the generation at which it was made or copied
	n        uint32   // slots ever handed out
	free     []uint32

	hists    [][]core.GeoEvent
	histFree []uint32

	gen       uint64 // incremented by every Freeze
	frozenGen uint64 // the newest unreleased view's generation; 0: none
	views     int    // unreleased views
}

const chunkBits = 12
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
	s.setOlder(e, nil)
	*e = entity{}
	s.free = append(s.free, slot)
}

// older returns the entity's older events, ascending by timestamp, for
// reading or appending only.
func (s *entityStore) older(e *entity) []core.GeoEvent {
	if e.hist == 0 {
		return nil
	}
	return s.hists[e.hist-1]
}

// olderForWrite returns the entity's older events for writing in place: a
// copy while a frozen view may hold them. The caller stores it back with
// setOlder.
func (s *entityStore) olderForWrite(e *entity) []core.GeoEvent {
	older := s.older(e)
	if s.views > 0 {
		older = slices.Clone(older)
	}
	return older
}

// setOlder makes older the older events of e, which must come from mut.
func (s *entityStore) setOlder(e *entity, older []core.GeoEvent) {
	switch {
	case len(older) > 0 && e.hist == 0:
		if k := len(s.histFree); k > 0 {
			e.hist = s.histFree[k-1] + 1
			s.histFree = s.histFree[:k-1]
		} else {
			s.hists = append(s.hists, nil)
			e.hist = uint32(len(s.hists))
		}
		fallthrough
	case len(older) > 0:
		s.hists[e.hist-1] = older
	case e.hist != 0:
		s.hists[e.hist-1] = nil
		s.histFree = append(s.histFree, e.hist-1)
		e.hist = 0
	}
}

func (s *entityStore) eventCount(e *entity) uint64 { return uint64(len(s.older(e))) + 1 }

func (s *entityStore) bytes() uint64 {
	const entityBytes = 128
	return uint64(len(s.chunks))*chunkSize*entityBytes + uint64(cap(s.free))*4 +
		uint64(cap(s.hists))*24 + uint64(cap(s.histFree))*4
}

// storeView is what a snapshot in storage order reads: the store's tables
// as they are, or as a Frozen view keeps them.
type storeView struct {
	lastTS   uint64
	entities int    // live entities
	n        uint32 // slots handed out; released ones are zeroed
	chunks   [][]entity
	hists    [][]core.GeoEvent
}

func (sm *StateMachine) liveView() storeView {
	s := &sm.store
	return storeView{lastTS: sm.lastTS, entities: sm.ids.len(), n: s.n, chunks: s.chunks, hists: s.hists}
}

func (v *storeView) at(slot uint32) *entity {
	return &v.chunks[slot>>chunkBits][slot&(chunkSize-1)]
}

func (v *storeView) older(e *entity) []core.GeoEvent {
	if e.hist == 0 {
		return nil
	}
	return v.hists[e.hist-1]
}
