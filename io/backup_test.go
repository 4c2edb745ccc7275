package io

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/io/store"
)

// backupOf takes s's backup into memory.
func backupOf(t *testing.T, s *Server) ([]byte, BackupManifest) {
	t.Helper()
	var b bytes.Buffer
	m, err := s.Backup(context.Background(), &b, nil)
	if err != nil {
		t.Fatalf("Backup: %v", err)
	}
	return b.Bytes(), m
}

// restoreTo restores b into a new directory and returns it.
func restoreTo(t *testing.T, b []byte) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "restored")
	if _, err := RestoreBackup(bytes.NewReader(b), dir, RestoreOptions{}); err != nil {
		t.Fatalf("RestoreBackup: %v", err)
	}
	return dir
}

// A backup taken while a writer inserts holds every insert acknowledged
// before it began, from a snapshot, its history checkpoint and the log
// above it; one taken once the writes have stopped, online or offline,
// restores to the same state (state machine digest and every entity's
// history) as the replica's.
func TestBackupUnderLoadRestoresTheState(t *testing.T) {
	dir := formatDir(t)
	opts := Options{}
	opts.Replica.SnapshotEvery = 7
	s := serve(t, dir, opts)
	c := dial(t, s.Addr())
	c.register(testCluster)
	const entities = 5
	var acked atomic.Int64 // rounds of inserts acknowledged
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for r := 0; !stop.Load(); r++ {
			for i := range entities {
				ev := event(i)
				ev.LatNano += int64(r)
				c.insert(ev)
			}
			acked.Store(int64(r + 1))
		}
	})
	for acked.Load() < 30 {
		time.Sleep(time.Millisecond)
	}
	before := acked.Load()
	during, m := backupOf(t, s.Server)
	stop.Store(true)
	wg.Wait()
	if m.SnapshotIndex == 0 || m.LastIndex <= m.SnapshotIndex {
		t.Fatalf("the backup holds snapshot %d and the log to %d: want both", m.SnapshotIndex, m.LastIndex)
	}
	pins, _ := filepath.Glob(filepath.Join(dir, backupPinPrefix+"*"))
	if len(pins) != 0 {
		t.Fatalf("pinned files left behind: %v", pins)
	}

	r1 := serve(t, restoreTo(t, during), opts)
	c1 := dial(t, r1.Addr())
	c1.register(testCluster)
	for i := range entities {
		if n := len(c1.history(i)); int64(n) < before {
			t.Fatalf("entity %d: %d events restored, %d were acknowledged before the backup", i, n, before)
		}
	}
	r1.stop(t)

	// Quiet now: online and offline backups restore the replica's state.
	after, _ := backupOf(t, s.Server)
	want := make([][]core.GeoEvent, entities)
	for i := range entities {
		want[i] = c.history(i)
	}
	s.stop(t)
	wantDigest := s.r.Digest()
	var offline bytes.Buffer
	if _, err := BackupDir(context.Background(), dir, &offline, nil); err != nil {
		t.Fatalf("BackupDir: %v", err)
	}
	for name, b := range map[string][]byte{"online": after, "offline": offline.Bytes()} {
		r := serve(t, restoreTo(t, b), opts)
		rc := dial(t, r.Addr())
		rc.register(testCluster)
		for i := range entities {
			got := rc.history(i)
			if len(got) != len(want[i]) {
				t.Fatalf("%s: entity %d has %d events, want %d", name, i, len(got), len(want[i]))
			}
			for k := range got {
				if got[k] != want[i][k] {
					t.Fatalf("%s: entity %d event %d is %+v, want %+v", name, i, k, got[k], want[i][k])
				}
			}
		}
		r.stop(t)
		if r.r.Digest() != wantDigest {
			t.Fatalf("%s: the restored state's digest differs from the replica's", name)
		}
	}
}

