package replica

import (
	"encoding/binary"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/statemachine"
)

// The history store (core/history.go) is IO's: the replica queues the
// writes that each applied entry makes (IO.WriteHistory) and reads it
// through requests answered later as inputs (IO.ReadHistory, HistoryRead).
//
//   - Applying: an entry whose outcome depends on stored older events (an
//     insert or upsert naming a timestamp within an entity's events, a
//     cleanup of older events) first has its reads answered: applying
//     pauses at it (Raft goes on) until HistoryRead brings the answers,
//     which see the store exactly as the entries before it left it; then
//     it applies with them. A cleanup may need a second round (see
//     statemachine.CleanupNeeds).
//   - History queries: a ready read of an entity's history asks the store
//     for its page's older events and is answered when they come.
//
// Tokens tell answers apart: each request has a new one, and an answer
// whose token is not awaited (its replica's state was replaced by a
// snapshot meanwhile) is dropped.
type historyState struct {
	token uint64 // the last token handed out

	// The entry applying waits for: its index and the reads asked (0:
	// none waits); answered, it holds the answers until applied.
	waitIndex uint64
	waitToken uint64
	provided  uint64 // the entry whose answers the state machine holds
	// The reads asked for the entry waited for.
	pendingReads []core.HistoryRead

	// History pages waiting for the store, by token.
	pages map[uint64]pendingPage
}

type pendingPage struct {
	to   dest
	h    core.Header
	page statemachine.HistoryPage
}

// needsReads reports whether applying the entry le must first wait for
// the history store's answers, asking for them if it has not yet.
func (r *Replica) needsReads(le core.LogEntry) bool {
	hs := &r.hist
	if hs.waitIndex == le.Index {
		return true // asked; the answer has not come
	}
	e, err := decodeEntry(le.Data)
	if err != nil || e.kind != kindOperation {
		return false // apply reports the damage
	}
	var reads []core.HistoryRead
	switch e.op {
	case core.OpInsert, core.OpUpsert:
		if hs.provided == le.Index || !clientTimestamps(e.payload) {
			return false // fresh timestamps read nothing: skip decoding the batch twice
		}
		b, err := core.DecodeBatch(e.op, e.payload, r.batchEvents)
		if err != nil {
			return false
		}
		r.batchEvents = b.Events[:0]
		reads = r.sm.WriteNeeds(b.Events, nil)
	case core.OpCleanupExpired:
		req, err := core.DecodeRequest(e.op, e.payload)
		if err != nil {
			return false
		}
		q, ok := req.(*core.CleanupRequest)
		if !ok {
			return false
		}
		// A cleanup may need further reads once the first answers are in.
		reads = r.sm.CleanupNeeds(e.timestamp, q, nil)
	default:
		return false
	}
	if len(reads) == 0 {
		return false
	}
	hs.token++
	hs.waitIndex, hs.waitToken = le.Index, hs.token
	r.io.ReadHistory(hs.token, reads)
	hs.pendingReads = reads
	return true
}

// HistoryRead is IO's answer to ReadHistory: answers[i] answers the i-th
// read asked with token.
func (r *Replica) HistoryRead(token uint64, answers []core.HistoryAnswer) {
	if r.failed != nil {
		return
	}
	hs := &r.hist
	if p, ok := hs.pages[token]; ok {
		delete(hs.pages, token)
		r.finishPage(p, answers)
		r.flush()
		return
	}
	if hs.waitIndex == 0 || token != hs.waitToken {
		return // its state was replaced meanwhile
	}
	for _, a := range answers {
		if a.Err != nil {
			// The store cannot answer: applying cannot go on. IO rebuilds
			// the history from a peer, or stops a replica of one.
			r.failed = a.Err
			return
		}
	}
	r.sm.Provide(hs.pendingReads, answers)
	hs.provided, hs.waitIndex, hs.pendingReads = hs.waitIndex, 0, nil
	r.applyCommitted()
	r.flush()
}

// takeWrites queues to IO the history writes of the entry at index just
// applied.
func (r *Replica) takeWrites(index uint64) {
	if w := r.sm.TakeHistoryWrites(); len(w) > 0 {
		r.io.WriteHistory(index, w)
	}
	if a := r.sm.TakeApplied(); len(a) > 0 {
		r.io.PublishApplied(index, a)
	}
	r.sm.DropAnswers()
	if r.hist.provided == index {
		r.hist.provided = 0
	}
}

