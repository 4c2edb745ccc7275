package io

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	stdio "io"
	"math"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"go.uber.org/zap"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/replica"
)

// Webhook delivery. The hooks and the position each has been delivered
// up to are replicated state (core/hooks.go); the posting is this
// package's, outside the deterministic core, and only the leader's:
//
//   - A dispatcher goroutine looks, every Poll, at the role the loop
//     publishes (Health). While the replica leads, it lists the hooks and
//     keeps one worker goroutine per hook and definition (a put of the
//     hook, which changes its version, restarts its worker); when the
//     replica stops leading, or the server stops, it stops every worker.
//   - A worker reads the feed after the hook's position with the hook's
//     filter (a local read, as GET /feed's), posts the notifications in
//     order, at most Batch at a time, one post in flight, and posts a
//     batch again after a failure (a status other than 2xx, no answer
//     within Timeout, a connection error) with exponential backoff and
//     jitter, until the receiver acknowledges it. Then it submits
//     hook_delivered with the sequence the batch's read ended at, through
//     the log, so that a new leader resumes from there. A batch
//     acknowledged but not yet recorded when the leader changed is posted
//     again by the next: delivery is at least once, in order per hook.
//   - When the feed has dropped notifications after the worker's
//     position (retention), it goes on from the feed's start and says so
//     in the next post ("trimmed": true): none are skipped silently.
//
// The workers reach the replica as the gateway does, through a client of
// the local replica (WebhookClient; *client.Client over DialLocal).

// WebhookClient is what the deliverer needs of a client of this process's
// replica: *client.Client (package client) has these methods.
type WebhookClient interface {
	Hooks(ctx context.Context, req *core.HookListRequest) (*core.HookList, error)
	ReadFeed(ctx context.Context, req *core.FeedRequest) (*core.FeedPage, error)
	HookDelivered(ctx context.Context, req *core.HookDelivered) (*core.HookDeliveredReply, error)
}

// WebhookOptions configure the deliverer. Client and Body are required.
type WebhookOptions struct {
	// Client runs the hook and feed operations against the local replica.
	Client WebhookClient
	// Body renders one post's JSON body (package http's WebhookBody).
	Body func(hook string, ns []core.Notification, trimmed bool) []byte
	// HTTP posts (nil: a client of its own, without cookies or an overall
	// timeout, that follows no redirect: a 3xx is a failure, as a POST
	// redirected would be sent again as a GET; each post has Timeout).
	HTTP *http.Client
	// Timeout bounds one post, from sending to the answer's status
	// (default 10 s).
	Timeout time.Duration
	// BackoffMin and BackoffMax bound the wait before a post is sent again
	// after a failure: it doubles from BackoffMin (default 100 ms) to
	// BackoffMax (default 30 s), each wait drawn between half and all of
	// its bound (jitter).
	BackoffMin, BackoffMax time.Duration
	// Batch is the most notifications one post carries (default 500, at
	// most core.MaxFeedLimit).
	Batch int
	// Poll is how often the dispatcher looks at the role and the hooks,
	// and a caught-up worker at the feed (default 100 ms).
	Poll time.Duration
	// Logger receives failures, at most one line a second per hook.
	Logger *zap.Logger
	// Metrics, when set, receives the delivery metrics (docs/operations.md).
	Metrics *metrics.Set
}

