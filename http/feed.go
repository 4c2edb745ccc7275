package http

import (
	"bytes"
	"context"
	"io"
	"net"
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
)

// feedKeepAlive is how long a stream goes without writing before it
// writes a comment line (a variable for the tests).
var feedKeepAlive = 15 * time.Second

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
// wait is closed once there may be (nil: poll), and ticks says that it is
// the window's, closed at least every feedFallbackPoll. A turn of the
// window's relay that the caller holds (woken; nil: none) is passed on
// once the window has been read, before a read of the replica, which
// waits for the loop.
func (c *call) nextNotes(req *core.FeedRequest, limit int, dst []tailNote, woken *tailWaiter) (notes []tailNote, next uint64, more bool, ext feedExtent, wait <-chan struct{}, ticks bool, f *failure) {
	if c.g.cfg.Feed != nil {
		notes, next, more, ext, wait, ok := c.g.tail.take(req, limit, dst)
		if woken != nil {
			c.g.tail.release(woken)
		}
		if ok {
			return notes, next, more, ext, wait, wait != nil, nil
		}
		_, wait = c.g.cfg.Feed.FeedNews() // taken before the read: what comes after it closes wait
	}
	r := *req
	r.Limit = uint32(limit)
	page, f := c.readFeed(&r)
	if f != nil {
		return dst, 0, false, feedExtent{}, nil, false, f
	}
	for i := range page.Notifications {
		dst = append(dst, newTailNote(&page.Notifications[i]))
	}
	if len(dst) > 0 || page.HasMore {
		wait = nil
	}
	return dst, page.Next, page.HasMore, feedExtent{page.Start, page.Last}, wait, false, nil
}

// feedExtent is the feed's oldest retained and newest made sequences, as
// a page or the tail last read them.
type feedExtent struct{ start, last uint64 }

// waitFeed waits for news of the feed (wait; nil: a poll interval),
// until deadline at the latest. It reports false when the client goes
// (gone closes) or the server ends.
func (c *call) waitFeed(wait <-chan struct{}, deadline time.Time, gone <-chan struct{}) bool {
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
	case <-gone:
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
		notes, next, more, ext, news, _, f := c.nextNotes(req, limit, nil, nil)
		if f != nil {
			return f
		}
		req.After = max(req.After, next) // past what the filter skipped
		if len(notes) > 0 || more || !time.Now().Before(deadline) || !c.waitFeed(news, deadline, c.r.Context().Done()) {
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
// names its start as the last event id. What a wake-up finds (the
// notifications of every commit since the last) goes out in one write.
func (c *call) feedStream(req *core.FeedRequest, fromEnd bool) *failure {
	notes, next, more, _, news, ticks, f := c.nextNotes(req, core.MaxFeedLimit, nil, nil)
	if f != nil {
		return f
	}
	out, ok := c.startSSE()
	if !ok {
		return nil
	}
	defer out.close()
	turn := newTailWaiter()
	defer c.g.tail.release(turn)
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
			if out.write(w.b) != nil {
				return nil
			}
			lastWrite = time.Now()
		}
		w.b = w.b[:0]
		var woken *tailWaiter
		if !more && len(notes) == 0 {
			if ticks {
				// The window's relay wakes the stream in its turn, and its
				// clock for the keep-alive.
				if c.g.tail.sleep(turn, req.After) {
					select {
					case <-out.gone:
						return nil
					case <-c.g.streams.done():
						return nil
					case <-turn.turn:
						woken = turn
					}
				}
			} else if !c.waitFeed(news, lastWrite.Add(feedKeepAlive), out.gone) {
				return nil
			}
		}
		if notes, next, more, _, news, ticks, f = c.nextNotes(req, core.MaxFeedLimit, notes[:0], woken); f != nil {
			if out.left() {
				return nil
			}
			body := errorBody(formB, f.info, f.msg)
			out.write(append(append([]byte("event: error\ndata: "), body...), "\n\n"...))
			return nil
		}
	}
}

// sseOut is where a stream's events go. Over HTTP/1.x the stream takes
// the connection over and sends each batch of events with one write, the
// body ending with the connection (Connection: close, no chunked framing):
// net/http's HTTP/1 writer passes a body through a 4 KiB buffer, so that
// a batch of more than about 4 KiB (a few commits' notifications) costs
// two or three write system calls, each waking the reader. Every open
// stream writes what each commit made, so these calls are most of what a
// commit's fan-out to 1,000 streams costs, and the last stream waits for
// all the others' on the gateway's processors. Otherwise (HTTP/2, a
// writer that cannot be taken over) the events go through net/http's
// writer, flushed after each batch.
type sseOut struct {
	conn    net.Conn    // taken over; nil: w, fl
	streams *streamsEnd // with conn: where it is counted
	w       stdhttp.ResponseWriter
	fl      stdhttp.Flusher // nil: w cannot flush
	gone    <-chan struct{} // closed once the client has gone
}

