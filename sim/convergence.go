package sim

import (
	"crypto/sha256"
	"fmt"
	"strings"

	"github.com/geoevent/geoevent/replica"
)

// The checkers on the replicas themselves (not on what clients saw):
//
//   - Status: a replica's applied <= commit <= last index, and within one
//     incarnation neither applied nor commit goes back.
//   - Election safety: no two replicas lead the same term.
//   - State digests: replicas that applied the same log have the same state
//     digest. A digest is noted with the index it was applied through: at
//     most every digestEvery ticks for each replica whose applied index
//     moved, after every input during which a replica froze its state for
//     a snapshot or installed its leader's (so that a replica restarting on
//     it, or a follower installing it, is compared with the state it was
//     made of), when a replica starts, just
//     before it crashes, and at the end. Two notes of one index must agree,
//     whichever replicas and incarnations made them. Because a crash never
//     loses a committed entry, an incarnation that replays its log must
//     also reach the digests it had before.
//   - Convergence: after the run (no clients, no faults), every replica
//     must reach the same applied index within settleMax ticks, and their
//     digests must then agree.
//
// Digest disagreements are reported after the history checkers (check), so
// that a lost write is reported as such where the history shows it.

type digestNote struct {
	d     [32]byte
	node  int
	epoch int
	tick  int64
	why   string
}

// noteDigest notes a replica's digest at its applied index, unless it did
// at that index already in this incarnation.
func (w *world) noteDigest(n *node, why string) {
	if !n.up {
		return
	}
	applied := n.r.Status().Applied
	if n.noted && n.notedAt == applied {
		return
	}
	// The history store's digest as of applied: see digestAt for a store
	// that recovery kept ahead of the replay (history.Recover).
	hist, ok := n.disk.hist.digestAt(applied)
	if !ok {
		return
	}
	n.noted, n.notedAt = true, applied
	// The state's digest and the history store's: the store has every
	// write of the entries applied (WriteHistory applies at once).
	sm := n.r.Digest()
	d := sha256.Sum256(append(sm[:], hist[:]...))
	if w.mutateDigest != nil {
		d = w.mutateDigest(n, applied, d)
	}
	w.digestNotes++
	w.tracef("replica %d digest at %d (%s): %x", n.idx, applied, why, d[:8])
	prev, ok := w.digests[applied]
	if !ok {
		w.digests[applied] = digestNote{d: d, node: n.idx, epoch: n.epoch, tick: w.now, why: why}
		return
	}
	if prev.d != d && w.divergence == "" {
		w.divergence = fmt.Sprintf("digest: at tick %d replica %d (epoch %d, %s) has digest %x after applying through index %d; replica %d (epoch %d, %s) had %x there at tick %d",
			w.now, n.idx, n.epoch, why, d[:8], applied, prev.node, prev.epoch, prev.why, prev.d[:8], prev.tick)
		w.tracef("DIVERGENCE %s", w.divergence)
	}
}

// observe checks every live replica's status after a tick, follows the
// leadership, and notes digests when due.
func (w *world) observe() {
	sample := w.now%w.cfg.digestEvery == 0
	for _, n := range w.nodes {
		if !n.up || w.failure != "" {
			continue
		}
		s := n.r.Status()
		switch {
		case s.Applied > s.Commit || s.Commit > s.LastIndex:
			w.fail("replica %d: applied %d, commit %d, last index %d", n.idx, s.Applied, s.Commit, s.LastIndex)
		case s.Applied < n.lastApplied || s.Commit < n.lastCommit:
			w.fail("replica %d went back: applied %d after %d, commit %d after %d", n.idx, s.Applied, n.lastApplied, s.Commit, n.lastCommit)
		}
		n.lastApplied, n.lastCommit = s.Applied, s.Commit
		if s.Role != n.lastRole || s.Term != n.lastTerm || s.Leader != n.lastLeader {
			n.lastRole, n.lastTerm, n.lastLeader = s.Role, s.Term, s.Leader
			w.tracef("replica %d is %s in term %d (leader %d)", n.idx, s.Role.String(), s.Term, int(int32(s.Leader)))
		}
		if s.Role == replica.Leader {
			if l, ok := w.leaders[s.Term]; ok && l != n.idx {
				w.fail("election safety: replicas %d and %d both lead term %d", l, n.idx, s.Term)
			} else if !ok {
				w.leaders[s.Term] = n.idx
				w.tracef("replica %d leads term %d", n.idx, s.Term)
				if s.Term > w.leaderTerm {
					w.leaderTerm = s.Term
					w.leaderChanges++
					if len(w.nodes) > 1 {
						// A new leader must hold every acknowledged write.
						w.probe.planRound("new leader")
					}
				}
			}
		}
		if sample {
			w.noteDigest(n, "sample")
		}
	}
}

// settle runs the cluster on after the run, without clients and faults,
// until every replica has applied the same index (the convergence checker
// above); it leaves a description of a failure in w.convergence.
func (w *world) settle() {
	w.healPartition()
	for i := int64(0); ; i++ {
		same := true
		var applied []uint64
		for _, n := range w.nodes {
			a := uint64(0)
			if n.up {
				a = n.r.Status().Applied
			} else {
				same = false
			}
			applied = append(applied, a)
			same = same && a == applied[0]
		}
		if same {
			w.tracef("replicas converge at index %d after %d ticks", applied[0], i)
			for _, n := range w.nodes {
				w.noteDigest(n, "end")
			}
			return
		}
		if i == w.cfg.settleMax || w.failure != "" {
			var b strings.Builder
			for _, n := range w.nodes {
				if !n.up {
					fmt.Fprintf(&b, " replica %d down;", n.idx)
					continue
				}
				s := n.r.Status()
				fmt.Fprintf(&b, " replica %d %s term %d leader %d commit %d applied %d last %d;", n.idx, s.Role, s.Term, int32(s.Leader), s.Commit, s.Applied, s.LastIndex)
			}
			w.convergence = fmt.Sprintf("convergence: %d ticks after the run the replicas have not applied the same index:%s", i, strings.TrimSuffix(b.String(), ";"))
			return
		}
		w.now++
		for len(w.events) > 0 && w.events[0].at <= w.now && w.failure == "" {
			e := w.popEvent()
			switch e.kind {
			case evToNode, evToClient, evConnDown:
				// The clients are done; their frames no longer count.
			default:
				w.handle(e)
			}
		}
		for _, n := range w.nodes {
			if n.up && w.failure == "" {
				n.r.Tick()
				w.afterInput(n)
			}
		}
		w.observe()
	}
}

// checkConvergence reports a digest disagreement or a failure to converge.
func (w *world) checkConvergence() string {
	if w.divergence != "" {
		return w.divergence
	}
	return w.convergence
}
