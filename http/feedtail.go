package http

import (
	"context"
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/geoevent/geoevent/core"
)

// LocalFeed is what the local replica's event loop publishes for the
// feed's readers (io.Server implements it). Its methods never wait for
// the loop.
type LocalFeed interface {
	// FeedNews returns the sequence of the newest notification applied
	// (0: none) and a channel closed once there is a newer one.
	FeedNews() (last uint64, changed <-chan struct{})
	// PositionsListen counts a listener of the applied entries' writes
	// and returns its cursor (it sees what is applied from then on);
	// PositionsUnlisten ends it.
	PositionsListen() (cursor uint64)
	PositionsUnlisten()
	// PositionsAfter appends to dst the writes applied since cursor and
	// returns them with the next cursor and, when there were none, a
	// channel closed once there are; behind says the listener fell too
	// far behind and gets nothing more.
	PositionsAfter(cursor uint64, dst []core.AppliedWrites) (batches []core.AppliedWrites, next uint64, changed <-chan struct{}, behind bool)
}

// The feed's tail. With Config.Feed, the gateway's feed readers that are
// caught up share one reader of the replica's feed: a goroutine, running
// while anyone reads, waits for the feed to move (FeedNews), reads what is
// new once (unfiltered, chained by sequence: page after page from the
// Next of the one before, so the window has no gap) and renders each
// notification's JSON once. Readers filter the window and write the
// rendered bytes: a commit costs one read through the loop, not one per
// reader. A reader behind the window (resuming from an older sequence, or
// after the window was reset by a failed read) reads the replica itself
// until it has caught up. The feed is the same on every replica up to its
// applied index, so the window is what a direct read would answer:
// ordering and exactly-once hold either way. Long polls wait on a
// channel closed at each change; streams wait in a relay that wakes a few
// at a time (see relay). While the goroutine runs, a clock wakes the
// window's waiters every feedFallbackPoll as well, so
// that a caught-up stream needs no timer of its own for its keep-alive:
// with 1,000 streams, a timer made and stopped per wait and the select on
// it were a quarter of what a stream's wake-up cost.
const (
	tailMax          = 1 << 16 // notifications the window keeps at most
	tailKeep         = 3 * tailMax / 4
	feedFallbackPoll = time.Second // a waiting reader looks again at least this often
	tailRetry        = 100 * time.Millisecond
)

// tailNote is one notification of the window with its Server-Sent Event
// (id, event and data lines), whose data is its JSON (Form B): rendered
// once, written by every stream.
type tailNote struct {
	n   core.Notification
	sse []byte
	at  int // where data starts in sse
}

// newTailNote renders n.
func newTailNote(n *core.Notification) tailNote {
	var w jw
	w.notification(n)
	sse := appendSSE(make([]byte, 0, len(w.b)+64), n.Seq, n.Type.String(), w.b)
	return tailNote{*n, sse, len(sse) - len("\n\n") - len(w.b)}
}

// data is the notification's JSON.
func (t *tailNote) data() []byte { return t.sse[t.at : len(t.sse)-2] }

// feedTail is the window: every notification with a sequence above from
// and at most upto, oldest first. A slice of notes handed out is never
// written again (appends go past its end; a trim copies), so readers use
// it without the lock.
type feedTail struct {
	mu         sync.Mutex
	users      int  // readers that use the window
	running    bool // the reading goroutine runs
	valid      bool
	notes      []tailNote
	from, upto uint64
	ext        feedExtent    // the feed's oldest and newest sequences, as last read
	ch         chan struct{} // closed when the window changes or the clock ticks (nil: nobody waits)
	clock      *time.Timer   // the waiters' clock (nil: stopped, after running ended)

	// The relay of the window's sleeping streams (see relay).
	asleep []*tailWaiter // waiting for the window to change
	queue  []*tailWaiter // to wake, from queue[qAt] on (nil: left meanwhile)
	qAt    int
	turns  int // streams woken that have not passed their turn on
	width  int // turns at most: GOMAXPROCS when the goroutine started
}