// appendSSE appends one Server-Sent Event: its id, its event type and
// its data (one line).
func appendSSE(b []byte, id uint64, event string, data []byte) []byte {
	b = append(b, "id: "...)
	b = appendUint(b, id)
	b = append(b, "\nevent: "...)
	b = append(b, event...)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	return append(b, "\n\n"...)
}

// write sends b at once.
func (o *sseOut) write(b []byte) error {
	if o.conn != nil {
		_, err := o.conn.Write(b)
		return err
	}
	_, err := o.w.Write(b)
	if o.fl != nil {
		o.fl.Flush()
	}
	return err
}

// left reports whether the client has gone.
func (o *sseOut) left() bool {
	select {
	case <-o.gone:
		return true
	default:
		return false
	}
}

// close ends the stream's body (a connection taken over is closed).
func (o *sseOut) close() {
	if o.conn != nil {
		o.streams.drop(o.conn)
	}
}

// startSSE answers 200 with an event stream's headers, and sends them
// at once: a reader learns the stream is open before the first event. ok
// is false for a HEAD request, which gets nothing more.
func (c *call) startSSE() (out *sseOut, ok bool) {
	h := c.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	if c.r.Method != "HEAD" && c.r.ProtoMajor == 1 {
		if out := c.takeOver(); out != nil {
			return out, true
		}
	}
	fl, _ := c.w.(stdhttp.Flusher)
	c.w.WriteHeader(stdhttp.StatusOK)
	if c.r.Method == "HEAD" {
		return nil, false
	}
	if fl != nil {
		fl.Flush()
	}
	return &sseOut{w: c.w, fl: fl, gone: c.r.Context().Done()}, true
}

// takeOver takes an HTTP/1.x request's connection over and writes the
// status line and c.w's headers, with Date and Connection: close; nil
// when net/http does not give the connection up (the answer is then
// still to be written through c.w). The connection's read side is read
// (and what comes discarded) until the client closes it: then gone
// closes, as net/http ends a request's context.
func (c *call) takeOver() *sseOut {
	conn, brw, err := stdhttp.NewResponseController(c.w).Hijack()
	if err != nil {
		return nil
	}
	conn.SetDeadline(time.Time{}) // the server's read deadline is the request's, not the stream's
	h := c.w.Header()
	h.Set("Date", time.Now().UTC().Format(stdhttp.TimeFormat))
	h.Set("Connection", "close")
	var head bytes.Buffer
	if c.r.ProtoAtLeast(1, 1) {
		head.WriteString("HTTP/1.1 200 OK\r\n")
	} else {
		head.WriteString("HTTP/1.0 200 OK\r\n")
	}
	h.Write(&head)
	head.WriteString("\r\n")
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		io.Copy(io.Discard, brw.Reader) // until the client closes, or close closes
	}()
	c.g.streams.take(conn)
	out := &sseOut{conn: conn, streams: &c.g.streams, gone: gone}
	out.write(head.Bytes()) // a failure shows at the next write, or in gone
	return out
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
// It also keeps the connections that streams took over (takeOver), which
// net/http's Shutdown neither waits for nor closes.
type streamsEnd struct {
	once  sync.Once
	ch    chan struct{}
	mu    sync.Mutex
	taken map[net.Conn]struct{} // connections of streams under way
	left  chan struct{}         // closed when a stream leaves taken (nil: nobody waits)
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

// take counts conn as a stream's until drop.
func (s *streamsEnd) take(conn net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.taken == nil {
		s.taken = make(map[net.Conn]struct{})
	}
	s.taken[conn] = struct{}{}
}

// drop closes a stream's connection and forgets it.
func (s *streamsEnd) drop(conn net.Conn) {
	conn.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.taken, conn)
	if s.left != nil {
		close(s.left)
		s.left = nil
	}
}

// wait waits until the streams that took their connections over have
// ended (after endStreams, they end at their next wake-up), or ctx ends:
// then it closes their connections (a stream writing to a client that
// does not read fails at once).
func (s *streamsEnd) wait(ctx context.Context) {
	for {
		s.mu.Lock()
		if len(s.taken) == 0 {
			s.mu.Unlock()
			return
		}
		if s.left == nil {
			s.left = make(chan struct{})
		}
		left := s.left
		s.mu.Unlock()
		select {
		case <-left:
		case <-ctx.Done():
			s.mu.Lock()
			for conn := range s.taken {
				conn.Close()
			}
			s.mu.Unlock()
			return
		}
	}
}

// endStreams ends every feed stream and long poll (a long poll answers
// what it has).
func (g *Gateway) endStreams() {
	ch := g.streams.channel()
	g.streams.once.Do(func() { close(ch) })
}
