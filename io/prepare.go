package io

import (
	"runtime"
	"sync/atomic"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/replica"
)

// readPrep is the state of the reads prepared on connections' goroutines
// (replica.PrepareRead): a large polygon query's polygon is built where
// its frame arrives, beside the event loop, instead of on it (the largest
// the limits allow takes 19-23 ms to build, where a page of any query
// holds the loop for at most about 10 ms).
//
// Prepared polygons take memory (about 200 bytes an edge: 20 MB for the
// largest) from when they are built until the read runs, and after it
// while the state machine keeps the last: bytes counts what the polygons
// alive hold, or, for a build under way, twice its estimate (what it
// allocates), and above maxPreparedBytes frames are not prepared (the
// loop builds their polygons, as it would without this). A polygon's
// count is given back once it is collected (runtime.AddCleanup).
type readPrep struct {
	recent atomic.Pointer[replica.PreparedRead] // the last prepared: the same rings share its polygon
	bytes  atomic.Int64
}

// maxPreparedBytes bounds the memory of prepared polygons: six of the
// largest.
const maxPreparedBytes = 128 << 20

// prepareRead runs replica.PrepareRead (peer: replica.PreparePeer, for a
// read a follower forwarded) on a frame while the replica leads, on the
// caller's goroutine; nil when the frame is not a read that preparing
// helps, or when prepared polygons hold maxPreparedBytes already.
func (s *Server) prepareRead(h core.Header, payload []byte, peer bool) *replica.PreparedRead {
	rp := &s.readPrep
	if !s.disk.leading.Load() || len(payload) < 16*1024 {
		return nil // a polygon of fewer than 1,024 vertices is not prepared
	}
	// A polygon's memory is about 13 bytes for each of its frame's (16 a
	// vertex, 200 an edge); a build allocates twice that.
	reserve := 26 * int64(len(payload))
	if rp.bytes.Add(reserve) > maxPreparedBytes {
		rp.bytes.Add(-reserve)
		return nil
	}
	defer rp.bytes.Add(-reserve)
	recent := rp.recent.Load()
	var pr *replica.PreparedRead
	if peer {
		pr = replica.PreparePeer(h, payload, recent)
	} else {
		pr = replica.PrepareRead(h, payload, recent)
	}
	if pr == nil || recent != nil && pr.Polygon() == recent.Polygon() {
		return pr
	}
	n := int64(pr.Bytes())
	rp.bytes.Add(n)
	runtime.AddCleanup(pr.Polygon(), func(n int64) { rp.bytes.Add(-n) }, n)
	rp.recent.Store(pr)
	return pr
}