// broadcast wakes the window's waiters (t.mu held): the long polls and
// streams that read the replica at once, the window's streams in turn.
func (t *feedTail) broadcast() {
	if t.ch != nil {
		close(t.ch)
		t.ch = nil
	}
	t.queue = append(t.queue, t.asleep...)
	clear(t.asleep)
	t.asleep = t.asleep[:0]
	t.relay()
}

// The relay. A stream that has taken everything the window holds sleeps
// (sleep) until the window changes or its clock ticks. Then the sleepers
// are woken in turn, not at once: at most width of them hold a turn, and
// each passes its turn on (release) once it has taken its notifications,
// before it writes them, so that a client slow to read holds nobody up.
// Closing one channel for all of them made 1,000 streams runnable at
// each commit; with GOMAXPROCS=1 the goroutines the network readied
// queued behind them, among them the binary protocol's readers, whose
// requests then waited (in a runtime trace one waited 219 ms to run), and
// the last streams served waited for all the others: notifications had a
// p99 of 117-210 ms after their write's acknowledgement, 18-27 ms with the
// relay (docs/performance.md, Feed readers).

// tailWaiter is a stream's place in the relay.
type tailWaiter struct {
	turn  chan struct{} // a token: the stream's turn (capacity 1)
	state uint8         // waiterIdle, waiterQueued, waiterWoken (t.mu)
}

const (
	waiterIdle   = iota // running, without a turn
	waiterQueued        // in asleep or queue
	waiterWoken         // holding a turn
)

func newTailWaiter() *tailWaiter { return &tailWaiter{turn: make(chan struct{}, 1)} }

// relay gives turns to the queue's first sleepers while fewer than width
// streams hold one (t.mu held).
func (t *feedTail) relay() {
	for t.turns < t.width && t.qAt < len(t.queue) {
		w := t.queue[t.qAt]
		t.queue[t.qAt] = nil
		t.qAt++
		if w == nil {
			continue
		}
		w.state = waiterWoken
		t.turns++
		w.turn <- struct{}{}
	}
	if t.qAt == len(t.queue) {
		t.queue, t.qAt = t.queue[:0], 0
	}
}

// sleep queues w to be woken when the window moves past after or the
// clock ticks; false (w not queued) when the window holds more after it
// already or does not cover it: the stream takes again at once.
func (t *feedTail) sleep(w *tailWaiter, after uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.valid || after < t.from || after < t.upto {
		return false
	}
	w.state = waiterQueued
	t.asleep = append(t.asleep, w)
	return true
}

// release takes w out of the relay: out of the queue it sleeps in, or,
// when it holds a turn, giving the turn to the next sleeper. A stream
// calls it once it has taken its notifications in its turn, and as it
// ends.
func (t *feedTail) release(w *tailWaiter) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch w.state {
	case waiterQueued:
		for _, q := range [][]*tailWaiter{t.asleep, t.queue[t.qAt:]} {
			if i := slices.Index(q, w); i >= 0 {
				q[i] = nil
			}
		}
	case waiterWoken:
		t.turns--
		t.relay()
	}
	w.state = waiterIdle
}

// reset empties the window: its readers read the replica until it is
// valid again (t.mu held).
func (t *feedTail) reset() {
	t.valid, t.notes = false, nil
	t.broadcast()
}

// join counts a reader of the window and starts its goroutine.
func (g *Gateway) tailJoin() {
	t := &g.tail
	t.mu.Lock()
	defer t.mu.Unlock()
	t.users++
	if !t.running {
		t.running = true
		t.width = runtime.GOMAXPROCS(0)
		go g.runTail()
		if t.clock == nil {
			t.clock = time.AfterFunc(feedFallbackPoll, g.tailTick)
		}
	}
}

// tailTick wakes the window's waiters, every feedFallbackPoll while the
// reading goroutine runs.
func (g *Gateway) tailTick() {
	t := &g.tail
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.running {
		t.clock = nil
		return
	}
	t.broadcast()
	t.clock.Reset(feedFallbackPoll)
}

