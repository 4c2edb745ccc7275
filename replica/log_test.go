package replica

import (
	"testing"

	"github.com/geoevent/geoevent/core"
	"pgregory.net/rapid"
)

// TestLogTermsAgainstAModel drives the in-memory log through appends (in
// runs of one term, enough to shed entries many times over), applying and
// dropping, truncation above the commit index, compaction to a snapshot
// and reset, and checks after each step that every index from base to
// lastIndex has the term a plain slice of all entries gives, and that
// entryAt returns the entry (with its Data unless dropped).
func TestLogTermsAgainstAModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var l raftLog
		batch := rapid.SampledFrom([]uint64{1, 3, 64, 4096}).Draw(t, "shedBatch")
		var model []uint64 // model[i] is the term of index i+1; indices up to base are gone
		term := uint64(1)
		data := []byte{1}
		check := func(step string) {
			if l.lastIndex != uint64(len(model)) {
				t.Fatalf("%s: lastIndex %d, model %d", step, l.lastIndex, len(model))
			}
			for i := l.base; i <= l.lastIndex; i++ {
				want := l.baseTerm
				if i > l.base {
					want = model[i-1]
				}
				if got := l.termAt(i); got != want {
					t.Fatalf("%s: termAt(%d) = %d, want %d (base %d, shed %d, dropped %d)", step, i, got, want, l.base, l.shed, l.dropped)
				}
				if i == l.base {
					continue
				}
				e := l.entryAt(i)
				if e.Index != i || e.Term != want || (i > l.dropped) != (len(e.Data) > 0) {
					t.Fatalf("%s: entryAt(%d) = index %d term %d data %d bytes (dropped through %d)", step, i, e.Index, e.Term, len(e.Data), l.dropped)
				}
			}
			if l.termAt(l.lastIndex+1) != 0 || (l.base > 0 && l.termAt(l.base-1) != 0) {
				t.Fatalf("%s: a term outside base..lastIndex", step)
			}
		}
		for range rapid.IntRange(1, 20).Draw(t, "steps") {
			switch rapid.IntRange(0, 5).Draw(t, "op") {
			case 0: // append a run of entries, maybe in a new term
				if rapid.Bool().Draw(t, "newTerm") {
					term++
				}
				n := rapid.IntRange(1, 50).Draw(t, "n")
				if rapid.Bool().Draw(t, "long") {
					n += int(batch)
				}
				for range n {
					idx := l.lastIndex + 1
					l.appendLocal(core.LogEntry{Index: idx, Term: term, Data: data})
					model = append(model, term)
				}
				l.queued = nil
				check("append")
			case 1: // commit, apply and drop some
				if l.lastIndex > l.dropped {
					upTo := l.dropped + uint64(rapid.IntRange(1, int(l.lastIndex-l.dropped)).Draw(t, "drop"))
					l.commit, l.applied = max(l.commit, upTo), max(l.applied, upTo)
					for l.dropped < upTo {
						l.dropped++
						l.log[l.dropped-l.first()].Data = nil
					}
					l.shedDropped(batch)
					check("drop")
				}
			case 2: // truncate above the commit index
				if l.lastIndex > l.commit {
					from := l.commit + 1 + uint64(rapid.IntRange(0, int(l.lastIndex-l.commit-1)).Draw(t, "from"))
					l.truncateFrom(from)
					model = model[:from-1]
					check("truncate")
				}
			case 3: // compact to an applied index (a snapshot)
				if l.applied > l.base {
					to := l.base + 1 + uint64(rapid.IntRange(0, int(l.applied-l.base-1)).Draw(t, "to"))
					l.compactTo(to)
					check("compact")
				}
			case 4: // shed again: nothing changes that can be seen
				l.shedDropped(batch)
				check("shed")
			case 5: // reset (a snapshot installed past the log)
				if rapid.IntRange(0, 9).Draw(t, "reset") == 0 {
					to := l.lastIndex + uint64(rapid.IntRange(0, 5).Draw(t, "past"))
					term++
					l.resetLog(to, term)
					model = make([]uint64, to)
					for i := range model {
						model[i] = term // only index to (base) is looked at, through baseTerm
					}
					check("reset")
				}
			}
		}
	})
}
