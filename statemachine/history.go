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
type history struct {
	small  []core.GeoEvent
	blocks []*[histBlockLen]core.GeoEvent
	ends   []int // nil, or ends[b]: the events in blocks 0..b
	n      int
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
	switch {
	case h.blocks == nil && h.n < histBlockLen:
		h.small = append(h.small, *ev)
	case h.blocks == nil:
		h.toBlocks()
		fallthrough
	case h.ends == nil:
		if h.n%histBlockLen == 0 {
			h.blocks = append(h.blocks, new([histBlockLen]core.GeoEvent))
		}
		h.blocks[h.n/histBlockLen][h.n%histBlockLen] = *ev
	default:
		last := len(h.blocks) - 1
		if h.ends[last]-h.start(last) == histBlockLen {
			h.blocks = append(h.blocks, new([histBlockLen]core.GeoEvent))
			h.ends = append(h.ends, h.n)
			last++
		}
		h.blocks[last][h.ends[last]-h.start(last)] = *ev
		h.ends[last]++
	}
	h.n++
}

// toBlocks makes a full small slice the first block.
func (h *history) toBlocks() {
	b := new([histBlockLen]core.GeoEvent)
	copy(b[:], h.small)
	h.blocks, h.small = []*[histBlockLen]core.GeoEvent{b}, nil
}

// set replaces event i.
func (h *history) set(i int, ev *core.GeoEvent, shared bool) {
	if h.blocks == nil {
		if shared {
			h.small = slices.Clone(h.small)
		}
		h.small[i] = *ev
		return
	}
	b, off := h.locate(i)
	if shared {
		h.own(b)
	}
	h.blocks[b][off] = *ev
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
	if size == histBlockLen {
		// Split the block: its upper half moves to a new one after it.
		const half = histBlockLen / 2
		upper := new([histBlockLen]core.GeoEvent)
		copy(upper[:], blk[half:])
		h.blocks = slices.Insert(h.blocks, b+1, upper)
		h.ends = slices.Insert(h.ends, b, h.start(b)+half)
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
}

// own gives the live history its own copy of block b and of the list of
// blocks and ends, so that changing them leaves a view's copy as it was.
func (h *history) own(b int) {
	h.blocks = slices.Clone(h.blocks)
	h.ends = slices.Clone(h.ends)
	c := *h.blocks[b]
	h.blocks[b] = &c
}