func (g *Gateway) tailLeave() {
	t := &g.tail
	t.mu.Lock()
	t.users--
	t.mu.Unlock()
}

// runTail keeps the window up with the feed while anyone reads it.
func (g *Gateway) runTail() {
	t := &g.tail
	stop := func() {
		t.running = false
		t.reset()
		t.mu.Unlock()
	}
	for {
		last, changed := g.cfg.Feed.FeedNews()
		t.mu.Lock()
		if t.users == 0 {
			stop()
			return
		}
		valid, after := t.valid, t.upto
		t.mu.Unlock()
		if valid && last <= after {
			select {
			case <-changed:
			case <-g.streams.done():
				t.mu.Lock()
				stop()
				return
			case <-time.After(feedFallbackPoll):
			}
			continue
		}
		if !valid {
			after = last // from now on: older notifications are read by those who want them
		}
		page, err := g.readFeedAfter(after)
		t.mu.Lock()
		if err != nil {
			t.reset()
			t.mu.Unlock()
			select {
			case <-g.streams.done():
			case <-time.After(tailRetry):
			}
			continue
		}
		if !t.valid {
			t.from, t.upto, t.valid = after, after, true
		}
		for i := range page.Notifications {
			t.notes = append(t.notes, newTailNote(&page.Notifications[i]))
		}
		t.upto, t.ext = max(t.upto, page.Next), feedExtent{page.Start, max(t.ext.last, page.Last)}
		if len(t.notes) > tailMax {
			drop := len(t.notes) - tailKeep
			t.from = t.notes[drop-1].n.Seq
			t.notes = slices.Clone(t.notes[drop:])
		}
		t.broadcast()
		t.mu.Unlock()
	}
}

// readFeedAfter reads the whole feed after a sequence (one page).
func (g *Gateway) readFeedAfter(after uint64) (*core.FeedPage, error) {
	ctx, cancel := context.WithTimeout(context.Background(), g.cfg.RequestTimeout)
	defer cancel()
	oc := &opCall[core.FeedRequest, core.FeedPage]{op: core.ReadFeed, req: &core.FeedRequest{After: after, Limit: core.MaxFeedLimit}}
	if err := g.cfg.Backend.Do(ctx, oc); err != nil {
		return nil, err
	}
	if oc.reply == nil {
		return nil, core.Errorf(core.InternalError, "the backend answered read_feed with %T", oc.bad)
	}
	return oc.reply, nil
}

// feedMatch reports whether n passes req's filter.
func feedMatch(req *core.FeedRequest, n *core.Notification) bool {
	return (req.Types == 0 || req.Types.Has(n.Type)) && (len(req.Fences) == 0 || slices.Contains(req.Fences, n.Fence))
}

// take takes from the window the notifications after req.After that
// match req, at most limit of them, and returns them with the sequence to
// go on from, whether the window holds more now and the feed's extent. ok
// is false when the window does not cover req.After: the caller reads the
// replica. When nothing is taken, changed is closed once the window moves
// or the clock ticks.
func (t *feedTail) take(req *core.FeedRequest, limit int, dst []tailNote) (notes []tailNote, next uint64, more bool, ext feedExtent, changed <-chan struct{}, ok bool) {
	t.mu.Lock()
	if !t.valid || req.After < t.from {
		t.mu.Unlock()
		return dst, 0, false, feedExtent{}, nil, false
	}
	window, upto := t.notes, t.upto
	ext = t.ext
	if req.After >= upto {
		if t.ch == nil {
			t.ch = make(chan struct{})
		}
		changed = t.ch
		t.mu.Unlock()
		return dst, req.After, false, ext, changed, true
	}
	t.mu.Unlock()
	i := sort.Search(len(window), func(i int) bool { return window[i].n.Seq > req.After })
	next = upto
	for ; i < len(window); i++ {
		if len(dst) == limit {
			return dst, next, true, ext, nil, true
		}
		n := &window[i]
		next = n.n.Seq
		if feedMatch(req, &n.n) {
			dst = append(dst, *n)
		}
	}
	return dst, upto, false, ext, nil, true
}