// A damaged or cut backup is refused as ErrBadBackup, and nothing is
// left: neither the directory nor its temporary one.
func TestDamagedBackupIsRefused(t *testing.T) {
	dir := formatDir(t)
	opts := Options{}
	opts.Replica.SnapshotEvery = 5
	s := serve(t, dir, opts)
	c := dial(t, s.Addr())
	c.register(testCluster)
	for i := range 12 {
		c.insert(event(i))
	}
	good, _ := backupOf(t, s.Server)
	if _, err := VerifyBackup(bytes.NewReader(good)); err != nil {
		t.Fatalf("VerifyBackup of a good backup: %v", err)
	}
	cases := map[string][]byte{"cut": good[:len(good)*2/3], "empty": nil}
	// In the snapshot, the cluster file and the manifest's text.
	for _, at := range []int{bytes.Index(good, []byte("GEOSNPF1")) + 50, bytes.Index(good, []byte("replica-count")) + 1, bytes.Index(good, []byte(`"last_index"`)) + 16} {
		b := bytes.Clone(good)
		b[at] ^= 0x10
		cases["flipped"+string(rune('A'+len(cases)))] = b
	}
	for name, b := range cases {
		parent := t.TempDir()
		target := filepath.Join(parent, "r")
		_, err := RestoreBackup(bytes.NewReader(b), target, RestoreOptions{})
		if !errors.Is(err, ErrBadBackup) {
			t.Fatalf("%s: RestoreBackup: %v, want ErrBadBackup", name, err)
		}
		if des, _ := os.ReadDir(parent); len(des) != 0 {
			t.Fatalf("%s: %s holds %v after a refused restore", name, parent, des)
		}
		if _, err := VerifyBackup(bytes.NewReader(b)); err == nil {
			t.Fatalf("%s: VerifyBackup passed a damaged backup", name)
		}
	}
	// Not into a directory that holds files.
	if _, err := RestoreBackup(bytes.NewReader(good), dir, RestoreOptions{}); err == nil {
		t.Fatal("restored over a data directory")
	}
}

// FuzzRestoreBackup: any input is restored whole or refused with nothing
// left behind; never a panic.
func FuzzRestoreBackup(f *testing.F) {
	dir := filepath.Join(f.TempDir(), "data")
	if err := Format(dir, ClusterInfo{Cluster: testCluster, ReplicaIndex: 0, ReplicaCount: 1}); err != nil {
		f.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := BackupDir(context.Background(), dir, &b, nil); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	f.Add(b.Bytes()[:b.Len()/2])
	f.Add([]byte("not a tar"))
	f.Fuzz(func(t *testing.T, data []byte) {
		parent := t.TempDir()
		target := filepath.Join(parent, "r")
		if _, err := RestoreBackup(bytes.NewReader(data), target, RestoreOptions{}); err != nil {
			if des, _ := os.ReadDir(parent); len(des) != 0 {
				t.Fatalf("refused (%v), but left %v", err, des)
			}
		}
	})
}

// Restoring a member of a cluster of several keeps its identity, or takes
// the one asked for, and starts it repairing unless the whole cluster is
// restored.
func TestRestoreIdentity(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := Format(dir, ClusterInfo{Cluster: testCluster, ReplicaIndex: 1, ReplicaCount: 3}); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := BackupDir(context.Background(), dir, &b, nil); err != nil {
		t.Fatal(err)
	}
	two := uint32(2)
	for _, tc := range []struct {
		opts      RestoreOptions
		index     uint32
		repairing bool
	}{
		{RestoreOptions{}, 1, true},
		{RestoreOptions{Replica: &two, WholeCluster: true}, 2, false},
	} {
		to := filepath.Join(t.TempDir(), "r")
		if _, err := RestoreBackup(bytes.NewReader(b.Bytes()), to, tc.opts); err != nil {
			t.Fatal(err)
		}
		info, err := ReadClusterFile(to)
		if err != nil {
			t.Fatal(err)
		}
		hs, _, err := store.LoadHardState(to)
		if err != nil {
			t.Fatal(err)
		}
		if info.Cluster != testCluster || info.ReplicaCount != 3 || info.ReplicaIndex != tc.index || hs.Repairing != tc.repairing || hs.Vote != store.NoVote {
			t.Fatalf("%+v: restored %+v, hard state %+v", tc.opts, info, hs)
		}
	}
	bad := uint32(3)
	if _, err := RestoreBackup(bytes.NewReader(b.Bytes()), filepath.Join(t.TempDir(), "r"), RestoreOptions{Replica: &bad}); err == nil {
		t.Fatal("restored as replica 3 of 3")
	}
}
