package http

import (
	"context"
	"time"
)

// requestContext is the context of the requests of one fast-path
// connection, made once and reused by each request in turn, where
// context.WithTimeout would make a context, a timer and (for the client's
// context under it) a child map per request.
//
// It is a cancelable context of its own (embedded: Done, Value; contexts
// derived from it register with it as with any *cancelCtx) with the
// current request's deadline, and a timer that cancels it at that
// deadline, with context.DeadlineExceeded as its cause and Err. A request
// whose timer fired leaves the context done: the next request gets a new
// one. So, as with WithTimeout, a request's context is done at its
// deadline; unlike it, it is not done when the request ends (the
// connection's last request ends it), so a Backend must not use the
// context after Do returns. Only the connection's goroutine calls begin,
// end and close.
type requestContext struct {
	context.Context // the cancelable context; nil before the first begin
	cancel          context.CancelCauseFunc
	timer           *time.Timer // cancels Context; nil: make both anew
	deadline        time.Time
}

// begin starts a request that ends in timeout.
func (rc *requestContext) begin(timeout time.Duration) {
	rc.deadline = time.Now().Add(timeout)
	if rc.timer == nil {
		ctx, cancel := context.WithCancelCause(context.Background())
		rc.Context, rc.cancel = ctx, cancel
		rc.timer = time.AfterFunc(timeout, func() { cancel(context.DeadlineExceeded) })
		return
	}
	rc.timer.Reset(timeout) // fires at the deadline or just after it
}

// end stops the request's timer. When it fired already (its function has
// run or is running), the context is done: the next begin makes another.
func (rc *requestContext) end() {
	if rc.timer != nil && !rc.timer.Stop() {
		rc.timer = nil
	}
}

// close ends the context for good: the connection is done.
func (rc *requestContext) close() {
	if rc.timer != nil {
		rc.timer.Stop()
		rc.timer = nil
	}
	if rc.cancel != nil {
		rc.cancel(context.Canceled)
	}
}

// Deadline is the current request's deadline.
func (rc *requestContext) Deadline() (time.Time, bool) { return rc.deadline, true }

// Err is the cause the context ended with: context.DeadlineExceeded at the
// deadline (as WithTimeout's), context.Canceled once the connection ended.
func (rc *requestContext) Err() error {
	if rc.Context.Err() == nil {
		return nil
	}
	return context.Cause(rc.Context)
}