func (o *WebhookOptions) setDefaults() {
	if o.HTTP == nil {
		o.HTTP = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.BackoffMin <= 0 {
		o.BackoffMin = 100 * time.Millisecond
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = 30 * time.Second
	}
	o.BackoffMax = max(o.BackoffMax, o.BackoffMin)
	if o.Batch <= 0 {
		o.Batch = 500
	}
	o.Batch = min(o.Batch, core.MaxFeedLimit)
	if o.Poll <= 0 {
		o.Poll = 100 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
}

// idleRecord is how often a worker with nothing to post records how far
// its reads have passed notifications its filter skipped, so that a new
// leader does not read them again.
const idleRecord = time.Second

// Webhooks is a running deliverer (StartWebhooks).
type Webhooks struct {
	opts   WebhookOptions
	leads  func() bool     // the replica leads, as the loop last published
	gone   <-chan struct{} // closed when the server's loop has ended
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	workers map[string]*hookWorker // dispatcher-owned; mu guards it for the gauges
	hooks   *metrics.Gauge
}

// hookWorker is the goroutine that delivers one hook's definition.
type hookWorker struct {
	hook   core.Hook
	cancel context.CancelFunc
	done   chan struct{}

	// For the metrics, written by the worker and the dispatcher.
	pos      atomic.Uint64 // the sequence acknowledged up to (or passed by reads)
	feedLast atomic.Uint64 // the feed's newest sequence, as the dispatcher last listed it
	pendNS   atomic.Uint64 // the operation time of the oldest notification posted but not acknowledged (0: none)
	failures atomic.Uint64
	posted   atomic.Uint64 // notifications acknowledged
	names    []string      // its metrics' names, to unregister
}

// StartWebhooks starts delivering the hooks while s's replica leads. Close
// stops it; it stops too when s stops.
func (s *Server) StartWebhooks(opts WebhookOptions) (*Webhooks, error) {
	if opts.Client == nil || opts.Body == nil {
		return nil, errors.New("io: webhooks need a Client and a Body")
	}
	leads := func() bool {
		h := s.Health()
		return h.Running && !h.Replaying && h.Role == replica.Leader
	}
	return startWebhooks(opts, leads, s.loopDone), nil
}

// startWebhooks starts the dispatcher over leads and gone (a test's own).
func startWebhooks(opts WebhookOptions, leads func() bool, gone <-chan struct{}) *Webhooks {
	opts.setDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	w := &Webhooks{opts: opts, leads: leads, gone: gone, ctx: ctx, cancel: cancel, done: make(chan struct{}), workers: map[string]*hookWorker{}}
	if set := opts.Metrics; set != nil {
		set.NewGauge(`geoevent_webhooks`, func() float64 {
			w.mu.Lock()
			defer w.mu.Unlock()
			return float64(len(w.workers))
		})
	}
	go w.dispatch()
	return w
}

// Close stops every worker and waits for them: a post in flight is cut
// off (the next leader, or this one once started again, posts it again).
func (w *Webhooks) Close() {
	w.cancel()
	<-w.done
}

func (w *Webhooks) dispatch() {
	defer close(w.done)
	defer w.stopAll()
	t := time.NewTicker(w.opts.Poll)
	defer t.Stop()
	var lastErr time.Time
	for {
		if w.leads() {
			if err := w.reconcile(); err != nil && w.ctx.Err() == nil && time.Since(lastErr) >= time.Second {
				lastErr = time.Now()
				w.opts.Logger.Warn("webhooks: cannot list the hooks", zap.Error(err))
			}
		} else {
			w.stopAll()
		}
		select {
		case <-w.ctx.Done():
			return
		case <-w.gone:
			return
		case <-t.C:
		}
	}
}

// reconcile lists the hooks and makes the workers match them.
func (w *Webhooks) reconcile() error {
	var all []core.Hook
	var feedLast uint64
	for after := ""; ; {
		ctx, cancel := context.WithTimeout(w.ctx, w.opts.Timeout)
		l, err := w.opts.Client.Hooks(ctx, &core.HookListRequest{After: after, Limit: core.MaxHookList})
		cancel()
		if err != nil {
			return err
		}
		all = append(all, l.Hooks...)
		feedLast = l.FeedLast
		if !l.HasMore || len(l.Hooks) == 0 {
			break
		}
		after = l.Hooks[len(l.Hooks)-1].Name
	}
	if !w.leads() {
		return nil // lost leadership while listing: the next round stops the workers
	}
	seen := make(map[string]bool, len(all))
	for i := range all {
		h := &all[i]
		seen[h.Name] = true
		wk := w.workers[h.Name]
		if wk != nil && wk.hook.Version != h.Version {
			w.stop(wk)
			wk = nil
		}
		if wk == nil {
			wk = w.start(*h)
		}
		wk.feedLast.Store(feedLast)
	}
	for name, wk := range w.workers {
		if !seen[name] {
			w.stop(wk)
		}
	}
	return nil
}

// stopAll stops every worker.
func (w *Webhooks) stopAll() {
	for _, wk := range w.workers {
		w.stop(wk)
	}
}

func (w *Webhooks) stop(wk *hookWorker) {
	wk.cancel()
	<-wk.done
	w.mu.Lock()
	delete(w.workers, wk.hook.Name)
	w.mu.Unlock()
	if set := w.opts.Metrics; set != nil {
		for _, n := range wk.names {
			set.UnregisterMetric(n)
		}
	}
}

func (w *Webhooks) start(h core.Hook) *hookWorker {
	ctx, cancel := context.WithCancel(w.ctx)
	wk := &hookWorker{hook: h, cancel: cancel, done: make(chan struct{})}
	wk.pos.Store(h.Delivered)
	if set := w.opts.Metrics; set != nil {
		label := fmt.Sprintf(`{hook=%q}`, h.Name) // a hook's name is a fence name: no quoting needed
		add := func(name string, f func() float64) {
			wk.names = append(wk.names, name+label)
			set.GetOrCreateGauge(name+label, f)
		}
		add("geoevent_webhook_lag_entries", func() float64 {
			last, pos := wk.feedLast.Load(), wk.pos.Load()
			if last <= pos {
				return 0
			}
			return float64(last>>32 - pos>>32)
		})
		add("geoevent_webhook_lag_seconds", func() float64 {
			ns := wk.pendNS.Load()
			if ns == 0 {
				return 0
			}
			return math.Max(0, float64(time.Now().UnixNano()-int64(ns))/1e9)
		})
		add("geoevent_webhook_failures_total", func() float64 { return float64(wk.failures.Load()) })
		add("geoevent_webhook_delivered_total", func() float64 { return float64(wk.posted.Load()) })
	}
	w.mu.Lock()
	w.workers[h.Name] = wk
	w.mu.Unlock()
	go w.deliver(ctx, wk)
	return wk
}

// deliver is a worker's loop (see the top of the file).
func (w *Webhooks) deliver(ctx context.Context, wk *hookWorker) {
	defer close(wk.done)
	h := &wk.hook
	lg := w.opts.Logger.With(zap.String("hook", h.Name))
	var logged time.Time
	warn := func(msg string, fields ...zap.Field) {
		if time.Since(logged) >= time.Second {
			logged = time.Now()
			lg.Warn(msg, fields...)
		}
	}
	pos, recorded := h.Delivered, h.Delivered // read up to; recorded in the log up to
	var recordedAt time.Time
	trimmed := false
	for ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, w.opts.Timeout)
		page, err := w.opts.Client.ReadFeed(rctx, &core.FeedRequest{After: pos, Fences: h.Fences, Types: h.Types, Limit: uint32(w.opts.Batch)})
		cancel()
		var ce *core.Error
		switch {
		case errors.As(err, &ce) && ce.Code == core.FeedTrimmed.Code:
			if start, ok := w.feedStart(ctx); ok {
				lg.Warn("the feed dropped notifications this hook had not been delivered: going on from the feed's start",
					zap.Uint64("position", pos), zap.Uint64("feed_start", start))
				pos, trimmed = start-1, true
				continue
			}
			sleep(ctx, w.opts.Poll)
			continue
		case err != nil:
			if ctx.Err() == nil {
				warn("webhooks: cannot read the feed", zap.Error(err))
			}
			sleep(ctx, w.opts.Poll)
			continue
		}
		if len(page.Notifications) == 0 {
			pos = max(pos, page.Next)
			wk.pos.Store(pos)
			if pos > recorded && time.Since(recordedAt) >= idleRecord {
				if w.record(ctx, h, pos, warn) {
					recorded = pos
				}
				recordedAt = time.Now()
			}
			if !page.HasMore {
				sleep(ctx, w.opts.Poll)
			}
			continue
		}
		wk.pendNS.Store(max(page.Notifications[0].OpNS, 1))
		body := w.opts.Body(h.Name, page.Notifications, trimmed)
		if !w.post(ctx, wk, body, warn) {
			return // stopped
		}
		wk.pendNS.Store(0)
		wk.posted.Add(uint64(len(page.Notifications)))
		pos, trimmed = page.Next, false
		wk.pos.Store(pos)
		if w.record(ctx, h, pos, warn) {
			recorded = pos
		}
		recordedAt = time.Now()
	}
}

