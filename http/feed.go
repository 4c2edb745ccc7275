package http

import (
	"context"
	stdhttp "net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/geoevent/geoevent/core"
)

// GET /feed: the notifications of fence transitions, after a sequence.
//
//	after=SEQ       the last sequence the reader has (default 0: from the
//	                start); after=now: the newest sequence the serving
//	                replica has made, for a reader that wants only new
//	                notifications. The Last-Event-ID header, when present,
//	                wins over after: a browser's EventSource sends it when
//	                it reconnects, with the URL it was opened with.
//	fences=a,b      only these fences
//	types=enter,exit only these types
//	limit=N         notifications a page (long-poll), 1 to 10,000
//	wait_ms=MS      answer as a long-poll JSON page: wait up to MS (at most
//	                30,000) for a notification, then answer, maybe empty
//
// Without wait_ms the answer is a stream of Server-Sent Events, one per
// notification: "id:" its sequence, "event:" its type, "data:" its JSON.
// A stream from after=now first sends an "id:" line alone (no event), so
// that an EventSource that reconnects before any notification resumes
// from where it began. A long-poll page says where it went on from
// ("next") and the feed's newest sequence ("last").
// The deterministic core never waits: the gateway does. With
// Config.Feed (the server's), a reader waits for the replica's event loop
// to publish that the feed moved, and readers that are caught up share
// one read of what is new (feedtail.go): a commit costs one read through
// the loop however many read. Without it (a remote backend) a reader
// polls the feed every feedPollInterval. The replica the
// gateway reaches answers a feed read itself, from what it has applied
// (a follower does not forward it to the leader, and answers while there
// is none). Any replica's feed is the same up to its applied index, so a
// reader that reconnects elsewhere with its last sequence misses nothing
// and sees nothing twice.

const (
	maxFeedWaitMS    = 30_000
	feedPollInterval = 20 * time.Millisecond
	feedKeepAlive    = 15 * time.Second
)

// feedRequest reads the feed's query parameters.
func (c *call) feedRequest() (req *core.FeedRequest, waitMS uint64, poll bool, f *failure) {
	p, f := c.params("after", "fences", "types", "limit", "wait_ms")
	if f != nil {
		return nil, 0, false, f
	}
	req, f = parseFeedParams(p, c.r.Header.Get("Last-Event-ID"))
	if f != nil {
		return nil, 0, false, f
	}
	_, poll = p["wait_ms"]
	if waitMS, f = p.u64("wait_ms"); f != nil {
		return nil, 0, false, f
	}
	if waitMS > maxFeedWaitMS {
		return nil, 0, false, fail(core.InvalidArgument, "wait_ms %d exceeds %d", waitMS, maxFeedWaitMS)
	}
	return req, waitMS, poll, nil
}

// parseFeedParams builds the feed request from the parameters and the
// Last-Event-ID header, which wins over after (a reconnect). after=now is
// After core.FeedEnd, which the handler resolves.
func parseFeedParams(p params, lastEventID string) (*core.FeedRequest, *failure) {
	req := &core.FeedRequest{}
	var f *failure
	switch _, ok := p["after"]; {
	case lastEventID != "":
		v, err := strconv.ParseUint(strings.TrimSpace(lastEventID), 10, 64)
		if err != nil || v == core.FeedEnd {
			return nil, malformed("Last-Event-ID %q is not a feed sequence", truncate(lastEventID, 40))
		}
		req.After = v
	case ok && p["after"] == "now":
		req.After = core.FeedEnd
	case ok:
		if req.After, f = p.u64("after"); f != nil {
			return nil, f
		}
		if req.After == core.FeedEnd {
			return nil, fail(core.InvalidArgument, "after: %d is no feed sequence (after=now reads from the end)", req.After)
		}
	}
	if s := p["fences"]; s != "" {
		names := strings.Split(s, ",")
		if len(names) > core.MaxFeedFenceFilter {
			return nil, fail(core.InvalidFence, "fences: %d names; at most %d", len(names), core.MaxFeedFenceFilter)
		}
		for _, n := range names {
			if _, f := fenceName(n); f != nil {
				return nil, f
			}
		}
		req.Fences = names
	}
	if s := p["types"]; s != "" {
		for _, n := range strings.Split(s, ",") {
			t, ok := core.ParseNotifyType(n)
			if !ok {
				return nil, fail(core.InvalidFence, "types: %q is none of enter, exit, inside", truncate(n, 40))
			}
			req.Types |= 1 << t
		}
	}
	limit, f := p.u64("limit")
	if f != nil {
		return nil, f
	}
	if limit > core.MaxFeedLimit {
		return nil, fail(core.QueryResultTooLarge, "limit %d exceeds %d", limit, core.MaxFeedLimit)
	}
	req.Limit = uint32(limit)
	return req, nil
}

