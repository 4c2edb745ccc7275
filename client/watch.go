package client

import (
	"context"
	"errors"
	"time"

	"github.com/geoevent/geoevent/core"
)

// PutFence defines or replaces a fence.
func (c *Client) PutFence(ctx context.Context, f *core.Fence) (*core.PutFenceReply, error) {
	return Call(ctx, c, core.PutFence, f)
}

// GetFence returns a fence's definition; 240 FENCE_NOT_FOUND when there is
// none.
func (c *Client) GetFence(ctx context.Context, name string) (*core.Fence, error) {
	return Call(ctx, c, core.GetFence, &core.FenceName{Name: name})
}

// ListFences returns a page of fences in name order.
func (c *Client) ListFences(ctx context.Context, req *core.FenceListRequest) (*core.FenceList, error) {
	return Call(ctx, c, core.ListFences, req)
}

// DeleteFence removes a fence; 240 FENCE_NOT_FOUND when there is none.
func (c *Client) DeleteFence(ctx context.Context, name string) (*core.DeleteFenceReply, error) {
	return Call(ctx, c, core.DeleteFence, &core.FenceName{Name: name})
}

// ReadFeed returns one page of the feed (see core.FeedRequest). The
// replica it reaches answers from what it has applied: a follower's page
// may end before a write just acknowledged, and a later read has it.
func (c *Client) ReadFeed(ctx context.Context, req *core.FeedRequest) (*core.FeedPage, error) {
	return Call(ctx, c, core.ReadFeed, req)
}

// SetFeedRetention bounds the feed by age and count (see
// core.FeedRetention): replicated configuration, so every replica trims
// alike, at once for the change itself. Out of range is 108
// INVALID_ARGUMENT.
func (c *Client) SetFeedRetention(ctx context.Context, r *core.FeedRetention) (*core.FeedRetentionReply, error) {
	return Call(ctx, c, core.SetFeedRetention, r)
}

// FeedRetention returns the feed's retention in force and its extent.
func (c *Client) FeedRetention(ctx context.Context) (*core.FeedRetentionReply, error) {
	return Call(ctx, c, core.GetFeedRetention, nil)
}

// FeedEnd, as Watch's after, starts at the end of the feed: the watch
// returns only the notifications made after the newest one the replica
// that answers its first read has made.
const FeedEnd = core.FeedEnd

// WatchFilter selects a Watch's notifications: those of the named fences
// (none: every fence) and of the types in Types (0: every type).
type WatchFilter struct {
	Fences []string
	Types  core.NotifyMask
}

// Watch follows the feed from after (0: its start; FeedEnd: its end, as
// the first read finds it; a sequence a previous Watch delivered: from
// just after it). Every replica holds the same
// feed, so the watch goes on across the client's failovers: it reads
// where it left off from whichever replica answers, missing nothing and
// repeating nothing. It polls while the feed has nothing new, every
// watchMinIdle at first, backing off to watchMaxIdle.
func (c *Client) Watch(ctx context.Context, after uint64, filter WatchFilter) *Watcher {
	return &Watcher{c: c, ctx: ctx, after: after, last: after, filter: filter}
}

const (
	watchMinIdle = 20 * time.Millisecond
	watchMaxIdle = 250 * time.Millisecond
)

// Watcher is a Watch in progress. It is not safe for concurrent use.
type Watcher struct {
	c      *Client
	ctx    context.Context
	after  uint64 // where the next read starts
	last   uint64 // the sequence of the last notification Next returned (at first, Watch's after)
	filter WatchFilter
	buf    []core.Notification
	idle   time.Duration
}

// Next returns the next notification, waiting for one. It fails with the
// context's error when it ends, with 241 FEED_TRIMMED when the feed no
// longer holds what follows (the reader fell behind its retention), or
// with another error that retrying cannot mend. Failures that retrying
// may mend (no leader, a replica down) are retried until the context ends.
func (w *Watcher) Next() (core.Notification, error) {
	for len(w.buf) == 0 {
		if err := w.ctx.Err(); err != nil {
			return core.Notification{}, err
		}
		page, err := w.c.ReadFeed(w.ctx, &core.FeedRequest{After: w.after, Fences: w.filter.Fences, Types: w.filter.Types})
		switch {
		case err == nil:
			w.buf = append(w.buf[:0], page.Notifications...)
			if w.after == core.FeedEnd {
				w.after = page.Next // the end, resolved by the replica that answered
			} else {
				w.after = max(w.after, page.Next)
			}
			if len(w.buf) > 0 || page.HasMore {
				w.idle = 0
				continue
			}
		case !retryableWatch(err):
			return core.Notification{}, err
		}
		w.idle = min(max(2*w.idle, watchMinIdle), watchMaxIdle)
		t := time.NewTimer(w.idle)
		select {
		case <-w.ctx.Done():
			t.Stop()
			return core.Notification{}, w.ctx.Err()
		case <-t.C:
		}
	}
	n := w.buf[0]
	w.buf = w.buf[1:]
	w.last = n.Seq
	return n, nil
}

// Last is where a later Watch with the same filter resumes exactly: the
// sequence of the last notification Next returned, or past the ones the
// filter skipped once every notification read has been returned.
func (w *Watcher) Last() uint64 {
	if len(w.buf) == 0 {
		return w.after
	}
	return w.last
}

// retryableWatch reports whether a failed read of the feed may succeed
// later: a retryable code, or no code at all (the client could reach no
// replica).
func retryableWatch(err error) bool {
	var ce *core.Error
	if errors.As(err, &ce) {
		return ce.Retryable
	}
	return !errors.Is(err, ErrClosed) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}
