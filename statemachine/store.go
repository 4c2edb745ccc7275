package statemachine

import (
	"math/bits"
	"unsafe"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/statemachine/internal/prefetch"
)

// entityStore keeps entities in fixed chunks so that growth never copies
// (and never doubles) the whole store; freed slots are reused LIFO. A chunk
// is compact, 64 entities of 64 bytes, until one of its entities needs an
// ext (a field of its latest event beyond entity's, or older events); then
// it becomes full for good: 64 fullEntity of 128 bytes, each entity beside
// its ext, so that reading both costs one cache miss (the processor fetches
// a 128-byte pair of lines together) rather than two. Every entity of a
// compact chunk has the zero ext. What memory keeps of older
// events (their facts: history.go; the events are in the history store)
// lives in a table, one entry per entity that has any, reused LIFO too.
//
// Invariants: for each chunk c, exactly one of chunks[c] and fulls[c] is
// set, and bit c of isFull says which (fulls[c]).
//
// A chunk turns full only in write, which an operation calls for an
// entity before it takes any other pointer into the entity's chunk: the
// compact chunk is left behind, so a pointer into it taken earlier would
// go stale.
//
// Copy-on-write, for snapshots encoded away from the state machine's owner
// (see Frozen). Freeze lends the view the chunks as they
// are; the store then never writes what it lent:
//
//   - A chunk is held by the newest unreleased view when copiedAt[c] <
//     frozenGen (frozenGen is 0 when there is none). mut copies such a
//     chunk before handing out a pointer into it; at and ext read the
//     current chunk either way. A chunk that turns full after the Freeze
//     is the store's alone. Every write to an entity goes through pointers
//     from mut or write taken after the last Freeze; Freeze happens only
//     between operations, so such a pointer stays good for a whole
//     operation.
//   - While a view is out, writes may copy every chunk once: up to twice
//     the entities' memory until Release.
//   - The view has its own copy of the table of older events' facts.
type entityStore struct {
	chunks   []*[chunkSize]entity     // compact chunks; nil for a full one
	fulls    []*[chunkSize]fullEntity // full chunks; nil for a compact one
	isFull   []uint64                 // bit c%64 of word c/64: chunk c is full
	copiedAt []uint64                 // per chunk: the generation at which it was made or copied
	n        uint32                   // slots ever handed out
	free     []uint32

	hists    []older
	histFree []uint32

	gen       uint64 // incremented by every Freeze
	frozenGen uint64 // the newest unreleased view's generation; 0: none
	views     int    // unreleased views
}

// fullEntity is an entity of a full chunk, with its ext: 128 bytes, two
// cache lines of one aligned pair (a full chunk is page-aligned).
type fullEntity struct {
	e entity
	x entityExt
	_ [128 - 64 - unsafe.Sizeof(entityExt{})]byte
}

var _ [0]struct{} = [unsafe.Sizeof(fullEntity{}) - 128]struct{}{}

// A chunk is 64 entities, 4 KiB (8 KiB once full): the unit that a write
// copies while a view is out. Random writes right after a Freeze copy one
// chunk each, so the chunk's size bounds that burst by the batch rather
// than by the state: at 10 million entities the first 10,000-event upsert
// batch after a Freeze took 0.63-0.92 s with 4,096-entity chunks (every
// chunk copied at once, past the 500 ms election timeout), and 95-105 ms
// with these, each batch after it copying as much until the view is
// released (17-52 ms with an earlier, cheaper upsert path). The benchmarks
// showed no difference between the two sizes. 16-entity chunks cut that burst to
// about 20 ms but made every upsert batch 15% slower without a view.
const chunkBits = 6
const chunkSize = 1 << chunkBits

// full reports whether chunk c is full. The bit map (2 KiB for a million
// entities) stays in cache; reading the tables of chunks to find out would
// cost a query a cache miss per entity.
func (s *entityStore) full(c uint32) bool { return s.isFull[c/64]>>(c%64)&1 != 0 }

