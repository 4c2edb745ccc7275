package http

import (
	"context"
	"fmt"
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
//	                start; the Last-Event-ID header, when after is not
//	                given, as a browser's EventSource resumes)
//	fences=a,b      only these fences
//	types=enter,exit only these types
//	limit=N         notifications a page (long-poll), 1 to 10,000
//	wait_ms=MS      answer as a long-poll JSON page: wait up to MS (at most
//	                30,000) for a notification, then answer, maybe empty
//
// Without wait_ms the answer is a stream of Server-Sent Events, one per
// notification: "id:" its sequence, "event:" its type, "data:" its JSON.
// The gateway waits by polling the feed (a cheap read) every
// feedPollInterval; the deterministic core never waits. The replica the
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
// Last-Event-ID header (used when after is not given).
func parseFeedParams(p params, lastEventID string) (*core.FeedRequest, *failure) {
	req := &core.FeedRequest{}
	var f *failure
	if _, ok := p["after"]; ok {
		if req.After, f = p.u64("after"); f != nil {
			return nil, f
		}
	} else if lastEventID != "" {
		v, err := strconv.ParseUint(strings.TrimSpace(lastEventID), 10, 64)
		if err != nil {
			return nil, malformed("Last-Event-ID %q is not a feed sequence", truncate(lastEventID, 40))
		}
		req.After = v
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
	if poll {
		return c.feedPoll(req, time.Duration(waitMS)*time.Millisecond)
	}
	return c.feedStream(req)
}

// feedPoll answers one JSON page, waiting up to wait for a notification.
func (c *call) feedPoll(req *core.FeedRequest, wait time.Duration) *failure {
	deadline := time.Now().Add(wait)
	for {
		page, f := c.readFeed(req)
		if f != nil {
			return f
		}
		if len(page.Notifications) > 0 || page.HasMore || !time.Now().Before(deadline) {
			return c.ok(func(w *jw) { w.feedPage(page) })
		}
		req.After = page.Next // past what the filter skipped
		select {
		case <-c.r.Context().Done():
			return nil
		case <-c.g.streams.done():
			return c.ok(func(w *jw) { w.feedPage(page) })
		case <-time.After(min(feedPollInterval, time.Until(deadline))):
		}
	}
}

// feedStream writes Server-Sent Events until the client goes. A failure
// before the first event is answered as JSON; one after it ends the
// stream with an "error" event.
func (c *call) feedStream(req *core.FeedRequest) *failure {
	page, f := c.readFeed(req)
	if f != nil {
		return f
	}
	fl, _ := c.w.(stdhttp.Flusher)
	h := c.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	c.w.WriteHeader(stdhttp.StatusOK)
	if c.r.Method == "HEAD" {
		return nil
	}
	if fl != nil {
		fl.Flush() // the headers now: a reader learns the stream is open before the first event
	}
	var w, data jw
	lastWrite := time.Now()
	for {
		w.b = w.b[:0]
		for i := range page.Notifications {
			n := &page.Notifications[i]
			data.b = data.b[:0]
			data.notification(n)
			w.b = fmt.Appendf(w.b, "id: %d\nevent: %s\ndata: %s\n\n", n.Seq, n.Type, data.b)
		}
		req.After = page.Next
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
		if !page.HasMore {
			select {
			case <-c.r.Context().Done():
				return nil
			case <-c.g.streams.done():
				return nil
			case <-time.After(feedPollInterval):
			}
		}
		if page, f = c.readFeed(req); f != nil {
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

// feedPage writes a long-poll page; start and next are sequences, as
// strings.
func (w *jw) feedPage(p *core.FeedPage) {
	w.open()
	w.key("notifications")
	w.openArr()
	for i := range p.Notifications {
		w.notification(&p.Notifications[i])
	}
	w.closeArr()
	w.key("start")
	w.str(strconv.FormatUint(p.Start, 10))
	w.key("next")
	w.str(strconv.FormatUint(p.Next, 10))
	w.key("has_more")
	w.boolean(p.HasMore)
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
