package io

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/replica"
)

// Admission of clients' writes: while the history store is far behind the
// log, the leader refuses new inserts and upserts with 212 CLUSTER_BUSY
// (retryable) instead of letting the historian's queue grow to
// maxQueuedWrites, where push holds the event loop and nothing is served.
//
//   - Where: on the loop, as a client's frame (a TCP connection's or a
//     LocalConn's) is handed to the replica (Server.clientFrame), before
//     the replica sees it: the refused request is not proposed, not
//     logged and not remembered by its session, so it changes nothing and
//     its retry (same session and request number) is a request like any
//     other. The replica stays free of it: whether the store keeps up is a
//     fact of this process's disk and time, not of the replicated state.
//   - What: inserts and upserts, the operations whose size is the
//     client's to choose and which grow history. Reads never wait for the
//     store's writes, so they are never refused; nor are deletions,
//     TTL changes and cleanup (they shrink history, and erasure must not
//     wait on load), fences, hooks, registrations and feed settings
//     (a handful of writes each). What is in the log already is never
//     refused: its history is written however long the queue, push
//     bounding the memory as before. A retry of a write that is in the
//     log is refused like a new one, and answered once admitted (the
//     session's cached reply, or the wait for its commit).
//   - When: with hysteresis. The leader starts refusing when more than
//     refuseAboveWrites (100,000) are queued and admits again once fewer
//     than admitBelowWrites (75,000) are, so that a load does not flip
//     between the two at every batch (a 10,000-event insert is 10,000
//     queued writes). The 25,000 between the marks are about what the
//     store absorbs in a client's first backoff (100-150 ms): a refused
//     client is admitted on its first or second retry, while the store
//     still has writes queued. A wider band (50,000, or 400,000 and
//     300,000 with push's bound at 600,000) changed neither the load's
//     rate nor its tail. The high mark is half of maxQueuedWrites: the
//     writes admitted before the refusal starts and applied after it
//     (a session has one request in flight: 4 sessions of 10,000-event
//     inserts are 40,000) land in the other half before push holds the
//     loop.
//   - Who: the leader alone, for its own clients (the HTTP gateway's
//     included) and for the followers' clients, whose writes a follower
//     forwards: the leader's IO judges a forward's request the same way
//     before the replica takes it, and the replica answers a refused one
//     through the follower (Replica.RefuseForwarded). A follower's store
//     applies the same writes; when it falls behind, push holds the
//     follower's loop a store batch at a time (tens
//     of milliseconds), slowing its acknowledgements, which paces a
//     leader that needs them, while the followers' heartbeats and votes
//     are still taken between the batches.
const (
	refuseAboveWrites = maxQueuedWrites / 2
	admitBelowWrites  = maxQueuedWrites * 3 / 8
)

// admission is the loop's state of the refusal (loop-owned).
type admission struct {
	high, low int64 // refuseAboveWrites, admitBelowWrites (tests lower them)
	refusing  bool
}

func newAdmission() admission {
	return admission{high: refuseAboveWrites, low: admitBelowWrites}
}

// growsHistory reports whether a client's request frame is a write that
// admission may refuse (see above): an insert or upsert of a session.
func growsHistory(h core.Header, payload []byte) bool {
	if h.Type != core.MsgRequest || h.ClientID == 0 || len(payload) == 0 {
		return false
	}
	op := core.Operation(payload[0])
	return op == core.OpInsert || op == core.OpUpsert
}

// refuseWrite answers c's frame f with 212 CLUSTER_BUSY, and reports
// true, when it is a write that grows history and this replica leads
// while its history store is behind (see above); otherwise it reports
// false and does nothing.
func (s *Server) refuseWrite(c *conn, f *netFrame) bool {
	msg, refuse := s.admissionRefuses(f.h, f.payload)
	if !refuse {
		return false
	}
	h := f.h
	h.Type = core.MsgError
	s.sendClient(c.id, core.AppendFrame(nil, h, core.AppendErrorMessage(nil, core.ClusterBusy.Code, msg)), false)
	s.metrics.refusedWrite()
	return true
}

// refuseForwarded is refuseWrite for a replica-to-replica frame: a
// follower's client's write that the follower forwards. The replica
// answers it through that follower (Replica.RefuseForwarded).
func (s *Server) refuseForwarded(h core.Header, payload []byte) bool {
	client, clientPayload, ok := replica.ForwardedFrame(h, payload)
	if !ok {
		return false
	}
	msg, refuse := s.admissionRefuses(client, clientPayload)
	if !refuse {
		return false
	}
	s.r.RefuseForwarded(h, payload, core.ClusterBusy, msg)
	s.metrics.refusedWrite()
	return true
}

// admissionRefuses reports whether a client's request frame is to be
// refused, and the refusal's message: a write that grows history, while
// this replica leads and its history store is behind. It moves the
// refusal's state between its marks.
func (s *Server) admissionRefuses(h core.Header, payload []byte) (msg string, refuse bool) {
	if !growsHistory(h, payload) || s.status.Role != replica.Leader {
		return "", false
	}
	a := &s.admit
	backlog := s.hist.queued.Load()
	switch {
	case !a.refusing && backlog > a.high:
		a.refusing = true
		s.admitLog.warn(s.log, "the history store is behind the log: refusing new writes with CLUSTER_BUSY",
			zap.Int64("queued_writes", backlog), zap.Int64("admit_below", a.low))
	case a.refusing && backlog < a.low:
		a.refusing = false
		s.log.Debug("the history store has caught up: admitting writes", zap.Int64("queued_writes", backlog))
	}
	if !a.refusing {
		return "", false
	}
	return fmt.Sprintf("the history store is behind the log (%d writes wait for it): new writes are refused until fewer than %d wait; retry with backoff",
		backlog, a.low), true
}
