package statemachine

import (
	"slices"
	"sort"

	"github.com/geoevent/geoevent/core"
)

// history is one entity's older events, ascending by timestamp.
//
// Up to histBlockLen events it is one slice (small), grown by append. Past
// that it is a list of blocks of up to histBlockLen events (blocks), and
// small is nil. While events only arrive in order every block is full but
// the last, and ends is nil: event i is in block i/histBlockLen. The first
// insertion before the end makes ends the running count of events through
// each block, and splits a full block it inserts into in two halves. So
// adding an event never moves more than one block (32 KiB), wherever it
// goes: growing a single slice of four million events held the replica
// for up to a second, and inserting near the front of a history in full
// blocks moved every later event, 6.2 ms per event in a history of a
// million.
//
// Sharing with frozen views (see entityStore): a view holds a copy of the
// history value, which shares small's array or the blocks, the list of
// blocks and ends with the live one. While a view may hold it (shared), the
// live history writes in place only what the view does not read: past its
// length n (appends, which may also raise the last count of a shared ends:
// that leaves where the view finds each of its events as it was).
// Replacing or inserting an event first copies what it changes: the small
// slice, or the block, the list of blocks and ends.
//
// Expiry: soonest holds the soonest own expiry (core.GeoEvent.ExpiresAtNS)
// and the soonest removal due (removalDue) of its events, and in blocks
// blockSoonest[b] those of block b's. Expired events stay until
// dropExpired removes them; it looks only into the blocks whose soonest
// expiry has passed. A view reads only events, never these, so the live
// history writes them in place even while shared.
type history struct {
	small        []core.GeoEvent
	blocks       []*[histBlockLen]core.GeoEvent
	ends         []int // nil, or ends[b]: the events in blocks 0..b
	blockSoonest []expiries
	soonest      expiries
	n            int
}

// expiries are the soonest own expiry and the soonest removal due of some
// events; each 0 when none of them has a TTL.
type expiries struct{ exp, due uint64 }

// expiriesOf returns ev's expiry and removal due.
func expiriesOf(ev *core.GeoEvent) expiries {
	return expiries{ev.ExpiresAtNS(), removalDue(ev)}
}

func (s expiries) and(o expiries) expiries {
	return expiries{sooner(s.exp, o.exp), sooner(s.due, o.due)}
}

// removalDue is when cleanup takes an older event's entity for it: its
// expiry plus a sixteenth of its TTL (0 without one). Cleanup then removes
// every older event of the entity that has expired, so a long history
// that expires event by event loses them a sixteenth of its TTL's worth at
// a time, not one a cleanup: removing from a history reads a block of 256
// events (32 KiB) however few go. Expired events wait for it unseen, at
// most a sixteenth more memory.
func removalDue(ev *core.GeoEvent) uint64 {
	if ev.TTLSeconds == 0 {
		return 0
	}
	d := uint64(ev.TTLSeconds) * (1_000_000_000 + 1_000_000_000/16)
	if ev.TimestampNS > ^uint64(0)-d {
		return ^uint64(0)
	}
	return ev.TimestampNS + d
}

// sooner returns the sooner of two times, 0 being never.
func sooner(a, b uint64) uint64 {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}

// expiredAt reports whether an older event has expired at t: it has a TTL
// and its own expiry is at or before t. (An entity's latest event expires
// with the entity, whose expiry /ttl/* may have changed.)
func expiredAt(ev *core.GeoEvent, t uint64) bool {
	return ev.TTLSeconds != 0 && ev.ExpiresAtNS() <= t
}

// histBlockLen is the events of one block: 256 events, 32 KiB.
const histBlockLen = 256

// len is the number of events; 0 for a nil history (an entity without
// older events).
func (h *history) len() int {
	if h == nil {
		return 0
	}
	return h.n
}

// locate returns the block holding event i of a history in blocks, and
// i's place in it.
func (h *history) locate(i int) (b, off int) {
	if h.ends == nil {
		return i / histBlockLen, i % histBlockLen
	}
	b = sort.SearchInts(h.ends, i+1)
	return b, i - h.start(b)
}

