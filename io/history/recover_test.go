package history

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/geoevent/geoevent/core"
)

// Recover keeps the store a crash left when the replay can go on from it,
// and restores the snapshot's checkpoint otherwise; what a crash left of
// an interrupted Restore goes.
func TestRecoverKeepsOrRestores(t *testing.T) {
	// A store checkpointed at entry 2, then entries 3 to 5 flushed, entry 6
	// not (lost at the crash: the WAL is off).
	base := vfs.NewCrashableMem()
	s := mustOpen(t, base, "db")
	for i := uint64(1); i <= 6; i++ {
		if err := s.Apply(i, []core.HistoryWrite{put(ev(1, i))}); err != nil {
			t.Fatal(err)
		}
		switch i {
		case 2:
			if _, err := s.Checkpoint("ckpt"); err != nil {
				t.Fatal(err)
			}
		case 5:
			if err := s.db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	crashed := base.CrashClone(vfs.CrashCloneCfg{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// A checkpoint ahead of its snapshot (taken while a kept store was
	// ahead of the replay) with a read among the entries it holds beyond
	// the snapshot cannot be replayed onto: an error, not a wrong answer.
	if _, _, err := Recover(crashed.CrashClone(vfs.CrashCloneCfg{}), "db",
		Recovery{SnapshotIndex: 1, Checkpoint: "ckpt", Committed: 1, FirstRead: 2}, Options{CacheBytes: 1 << 20}); err == nil {
		t.Fatal("a checkpoint holding a reading entry beyond its snapshot was accepted")
	}

	for _, c := range []struct {
		name    string
		r       Recovery
		kept    bool
		applied uint64
	}{
		{"replay goes on from it", Recovery{SnapshotIndex: 2, Checkpoint: "ckpt", Committed: 9}, true, 5},
		{"reads after it", Recovery{SnapshotIndex: 2, Checkpoint: "ckpt", Committed: 9, FirstRead: 6}, true, 5},
		{"an entry it holds reads", Recovery{SnapshotIndex: 2, Checkpoint: "ckpt", Committed: 9, FirstRead: 5}, false, 2},
		{"ahead of what is committed", Recovery{SnapshotIndex: 2, Checkpoint: "ckpt", Committed: 4}, false, 2},
		{"behind the snapshot", Recovery{SnapshotIndex: 7, Checkpoint: "ckpt", Committed: 9}, false, 2},
		{"no snapshot, ahead of the log", Recovery{Committed: 3}, false, 0},
		{"no snapshot", Recovery{Committed: 9}, true, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := crashed.CrashClone(vfs.CrashCloneCfg{})
			// What a Restore cut short leaves beside the store.
			if err := fs.MkdirAll("db.restoring", 0o755); err != nil {
				t.Fatal(err)
			}
			st, kept, err := Recover(fs, "db", c.r, Options{CacheBytes: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if kept != c.kept || st.Applied() != c.applied {
				t.Fatalf("kept %v at %d, want %v at %d", kept, st.Applied(), c.kept, c.applied)
			}
			v := st.View()
			defer v.Close()
			got, _ := mustRange(t, v, core.HistoryRange{EntityID: core.Uint128{Lo: 1}, UntilNS: 1 << 62, Limit: 10})
			if uint64(len(got)) != c.applied {
				t.Fatalf("%d events, want %d", len(got), c.applied)
			}
			if _, err := fs.Stat("db.restoring"); err == nil {
				t.Fatal("the leftover of a Restore is still there")
			}
			// The checkpoint is intact whatever happened to the store.
			if err := st.Apply(8, []core.HistoryWrite{{Kind: core.HistoryDeleteEntity, EntityID: core.Uint128{Lo: 1}}}); err != nil {
				t.Fatal(err)
			}
			ck := mustOpen(t, fs, "ckpt")
			defer ck.Close()
			if ck.Applied() != 2 {
				t.Fatalf("checkpoint at %d, want 2", ck.Applied())
			}
		})
	}
}
