package statemachine

import (
	"bytes"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/geoevent/geoevent/core"
)

// hookedSnapshot is the snapshot of a state with fences, a feed and two
// hooks, one of them delivered part of the way.
func hookedSnapshot(t testing.TB) []byte {
	sm := hookedState(t)
	var buf bytes.Buffer
	if err := sm.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func hookedState(t testing.TB) *StateMachine {
	sm := New()
	sm.BeginEntry(1, epoch)
	if _, err := sm.PutFence(epoch, &core.Fence{Name: "zone", Shape: core.FenceCircle, Center: core.Coordinate{LatNano: fmLat, LonNano: fmLon}, RadiusMM: 1_000_000}); err != nil {
		t.Fatal(err)
	}
	sm.BeginEntry(2, epoch)
	_, err := sm.PutHook(epoch, &core.Hook{Name: "b", URL: "https://b.example/x", Fences: []string{"zone"}, Types: core.DefaultNotify})
	mustOK(t, err)
	_, err = sm.PutHook(epoch, &core.Hook{Name: "a", URL: "http://127.0.0.1:1/a"})
	mustOK(t, err)
	for i := range 3 {
		sm.BeginEntry(uint64(3+i), epoch+uint64(i))
		ev := []core.GeoEvent{{EntityID: core.Uint128{Lo: uint64(1 + i)}, LatNano: fmLat, LonNano: fmLon, GroupID: 1}}
		AssignCells(ev)
		if _, err := sm.Upsert(epoch+uint64(i), &core.InsertRequest{Events: ev}); err != nil {
			t.Fatal(err)
		}
	}
	page, err := sm.ReadFeed(epoch, &core.FeedRequest{})
	if err != nil || len(page.Notifications) != 3 {
		t.Fatalf("feed: %d notifications, %v", len(page.Notifications), err)
	}
	h, _ := sm.GetHook(epoch, &core.HookName{Name: "a"})
	_, err = sm.HookDelivered(epoch, &core.HookDelivered{Name: "a", Version: h.Version, Seq: page.Notifications[1].Seq})
	mustOK(t, err)
	return sm
}

func mustOK(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestHooks(t *testing.T) {
	sm := New()
	sm.BeginEntry(7, epoch)
	sm.watch.feed.lastSeq = 7<<32 + 3 // as if the feed had made notifications
	put := func(h core.Hook) (core.PutHookReply, error) { return sm.PutHook(epoch, &h) }
	if r, err := put(core.Hook{Name: "h", URL: "http://x/1", Fences: []string{"a"}}); err != nil || !r.Created {
		t.Fatalf("put: %+v %v", r, err)
	}
	h, err := sm.GetHook(epoch, &core.HookName{Name: "h"})
	if err != nil || h.Delivered != 7<<32+3 || h.Version != 1 || h.URL != "http://x/1" || !slices.Equal(h.Fences, []string{"a"}) {
		t.Fatalf("a new hook starts at the feed's newest: %+v %v", h, err)
	}

	// Deliveries: monotonic, under the hook's version only, never beyond the feed.
	sm.watch.feed.lastSeq = 9 << 32
	for _, c := range []struct {
		version, seq uint64
		want         uint64
		advanced     bool
		code         core.Code
	}{
		{1, 8 << 32, 8 << 32, true, 0},
		{1, 7 << 32, 8 << 32, false, 0}, // lower: ignored
		{2, 9 << 32, 8 << 32, false, 0}, // another version: ignored
		{1, 10 << 32, 0, false, 108},    // beyond the feed: refused
		{1, 9 << 32, 9 << 32, true, 0},
	} {
		r, err := sm.HookDelivered(epoch, &core.HookDelivered{Name: "h", Version: c.version, Seq: c.seq})
		if c.code != 0 {
			if errCode(t, err) != c.code {
				t.Fatalf("%+v: %v, want code %d", c, err, c.code)
			}
			continue
		}
		if err != nil || r.Delivered != c.want || r.Advanced != c.advanced {
			t.Fatalf("%+v: %+v %v", c, r, err)
		}
	}

	// A put of the hook keeps its position and takes a new version.
	before := sm.Digest()
	if r, err := put(core.Hook{Name: "h", URL: "https://y/2", Types: core.AllNotify}); err != nil || r.Created {
		t.Fatalf("replace: %+v %v", r, err)
	}
	if sm.Digest() == before {
		t.Fatal("a put did not change the digest")
	}
	h, _ = sm.GetHook(epoch, &core.HookName{Name: "h"})
	if h.Delivered != 9<<32 || h.Version != 2 || h.URL != "https://y/2" || h.Fences != nil {
		t.Fatalf("replaced: %+v", h)
	}

	// Rejected requests change nothing.
	before = sm.Digest()
	for _, c := range []struct {
		h    core.Hook
		code core.Code
	}{
		{core.Hook{Name: "bad name", URL: "http://x"}, core.InvalidHook.Code},
		{core.Hook{Name: "g", URL: "gopher://x"}, core.InvalidHook.Code},
		{core.Hook{Name: "g", URL: "http://x", Types: 0x80}, core.InvalidHook.Code},
		{core.Hook{Name: "g", URL: "http://x", Delivered: 5}, core.InvalidHook.Code},
	} {
		if _, err := put(c.h); errCode(t, err) != c.code {
			t.Errorf("%+v: %v", c.h, err)
		}
	}
	if _, err := sm.GetHook(epoch, &core.HookName{Name: "nope"}); errCode(t, err) != core.HookNotFound.Code {
		t.Error(err)
	}
	if _, err := sm.DeleteHook(epoch, &core.HookName{Name: "nope"}); errCode(t, err) != core.HookNotFound.Code {
		t.Error(err)
	}
	if _, err := sm.HookDelivered(epoch, &core.HookDelivered{Name: "nope", Version: 1, Seq: 1}); errCode(t, err) != core.HookNotFound.Code {
		t.Error(err)
	}
	if sm.Digest() != before {
		t.Fatal("a rejected request changed the state")
	}

	// The limit, the list's pages, and deletion.
	for i := 1; i < core.MaxHooks; i++ {
		if _, err := put(core.Hook{Name: "x" + string(rune('a'+i%26)) + itoa(i), URL: "http://x"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := put(core.Hook{Name: "one-more", URL: "http://x"}); errCode(t, err) != core.TooManyHooks.Code {
		t.Fatalf("hook %d: %v", core.MaxHooks+1, err)
	}
	if _, err := put(core.Hook{Name: "h", URL: "http://z"}); err != nil {
		t.Fatalf("replacing at the limit: %v", err)
	}
	var names []string
	for after := ""; ; {
		l, err := sm.ListHooks(epoch, &core.HookListRequest{After: after, Limit: 300})
		if err != nil || l.Total != core.MaxHooks || l.FeedLast != 9<<32 {
			t.Fatalf("list: total %d last %d %v", l.Total, l.FeedLast, err)
		}
		for _, h := range l.Hooks {
			names = append(names, h.Name)
		}
		if !l.HasMore {
			break
		}
		after = l.Hooks[len(l.Hooks)-1].Name
	}
	if len(names) != core.MaxHooks || !slices.IsSorted(names) {
		t.Fatalf("listed %d hooks, sorted %v", len(names), slices.IsSorted(names))
	}
	if _, err := sm.ListHooks(epoch, &core.HookListRequest{Limit: core.MaxHookList + 1}); errCode(t, err) != core.QueryResultTooLarge.Code {
		t.Error(err)
	}
	if r, err := sm.DeleteHook(epoch, &core.HookName{Name: "h"}); err != nil || !r.Deleted {
		t.Fatal(err)
	}
	if _, err := sm.GetHook(epoch, &core.HookName{Name: "h"}); errCode(t, err) != core.HookNotFound.Code {
		t.Fatal(err)
	}
}

func itoa(i int) string {
	return string(rune('0'+i/100%10)) + string(rune('0'+i/10%10)) + string(rune('0'+i%10))
}

// TestHookSnapshots: hooks and their positions go into snapshots and the
// digest; a state without hooks encodes as before there were hooks.
func TestHookSnapshots(t *testing.T) {
	sm := hookedState(t)
	b := hookedSnapshot(t)
	cp, err := ReadSnapshot(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if cp.Digest() != sm.Digest() {
		t.Fatal("the restored state has another digest")
	}
	for _, name := range []string{"a", "b"} {
		x, _ := sm.GetHook(epoch, &core.HookName{Name: name})
		y, err := cp.GetHook(epoch, &core.HookName{Name: name})
		if err != nil || x.Name != y.Name || x.URL != y.URL || !slices.Equal(x.Fences, y.Fences) || x.Types != y.Types ||
			x.Delivered != y.Delivered || x.Version != y.Version {
			t.Fatalf("%s: %+v, restored %+v (%v)", name, x, y, err)
		}
	}
	if a, _ := cp.GetHook(epoch, &core.HookName{Name: "a"}); a.Delivered == 0 {
		t.Fatal("the delivered position was not restored")
	}
	// A frozen view keeps the hooks as they were.
	fr := sm.Freeze()
	sm.DeleteHook(epoch, &core.HookName{Name: "a"})
	if got := fr.AppendSnapshot(nil); !bytes.Equal(got, b) {
		t.Fatal("a frozen view's snapshot changed with the state")
	}
	sm.Release(fr)

	// Without hooks (none ever put): no section, as before hooks existed.
	plain := New()
	var without bytes.Buffer
	plain.WriteSnapshot(&without)
	if len(without.Bytes()) != 8+8+8+4*8+4+8+4 || bytes.Contains(without.Bytes(), []byte(hookMagic)) {
		t.Fatalf("an empty state's snapshot is %d bytes", without.Len())
	}
	// Once hooks were put, the section stays (the version is state).
	plain.PutHook(epoch, &core.Hook{Name: "x", URL: "http://x"})
	plain.DeleteHook(epoch, &core.HookName{Name: "x"})
	var after bytes.Buffer
	plain.WriteSnapshot(&after)
	back, err := ReadSnapshot(bytes.NewReader(after.Bytes()))
	if err != nil || back.Digest() != plain.Digest() || back.Digest() == New().Digest() {
		t.Fatalf("restoring a state whose hooks were deleted: %v", err)
	}
}

// TestHooksAgainstModel runs random hook operations against a model (a
// map of hooks with their positions) while the feed grows, and checks
// every answer, the list's pages, and that a snapshot restores the same
// hooks and digest.
func TestHooksAgainstModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sm := New()
		type mhook struct {
			url                string
			delivered, version uint64
		}
		model := map[string]*mhook{}
		var version uint64
		names := []string{"a", "b", "c"}
		for range rapid.IntRange(1, 40).Draw(t, "steps") {
			name := rapid.SampledFrom(names).Draw(t, "name")
			switch rapid.IntRange(0, 4).Draw(t, "op") {
			case 0: // the feed grows
				sm.watch.feed.lastSeq += rapid.Uint64Range(1, 1<<33).Draw(t, "grow")
			case 1:
				url := rapid.SampledFrom([]string{"http://x/1", "https://y/2", "ftp://bad"}).Draw(t, "url")
				r, err := sm.PutHook(epoch, &core.Hook{Name: name, URL: url})
				if url == "ftp://bad" {
					if errCode(t, err) != core.InvalidHook.Code {
						t.Fatalf("put %s: %v", url, err)
					}
					continue
				}
				m, exists := model[name]
				if err != nil || r.Created == exists {
					t.Fatalf("put %s: %+v %v (exists %v)", name, r, err, exists)
				}
				version++
				if !exists {
					m = &mhook{delivered: sm.watch.feed.lastSeq}
					model[name] = m
				}
				m.url, m.version = url, version
			case 2:
				_, err := sm.DeleteHook(epoch, &core.HookName{Name: name})
				if _, ok := model[name]; ok != (err == nil) {
					t.Fatalf("delete %s: %v", name, err)
				}
				delete(model, name)
			case 3:
				m := model[name]
				v := rapid.Uint64Range(0, version+1).Draw(t, "version")
				seq := rapid.Uint64Range(0, sm.watch.feed.lastSeq+1).Draw(t, "seq")
				r, err := sm.HookDelivered(epoch, &core.HookDelivered{Name: name, Version: v, Seq: seq})
				switch {
				case m == nil:
					if errCode(t, err) != core.HookNotFound.Code {
						t.Fatalf("delivered to a missing hook: %v", err)
					}
				case seq > sm.watch.feed.lastSeq:
					if errCode(t, err) != core.InvalidArgument.Code {
						t.Fatalf("delivered beyond the feed: %v", err)
					}
				default:
					advance := v == m.version && seq > m.delivered
					if advance {
						m.delivered = seq
					}
					if err != nil || r.Advanced != advance || r.Delivered != m.delivered {
						t.Fatalf("delivered %d v%d to %+v: %+v %v", seq, v, *m, r, err)
					}
				}
			case 4:
				h, err := sm.GetHook(epoch, &core.HookName{Name: name})
				m := model[name]
				if m == nil {
					if errCode(t, err) != core.HookNotFound.Code {
						t.Fatalf("get a missing hook: %v", err)
					}
					continue
				}
				if err != nil || h.URL != m.url || h.Delivered != m.delivered || h.Version != m.version {
					t.Fatalf("get %s: %+v, model %+v (%v)", name, h, *m, err)
				}
			}
		}
		l, err := sm.ListHooks(epoch, &core.HookListRequest{Limit: 2})
		if err != nil || int(l.Total) != len(model) || l.HasMore != (len(model) > 2) {
			t.Fatalf("list: %+v %v, model has %d", l, err, len(model))
		}
		cp, _ := restored(t, sm)
		if cp.Digest() != sm.Digest() {
			t.Fatal("the restored state has another digest")
		}
		for name, m := range model {
			h, err := cp.GetHook(epoch, &core.HookName{Name: name})
			if err != nil || h.Delivered != m.delivered || h.Version != m.version || h.URL != m.url {
				t.Fatalf("restored %s: %+v (%v), model %+v", name, h, err, *m)
			}
		}
	})
}