// pair returns the entity in slot and its ext (nil in a compact chunk: the
// zero ext), for reading only. It is compactAt and fullAt written out:
// through them, pair would cost too much for Go to inline it into some of
// its callers.
func (s *entityStore) pair(slot uint32) (*entity, *entityExt) {
	c, i := slot>>chunkBits, slot&(chunkSize-1)
	if s.full(c) {
		fe := (*fullEntity)(unsafe.Add(unsafe.Pointer(s.fulls[c]), i*fullEntitySize))
		return &fe.e, &fe.x
	}
	return (*entity)(unsafe.Add(unsafe.Pointer(s.chunks[c]), i*entitySize)), nil
}

// entitySize and fullEntitySize are the strides of compact and full chunks.
const entitySize, fullEntitySize = uint32(unsafe.Sizeof(entity{})), uint32(unsafe.Sizeof(fullEntity{}))

// compactAt and fullAt return entity i (< chunkSize) of a chunk without
// checking the chunk's pointer, which the store's invariants say is set.
// Go checks a pointer indexed as &ch[i] by loading the first byte it
// points to: the chunk's first cache line, a second miss when the entity
// read lies elsewhere in the chunk, as a random one does.
func compactAt(ch *[chunkSize]entity, i uint32) *entity {
	return (*entity)(unsafe.Add(unsafe.Pointer(ch), i*entitySize))
}

func fullAt(ch *[chunkSize]fullEntity, i uint32) *fullEntity {
	return (*fullEntity)(unsafe.Add(unsafe.Pointer(ch), i*fullEntitySize))
}

// prefetch starts loading the entity in slot, and its ext in a full
// chunk, into the processor's cache without waiting for it (see package
// prefetch): a reader that needs many entities prefetches them some time
// before it reads them.
func (s *entityStore) prefetch(slot uint32) {
	e, x := s.pair(slot)
	prefetch.Line(unsafe.Pointer(e))
	if x != nil {
		prefetch.Line(unsafe.Pointer(x))
	}
}

// at returns the entity in slot, for reading only.
func (s *entityStore) at(slot uint32) *entity {
	e, _ := s.pair(slot)
	return e
}

// ext returns the ext of the entity in slot, for reading only (see pair).
func (s *entityStore) ext(slot uint32) *entityExt {
	_, x := s.pair(slot)
	return x
}

// mut returns the entity in slot for writing: its chunk is copied first if
// a frozen view holds it.
func (s *entityStore) mut(slot uint32) *entity {
	e, _ := s.write(slot, false)
	return e
}

// write returns the entity in slot and its ext (nil in a compact chunk) for
// writing, copying the chunk first if a frozen view holds it, and making it
// full first if needExt is set (see entityStore on when it may be called
// with needExt).
func (s *entityStore) write(slot uint32, needExt bool) (*entity, *entityExt) {
	c, i := slot>>chunkBits, slot&(chunkSize-1)
	if s.copiedAt[c] < s.frozenGen {
		if s.full(c) {
			cp := *s.fulls[c]
			s.fulls[c] = &cp
		} else {
			cp := *s.chunks[c]
			s.chunks[c] = &cp
		}
		s.copiedAt[c] = s.gen
	}
	if !s.full(c) {
		if !needExt {
			return compactAt(s.chunks[c], i), nil
		}
		f := new([chunkSize]fullEntity)
		for k := range f {
			f[k].e = s.chunks[c][k]
		}
		s.fulls[c], s.chunks[c] = f, nil
		s.isFull[c/64] |= 1 << (c % 64)
	}
	fe := fullAt(s.fulls[c], i)
	return &fe.e, &fe.x
}

// event returns the latest event of the entity in slot.
func (s *entityStore) event(slot uint32) core.GeoEvent {
	var ev core.GeoEvent
	e, x := s.pair(slot)
	fillEvent(&ev, e, x)
	return ev
}

