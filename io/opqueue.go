package io

import "sync"

// opQueue is the queue of requests of a storage goroutine (disk,
// historian): any goroutine pushes, one takes them in batches, in order.
type opQueue[T any] struct {
	mu     sync.Mutex
	ops    []T
	closed bool
	wake   chan struct{} // capacity 1: "ops changed"
}

func newOpQueue[T any]() opQueue[T] { return opQueue[T]{wake: make(chan struct{}, 1)} }

// push queues op. It never blocks; after close it drops op.
func (q *opQueue[T]) push(op T) {
	q.mu.Lock()
	if !q.closed {
		q.ops = append(q.ops, op)
	}
	q.mu.Unlock()
	q.signal()
}

// close makes take return what was queued so far, then report closed.
func (q *opQueue[T]) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.signal()
}

func (q *opQueue[T]) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take waits for requests and returns them, reusing buf's memory; it
// returns none, and done, once the queue is closed and empty.
func (q *opQueue[T]) take(buf []T) (batch []T, done bool) {
	for {
		q.mu.Lock()
		batch, q.ops = q.ops, buf[:0]
		closed := q.closed
		q.mu.Unlock()
		if len(batch) > 0 {
			return batch, false
		}
		if closed {
			return nil, true
		}
		buf = batch
		<-q.wake
	}
}