// start is the index of the first event of block b (ends set).
func (h *history) start(b int) int {
	if b == 0 {
		return 0
	}
	return h.ends[b-1]
}

// size is the number of events in block b.
func (h *history) size(b int) int {
	if h.ends == nil {
		return min(histBlockLen, h.n-b*histBlockLen)
	}
	return h.ends[b] - h.start(b)
}

// at returns event i (0 <= i < n) for reading, or for writing where the
// rules above allow it.
func (h *history) at(i int) *core.GeoEvent {
	if h.blocks == nil {
		return &h.small[i]
	}
	b, off := h.locate(i)
	return &h.blocks[b][off]
}

// search returns the first index whose timestamp is at least ts (n when
// there is none).
func (h *history) search(ts uint64) int {
	return sort.Search(h.n, func(i int) bool { return h.at(i).TimestampNS >= ts })
}

// push appends ev. It writes only past n, so it is safe while shared.
func (h *history) push(ev *core.GeoEvent) {
	x := expiriesOf(ev)
	switch {
	case h.blocks == nil && h.n < histBlockLen:
		h.small = append(h.small, *ev)
	case h.blocks == nil:
		h.toBlocks()
		fallthrough
	case h.ends == nil:
		if h.n%histBlockLen == 0 {
			h.blocks = append(h.blocks, new([histBlockLen]core.GeoEvent))
			h.blockSoonest = append(h.blockSoonest, expiries{})
		}
		b := h.n / histBlockLen
		h.blocks[b][h.n%histBlockLen] = *ev
		h.blockSoonest[b] = h.blockSoonest[b].and(x)
	default:
		last := len(h.blocks) - 1
		if h.ends[last]-h.start(last) == histBlockLen {
			h.blocks = append(h.blocks, new([histBlockLen]core.GeoEvent))
			h.ends = append(h.ends, h.n)
			h.blockSoonest = append(h.blockSoonest, expiries{})
			last++
		}
		h.blocks[last][h.ends[last]-h.start(last)] = *ev
		h.ends[last]++
		h.blockSoonest[last] = h.blockSoonest[last].and(x)
	}
	h.soonest = h.soonest.and(x)
	h.n++
}

// toBlocks makes a full small slice the first block.
func (h *history) toBlocks() {
	b := new([histBlockLen]core.GeoEvent)
	copy(b[:], h.small)
	h.blocks, h.small = []*[histBlockLen]core.GeoEvent{b}, nil
	h.blockSoonest = []expiries{h.soonest}
}

// toSmall makes a history in blocks of at most histBlockLen events one
// small slice, in new memory (a view may hold the blocks).
func (h *history) toSmall() {
	small := make([]core.GeoEvent, 0, h.n)
	for b, blk := range h.blocks {
		small = append(small, blk[:h.size(b)]...)
	}
	h.small, h.blocks, h.ends, h.blockSoonest = small, nil, nil, nil
}

// soonestIn returns the soonest expiries of the events of evs.
func soonestIn(evs []core.GeoEvent) expiries {
	var s expiries
	for i := range evs {
		s = s.and(expiriesOf(&evs[i]))
	}
	return s
}

// resoon recomputes the soonest expiries of block b (in blocks) and of the
// whole history, after an event in block b was replaced.
func (h *history) resoon(b int) {
	if h.blocks == nil {
		h.soonest = soonestIn(h.small)
		return
	}
	h.blockSoonest[b] = soonestIn(h.blocks[b][:h.size(b)])
	h.soonest = expiries{}
	for _, s := range h.blockSoonest {
		h.soonest = h.soonest.and(s)
	}
}

// set replaces event i.
func (h *history) set(i int, ev *core.GeoEvent, shared bool) {
	if h.blocks == nil {
		if shared {
			h.small = slices.Clone(h.small)
		}
		h.small[i] = *ev
		h.resoon(0)
		return
	}
	b, off := h.locate(i)
	if shared {
		h.own(b)
	}
	h.blocks[b][off] = *ev
	h.resoon(b)
}