// readFeed runs one read of the feed with its own deadline (a stream
// outlives the request timeout).
func (c *call) readFeed(req *core.FeedRequest) (*core.FeedPage, *failure) {
	ctx, cancel := context.WithTimeout(c.r.Context(), c.g.cfg.RequestTimeout)
	defer cancel()
	saved := c.ctx
	c.ctx = ctx
	defer func() { c.ctx = saved }()
	return submit(c, core.ReadFeed, req)
}

// GET /feed.
func (g *Gateway) feed(c *call) *failure {
	req, waitMS, poll, f := c.feedRequest()
	if f != nil {
		return f
	}
	fromEnd := req.After == core.FeedEnd
	if fromEnd {
		// Resolved once, here: the replica's newest sequence, from which
		// the reader goes on as from any other.
		page, f := c.readFeed(&core.FeedRequest{After: core.FeedEnd, Limit: 1})
		if f != nil {
			return f
		}
		req.After = page.Next
	}
	if g.cfg.Feed != nil {
		g.tailJoin()
		defer g.tailLeave()
	}
	if poll {
		g.readers.polls.Add(1)
		defer g.readers.polls.Add(-1)
		return c.feedPoll(req, time.Duration(waitMS)*time.Millisecond)
	}
	g.readers.streams.Add(1)
	defer g.readers.streams.Add(-1)
	return c.feedStream(req, fromEnd)
}

// nextNotes returns the notifications after req.After that match req, at
// most limit of them: from the tail's window when it covers req.After,
// else read from the replica. It returns the sequence to go on from,
// whether there are more now and the feed's extent; when there are none,
// wait is closed once there may be (nil: poll).
func (c *call) nextNotes(req *core.FeedRequest, limit int, dst []tailNote) (notes []tailNote, next uint64, more bool, ext feedExtent, wait <-chan struct{}, f *failure) {
	if c.g.cfg.Feed != nil {
		if notes, next, more, ext, wait, ok := c.g.tail.take(req, limit, dst); ok {
			return notes, next, more, ext, wait, nil
		}
		_, wait = c.g.cfg.Feed.FeedNews() // taken before the read: what comes after it closes wait
	}
	r := *req
	r.Limit = uint32(limit)
	page, f := c.readFeed(&r)
	if f != nil {
		return dst, 0, false, feedExtent{}, nil, f
	}
	for i := range page.Notifications {
		dst = append(dst, newTailNote(&page.Notifications[i]))
	}
	if len(dst) > 0 || page.HasMore {
		wait = nil
	}
	return dst, page.Next, page.HasMore, feedExtent{page.Start, page.Last}, wait, nil
}

// feedExtent is the feed's oldest retained and newest made sequences, as
// a page or the tail last read them.
type feedExtent struct{ start, last uint64 }

// waitFeed waits for news of the feed (wait; nil: a poll interval),
// until deadline at the latest. It reports false when the request or the
// server ends.
func (c *call) waitFeed(wait <-chan struct{}, deadline time.Time) bool {
	d := feedPollInterval
	if wait != nil {
		d = feedFallbackPoll // in case news is missed: the loop ended, a read failed
	}
	if !deadline.IsZero() {
		d = min(d, time.Until(deadline))
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.r.Context().Done():
		return false
	case <-c.g.streams.done():
		return false
	case <-wait:
	case <-t.C:
	}
	return true
}

// feedPoll answers one JSON page, waiting up to wait for a notification.
func (c *call) feedPoll(req *core.FeedRequest, wait time.Duration) *failure {
	deadline := time.Now().Add(wait)
	limit := int(req.Limit)
	if limit == 0 {
		limit = core.DefaultFeedLimit
	}
	for {
		notes, next, more, ext, news, f := c.nextNotes(req, limit, nil)
		if f != nil {
			return f
		}
		req.After = max(req.After, next) // past what the filter skipped
		if len(notes) > 0 || more || !time.Now().Before(deadline) || !c.waitFeed(news, deadline) {
			if c.r.Context().Err() != nil {
				return nil
			}
			return c.ok(func(w *jw) { w.feedPage(notes, ext, req.After, more) })
		}
	}
}

