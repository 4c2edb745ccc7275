package statemachine

import (
	"bytes"
	"testing"

	"github.com/geoevent/geoevent/core"
)

// Older events expire on their own: an entity's latest event sets the
// entity's expiry (which /ttl/* change), and each older event is visible
// until its own timestamp + ttl_seconds. These tests walk the rule's cases
// one by one; TestStateMachineAgainstModel compares it at random.

const second = uint64(1e9)

// put writes one event of entity id at opTS (ts 0: a fresh timestamp) and
// returns its result.
func put(t *testing.T, sm *StateMachine, upsert bool, opTS uint64, id int, ts uint64, ttl uint32) core.EventResult {
	t.Helper()
	ev := at(id, 38_100_000_000+int64(ts%1000), 13_360_000_000)
	ev.TimestampNS, ev.TTLSeconds = ts, ttl
	evs := []core.GeoEvent{ev}
	AssignCells(evs)
	write := sm.Insert
	if upsert {
		write = sm.Upsert
	}
	r, err := write(opTS, &core.InsertRequest{Events: evs})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Committed {
		return r.Results[0]
	}
	if err := sm.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	return r.Results[0]
}

// historyTS lists the timestamps of entity id's history at t.
func historyTS(t *testing.T, sm *StateMachine, at uint64, id int) []uint64 {
	t.Helper()
	res, err := sm.History(at, &core.HistoryQuery{EntityID: testID(id), Page: core.Page{Limit: core.MaxQueryLimit}})
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, ev := range res.Events {
		out = append(out, ev.TimestampNS)
	}
	return out
}

func sameTS(t *testing.T, what string, got []uint64, want ...uint64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: %v, want %v", what, got, want)
		}
	}
}

func TestOlderEventsExpireOnTheirOwn(t *testing.T) {
	sm := New()
	a := epoch - 5*second // an import with a 10 s TTL: expires at epoch+5s
	put(t, sm, false, epoch, 1, a, 10)
	b := put(t, sm, false, epoch, 1, 0, 0).TimestampNS // the latest, never expires
	exp := a + 10*second
	due := exp + 10*second/16 // when cleanup takes it

	sameTS(t, "before A's expiry", historyTS(t, sm, exp-1, 1), a, b)
	sameTS(t, "at A's expiry", historyTS(t, sm, exp, 1), b)
	if sm.Expired(exp) || sm.Expired(due-1) || !sm.Expired(due) {
		t.Fatalf("Expired: %v at A's expiry, %v just before its removal due, %v at it", sm.Expired(exp), sm.Expired(due-1), sm.Expired(due))
	}
	// Stats count A until cleanup removes it.
	if s := sm.Stats(due); s.EntityCount != 1 || s.EventCount != 2 {
		t.Fatalf("stats at A's removal due: %+v", s)
	}

	// A's key exists while A is visible, and is free once it has expired:
	// the new event takes A's place and updates nothing.
	if r := put(t, sm, false, exp-1, 1, a, 0); r.Code != core.EventExists.Code {
		t.Fatalf("insert at A's key before its expiry: code %d", r.Code)
	}
	if r := put(t, sm, false, exp, 1, a, 0); r.Code != 0 || r.Updated {
		t.Fatalf("insert at A's expired key: %+v", r)
	}
	sameTS(t, "A again, without a TTL", historyTS(t, sm, exp+100*second, 1), a, b)
	// Memory kept A's removal due as a bound of its older events' (see
	// older); a cleanup finds none due, takes nothing, and corrects it.
	if cl, err := sm.CleanupExpired(exp+100*second, &core.CleanupRequest{}); err != nil || cl.Scanned != 0 || cl.Removed != 0 {
		t.Fatalf("cleanup after A came back without a TTL: %+v %v", cl, err)
	}
	if sm.Expired(exp + 100*second) {
		t.Fatal("something expired after A came back without a TTL")
	}

	// An upsert at an expired key is an insert too (updated false); at a
	// visible one it updates.
	c := epoch - 4*second
	put(t, sm, false, exp, 1, c, 10) // expires at epoch+6s
	if r := put(t, sm, true, exp, 1, c, 10); r.Code != 0 || !r.Updated {
		t.Fatalf("upsert at C's visible key: %+v", r)
	}
	if r := put(t, sm, true, exp+2*second, 1, c, 0); r.Code != 0 || r.Updated {
		t.Fatalf("upsert at C's expired key: %+v", r)
	}

	// /ttl/clear keeps the entity, not its older events: each keeps its own
	// expiry.
	x := put(t, sm, false, epoch, 2, 0, 5).TimestampNS
	y := put(t, sm, false, epoch+second, 2, 0, 5).TimestampNS
	if _, err := sm.TTLClear(epoch+second, &core.TTLClearRequest{EntityID: testID(2)}); err != nil {
		t.Fatal(err)
	}
	sameTS(t, "after /ttl/clear, at X's expiry", historyTS(t, sm, x+5*second, 2), y)
	sameTS(t, "long after", historyTS(t, sm, y+100*second, 2), y)

	// An entity that expires takes its older events along, whatever their
	// TTL.
	p := put(t, sm, false, epoch, 3, 0, 0).TimestampNS
	q := put(t, sm, false, epoch, 3, 0, 3).TimestampNS
	sameTS(t, "entity 3 before its expiry", historyTS(t, sm, q+3*second-1, 3), p, q)
	sameTS(t, "entity 3 at its expiry", historyTS(t, sm, q+3*second, 3))

	// Cleanup at epoch+10s takes entities by the sooner of their own
	// expiry and their older events' removal dues: entity 2 (X, due at
	// x+5s+5s/16: X goes), entity 3 (expired at q+3s: both events go).
	// Entity 1 has nothing due (A and C came back without a TTL).
	now := epoch + 10*second
	if s := sm.Stats(now); s.EntityCount != 2 || s.EventCount != 5 {
		t.Fatalf("stats before cleanup: %+v", s)
	}
	cl, err := sm.CleanupExpired(now, &core.CleanupRequest{})
	if err != nil || cl.Scanned != 2 || cl.Removed != 3 {
		t.Fatalf("cleanup: %+v %v", cl, err)
	}
	if err := sm.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	if s := sm.Stats(now); sm.Expired(now) || s.EntityCount != 2 || s.EventCount != 4 {
		t.Fatalf("after cleanup: expired %v, stats %+v", sm.Expired(now), s)
	}
	if sm.olderDue.Len() != 0 {
		t.Fatalf("%d older-due keys left", sm.olderDue.Len())
	}
}

