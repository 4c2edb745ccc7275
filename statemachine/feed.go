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

// feedLog holds the retained notifications, oldest first, in the
// compact form of feedStore, and what makes the next ones.
type feedLog struct {
	feedStore
	nextGroup uint64    // the number the next group gets
	names     feedNames // the references to feedStore.names

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
		r.Start = f.seq(0)
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

// The feed keeps a notification in 8 bytes and shares the rest with the
// other notifications the same event made (an event lands in 1.6 fences
// of a dense set on average, and a move may make an exit and an enter):
//
//   - a feedNote names its fence by a number in an interned table of
//     names (feedNames) and its group by the low 32 bits of the group's
//     number, and holds its type and has_prev;
//   - a feedGroup holds the event, the previous position, the operation
//     time, and the difference between its notifications' sequences and
//     their numbers: the notifications of a group are consecutive, and so
//     are their sequences, so a note's sequence is its number plus its
//     group's difference.
//
// Neither holds a pointer, so the garbage collector does not scan the
// chunks, and reads build the core.Notification on the way out.
// Notifications and groups are numbered from 0 in the order they are
// made; the numbers are internal (snapshots hold the notifications, not
// the numbers) and a feed read from a snapshot numbers afresh. At most
// core.MaxFeedRetentionCount notifications are retained, and so at most as
// many groups: the low 32 bits of a group's number name it among them.

// feedChunkLen is the notifications of a chunk (32 KB); feedGroupChunkLen
// the groups of a chunk (288 KB: a group is 144 bytes).
const (
	feedChunkLen      = 4096
	feedGroupChunkLen = 2048
)

// feedNote is a notification as the feed keeps it.
type feedNote struct {
	group uint32 // the low 32 bits of its group's number
	bits  uint32 // its fence name's number<<3 | has_prev<<2 | type
}

// feedGroup is what the notifications of one event share.
type feedGroup struct {
	ev   core.GeoEvent
	prev core.Coordinate
	opNS uint64
	seq  uint64 // its notifications' sequences less their numbers (modulo 2^64)
}

type (
	feedChunk      [feedChunkLen]feedNote
	feedGroupChunk [feedGroupChunkLen]feedGroup
)

// feedStore is the retained notifications: the ones from position head of
// chunks[0] on, n of them, and their groups. Appending fills the last
// chunks, and dropping the oldest advances head and lets go of chunks it
// has passed: no note or group is ever copied or overwritten once
// written, nor is the name of a slot that a frozen view may read (the
// table of names is copied before a slot is reused while a view shares
// it), so a frozen view (a feedStore with its own copies of the tables of
// chunks) stays valid, and the feed's memory does not move as it turns
// over.
type feedStore struct {
	chunks []*feedChunk
	head   int    // position of the oldest in chunks[0]
	n      int    // notifications retained
	base   uint64 // the number of chunks[0][0]

	groups []*feedGroupChunk
	gbase  uint64 // the number of groups[0][0]
	gn     int    // the groups written from groups[0][0] on

	names []feedName // the fence names by number (feedNames)
}

// note returns the i-th retained notification's note.
func (v *feedStore) note(i int) *feedNote {
	i += v.head
	return &v.chunks[i/feedChunkLen][i%feedChunkLen]
}

// group returns x's group.
func (v *feedStore) group(x *feedNote) *feedGroup {
	g := int(x.group - uint32(v.gbase)) // the distance from groups[0][0]: less than 2^32
	return &v.groups[g/feedGroupChunkLen][g%feedGroupChunkLen]
}

// seq returns the i-th retained notification's sequence.
func (v *feedStore) seq(i int) uint64 { return v.seqOf(v.group(v.note(i)), i) }

// seqOf is the sequence of the i-th retained notification (i may be n,
// the next one's), g its group: the group keeps its notifications'
// sequences less their numbers, and the i-th is number base+head+i.
func (v *feedStore) seqOf(g *feedGroup, i int) uint64 { return g.seq + v.number(i) }

// number is the i-th retained notification's number.
func (v *feedStore) number(i int) uint64 { return v.base + uint64(v.head+i) }

// at returns the i-th retained notification.
func (v *feedStore) at(i int) core.Notification {
	x := v.note(i)
	g := v.group(x)
	return core.Notification{
		Seq:     v.seqOf(g, i),
		Type:    core.NotifyType(x.bits & 3),
		Fence:   v.names[x.bits>>3].name,
		Event:   g.ev,
		Prev:    g.prev,
		HasPrev: x.bits&4 != 0,
		OpNS:    g.opNS,
	}
}

// fence returns the i-th retained notification's fence name and type.
func (v *feedStore) fence(i int) (string, core.NotifyType) {
	x := v.note(i)
	return v.names[x.bits>>3].name, core.NotifyType(x.bits & 3)
}

// feedNames interns the fence names of the retained notifications in
// feedStore.names. A name keeps its number while a retained notification
// names it (its slot's refs counts them), whether or not the fence still
// exists; when the last one is dropped its number is freed and a later
// name takes it. Numbers are taken in the order the feed asks for them,
// the last freed first, so the table is the same on every replica of the
// same history (though nothing outside the feed sees the numbers).
type feedNames struct {
	byName map[string]uint32 // looked up only, never ranged over
	free   []uint32
	shared bool // a view holds the names: copy them before a slot is reused
}

// feedName is a slot of the table of names. The count is beside the name
// so that a push reads one place; a view reads only the name, and the
// feed changes only the count of a slot a view may read.
type feedName struct {
	name string
	refs uint32
}

// ref returns name's number, counting one more notification that names it.
func (f *feedLog) ref(name string) uint32 {
	t := &f.names
	i, ok := t.byName[name]
	switch {
	case ok:
	case len(t.free) > 0:
		i = t.free[len(t.free)-1]
		t.free = t.free[:len(t.free)-1]
		if t.shared {
			f.feedStore.names, t.shared = slices.Clone(f.feedStore.names), false
		}
		f.feedStore.names[i] = feedName{name: name}
		t.byName[name] = i
	default:
		i = uint32(len(f.feedStore.names))
		f.feedStore.names = append(f.feedStore.names, feedName{name: name}) // past every view's length: none reads it
		if t.byName == nil {
			t.byName = make(map[string]uint32)
		}
		t.byName[name] = i
	}
	f.feedStore.names[i].refs++
	return i
}

// refFence is ref of x's name, by the number x remembers when the
// table still holds its name there (a map lookup a notification is most
// of a push's cost with many fences).
func (f *feedLog) refFence(x *fence) uint32 {
	i := x.feedName
	if int(i) >= len(f.feedStore.names) {
		return f.refAfresh(x)
	}
	if s := &f.feedStore.names[i]; s.refs > 0 && s.name == x.def.Name {
		s.refs++
		return i
	}
	return f.refAfresh(x)
}

func (f *feedLog) refAfresh(x *fence) uint32 {
	i := f.ref(x.def.Name)
	x.feedName = i
	return i
}

// unref counts one notification fewer that names number i.
func (f *feedLog) unref(i uint32) {
	s := &f.feedStore.names[i]
	s.refs--
	if s.refs == 0 {
		delete(f.names.byName, s.name)
		f.names.free = append(f.names.free, i)
	}
}

// newGroup starts a group for the notifications that follow, the first of
// them with sequence seq, and returns the low 32 bits of its number.
func (f *feedLog) newGroup(ev *core.GeoEvent, prev core.Coordinate, opNS, seq uint64) uint32 {
	if f.gn == len(f.groups)*feedGroupChunkLen {
		f.groups = append(f.groups, new(feedGroupChunk))
	}
	f.groups[f.gn/feedGroupChunkLen][f.gn%feedGroupChunkLen] = feedGroup{ev: *ev, prev: prev, opNS: opNS,
		seq: seq - f.number(f.n)}
	f.gn++
	f.nextGroup = f.gbase + uint64(f.gn)
	return uint32(f.nextGroup - 1)
}

// appendNote adds a notification of group g (the newest) after the
// newest, naming the fence name of number name (counted by ref).
func (f *feedLog) appendNote(g uint32, t core.NotifyType, name uint32, hasPrev bool) {
	end := f.head + f.n
	if end == len(f.chunks)*feedChunkLen {
		f.chunks = append(f.chunks, new(feedChunk))
	}
	bits := name<<3 | uint32(t)&3
	if hasPrev {
		bits |= 4
	}
	f.chunks[end/feedChunkLen][end%feedChunkLen] = feedNote{group: g, bits: bits}
	f.n++
}

// pushEvent appends the notifications that event ev makes, one for each
// of notes in order, giving them their sequences and time, and drops
// what retention no longer keeps. prev is the entity's position before
// ev, hasPrev whether it had one.
func (f *feedLog) pushEvent(ev *core.GeoEvent, prev core.Coordinate, hasPrev bool, notes []fenceNote) {
	if len(notes) == 0 {
		return
	}
	seq := max(f.lastSeq+1, f.index<<32+1)
	g := f.newGroup(ev, prev, f.opNS, seq)
	for _, x := range notes {
		f.appendNote(g, x.t, f.refFence(x.f), hasPrev)
	}
	f.lastSeq = seq + uint64(len(notes)) - 1
	f.trim() // trimming once drops what trimming after each notification would
}

// append adds n after the newest as it is (a snapshot's notification),
// in the newest group when it is that group's next notification.
func (f *feedLog) append(n *core.Notification) {
	g := uint32(f.nextGroup - 1)
	if f.n == 0 || f.note(f.n-1).group != g {
		g = f.newGroup(&n.Event, n.Prev, n.OpNS, n.Seq)
	} else if x := f.group(f.note(f.n - 1)); x.ev != n.Event || x.prev != n.Prev || x.opNS != n.OpNS ||
		f.seqOf(x, f.n) != n.Seq {
		g = f.newGroup(&n.Event, n.Prev, n.OpNS, n.Seq)
	}
	f.appendNote(g, n.Type, f.ref(n.Fence), n.HasPrev)
}

func (f *feedLog) trim() {
	ns, count := f.retention()
	for f.n > 0 {
		x := f.note(0)
		g := f.group(x)
		if f.n <= count && (f.opNS < ns || g.opNS >= f.opNS-ns) {
			break
		}
		f.dropped = f.seqOf(g, 0)
		f.unref(x.bits >> 3)
		f.head++ // not zeroed: a frozen view may still hold it
		f.n--
		if f.head == feedChunkLen {
			f.chunks[0] = nil
			f.chunks = f.chunks[1:]
			f.head = 0
			f.base += feedChunkLen
		}
	}
	if f.n == 0 {
		f.chunks, f.head, f.base = nil, 0, f.number(0)
		f.groups, f.gbase, f.gn = nil, f.nextGroup, 0
		return
	}
	// Let go of the group chunks that the oldest notification has passed.
	for oldest := int(f.note(0).group - uint32(f.gbase)); oldest >= feedGroupChunkLen; oldest -= feedGroupChunkLen {
		f.groups[0] = nil
		f.groups = f.groups[1:]
		f.gbase += feedGroupChunkLen
		f.gn -= feedGroupChunkLen
	}
}

// view is the retained notifications as a frozen view keeps them.
func (f *feedLog) view() feedStore {
	v := f.feedStore
	v.chunks, v.groups = slices.Clone(f.chunks), slices.Clone(f.groups)
	f.names.shared = true // v.names is f's
	return v
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
		page.Start = f.seq(0)
	}
	if after < f.dropped {
		return core.FeedPage{}, core.Errorf(core.FeedTrimmed,
			"the feed no longer holds notifications after sequence %d: it starts at sequence %d (ask for after=%d)",
			after, f.dropped+1, f.dropped)
	}
	i := sort.Search(f.n, func(i int) bool { return f.seq(i) > after })
	for scanned := 0; i < f.n && len(page.Notifications) < limit && scanned < feedScanBudget; i, scanned = i+1, scanned+1 {
		page.Next = f.seq(i)
		if fence, t := f.fence(i); !types.Has(t) || len(req.Fences) > 0 && !slices.Contains(req.Fences, fence) {
			continue
		}
		page.Notifications = append(page.Notifications, f.at(i))
	}
	page.HasMore = i < f.n
	return page, nil
}

// FeedLast returns the sequence of the newest notification made so far (0:
// none): a cheap read by which a waiting reader learns the feed advanced.
func (sm *StateMachine) FeedLast() uint64 { return sm.watch.feed.lastSeq }
