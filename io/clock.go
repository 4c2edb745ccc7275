package io

import (
	crand "crypto/rand"
	"math/rand/v2"
	"time"

	"github.com/geoevent/geoevent/core"
)

// Clock is the real clock: MonotonicNS counts from the Clock's creation
// with Go's monotonic clock, RealtimeNS is the wall clock.
type Clock struct{ start time.Time }

var _ core.Clock = (*Clock)(nil)

// NewClock returns a Clock whose monotonic time starts now.
func NewClock() *Clock { return &Clock{start: time.Now()} }

// MonotonicNS is nanoseconds since the Clock was made; it never goes back.
func (c *Clock) MonotonicNS() uint64 { return uint64(time.Since(c.start)) }

// RealtimeNS is nanoseconds since the Unix epoch.
func (c *Clock) RealtimeNS() uint64 { return uint64(time.Now().UnixNano()) }

// NewRand returns a random source seeded from crypto/rand, for production
// only (the simulator seeds its own from the run's seed). It is not safe for
// concurrent use: the event loop owns it.
func NewRand() core.Rand {
	var seed [32]byte
	_, _ = crand.Read(seed[:]) // never fails on supported platforms
	return rand.New(rand.NewChaCha8(seed))
}
