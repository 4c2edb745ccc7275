package statemachine

import (
	"slices"
	"sort"

	"github.com/geoevent/geoevent/core"
)

// history is one entity's older events, ascending by timestamp.
//
// Up to histBlockLen events it is one slice (small), grown by append. Past
// that it is a list of fixed blocks of histBlockLen events (blocks), every
// one full but the last, and small is nil. So adding an event never copies
// more than one block (32 KiB): growing a single slice of four million
// events held the replica for up to a second.
//
// Sharing with frozen views (see entityStore): a view holds a copy of the
// history value, which shares small's array or the blocks and the blocks
// list with the live one. While a view may hold it (shared), the live
// history writes in place only past the view's length n: appends do;
// replacing or inserting an event copies first what it changes (the small
// slice, or the blocks from the change on and the list of blocks).
type history struct {
	small  []core.GeoEvent
	blocks []*[histBlockLen]core.GeoEvent
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

// at returns event i (0 <= i < n) for reading, or for writing where the
// rules above allow it.
func (h *history) at(i int) *core.GeoEvent {
	if h.blocks == nil {
		return &h.small[i]
	}
	return &h.blocks[i/histBlockLen][i%histBlockLen]
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
		// The slice is full: it becomes the first block.
		b := new([histBlockLen]core.GeoEvent)
		copy(b[:], h.small)
		h.blocks, h.small = []*[histBlockLen]core.GeoEvent{b}, nil
		fallthrough
	default:
		if h.n%histBlockLen == 0 {
			h.blocks = append(h.blocks, new([histBlockLen]core.GeoEvent))
		}
		h.blocks[h.n/histBlockLen][h.n%histBlockLen] = *ev
	}
	h.n++
}

// set replaces event i.
func (h *history) set(i int, ev *core.GeoEvent, shared bool) {
	if shared {
		h.own(i)
	}
	*h.at(i) = *ev
}

// insert puts ev at index i (0 <= i <= n), moving the events from i on one
// place up.
func (h *history) insert(i int, ev *core.GeoEvent, shared bool) {
	if i == h.n {
		h.push(ev)
		return
	}
	if shared {
		h.own(i)
	}
	last := *h.at(h.n - 1)
	h.shiftUp(i)
	*h.at(i) = *ev
	h.push(&last) // past n: a new place
}

// shiftUp moves events i..n-2 one place up, over event n-1, a block at a
// time from the top (what own(i) copied, when shared).
func (h *history) shiftUp(i int) {
	top := h.n - 1
	if h.blocks == nil {
		copy(h.small[i+1:top+1], h.small[i:top])
		return
	}
	for b := top / histBlockLen; b >= i/histBlockLen; b-- {
		blk := h.blocks[b]
		lo := max(i, b*histBlockLen) % histBlockLen
		hi := min(top, b*histBlockLen+histBlockLen-1) % histBlockLen
		copy(blk[lo+1:hi+1], blk[lo:hi])
		if b > i/histBlockLen {
			blk[0] = h.blocks[b-1][histBlockLen-1]
		}
	}
}

// own gives the live history its own copy of what holds events i..n-1, so
// that writing them leaves a view's copy as it was.
func (h *history) own(i int) {
	if h.blocks == nil {
		h.small = slices.Clone(h.small)
		return
	}
	h.blocks = slices.Clone(h.blocks)
	for b := i / histBlockLen; b < len(h.blocks); b++ {
		c := *h.blocks[b]
		h.blocks[b] = &c
	}
}
