package io

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/replica"
)

// readPrep is the state of the reads prepared on connections' goroutines
// (replica.PrepareRead): a large polygon query is decoded and its polygon
// built where its frame arrives, beside the event loop, instead of on it
// (the largest polygon the limits allow takes 19-23 ms to build, where a
// page of any query holds the loop for at most about 10 ms).
//
//   - Reads of the same rings share one polygon: the last few built are
//     kept (recent), and a frame whose polygon is being built waits for
//     that build (building). Pages of one query, or clients sending one
//     polygon, build it once, and a frame whose rings are a recent one's
//     byte for byte is not decoded again but for its other fields.
//   - At most maxPrepareBuilds polygons are built at once: a connection
//     whose frame needs one waits for its turn (its frames wait behind
//     it).
//   - Prepared polygons take memory (about 200 bytes an edge: 20 MB for
//     the largest) from when they are built until the read runs, and
//     after it while the state machine keeps the last: bytes counts what
//     the polygons alive hold, each until it is collected
//     (runtime.AddCleanup). At maxPreparedBytes and above, frames are
//     decoded but their polygons not built: the loop builds them, as it
//     would without this.
type readPrep struct {
	builds chan struct{} // a token for each build under way

	mu       sync.Mutex
	recent   [recentPolygons]*replica.PreparedRead // newest first; nil: none
	building []*polygonBuild
	bytes    atomic.Int64
}

// polygonBuild is a build under way: done is closed when it has ended.
type polygonBuild struct {
	pr   *replica.PreparedRead
	done chan struct{}
}

const (
	// maxPreparedBytes bounds the memory of prepared polygons: a dozen of
	// the largest.
	maxPreparedBytes = 256 << 20
	// maxPrepareBuilds bounds the polygons built at once: as many as there
	// are processors to spare beside the loop, on a small machine.
	maxPrepareBuilds = 2
	// recentPolygons is how many of the last polygons built are kept for
	// reads of the same rings.
	recentPolygons = 4
)

// prepareRead runs replica.PrepareRead (peer: replica.PreparePeer, for a
// read a follower forwarded) on a frame while the replica leads, on the
// caller's goroutine, and gives the read its polygon: a recent one of the
// same rings, or one it builds (see readPrep). It returns nil when the
// frame is not a read that preparing helps.
func (s *Server) prepareRead(h core.Header, payload []byte, peer bool) *replica.PreparedRead {
	if !s.disk.leading.Load() {
		return nil
	}
	rp := &s.readPrep
	rp.mu.Lock()
	recent := rp.recent
	rp.mu.Unlock()
	var pr *replica.PreparedRead
	if peer {
		pr = replica.PreparePeer(h, payload, recent[:])
	} else {
		pr = replica.PrepareRead(h, payload, recent[:])
	}
	if pr == nil || pr.Polygon() != nil { // not a large polygon, or a recent one's
		return pr
	}
	rp.mu.Lock()
	if rp.shareLocked(pr) {
		rp.mu.Unlock()
		return pr
	}
	for _, b := range rp.building {
		if pr.SameRings(b.pr) {
			rp.mu.Unlock()
			select {
			case <-b.done:
				pr.Share(b.pr) // its polygon, or its error (unless too wide for the plane)
			case <-s.loopDone:
			}
			return pr
		}
	}
	if rp.bytes.Load() >= maxPreparedBytes {
		rp.mu.Unlock()
		return pr
	}
	b := &polygonBuild{pr: pr, done: make(chan struct{})}
	rp.building = append(rp.building, b)
	rp.mu.Unlock()

	select {
	case rp.builds <- struct{}{}:
		if pr.Build() && pr.Polygon().Err() == nil {
			n := int64(pr.Bytes())
			rp.bytes.Add(n)
			runtime.AddCleanup(pr.Polygon(), func(n int64) { rp.bytes.Add(-n) }, n)
		}
		<-rp.builds
	case <-s.loopDone:
	}
	rp.mu.Lock()
	rp.building = slices.DeleteFunc(rp.building, func(o *polygonBuild) bool { return o == b })
	if pr.Polygon() != nil && pr.Polygon().Err() == nil {
		copy(rp.recent[1:], rp.recent[:])
		rp.recent[0] = pr
	}
	rp.mu.Unlock()
	close(b.done)
	return pr
}

// share gives pr the polygon of a recent read of the same rings, if there
// is one, and reports whether it did.
func (rp *readPrep) share(pr *replica.PreparedRead) bool {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return rp.shareLocked(pr)
}

// shareLocked is share with rp.mu held.
func (rp *readPrep) shareLocked(pr *replica.PreparedRead) bool {
	for _, o := range rp.recent {
		if o != nil && pr.Share(o) {
			return true
		}
	}
	return false
}
