package statemachine

import (
	"io"
	"slices"
)

// Frozen is the state as it was when Freeze was called. Its AppendSnapshot
// may run on another goroutine while the state machine goes on changing:
// the store copies what the view holds before it writes it (see
// entityStore). The state machine's owner calls Release once the view is
// no longer needed, and the store stops copying.
type Frozen struct {
	owner    *StateMachine
	view     storeView
	watch    watchView // fences and feed: watchsnap.go
	released bool
}

// Freeze captures the state for a snapshot written later, away from the
// caller. It costs a copy of the store's tables of chunks (compact and
// full) and of older events' facts (history.go), not of the entities.
func (sm *StateMachine) Freeze() *Frozen {
	s := &sm.store
	s.gen++
	s.frozenGen = s.gen
	s.views++
	v := sm.liveView()
	v.chunks = slices.Clone(v.chunks)
	v.fulls = slices.Clone(v.fulls)
	v.hists = slices.Clone(v.hists)
	return &Frozen{owner: sm, view: v, watch: sm.watchView()}
}

// Release ends f's use; releasing it twice, or a view of another state
// machine, does nothing.
func (sm *StateMachine) Release(f *Frozen) {
	if f == nil || f.released || f.owner != sm {
		return
	}
	f.released = true
	s := &sm.store
	s.views--
	if s.views == 0 {
		s.frozenGen = 0
	}
}

// AppendSnapshot appends the snapshot of the frozen state to dst: the bytes
// StateMachine.WriteSnapshot would have written when Freeze was called.
// The snapshot goes straight into dst, with no copy through a writer: a
// caller that sizes dst for it moves each byte once.
func (f *Frozen) AppendSnapshot(dst []byte) []byte { return appendSnapshot(dst, &f.view, &f.watch) }

// WriteSnapshot writes the snapshot of the frozen state to w, as
// AppendSnapshot appends it, in pieces of 32 KiB or more (w needs no
// buffer of its own) and without holding the whole in memory.
func (f *Frozen) WriteSnapshot(w io.Writer) error { return writeSnapshot(w, &f.view, &f.watch) }
