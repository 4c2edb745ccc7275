package replica

import "github.com/geoevent/geoevent/core"

// Entries given back to storage, and read back when a follower needs them.
//
// An applied entry's Data is dropped from memory (the log keeps its index
// and term) once no follower is expected to ask for it: on a follower at
// once (it sends entries only should it lead, and then reads them back),
// on the leader once every follower that answered within an election
// timeout holds it. A follower that falls behind that point (it was down,
// lost messages for a while, or repairs a damaged log) needs entries the
// leader no longer has in memory: the leader asks storage for them
// (IO.ReadLog), one read at a time, and sends them from the answer, which
// it keeps while it serves. Storage may no longer hold them (after a
// snapshot it may discard the log up to it); a follower that needs such an
// entry gets a snapshot.
//
// Invariants (besides the log's, see raftLog):
//   - At most one read is out (reading), for the entries from `from` on.
//   - entries, when not empty, are contiguous, dropped ones, with the
//     terms the log holds for them (LogRead keeps no other).
//   - No entry at or below gone is read again: a read found the entry at
//     gone missing or damaged. Storage discards only a prefix of the log,
//     and dropped entries are applied ones, never truncated, so those
//     below it are missing too, or are treated so.
type readBack struct {
	reading bool
	from    uint64
	entries []core.LogEntry
	gone    uint64
}

// maxReadBytes is how much entry data one read brings back: two full
// appends' worth, so that a follower catching up keeps a pipeline of them
// busy with one read in two.
const maxReadBytes = 2 * maxAppendBytes

// dropData gives up the Data of applied entries no follower is expected to
// ask for (see readBack).
func (r *Replica) dropData() {
	upTo := r.applied
	if r.role == Leader {
		now := r.clock.MonotonicNS()
		r.eachPeer(func(p uint32) {
			if pr := &r.peers[p]; pr.answered(now, r.cfg.ElectionTimeoutNS) {
				upTo = min(upTo, pr.match)
			}
		})
	}
	for r.dropped < upTo {
		r.dropped++
		r.log[r.dropped-r.first()].Data = nil
	}
	r.shedDropped(r.cfg.ShedBatch)
	if k := len(r.rb.entries); k > 0 && r.role == Leader {
		// Released once every follower is past them.
		last, needed := r.rb.entries[k-1].Index, false
		r.eachPeer(func(p uint32) { needed = needed || r.peers[p].next <= last })
		if !needed {
			r.rb.entries = nil
		}
	}
}

// unsendable is the last index up to which the leader cannot send entries:
// those the log has compacted away, and those storage cannot give back. A
// follower that needs one gets a snapshot.
func (r *Replica) unsendable() uint64 { return max(r.base, r.rb.gone) }

// sendable returns the entry at index (base < index <= lastIndex) with its
// Data, from the log or from the last read; ok is false when it must be
// read first.
func (r *Replica) sendable(index uint64) (e core.LogEntry, ok bool) {
	if index > r.dropped {
		return r.entryAt(index), true
	}
	if k := len(r.rb.entries); k > 0 {
		if first := r.rb.entries[0].Index; index >= first && index < first+uint64(k) {
			return r.rb.entries[index-first], true
		}
	}
	return core.LogEntry{}, false
}

// readFrom asks storage for the dropped entries from index on, unless a
// read is out (its answer runs replicateAll, which asks again if need be).
func (r *Replica) readFrom(index uint64) {
	if r.rb.reading {
		return
	}
	r.rb.reading, r.rb.from = true, index
	r.io.ReadLog(index, r.dropped, maxReadBytes)
}

// LogRead is storage's answer to ReadLog: the entries from index from on
// that it still holds (see core.IO.ReadLog).
func (r *Replica) LogRead(from uint64, entries []core.LogEntry) {
	if r.failed != nil || !r.rb.reading || from != r.rb.from {
		return
	}
	r.rb.reading = false
	r.rb.entries = nil
	if r.role != Leader {
		return
	}
	// Keep the run of entries that are still dropped ones of this log.
	n := 0
	for n < len(entries) {
		e := entries[n]
		if e.Index != from+uint64(n) || e.Index <= r.base || e.Index > r.dropped || e.Term != r.termAt(e.Index) || len(e.Data) == 0 {
			break
		}
		n++
	}
	if n == 0 {
		if from > r.base && from <= r.dropped {
			r.rb.gone = max(r.rb.gone, from)
		}
	} else {
		r.rb.entries = entries[:n:n]
	}
	r.replicateAll()
}