// setLatest makes ev the latest event of the entity e, whose ext is x (both
// from write; x nil only when ev needs no ext), keeping its expiry and its
// older events.
func setLatest(e *entity, x *entityExt, ev *core.GeoEvent) {
	e.id, e.ts, e.cell, e.lat, e.lon, e.group = ev.EntityID, ev.TimestampNS, ev.CellID, ev.LatNano, ev.LonNano, ev.GroupID
	if x == nil {
		return
	}
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
		s.chunks = append(s.chunks, new([chunkSize]entity))
		s.fulls = append(s.fulls, nil)
		if len(s.chunks) > 64*len(s.isFull) {
			s.isFull = append(s.isFull, 0)
		}
		s.copiedAt = append(s.copiedAt, s.gen)
	}
	s.n++
	return s.n - 1
}

func (s *entityStore) release(slot uint32) {
	e, x := s.write(slot, false)
	if x != nil {
		s.dropOlder(x)
		*x = entityExt{}
	}
	*e = entity{}
	s.free = append(s.free, slot)
}

// older returns the facts of the older events of the entity in slot, for
// reading only; nil when it has none.
func (s *entityStore) older(slot uint32) *older {
	if x := s.ext(slot); x != nil && x.hist != 0 {
		return &s.hists[x.hist-1]
	}
	return nil
}

// olderFor returns the facts of the older events of the entity whose ext
// is x (from write), for writing, giving it an empty one first if it has
// none. The table is the store's own: a view has a copy (Freeze).
func (s *entityStore) olderFor(x *entityExt) *older {
	if x.hist == 0 {
		if k := len(s.histFree); k > 0 {
			x.hist = s.histFree[k-1] + 1
			s.histFree = s.histFree[:k-1]
		} else {
			s.hists = append(s.hists, older{})
			x.hist = uint32(len(s.hists))
		}
	}
	return &s.hists[x.hist-1]
}

// dropOlder forgets the older events of the entity whose ext is x (from
// write).
func (s *entityStore) dropOlder(x *entityExt) {
	if x.hist == 0 {
		return
	}
	s.hists[x.hist-1] = older{}
	s.histFree = append(s.histFree, x.hist-1)
	x.hist = 0
}

func (s *entityStore) eventCount(slot uint32) uint64 { return uint64(s.older(slot).len()) + 1 }

// fullChunks counts the full chunks.
func (s *entityStore) fullChunks() int {
	n := 0
	for _, w := range s.isFull {
		n += bits.OnesCount64(w)
	}
	return n
}

func (s *entityStore) bytes() uint64 {
	full := uint64(s.fullChunks())
	compact := uint64(len(s.chunks)) - full
	return compact*chunkSize*uint64(entitySize) + full*chunkSize*uint64(fullEntitySize) +
		uint64(cap(s.chunks))*uint64(unsafe.Sizeof(&entity{})) + uint64(cap(s.fulls))*uint64(unsafe.Sizeof(&fullEntity{})) +
		uint64(cap(s.free))*4 + uint64(cap(s.hists))*uint64(unsafe.Sizeof(older{})) + uint64(cap(s.histFree))*4
}

// storeView is what a snapshot in storage order reads: the store's tables
// as they are, or as a Frozen view keeps them.
type storeView struct {
	lastTS   uint64
	entities int    // live entities
	n        uint32 // slots handed out; released ones are zeroed
	chunks   []*[chunkSize]entity
	fulls    []*[chunkSize]fullEntity
	hists    []older
}

func (sm *StateMachine) liveView() storeView {
	s := &sm.store
	return storeView{lastTS: sm.lastTS, entities: sm.ids.len(), n: s.n, chunks: s.chunks, fulls: s.fulls, hists: s.hists}
}

// pair is entityStore.pair for the view (which tells a full chunk by its
// table: the store's bit map may have changed since the Freeze).
func (v *storeView) pair(slot uint32) (*entity, *entityExt) {
	c, i := slot>>chunkBits, slot&(chunkSize-1)
	if f := v.fulls[c]; f != nil {
		fe := fullAt(f, i)
		return &fe.e, &fe.x
	}
	return compactAt(v.chunks[c], i), nil
}

func (v *storeView) older(x *entityExt) *older {
	if x != nil && x.hist != 0 {
		return &v.hists[x.hist-1]
	}
	return nil
}