// resetHistory forgets what waited for the store: the state it was for
// has been replaced (a snapshot installed).
func (r *Replica) resetHistory() {
	r.hist.waitIndex, r.hist.waitToken, r.hist.provided, r.hist.pendingReads = 0, 0, 0, nil
	r.hist.pages = nil
}

// startHistory runs a history query: at once when memory settles it,
// otherwise once the store has answered its page's range.
func (r *Replica) startHistory(to dest, h core.Header, ts uint64, req any) {
	q, ok := req.(*core.HistoryQuery)
	if !ok {
		r.reply(to, h, core.OpEntityHistory, nil, core.Errorf(core.InternalError, "history request of type %T", req))
		return
	}
	res, page, done, err := r.sm.HistoryStart(ts, q)
	if done || err != nil {
		r.reply(to, h, core.OpEntityHistory, &res, err)
		return
	}
	hs := &r.hist
	hs.token++
	if hs.pages == nil {
		hs.pages = make(map[uint64]pendingPage)
	}
	hs.pages[hs.token] = pendingPage{to, h, page}
	r.io.ReadHistory(hs.token, []core.HistoryRead{{Kind: core.HistoryRangeRead, Range: page.Range}})
}

// finishPage answers a history query from the store's answer.
func (r *Replica) finishPage(p pendingPage, answers []core.HistoryAnswer) {
	if len(answers) != 1 {
		r.reply(p.to, p.h, core.OpEntityHistory, nil, core.Errorf(core.InternalError, "the history store gave %d answers to one read", len(answers)))
		return
	}
	if err := answers[0].Err; err != nil {
		// Nothing is answered from a damaged store. The replica stops
		// too: IO rebuilds its history from a peer, or stops a replica of
		// one (io/rebuild.go).
		r.reply(p.to, p.h, core.OpEntityHistory, nil, core.Errorf(core.Corruption, "the history store could not read entity %s: %v", p.page.Range.EntityID, err))
		r.failed = err
		return
	}
	res, err := r.sm.FinishHistory(p.page, answers[0].Events)
	r.reply(p.to, p.h, core.OpEntityHistory, &res, err)
}

// clientTimestamps reports whether a batch's payload may hold an event
// with a timestamp of its own: false only when its records (a record's
// timestamp is its bytes 48 to 55) show none.
func clientTimestamps(payload []byte) bool {
	recs, n, ok := core.EventRecords(payload)
	if !ok {
		return true // decoded to find out
	}
	for i := range n {
		if binary.LittleEndian.Uint64(recs[i*core.RecordSize+48:]) != 0 {
			return true
		}
	}
	return false
}

// FirstHistoryRead returns the index of the first of entries (a log
// recovered after a snapshot, ascending) whose applying may read the
// history store, 0 when none may: an insert or upsert that may name a
// timestamp of its own, or a cleanup of expired events (needsReads asks
// for no other). It decides on the entries alone, so it may name an entry
// that reads nothing once applied, never miss one that reads. IO keeps the
// history store a crash left only when it holds no entry from this one on
// (io/history.Recover): a read must see the store as the entries before
// it left it.
func FirstHistoryRead(entries []core.LogEntry) uint64 {
	for _, le := range entries {
		e, err := decodeEntry(le.Data)
		if err != nil || e.kind != kindOperation {
			continue // applying reads nothing for it
		}
		switch e.op {
		case core.OpInsert, core.OpUpsert:
			if clientTimestamps(e.payload) {
				return le.Index
			}
		case core.OpCleanupExpired:
			return le.Index
		}
	}
	return 0
}

// KnownCommitted is the last index of rec (its snapshot's, or its log's)
// known to be committed in a cluster of replicaCount, so that it is the
// same on every replica and for ever: a lone replica's log holds only
// entries it appended as leader, which it commits all; a cluster's
// replica knows its entries committed up to its hard state's commit
// index.
func (rec Recovered) KnownCommitted(replicaCount uint32) uint64 {
	n := len(rec.Entries)
	if n == 0 {
		return rec.SnapshotIndex
	}
	last := rec.Entries[n-1].Index
	if replicaCount == 1 {
		return last
	}
	return max(rec.SnapshotIndex, min(last, rec.HardState.Commit))
}