// A cleanup's budget counts entities, taken soonest due first.
func TestCleanupTakesOlderEventsInExpiryOrder(t *testing.T) {
	sm := New()
	// Entity i (1..5) has an older event expiring at epoch + i ns (due for
	// removal 10s/16 later); the latest of entities 1-4 never expires,
	// entity 5's at epoch+2.5s.
	for i := 1; i <= 5; i++ {
		put(t, sm, false, epoch, i, epoch-10*second+uint64(i), 10)
		if i < 5 {
			put(t, sm, false, epoch, i, 0, 0)
		}
	}
	put(t, sm, false, epoch, 5, epoch-second/2, 3)
	now := epoch + 10*second
	// Entity 5 is not counted, nor its events; the others' expired older
	// events are, until cleanup.
	if s := sm.Stats(now); s.EntityCount != 4 || s.EventCount != 8 {
		t.Fatalf("stats before cleanup: %+v", s)
	}
	for _, want := range []struct{ scanned, removed uint32 }{{2, 2}, {2, 2}, {1, 2}, {0, 0}} {
		cl, err := sm.CleanupExpired(now, &core.CleanupRequest{MaxEntries: 2})
		if err != nil || cl.Scanned != want.scanned || cl.Removed != want.removed {
			t.Fatalf("cleanup: %+v %v, want %+v", cl, err, want)
		}
		if err := sm.checkInvariants(); err != nil {
			t.Fatal(err)
		}
	}
	if r, _ := sm.GetLatest(now, testID(5)); r.Found {
		t.Fatal("entity 5 is still there")
	}
	if s := sm.Stats(now); s.EntityCount != 4 || s.EventCount != 4 {
		t.Fatalf("stats: %+v", s)
	}
}

// A long history (blocks) loses its expired events to cleanup while a
// frozen view is out: the view's snapshot is the state as it was, and a
// restored state has the same older-due index.
func TestLongHistoryExpiresWhileFrozen(t *testing.T) {
	sm := New()
	const n = 3*histBlockLen + 5
	base := epoch - 1000*second
	// Events a second apart, each with a TTL of 1,000 s (event i expires
	// at epoch + i s) but every seventh, which has none: the expired ones
	// are not one prefix.
	for i := range n {
		ttl := uint32(1000)
		if i%7 == 0 {
			ttl = 0
		}
		put(t, sm, false, epoch, 1, base+uint64(i)*second, ttl)
	}
	put(t, sm, false, epoch, 1, 0, 0)
	var was bytes.Buffer
	if err := sm.WriteSnapshot(&was); err != nil {
		t.Fatal(err)
	}
	checkpoint := sm.sync.(*MemStore).Clone()
	view := sm.Freeze()

	// At epoch+300s the first 301 events have expired, but for the
	// sevenths among them; the first with a TTL was due for removal at
	// epoch+1s+62.5s.
	now := epoch + 300*second
	gone := 0
	for i := range 301 {
		if i%7 != 0 {
			gone++
		}
	}
	cl, err := sm.CleanupExpired(now, &core.CleanupRequest{})
	if err != nil || cl.Scanned != 1 || cl.Removed != uint32(gone) {
		t.Fatalf("cleanup: %+v %v, want 1 scanned, %d removed", cl, err, gone)
	}
	if err := sm.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	if got := len(historyTS(t, sm, now, 1)); got != n+1-gone || sm.Stats(now).EventCount != uint64(got) {
		t.Fatalf("history of %d events, stats %d, want %d", got, sm.Stats(now).EventCount, n+1-gone)
	}
	var frozen bytes.Buffer
	if err := view.WriteSnapshot(&frozen); err != nil {
		t.Fatal(err)
	}
	sm.Release(view)
	if !bytes.Equal(frozen.Bytes(), was.Bytes()) {
		t.Fatal("the frozen view changed under cleanup")
	}

	restored, err := ReadSnapshot(bytes.NewReader(was.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	restored.Attach(checkpoint)
	if err := restored.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	rc, err := restored.CleanupExpired(now, &core.CleanupRequest{})
	if err != nil || rc != cl || restored.Digest() != sm.Digest() {
		t.Fatalf("restored: cleanup %+v %v, digests equal %v", rc, err, restored.Digest() == sm.Digest())
	}

	// Everything with a TTL goes at last; the sevenths stay.
	later := epoch + 1000*second
	cl, err = sm.CleanupExpired(later, &core.CleanupRequest{})
	if err != nil || cl.Removed != uint32(n-gone-(n+6)/7) {
		t.Fatalf("second cleanup: %+v %v", cl, err)
	}
	if err := sm.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	if got := len(historyTS(t, sm, later, 1)); got != (n+6)/7+1 {
		t.Fatalf("history of %d events, want %d", got, (n+6)/7+1)
	}
}
