package history

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/geoevent/geoevent/core"
)

func put(e core.GeoEvent) core.HistoryWrite {
	return core.HistoryWrite{Kind: core.HistoryPut, EntityID: e.EntityID, TS: e.TimestampNS, Event: e}
}

func ev(id, ts uint64) core.GeoEvent {
	e := sampleEvent()
	e.EntityID = core.Uint128{Lo: id}
	e.TimestampNS = ts
	e.TTLSeconds = 0
	return e
}

func mustOpen(t testing.TB, fs vfs.FS, dir string) *Store {
	t.Helper()
	s, err := Open(fs, dir, Options{CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustRange(t testing.TB, v *View, r core.HistoryRange) ([]core.GeoEvent, bool) {
	t.Helper()
	evs, more, err := v.Range(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	return evs, more
}

func TestApplyRangeGetAndReopen(t *testing.T) {
	fs := vfs.NewMem()
	s := mustOpen(t, fs, "db")
	if s.Applied() != 0 {
		t.Fatalf("new store applied %d", s.Applied())
	}
	if err := s.Apply(5, []core.HistoryWrite{put(ev(1, 10)), put(ev(1, 20)), put(ev(2, 15)), put(ev(1, 30))}); err != nil {
		t.Fatal(err)
	}
	// Replay of an applied index is skipped.
	if err := s.Apply(5, []core.HistoryWrite{put(ev(1, 40))}); err != nil {
		t.Fatal(err)
	}
	v := s.View()
	got, more := mustRange(t, v, core.HistoryRange{EntityID: core.Uint128{Lo: 1}, SinceNS: 0, UntilNS: 1 << 62, Limit: 2})
	if len(got) != 2 || got[0] != ev(1, 10) || got[1] != ev(1, 20) || !more {
		t.Fatalf("range: %v more=%v", got, more)
	}
	got, more = mustRange(t, v, core.HistoryRange{EntityID: core.Uint128{Lo: 1}, SinceNS: 20, UntilNS: 30, Limit: 5})
	if len(got) != 2 || got[0] != ev(1, 20) || got[1] != ev(1, 30) || more {
		t.Fatalf("range [20,30]: %v more=%v", got, more)
	}
	if e, ok, err := v.Get(core.Uint128{Lo: 2}, 15); err != nil || !ok || e != ev(2, 15) {
		t.Fatalf("get: %v %v %v", e, ok, err)
	}
	if _, ok, err := v.Get(core.Uint128{Lo: 1}, 40); err != nil || ok {
		t.Fatalf("get of a skipped replay: %v %v", ok, err)
	}
	v.Close()
	if err := s.Apply(7, []core.HistoryWrite{{Kind: 99}}); err == nil {
		t.Fatal("unknown kind accepted")
	}
	if s.Applied() != 5 {
		t.Fatalf("rejected entry moved applied to %d", s.Applied())
	}
	d1, err := s.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, fs, "db")
	defer s.Close()
	if s.Applied() != 5 {
		t.Fatalf("reopened at %d", s.Applied())
	}
	if d2, err := s.Digest(); err != nil || d2 != d1 {
		t.Fatalf("digest after reopen differs: %v", err)
	}
}

// A View taken before later Applies reads the state it was taken at.
func TestViewKeepsItsState(t *testing.T) {
	s := mustOpen(t, vfs.NewMem(), "db")
	defer s.Close()
	a, b := core.Uint128{Lo: 1}, core.Uint128{Lo: 2}
	if err := s.Apply(1, []core.HistoryWrite{put(ev(1, 10)), put(ev(1, 20)), put(ev(2, 10))}); err != nil {
		t.Fatal(err)
	}
	old := s.View()
	defer old.Close()
	changed := ev(1, 10)
	changed.UserData = core.Uint128{Lo: 99}
	if err := s.Apply(2, []core.HistoryWrite{
		put(changed), put(ev(1, 30)),
		{Kind: core.HistoryDeleteEntity, EntityID: b},
	}); err != nil {
		t.Fatal(err)
	}
	// Flushing moves the new state to the files; the old view still holds.
	if _, err := s.Checkpoint(t.TempDir() + "/ckpt"); err != nil {
		t.Fatal(err)
	}
	all := core.HistoryRange{EntityID: a, UntilNS: 1 << 62, Limit: 10}
	if got, _ := mustRange(t, old, all); !slices.Equal(got, []core.GeoEvent{ev(1, 10), ev(1, 20)}) {
		t.Fatalf("old view of 1: %v", got)
	}
	if e, ok, err := old.Get(b, 10); err != nil || !ok || e != ev(2, 10) {
		t.Fatalf("old view of 2: %v %v %v", e, ok, err)
	}
	cur := s.View()
	defer cur.Close()
	if got, _ := mustRange(t, cur, all); !slices.Equal(got, []core.GeoEvent{changed, ev(1, 20), ev(1, 30)}) {
		t.Fatalf("new view of 1: %v", got)
	}
	if _, ok, err := cur.Get(b, 10); err != nil || ok {
		t.Fatalf("new view of erased 2: %v %v", ok, err)
	}
}

// filesContain reports the files of dir that contain pattern. A file that
// vanishes meanwhile (a compaction of the open store replaced it) holds
// nothing.
func filesContain(t *testing.T, dir string, pattern []byte) []string {
	t.Helper()
	var hits []string
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, pattern) {
			hits = append(hits, e.Name())
		}
	}
	return hits
}

// After HistoryDeleteEntity and Close, no file of the store holds the
// erased entities' values, whether one is erased or a burst of them. Blocks are stored
// uncompressed so that a value's bytes are visible in the files.
func TestErasureLeavesNoBytes(t *testing.T) {
	for _, erased := range []int{1, 20} {
		t.Run(fmt.Sprint(erased), func(t *testing.T) { testErasure(t, erased) })
	}
}

func testErasure(t *testing.T, erased int) {
	dir := t.TempDir()
	o := Options{CacheBytes: 1 << 20, uncompressed: true}
	s, err := Open(vfs.Default, dir, o)
	if err != nil {
		t.Fatal(err)
	}
	secret := core.Uint128{Hi: 0x5ec7e75ec7e75ec7, Lo: 0x0123456789abcdef}
	pattern := appendValue(nil, &core.GeoEvent{UserData: secret})[3 : 3+16] // inside UserData's varints
	// Erased entities are 100, 102, ...; kept ones 101, 103, ... lie
	// between them.
	gone := func(k int) core.Uint128 { return core.Uint128{Lo: uint64(100 + 2*k)} }
	kept := func(k int) core.Uint128 { return core.Uint128{Lo: uint64(101 + 2*k)} }
	const perRound, rounds = 100, 4
	index := uint64(0)
	// Each pair of entities in tables of its own, one a round, so that an
	// entity spans several tables and the pairs lie in different ones.
	for k := 0; k < erased; k++ {
		for round := 0; round < rounds; round++ {
			var ws []core.HistoryWrite
			for i := 0; i < perRound; i++ {
				ts := uint64(round*perRound+i) * 1e9
				ws = append(ws,
					put(core.GeoEvent{EntityID: gone(k), TimestampNS: ts, UserData: secret, LatNano: int64(i)}),
					put(core.GeoEvent{EntityID: kept(k), TimestampNS: ts, LatNano: int64(i)}))
			}
			index++
			if err := s.Apply(index, ws); err != nil {
				t.Fatal(err)
			}
			if err := s.db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if hits := filesContain(t, dir, pattern); len(hits) == 0 {
		t.Fatal("the pattern is in no file before the erasure: the test cannot see it")
	}
	var ws []core.HistoryWrite
	for k := 0; k < erased; k++ {
		ws = append(ws, core.HistoryWrite{Kind: core.HistoryDeleteEntity, EntityID: gone(k)})
	}
	index++
	if err := s.Apply(index, ws); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if hits := filesContain(t, dir, pattern); len(hits) != 0 {
		t.Fatalf("erased bytes still in %v", hits)
	}
	s, err = Open(vfs.Default, dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v := s.View()
	defer v.Close()
	all := func(id core.Uint128) core.HistoryRange {
		return core.HistoryRange{EntityID: id, UntilNS: 1 << 62, Limit: 5000}
	}
	for k := 0; k < erased; k++ {
		if got, _ := mustRange(t, v, all(kept(k))); len(got) != perRound*rounds {
			t.Fatalf("kept entity %v has %d events, want %d", kept(k), len(got), perRound*rounds)
		}
		if got, _ := mustRange(t, v, all(gone(k))); len(got) != 0 {
			t.Fatalf("erased entity %v has %d events", gone(k), len(got))
		}
	}
}

// A table whose data block is damaged is never answered from: every read
// returns either the right events or a *CorruptionError naming the file.
func TestCorruptBlockIsReported(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(vfs.Default, dir, Options{CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	const entities, perEntity = 50, 200
	want := map[core.Uint128][]core.GeoEvent{}
	var ws []core.HistoryWrite
	for i := 0; i < perEntity; i++ {
		for id := uint64(1); id <= entities; id++ {
			e := ev(id, uint64(i+1)*1e9)
			e.LatNano += int64(i * 1000)
			ws = append(ws, put(e))
			want[e.EntityID] = append(want[e.EntityID], e)
		}
	}
	if err := s.Apply(1, ws); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Damage the middle of the first data block of the one table.
	ssts, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(ssts) != 1 {
		t.Fatalf("%d tables, want 1", len(ssts))
	}
	b, err := os.ReadFile(ssts[0])
	if err != nil {
		t.Fatal(err)
	}
	for i := 200; i < 216; i++ {
		b[i] ^= 0x5a
	}
	if err := os.WriteFile(ssts[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = Open(vfs.Default, dir, Options{CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v := s.View()
	defer v.Close()
	corrupt := 0
	for id, evs := range want {
		got, _, err := v.Range(core.HistoryRange{EntityID: id, UntilNS: 1 << 62, Limit: 1000}, nil)
		var ce *CorruptionError
		if errors.As(err, &ce) {
			corrupt++
			if ce.File != ssts[0] || ce.Entity != id {
				t.Fatalf("corruption names %q entity %v, want %q %v", ce.File, ce.Entity, ssts[0], id)
			}
			// The block's key range: the first entity's oldest event on.
			if first := "entity " + (core.Uint128{Lo: 1}).String() + " at 1000000000 to "; !strings.HasPrefix(ce.Keys, first) {
				t.Fatalf("corruption names keys %q, want %q...", ce.Keys, first)
			}
			if _, _, err := v.Get(id, evs[0].TimestampNS); !errors.As(err, &ce) {
				t.Fatalf("get from the damaged block: %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, evs) {
			t.Fatalf("entity %v: wrong events from a damaged table", id)
		}
	}
	if corrupt == 0 {
		t.Fatal("no read met the damaged block")
	}
	if _, err := s.Digest(); !errors.As(err, new(*CorruptionError)) {
		t.Fatalf("digest over a damaged block: %v", err)
	}
}

// A View read on another goroutine while Apply goes on sees its state.
func TestViewWhileApplying(t *testing.T) {
	s := mustOpen(t, vfs.NewMem(), "db")
	defer s.Close()
	if err := s.Apply(1, []core.HistoryWrite{put(ev(1, 1)), put(ev(1, 2))}); err != nil {
		t.Fatal(err)
	}
	v := s.View()
	done := make(chan error)
	go func() {
		defer v.Close()
		for i := 0; i < 200; i++ {
			got, _, err := v.Range(core.HistoryRange{EntityID: core.Uint128{Lo: 1}, UntilNS: 1 << 62, Limit: 1000}, nil)
			if err != nil {
				done <- err
				return
			}
			if !slices.Equal(got, []core.GeoEvent{ev(1, 1), ev(1, 2)}) {
				done <- fmt.Errorf("read %d: %d events", i, len(got))
				return
			}
		}
		done <- nil
	}()
	for i := uint64(2); i < 200; i++ {
		if err := s.Apply(i, []core.HistoryWrite{put(ev(1, i+1))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestClosedAndExistingDirs(t *testing.T) {
	s := mustOpen(t, vfs.NewMem(), "db")
	if _, err := s.Checkpoint("ckpt"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Checkpoint("ckpt"); err == nil {
		t.Fatal("checkpoint into an existing directory")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(1, []core.HistoryWrite{put(ev(1, 1))}); err == nil {
		t.Fatal("apply after close")
	}
	if _, err := s.Checkpoint("ckpt2"); err == nil {
		t.Fatal("checkpoint after close")
	}
}

// Restore on a real directory links the checkpoint's tables and copies the
// rest, so that the restored store, written and compacted, leaves the
// checkpoint as it was.
func TestRestoreLeavesCheckpointIntact(t *testing.T) {
	root := t.TempDir()
	live, ckpt, restored := filepath.Join(root, "live"), filepath.Join(root, "ckpt"), filepath.Join(root, "restored")
	s, err := Open(vfs.Default, live, Options{CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 3; i++ {
		if err := s.Apply(i, []core.HistoryWrite{put(ev(1, i)), put(ev(2, i))}); err != nil {
			t.Fatal(err)
		}
	}
	at, err := s.Checkpoint(ckpt)
	if err != nil || at != 3 {
		t.Fatalf("checkpoint at %d: %v", at, err)
	}
	want, err := s.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(4, []core.HistoryWrite{put(ev(3, 4))}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 2; round++ {
		if err := Restore(vfs.Default, ckpt, restored); err != nil {
			t.Fatal(err)
		}
		ssts, _ := filepath.Glob(filepath.Join(restored, "*.sst"))
		if len(ssts) == 0 {
			t.Fatal("no tables restored")
		}
		for _, p := range ssts {
			a, errA := os.Stat(p)
			b, errB := os.Stat(filepath.Join(ckpt, filepath.Base(p)))
			if errA != nil || errB != nil || !os.SameFile(a, b) {
				t.Fatalf("%s is not a link to the checkpoint's table", p)
			}
		}
		r, err := Open(vfs.Default, restored, Options{CacheBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := r.Digest(); err != nil || got != want || r.Applied() != 3 {
			t.Fatalf("restored store at %d differs from the checkpoint: %v", r.Applied(), err)
		}
		// Write, erase and compact in the restored store.
		if err := r.Apply(5, []core.HistoryWrite{put(ev(4, 5)), {Kind: core.HistoryDeleteEntity, EntityID: core.Uint128{Lo: 1}}}); err != nil {
			t.Fatal(err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
