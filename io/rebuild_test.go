package io

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/io/history"
	"github.com/geoevent/geoevent/io/store"
)

// damagedCheckpoint writes entries 1..10 and a snapshot at 6 whose history
// checkpoint holds an event, then damages the checkpoint's MANIFEST, which
// opening the store reads (the live store's is a copy of it).
func damagedCheckpoint(t *testing.T, dir string) {
	t.Helper()
	writeTen(t, dir)
	if _, err := store.SaveSnapshot(dir, 6, 2, writeBytes([]byte("state"))); err != nil {
		t.Fatal(err)
	}
	st, err := history.Open(vfs.Default, filepath.Join(dir, liveHistoryDir), history.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ev := core.GeoEvent{EntityID: core.Uint128{Lo: 1}, TimestampNS: 5}
	if err := st.Apply(6, []core.HistoryWrite{{Kind: core.HistoryPut, EntityID: ev.EntityID, TS: 5, Event: ev}}); err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(dir, checkpointDir(6))
	if _, err := st.Checkpoint(cp); err != nil {
		t.Fatal(err)
	}
	st.Close()
	// The live store too: recovery keeps it rather than restore the
	// checkpoint when it can (history.Recover).
	damageManifest(t, cp)
	damageManifest(t, filepath.Join(dir, liveHistoryDir))
}

// damageManifest flips bytes all through the pebble MANIFEST in dir.
func damageManifest(t *testing.T, dir string) {
	t.Helper()
	ms, _ := filepath.Glob(filepath.Join(dir, "MANIFEST-*"))
	if len(ms) != 1 {
		t.Fatalf("manifests %v", ms)
	}
	b, err := os.ReadFile(ms[0])
	if err != nil {
		t.Fatal(err)
	}
	for i := 10; i < len(b)-4; i += 7 {
		b[i] ^= 0x5a
	}
	if err := os.WriteFile(ms[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A history checkpoint damaged where opening the store reads stops a lone
// replica from starting, saying what to do; a replica with peers discards
// its log, snapshot and history, marks its hard state repairing and starts
// empty.
func TestOpenRebuildsADamagedHistoryCheckpoint(t *testing.T) {
	for _, count := range []uint32{1, 3} {
		dir := t.TempDir()
		damagedCheckpoint(t, dir)
		log, rec, err := recoverStorage(dir, 0, count, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		if rec.SnapshotIndex != 6 || len(rec.Entries) != 4 {
			t.Fatalf("recovered snapshot %d and %d entries, want 6 and 4", rec.SnapshotIndex, len(rec.Entries))
		}
		st, err := openHistoryOrRebuild(dir, log, &rec, count, 0, zap.NewNop())
		if count == 1 {
			if historyDamage(err) == nil || !strings.Contains(err.Error(), "restore the data directory from a backup") {
				t.Fatalf("a lone replica on a damaged checkpoint: %v", err)
			}
			log.Close()
			continue
		}
		if err != nil {
			t.Fatalf("a replica of three on a damaged checkpoint: %v", err)
		}
		if st.Applied() != 0 || rec.SnapshotIndex != 0 || len(rec.Entries) != 0 || !rec.HardState.Repairing || rec.HardState.Term != 3 {
			t.Fatalf("after the rebuild: store at %d, recovered %+v", st.Applied(), rec)
		}
		st.Close()
		left, _ := filepath.Glob(filepath.Join(dir, "snapshot-*"))
		if len(left) != 0 || log.LastIndex() != 0 {
			t.Fatalf("after the rebuild: %v left, log ends at %d", left, log.LastIndex())
		}
		log.Close()
	}
}
