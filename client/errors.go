package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/geoevent/geoevent/core"
)

// ErrClosed is returned by calls made after Close, and is the reason of
// calls that Close interrupted.
var ErrClosed = errors.New("geoevent client: closed")

// ErrTotalTimeout is the reason a call stopped when Options.TotalTimeout ran
// out. errors.Is(ErrTotalTimeout, context.DeadlineExceeded) is true.
var ErrTotalTimeout error = totalTimeout{}

type totalTimeout struct{}

func (totalTimeout) Error() string        { return "geoevent client: total timeout exceeded" }
func (totalTimeout) Timeout() bool        { return true }
func (totalTimeout) Is(target error) bool { return target == context.DeadlineExceeded }

// errAttemptTimeout is the cause of an attempt's end at
// Options.RequestTimeout. errors.Is(errAttemptTimeout,
// context.DeadlineExceeded) is true.
var errAttemptTimeout error = attemptTimeout{}

type attemptTimeout struct{}

func (attemptTimeout) Error() string        { return "geoevent client: no answer within the request timeout" }
func (attemptTimeout) Timeout() bool        { return true }
func (attemptTimeout) Temporary() bool      { return true } // a net.Error, as context.DeadlineExceeded is
func (attemptTimeout) Is(target error) bool { return target == context.DeadlineExceeded }

// RetryError is the error of a call that did not get an answer it could
// return: its retries ran out (Reason nil), or Options.TotalTimeout
// (Reason ErrTotalTimeout), the caller's context (Reason its cause) or Close
// (Reason ErrClosed) stopped it. Err is the last attempt's error: a
// *core.Error with a retryable code, or a connection or timeout error.
//
// A write that ends with a RetryError may or may not have been applied.
//
// errors.Is and errors.As see both Err and Reason, so
// errors.Is(err, context.Canceled) and errors.As(err, &coreErr) work.
type RetryError struct {
	Attempts int   // requests sent, the first one included
	Err      error // the last attempt's error
	Reason   error // nil when the retries ran out
}

func (e *RetryError) Error() string {
	why := "retries exhausted"
	if e.Reason != nil {
		why = e.Reason.Error()
	}
	return fmt.Sprintf("geoevent client: giving up after %d attempt(s) (%s): %v", e.Attempts, why, e.Err)
}

// Unwrap returns Err and, when set, Reason.
func (e *RetryError) Unwrap() []error {
	if e.Reason == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.Reason}
}

// BatchError is the error of an Insert or Upsert whose batch was split into
// chunks (more than Options.MaxBatchEvents events) and did not commit as a
// whole. Chunks are sent in order and each commits atomically on its own;
// the chunk that failed and every chunk after it were not written.
//
// Committed events are the caller's events [0, Committed); the failed chunk
// is [Start, End). Err is the failed chunk's error: the call's error (a
// *core.Error, *RetryError, ...), or, when the chunk came back with
// Committed false because events failed validation, a *core.Error naming the
// first failing event (its per-event codes are in the reply's Results).
type BatchError struct {
	Chunk      int // index of the failed chunk
	Start, End int // the failed chunk's events in the caller's batch
	Committed  int // events committed before it
	Err        error
}

func (e *BatchError) Error() string {
	return fmt.Sprintf("geoevent client: batch chunk %d (events %d..%d) failed, events 0..%d committed: %v",
		e.Chunk, e.Start, e.End-1, e.Committed-1, e.Err)
}

func (e *BatchError) Unwrap() error { return e.Err }

// connError is a failure of the connection: dialing, writing, reading, a
// timeout, or a frame the client cannot trust. The connection is closed and
// the attempt may be retried on a new one.
type connError struct {
	addr string
	op   string
	err  error
}

// opConnect is connError.op of a dial that failed: the replica is down (or
// unreachable), so a call may try the next address at once.
const opConnect = "connect to"

func (e *connError) Error() string {
	return fmt.Sprintf("geoevent client: %s %s: %v", e.op, e.addr, e.err)
}

func (e *connError) Unwrap() error { return e.err }

// protocolError is a frame the server should not have sent.
type protocolError struct{ msg string }

func (e *protocolError) Error() string { return "protocol violation: " + e.msg }

func protocolf(format string, args ...any) error {
	return &protocolError{msg: fmt.Sprintf(format, args...)}
}

// connRefused is a connection the server refused with an error (before
// any exchange on it). It wraps the server's *core.Error, so that
// errors.As finds its code (212 CLUSTER_BUSY: retryable), but it is not
// one itself: the connection is gone, not the request answered.
type connRefused struct{ e *core.Error }

func (e *connRefused) Error() string { return "the server refused the connection: " + e.e.Error() }

func (e *connRefused) Unwrap() error { return e.e }