// insert puts ev at index i (0 <= i <= n), moving the events from i on one
// place up.
func (h *history) insert(i int, ev *core.GeoEvent, shared bool) {
	switch {
	case i == h.n:
		h.push(ev)
		return
	case h.blocks == nil && h.n < histBlockLen:
		if shared {
			h.small = slices.Clone(h.small)
		}
		h.small = slices.Insert(h.small, i, *ev)
		h.soonest = h.soonest.and(expiriesOf(ev))
		h.n++
		return
	case h.blocks == nil:
		h.toBlocks() // a new block: the view keeps small
	}
	if h.ends == nil {
		h.ends = make([]int, len(h.blocks)) // a new list: a view keeps its nil
		for b := range h.ends {
			h.ends[b] = min((b+1)*histBlockLen, h.n)
		}
	}
	b, off := h.locate(i)
	if shared {
		h.own(b)
	}
	blk, size := h.blocks[b], h.ends[b]-h.start(b)
	split := -1
	if size == histBlockLen {
		// Split the block: its upper half moves to a new one after it.
		const half = histBlockLen / 2
		upper := new([histBlockLen]core.GeoEvent)
		copy(upper[:], blk[half:])
		h.blocks = slices.Insert(h.blocks, b+1, upper)
		h.ends = slices.Insert(h.ends, b, h.start(b)+half)
		h.blockSoonest = slices.Insert(h.blockSoonest, b+1, expiries{})
		split = b
		size = half
		if off > half {
			b, off, blk = b+1, off-half, upper
		}
	}
	copy(blk[off+1:size+1], blk[off:size])
	blk[off] = *ev
	for k := b; k < len(h.ends); k++ {
		h.ends[k]++
	}
	h.n++
	x := expiriesOf(ev)
	h.soonest = h.soonest.and(x)
	if split >= 0 {
		for k := split; k <= split+1; k++ {
			h.blockSoonest[k] = soonestIn(h.blocks[k][:h.size(k)])
		}
	} else {
		h.blockSoonest[b] = h.blockSoonest[b].and(x)
	}
}

// own gives the live history its own copy of block b and of the list of
// blocks and ends, so that changing them leaves a view's copy as it was.
func (h *history) own(b int) {
	h.blocks = slices.Clone(h.blocks)
	h.ends = slices.Clone(h.ends)
	c := *h.blocks[b]
	h.blocks[b] = &c
}

// dropExpired removes the events that have expired at t (see expiredAt)
// and returns how many. It reads only the blocks whose soonest expiry has
// passed. What a view holds stays as it was: a small slice or block it
// changes is copied first when shared, and the lists of blocks are new.
// A history in blocks left with at most histBlockLen events becomes
// small; an empty one is for the caller to free.
func (h *history) dropExpired(t uint64, shared bool) int {
	if h.soonest.exp == 0 || h.soonest.exp > t {
		return 0
	}
	before := h.n
	if h.blocks == nil {
		kept := h.small[:0]
		if shared {
			kept = make([]core.GeoEvent, 0, len(h.small))
		}
		for i := range h.small {
			if !expiredAt(&h.small[i], t) {
				kept = append(kept, h.small[i])
			}
		}
		h.small, h.n, h.soonest = kept, len(kept), soonestIn(kept)
		return before - h.n
	}
	blocks := make([]*[histBlockLen]core.GeoEvent, 0, len(h.blocks))
	ends := make([]int, 0, len(h.blocks))
	soons := make([]expiries, 0, len(h.blocks))
	n := 0
	var soonest expiries
	for b, blk := range h.blocks {
		size, bs := h.size(b), h.blockSoonest[b]
		if bs.exp != 0 && bs.exp <= t {
			if shared {
				c := *blk
				blk = &c
			}
			k := 0
			for i := range size {
				if !expiredAt(&blk[i], t) {
					blk[k] = blk[i]
					k++
				}
			}
			size, bs = k, soonestIn(blk[:k])
			if size == 0 {
				continue
			}
		}
		n += size
		blocks, ends, soons = append(blocks, blk), append(ends, n), append(soons, bs)
		soonest = soonest.and(bs)
	}
	h.blocks, h.ends, h.blockSoonest, h.n, h.soonest = blocks, ends, soons, n, soonest
	if n <= histBlockLen {
		h.toSmall()
	}
	return before - n
}