// feedStart returns the sequence of the oldest notification the feed
// holds (a trimmed feed holds at least one: trimming happens as one is
// added).
func (w *Webhooks) feedStart(ctx context.Context) (uint64, bool) {
	rctx, cancel := context.WithTimeout(ctx, w.opts.Timeout)
	defer cancel()
	page, err := w.opts.Client.ReadFeed(rctx, &core.FeedRequest{After: math.MaxUint64, Limit: 1})
	if err != nil || page.Start == 0 {
		return 0, false
	}
	return page.Start, true
}

// post posts body until the receiver acknowledges it (true) or the worker
// is stopped (false).
func (w *Webhooks) post(ctx context.Context, wk *hookWorker, body []byte, warn func(string, ...zap.Field)) bool {
	backoff := w.opts.BackoffMin
	for attempt := 1; ; attempt++ {
		status, err := w.postOnce(ctx, wk.hook.URL, body)
		if ctx.Err() != nil {
			return false
		}
		if err == nil && status/100 == 2 {
			return true
		}
		wk.failures.Add(1)
		if err != nil {
			warn("webhooks: a post failed", zap.Int("attempt", attempt), zap.Error(err), zap.Duration("retry_in", backoff))
		} else {
			warn("webhooks: the receiver refused a post", zap.Int("attempt", attempt), zap.Int("status", status), zap.Duration("retry_in", backoff))
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		if !sleep(ctx, wait) {
			return false
		}
		backoff = min(2*backoff, w.opts.BackoffMax)
	}
}

// postOnce sends one post and returns the answer's status.
func (w *Webhooks) postOnce(ctx context.Context, url string, body []byte) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, w.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "geoevent-webhooks")
	res, err := w.opts.HTTP.Do(req)
	if err != nil {
		return 0, err
	}
	// Read a little of the answer so that the connection can be used
	// again; a receiver's long answer is not our business.
	stdio.Copy(stdio.Discard, stdio.LimitReader(res.Body, 64<<10))
	res.Body.Close()
	return res.StatusCode, nil
}

// record submits hook_delivered; a failure is logged, and the next
// delivery records a later position anyway.
func (w *Webhooks) record(ctx context.Context, h *core.Hook, seq uint64, warn func(string, ...zap.Field)) bool {
	rctx, cancel := context.WithTimeout(ctx, w.opts.Timeout)
	defer cancel()
	_, err := w.opts.Client.HookDelivered(rctx, &core.HookDelivered{Name: h.Name, Version: h.Version, Seq: seq})
	if err != nil && ctx.Err() == nil {
		warn("webhooks: cannot record the delivered position", zap.Uint64("seq", seq), zap.Error(err))
	}
	return err == nil
}

// sleep waits d, or less when ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