// feedStream writes Server-Sent Events until the client goes. A failure
// before the first event is answered as JSON; one after it ends the
// stream with an "error" event. A stream from the end (after=now) first
// names its start as the last event id.
func (c *call) feedStream(req *core.FeedRequest, fromEnd bool) *failure {
	notes, next, more, _, news, f := c.nextNotes(req, core.MaxFeedLimit, nil)
	if f != nil {
		return f
	}
	fl, ok := c.startSSE()
	if !ok {
		return nil
	}
	var w jw
	if fromEnd {
		w.b = strconv.AppendUint(append(w.b, "id: "...), req.After, 10)
		w.b = append(w.b, "\n\n"...)
	}
	lastWrite := time.Now()
	for {
		for i := range notes {
			w.b = append(w.b, notes[i].sse...)
		}
		req.After = max(req.After, next)
		if len(w.b) == 0 && time.Since(lastWrite) >= feedKeepAlive {
			w.b = append(w.b, ": keep-alive\n\n"...)
		}
		if len(w.b) > 0 {
			if _, err := c.w.Write(w.b); err != nil {
				return nil
			}
			if fl != nil {
				fl.Flush()
			}
			lastWrite = time.Now()
		}
		w.b = w.b[:0]
		if !more && len(notes) == 0 && !c.waitFeed(news, lastWrite.Add(feedKeepAlive)) {
			return nil
		}
		if notes, next, more, _, news, f = c.nextNotes(req, core.MaxFeedLimit, notes[:0]); f != nil {
			if c.r.Context().Err() != nil {
				return nil
			}
			body := errorBody(formB, f.info, f.msg)
			c.w.Write(append(append([]byte("event: error\ndata: "), body...), "\n\n"...))
			if fl != nil {
				fl.Flush()
			}
			return nil
		}
	}
}

// startSSE answers 200 with an event stream's headers, and sends them
// at once: a reader learns the stream is open before the first event. ok
// is false for a HEAD request, which gets nothing more. fl is nil when the
// writer cannot flush.
func (c *call) startSSE() (fl stdhttp.Flusher, ok bool) {
	fl, _ = c.w.(stdhttp.Flusher)
	h := c.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	c.w.WriteHeader(stdhttp.StatusOK)
	if c.r.Method == "HEAD" {
		return nil, false
	}
	if fl != nil {
		fl.Flush()
	}
	return fl, true
}

// feedPage writes a long-poll page; start, next and last are sequences,
// as strings. A notification is written from its JSON (Form B) but in
// Form A, whose events differ.
func (w *jw) feedPage(notes []tailNote, ext feedExtent, next uint64, more bool) {
	w.open()
	w.key("notifications")
	w.openArr()
	for i := range notes {
		if w.formA {
			w.notification(&notes[i].n)
		} else {
			w.sep()
			w.b = append(w.b, notes[i].data()...)
		}
	}
	w.closeArr()
	w.key("start")
	w.str(strconv.FormatUint(ext.start, 10))
	w.key("next")
	w.str(strconv.FormatUint(next, 10))
	w.key("last")
	w.str(strconv.FormatUint(max(ext.last, next), 10))
	w.key("has_more")
	w.boolean(more)
	w.close()
}

// notification writes one notification. Sequences and times are strings:
// as numbers they would lose precision in JavaScript past 2^53.
func (w *jw) notification(n *core.Notification) {
	w.open()
	w.key("seq")
	w.str(strconv.FormatUint(n.Seq, 10))
	w.key("type")
	w.str(n.Type.String())
	w.key("fence")
	w.str(n.Fence)
	w.key("entity_id")
	w.id(n.Event.EntityID)
	w.key("event")
	w.event(&n.Event, nil)
	w.key("previous")
	if n.HasPrev {
		w.point(n.Prev)
	} else {
		w.null()
	}
	w.key("op_ns")
	w.str(strconv.FormatUint(n.OpNS, 10))
	w.close()
}

// streamsEnd tells waiting feed requests that the server is shutting
// down: a stream never goes idle, and would hold Shutdown to its deadline.
type streamsEnd struct {
	once sync.Once
	ch   chan struct{}
	mu   sync.Mutex
}

func (s *streamsEnd) done() <-chan struct{} { return s.channel() }

func (s *streamsEnd) channel() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// endStreams ends every feed stream and long poll (a long poll answers
// what it has).
func (g *Gateway) endStreams() {
	ch := g.streams.channel()
	g.streams.once.Do(func() { close(ch) })
}
