package http

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// byteBudget bounds bytes held at once over many goroutines (the request
// bodies in flight). acquire takes bytes, waiting a while for releases;
// release returns them. Taking and returning are atomic additions; a
// mutex and channel serve only the waiters.
type byteBudget struct {
	limit   int64
	used    atomic.Int64
	waiting atomic.Int32
	mu      sync.Mutex
	freed   chan struct{} // closed by a release while someone waits
}

func newByteBudget(limit int64) *byteBudget { return &byteBudget{limit: limit} }

func (b *byteBudget) tryAcquire(n int64) bool {
	if b.used.Add(n) <= b.limit {
		return true
	}
	b.used.Add(-n)
	return false
}

// acquire takes n bytes, waiting up to wait (and while ctx lives) for
// releases to make room; false: it took nothing.
func (b *byteBudget) acquire(ctx context.Context, n int64, wait time.Duration) bool {
	if n <= 0 || b.tryAcquire(n) {
		return true
	}
	if n > b.limit {
		return false
	}
	// A release after waiting is raised sees it and wakes us; one before
	// it left room that the tryAcquire below sees.
	b.waiting.Add(1)
	defer b.waiting.Add(-1)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		b.mu.Lock()
		if b.freed == nil {
			b.freed = make(chan struct{})
		}
		freed := b.freed
		b.mu.Unlock()
		if b.tryAcquire(n) {
			return true
		}
		select {
		case <-freed:
		case <-timer.C:
			return b.tryAcquire(n)
		case <-ctx.Done():
			return false
		}
	}
}

// release returns n bytes taken by acquire.
func (b *byteBudget) release(n int64) {
	b.used.Add(-n)
	if b.waiting.Load() > 0 {
		b.mu.Lock()
		if b.freed != nil {
			close(b.freed)
			b.freed = nil
		}
		b.mu.Unlock()
	}
}
