package statemachine

import (
	"slices"
	"sort"

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
// entries, never a clock), replicated configuration (SetFeedRetention,
// in snapshots and the digest): the oldest notifications are dropped as
// new ones come, and at once when the bounds are lowered. A read from before what the feed still holds is 241
// FEED_TRIMMED, naming where the feed starts.

// watchState is the fences and the feed.
type watchState struct {
	fences fenceSet
	feed   feedLog
}

// feedLog holds the retained notifications, oldest first: the ones from
// position head of chunks[0] on, n of them. Appending fills the last
// chunk, and dropping the oldest advances head and lets go of chunks it
// has passed: no notification is ever copied or overwritten once
// written, so a frozen view (which keeps the chunks it was given) stays
// valid, and the feed's memory does not move as it turns over.
type feedLog struct {
	chunks []*feedChunk
	head   int // position of the oldest in chunks[0]
	n      int // notifications retained

	index   uint64 // the log index of the entry being applied (BeginEntry)
	opNS    uint64 // and its operation time
	lastSeq uint64 // the sequence of the newest notification made, retained or not
	dropped uint64 // the sequence of the newest notification dropped (0: none)

	// Retention (SetFeedRetention), 0 and 0 until it is set: the
	// defaults, and no retention section in snapshots.
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

// SetFeedRetention is set_feed_retention: it bounds the feed to the
// notifications made within MaxAgeS seconds (of operation time) of the
// newest entry, and to the newest MaxNotifications of them, and drops at
// once what the new bounds no longer keep. Retention goes through the
// log, is in snapshots and the digest, so every replica trims alike.
// Errors: 108 INVALID_ARGUMENT outside core's limits, changing nothing.
func (sm *StateMachine) SetFeedRetention(opTS uint64, req *core.FeedRetention) (core.FeedRetentionReply, error) {
	if err := core.CheckFeedRetention(req); err != nil {
		return core.FeedRetentionReply{}, err
	}
	f := &sm.watch.feed
	f.retainNS, f.retainCount = req.MaxAgeS*1_000_000_000, int(req.MaxNotifications)
	f.trim()
	return sm.feedRetention(), nil
}

// GetFeedRetention is get_feed_retention: the retention in force (the
// defaults until it is set) and the feed's extent.
func (sm *StateMachine) GetFeedRetention(opTS uint64, _ *core.None) (core.FeedRetentionReply, error) {
	return sm.feedRetention(), nil
}

func (sm *StateMachine) feedRetention() core.FeedRetentionReply {
	f := &sm.watch.feed
	ns, n := f.retention()
	r := core.FeedRetentionReply{FeedRetention: core.FeedRetention{MaxAgeS: ns / 1_000_000_000, MaxNotifications: uint64(n)}, Last: f.lastSeq}
	if f.n > 0 {
		r.Start = f.at(0).Seq
	}
	return r
}

// setFeedRetention sets the bounds without the operation's limits (0
// keeps a default), for tests that turn the feed over quickly.
func (sm *StateMachine) setFeedRetention(ns uint64, count int) {
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

// feedChunkLen is the notifications of a chunk: about 800 KB.
const feedChunkLen = 4096

type feedChunk [feedChunkLen]core.Notification

// at returns the i-th retained notification.
func (f *feedLog) at(i int) *core.Notification {
	i += f.head
	return &f.chunks[i/feedChunkLen][i%feedChunkLen]
}

// push appends a notification, giving it its sequence and time, and drops
// what retention no longer keeps.
func (f *feedLog) push(n *core.Notification) {
	n.Seq = max(f.lastSeq+1, f.index<<32+1)
	n.OpNS = f.opNS
	f.lastSeq = n.Seq
	f.append(n)
	f.trim()
}

// append adds n after the newest.
func (f *feedLog) append(n *core.Notification) {
	end := f.head + f.n
	if end == len(f.chunks)*feedChunkLen {
		f.chunks = append(f.chunks, new(feedChunk))
	}
	f.chunks[end/feedChunkLen][end%feedChunkLen] = *n
	f.n++
}

func (f *feedLog) trim() {
	ns, count := f.retention()
	for f.n > 0 {
		old := f.at(0)
		if f.n <= count && (f.opNS < ns || old.OpNS >= f.opNS-ns) {
			break
		}
		f.dropped = old.Seq
		f.head++ // not zeroed: a frozen view may still hold it
		f.n--
		if f.head == feedChunkLen {
			f.chunks[0] = nil
			f.chunks = f.chunks[1:]
			f.head = 0
		}
	}
	if f.n == 0 && len(f.chunks) > 0 {
		f.chunks, f.head = nil, 0
	}
}

// view is the retained notifications as a frozen view keeps them.
func (f *feedLog) view() feedView {
	return feedView{chunks: slices.Clone(f.chunks), head: f.head, n: f.n}
}

// feedView is a feedLog's notifications at one moment.
type feedView struct {
	chunks []*feedChunk
	head   int
	n      int
}

func (v *feedView) at(i int) *core.Notification {
	i += v.head
	return &v.chunks[i/feedChunkLen][i%feedChunkLen]
}

// feedScanBudget bounds the notifications one page examines, so that a
// filter that matches little does not walk the whole feed in one read.
const feedScanBudget = 100_000

// ReadFeed returns the notifications after req.After that match its
// filter, oldest first. After core.FeedEnd is after the newest
// notification made: the page is empty and its Next is that sequence.
// Every page carries the newest sequence as Last. Errors: 241 FEED_TRIMMED when notifications after
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
	after := req.After
	if after == core.FeedEnd {
		after = f.lastSeq
	}
	page := core.FeedPage{Next: after, Last: f.lastSeq}
	if f.n > 0 {
		page.Start = f.at(0).Seq
	}
	if after < f.dropped {
		return core.FeedPage{}, core.Errorf(core.FeedTrimmed,
			"the feed no longer holds notifications after sequence %d: it starts at sequence %d (ask for after=%d)",
			after, f.dropped+1, f.dropped)
	}
	i := sort.Search(f.n, func(i int) bool { return f.at(i).Seq > after })
	for scanned := 0; i < f.n && len(page.Notifications) < limit && scanned < feedScanBudget; i, scanned = i+1, scanned+1 {
		n := f.at(i)
		page.Next = n.Seq
		if !types.Has(n.Type) || len(req.Fences) > 0 && !slices.Contains(req.Fences, n.Fence) {
			continue
		}
		page.Notifications = append(page.Notifications, *n)
	}
	page.HasMore = i < f.n
	return page, nil
}

// FeedLast returns the sequence of the newest notification made so far (0:
// none): a cheap read by which a waiting reader learns the feed advanced.
func (sm *StateMachine) FeedLast() uint64 { return sm.watch.feed.lastSeq }
