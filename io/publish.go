package io

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/geoevent/geoevent/core"
)

// What the loop publishes for the HTTP gateway's feed readers (http's
// LocalFeed), which wait for it on other goroutines without polling and
// without a read through the loop:
//
//   - the feed's newest sequence (FeedNews), compared after every input
//     and published when it has moved, so a reader waits on a channel
//     and reads the feed only when there is something new in it;
//   - the events each applied entry wrote (PositionsAfter), for the
//     position stream, kept only while someone listens: a copy of what
//     the replica hands over (PublishApplied), in a bounded ring that
//     every listener reads at its own cursor. The loop's cost is one copy
//     an entry, however many listen; a listener that falls more
//     than the ring behind is told so and must give up (it never holds
//     the loop).

// news is a value readers wait on: set closes the channel that get handed
// out since the last set, so a waiter wakes once per change.
type news struct {
	mu sync.Mutex
	v  uint64
	ch chan struct{} // nil: nobody waits
}

func (n *news) get() (uint64, <-chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.v, n.ch
}

func (n *news) set(v uint64) {
	n.mu.Lock()
	n.v = v
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
	n.mu.Unlock()
}

// FeedNews returns the sequence of the newest fence notification the
// replica has applied (0: none) and a channel closed once it is newer.
// Safe for concurrent use; it never waits for the loop.
func (s *Server) FeedNews() (last uint64, changed <-chan struct{}) { return s.feedNews.get() }

// publishFeed publishes the feed's newest sequence when it has moved (on
// the loop, after each input).
func (s *Server) publishFeed() {
	if v := s.r.FeedLast(); v != s.feedLast {
		s.feedLast = v
		s.feedNews.set(v)
	}
}

// The position ring's bounds: the batches (applied entries) and the
// writes it holds. A listener more than that behind has fallen behind.
const (
	positionRingBatches = 4096
	positionRingWrites  = 1 << 17
)

// positionRing is the applied entries' writes while someone listens.
type positionRing struct {
	listeners atomic.Int64

	mu          sync.Mutex
	batches     []core.AppliedWrites // ring storage; batch b is at b % len
	first, next uint64               // the batches held: first up to next (exclusive)
	writes      int                  // writes held
	ch          chan struct{}        // closed when a batch comes (nil: nobody waits)
}

// offer keeps a copy of the writes of the entry at index for the
// listeners, if any (on the loop, from PublishApplied).
func (p *positionRing) offer(index uint64, writes []core.HistoryWrite) {
	if p.listeners.Load() == 0 {
		if p.first != p.next { // read unlocked: only the loop changes first and next
			p.mu.Lock()
			clear(p.batches)
			p.first, p.writes = p.next, 0
			p.mu.Unlock()
		}
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.batches == nil {
		p.batches = make([]core.AppliedWrites, positionRingBatches)
	}
	for p.first < p.next && (p.next-p.first == uint64(len(p.batches)) || p.writes+len(writes) > positionRingWrites) {
		b := &p.batches[p.first%uint64(len(p.batches))]
		p.writes -= len(b.Writes)
		*b = core.AppliedWrites{}
		p.first++
	}
	p.batches[p.next%uint64(len(p.batches))] = core.AppliedWrites{Index: index, Writes: slices.Clone(writes)}
	p.next++
	p.writes += len(writes)
	if p.ch != nil {
		close(p.ch)
		p.ch = nil
	}
}

// PositionsListen counts a listener of the applied events and returns
// its cursor: it sees the entries applied from now on. Each call needs
// its PositionsUnlisten.
func (s *Server) PositionsListen() (cursor uint64) {
	p := &s.positions
	p.listeners.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.next
}

// PositionsUnlisten ends a listener of PositionsListen.
func (s *Server) PositionsUnlisten() { s.positions.listeners.Add(-1) }

// PositionsAfter appends to dst the batches of writes applied since
// cursor, oldest first, and returns them with the cursor to ask from next
// and, when there were none, a channel closed once there are. behind says
// that some batches after cursor have been dropped (the listener fell more
// than the ring behind): it gets nothing more. The writes are not to be
// modified.
func (s *Server) PositionsAfter(cursor uint64, dst []core.AppliedWrites) (batches []core.AppliedWrites, next uint64, changed <-chan struct{}, behind bool) {
	p := &s.positions
	p.mu.Lock()
	defer p.mu.Unlock()
	if cursor < p.first {
		return dst, cursor, nil, true
	}
	for b := cursor; b < p.next; b++ {
		dst = append(dst, p.batches[b%uint64(len(p.batches))])
	}
	if cursor >= p.next {
		if p.ch == nil {
			p.ch = make(chan struct{})
		}
		return dst, p.next, p.ch, false
	}
	return dst, p.next, nil, false
}
