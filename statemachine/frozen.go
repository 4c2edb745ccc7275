package statemachine

import (
	"bytes"
	"io"
)

// Frozen is the state as it was when Freeze was called. Its WriteSnapshot
// may run on another goroutine while the state machine goes on changing;
// the owner calls Release once it is done with it.
type Frozen struct {
	snap []byte
}

// Freeze captures the state for a snapshot written later, away from the
// caller.
func (sm *StateMachine) Freeze() *Frozen {
	var b bytes.Buffer
	_ = sm.WriteSnapshot(&b) // writes to memory cannot fail
	return &Frozen{snap: b.Bytes()}
}

// Release ends f's use: the state machine no longer keeps its state for it.
func (sm *StateMachine) Release(f *Frozen) {}

// WriteSnapshot writes the snapshot of the frozen state to w, as
// StateMachine.WriteSnapshot would have when Freeze was called.
func (f *Frozen) WriteSnapshot(w io.Writer) error {
	_, err := w.Write(f.snap)
	return err
}
