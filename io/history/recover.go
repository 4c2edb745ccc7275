package history

import (
	"errors"
	"fmt"
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Recovery is what a recovering replica holds besides its history store.
type Recovery struct {
	// SnapshotIndex is the index of the snapshot it restores (0: none), and
	// Checkpoint that snapshot's checkpoint ("": none; the store is then
	// empty at the snapshot, or the log holds every entry).
	SnapshotIndex uint64
	Checkpoint    string
	// Committed is the last index of the log it recovered that is known to
	// be committed (at least SnapshotIndex): committed entries are the same
	// on every replica and for ever, so a store that holds entries up to an
	// index at or below it holds exactly what replaying them writes.
	Committed uint64
	// FirstRead is the index of the first recovered entry whose applying
	// may read the store (0: none may).
	FirstRead uint64
}

// Recover opens the store in dir for a replica recovering r, and says
// whether it kept the store as it was.
//
// Pebble's WAL is off, and Apply writes an entry's index in the same batch
// as its history, so the store a crash leaves holds exactly the entries up
// to its Applied(), A, whatever it had flushed. It is kept when replaying
// the log above the snapshot can go on from it: SnapshotIndex <= A <=
// Committed (it holds no entry the log does not, or that might yet
// differ), and no entry at or below A may read the store (FirstRead is 0
// or above A: a read must see the store as the entries before it left it,
// and a store cannot go back). The replay then skips the writes of the
// entries at or below A (Apply is idempotent). Otherwise the store is the
// checkpoint, restored (empty without one), and the replay writes every
// entry above the snapshot. A store that cannot be opened is not kept
// either: its files are replaced by the checkpoint.
func Recover(fs vfs.FS, dir string, r Recovery, o Options) (st *Store, kept bool, err error) {
	for _, leftover := range []string{dir + ".restoring", dir + ".old"} {
		if err := fs.RemoveAll(leftover); err != nil {
			return nil, false, err
		}
	}
	if _, err := fs.Stat(dir); err == nil {
		// Compactions held until kept: one that starts would hold up the
		// Close of a store that is not.
		held := o
		held.holdCompactions = true
		st, err := Open(fs, dir, held)
		if err == nil {
			a := st.Applied()
			if r.SnapshotIndex <= a && a <= max(r.Committed, r.SnapshotIndex) && (r.FirstRead == 0 || a < r.FirstRead) {
				st.gate.release()
				return st, true, nil
			}
			if err := st.Close(); err != nil {
				return nil, false, err
			}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, false, err
	}
	if r.Checkpoint == "" {
		if err := fs.RemoveAll(dir); err != nil {
			return nil, false, err
		}
	} else if err := Restore(fs, r.Checkpoint, dir); err != nil {
		return nil, false, err
	}
	if st, err = Open(fs, dir, o); err != nil {
		return nil, false, err
	}
	// A checkpoint taken while a kept store was ahead of the replay holds
	// entries above its snapshot: the replay skips them, which is right
	// only if none of them reads (as when the store was kept: the same
	// committed entries).
	if a := st.Applied(); r.FirstRead > r.SnapshotIndex && r.FirstRead <= a {
		_ = st.Close()
		return nil, false, fmt.Errorf("the history checkpoint %s holds the entries up to %d, beyond its snapshot's %d, and entry %d among them reads the store: it cannot be replayed onto", r.Checkpoint, a, r.SnapshotIndex, r.FirstRead)
	}
	return st, false, nil
}
