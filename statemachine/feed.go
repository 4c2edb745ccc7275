package statemachine

import (
	"slices"

	"github.com/geoevent/geoevent/core"
)

// The feed: the notifications of fence transitions, in log order. It is
// replicated state, in snapshots and the digest. A notification's sequence
// is derived from the log index of the entry that made it (BeginEntry):
// the first of an entry is at least index*2^32+1, the others follow one by
// one, and every sequence exceeds the one before, so readers resume by
// sequence on any replica.
//
// Retention is bounded by count and by age (the operation times of the
// entries, never a clock): the oldest notifications are dropped as new
// ones come. A read from before what the feed still holds is 241
// FEED_TRIMMED, naming where the feed starts.

// watchState is the fences and the feed.
type watchState struct {
	fences fenceSet
	feed   feedLog
}

// feedLog holds the retained notifications, oldest first, in items[head:].
// Dropping the oldest advances head; compacting copies the rest into new
// memory, never in place, so that a frozen view (which keeps the slice it
// was given) is not overwritten.
type feedLog struct {
	items []core.Notification
	head  int

	index   uint64 // the log index of the entry being applied (BeginEntry)
	opNS    uint64 // and its operation time
	lastSeq uint64 // the sequence of the newest notification made, retained or not
	dropped uint64 // the sequence of the newest notification dropped (0: none)

	retainNS    uint64 // 0: DefaultFeedRetentionNS
	retainCount int    // 0: DefaultFeedRetentionCount
}

// BeginEntry tells the state machine the log index and the operation
// time of the entry it is about to apply: the sequences of the
// notifications the entry makes derive from the index, and their age from
// the time. A replica calls it before each entry it applies; without it
// sequences still grow one by one.
func (sm *StateMachine) BeginEntry(index, opTS uint64) {
	f := &sm.watch.feed
	if index > f.index {
		f.index = index
	}
	f.opNS = max(f.opNS, opTS)
}

// SetFeedRetention bounds the feed to notifications made within ns
// nanoseconds (of operation time) of the newest entry, and to the newest
// count of them; 0 keeps a default (24 h, 10,000,000). Every replica must
// be configured alike: retention decides the replicated feed.
func (sm *StateMachine) SetFeedRetention(ns uint64, count int) {
	sm.watch.feed.retainNS, sm.watch.feed.retainCount = ns, max(count, 0)
}

func (f *feedLog) retention() (uint64, int) {
	ns, n := f.retainNS, f.retainCount
	if ns == 0 {
		ns = core.DefaultFeedRetentionNS
	}
	if n == 0 {
		n = core.DefaultFeedRetentionCount
	}
	return ns, n
}

// push appends a notification, giving it its sequence and time, and drops
// what retention no longer keeps.
func (f *feedLog) push(n *core.Notification) {
	n.Seq = max(f.lastSeq+1, f.index<<32+1)
	n.OpNS = f.opNS
	f.lastSeq = n.Seq
	f.items = append(f.items, *n)
	f.trim()
}

func (f *feedLog) trim() {
	ns, count := f.retention()
	for f.head < len(f.items) {
		old := &f.items[f.head]
		if len(f.items)-f.head <= count && (f.opNS < ns || old.OpNS >= f.opNS-ns) {
			break
		}
		f.dropped = old.Seq
		*old = core.Notification{}
		f.head++
	}
	if f.head > 1024 && f.head > len(f.items)/2 {
		f.items = slices.Clone(f.items[f.head:])
		f.head = 0
	}
}

func (f *feedLog) live() []core.Notification { return f.items[f.head:] }

// feedScanBudget bounds the notifications one page examines, so that a
// filter that matches little does not walk the whole feed in one read.
const feedScanBudget = 100_000

// ReadFeed returns the notifications after req.After that match its
// filter, oldest first. Errors: 241 FEED_TRIMMED when notifications after
// req.After have been dropped; 120 INVALID_FENCE for a bad fence name or
// type set; 300 when the limit exceeds 10,000. Fences need not exist: a
// filter may name a fence that is defined later.
func (sm *StateMachine) ReadFeed(opTS uint64, req *core.FeedRequest) (core.FeedPage, error) {
	limit := int(req.Limit)
	switch {
	case limit == 0:
		limit = core.DefaultFeedLimit
	case limit > core.MaxFeedLimit:
		return core.FeedPage{}, core.Errorf(core.QueryResultTooLarge, "limit %d exceeds %d", limit, core.MaxFeedLimit)
	}
	if len(req.Fences) > core.MaxFeedFenceFilter {
		return core.FeedPage{}, core.Errorf(core.InvalidFence, "%d fence names; at most %d", len(req.Fences), core.MaxFeedFenceFilter)
	}
	for _, name := range req.Fences {
		if !core.ValidFenceName(name) {
			return core.FeedPage{}, core.Errorf(core.InvalidFence, "fence name %q is not a fence name", name)
		}
	}
	if req.Types&^core.AllNotify != 0 {
		return core.FeedPage{}, core.Errorf(core.InvalidFence, "unknown notification types %#x", uint8(req.Types))
	}
	types := req.Types
	if types == 0 {
		types = core.AllNotify
	}
	f := &sm.watch.feed
	items := f.live()
	page := core.FeedPage{Next: req.After}
	if len(items) > 0 {
		page.Start = items[0].Seq
	}
	if req.After < f.dropped {
		return core.FeedPage{}, core.Errorf(core.FeedTrimmed,
			"the feed no longer holds notifications after sequence %d: it starts at sequence %d (ask for after=%d)",
			req.After, f.dropped+1, f.dropped)
	}
	i, _ := slices.BinarySearchFunc(items, req.After+1, func(n core.Notification, s uint64) int {
		switch {
		case n.Seq < s:
			return -1
		case n.Seq > s:
			return 1
		}
		return 0
	})
	for scanned := 0; i < len(items) && len(page.Notifications) < limit && scanned < feedScanBudget; i, scanned = i+1, scanned+1 {
		n := &items[i]
		page.Next = n.Seq
		if !types.Has(n.Type) || len(req.Fences) > 0 && !slices.Contains(req.Fences, n.Fence) {
			continue
		}
		page.Notifications = append(page.Notifications, *n)
	}
	page.HasMore = i < len(items)
	return page, nil
}

// FeedLast returns the sequence of the newest notification made so far (0:
// none): a cheap read by which a waiting reader learns the feed advanced.
func (sm *StateMachine) FeedLast() uint64 { return sm.watch.feed.lastSeq }
