package statemachine

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/geoevent/geoevent/core"
)

// retentionFeed is a state machine with a bbox fence and an entity that
// moves in and out of it, one transition an entry, an entry a second.
type retentionFeed struct {
	t     *testing.T
	sm    *StateMachine
	entry int
	in    bool // the entity is in the fence
}

func newRetentionFeed(t *testing.T) *retentionFeed {
	sm := New()
	if _, err := sm.PutFence(0, &core.Fence{Name: "box", Shape: core.FenceBBox,
		Min: core.Coordinate{LatNano: 0, LonNano: 0}, Max: core.Coordinate{LatNano: 1_000_000_000, LonNano: 1_000_000_000}}); err != nil {
		t.Fatal(err)
	}
	return &retentionFeed{t: t, sm: sm}
}

func (r *retentionFeed) ts() uint64 { return 1_700_000_000_000_000_000 + uint64(r.entry)*1_000_000_000 }

// moves applies n entries, each one transition (enter or exit).
func (r *retentionFeed) moves(n int) {
	for range n {
		r.entry++
		r.sm.BeginEntry(uint64(r.entry), r.ts())
		r.in = !r.in
		lat := int64(2_000_000_000)
		if r.in {
			lat = 500_000_000
		}
		evs := []core.GeoEvent{{EntityID: core.Uint128{Lo: 1}, LatNano: lat, LonNano: 500_000_000}}
		AssignCells(evs)
		if _, err := r.sm.Upsert(r.ts(), &core.InsertRequest{Events: evs}); err != nil {
			r.t.Fatal(err)
		}
	}
}

// set applies set_feed_retention as the next entry.
func (r *retentionFeed) set(ageS, count uint64) (core.FeedRetentionReply, error) {
	r.entry++
	r.sm.BeginEntry(uint64(r.entry), r.ts())
	return r.sm.SetFeedRetention(r.ts(), &core.FeedRetention{MaxAgeS: ageS, MaxNotifications: count})
}

func (r *retentionFeed) extent() (start uint64, n int) {
	return r.sm.watch.feed.at(0).Seq, r.sm.watch.feed.n
}

// TestSetFeedRetention: retention is the defaults until set; a change
// trims at once, by count and by age, and later entries keep to it; a
// rejected change changes nothing.
func TestSetFeedRetention(t *testing.T) {
	r := newRetentionFeed(t)
	got, _ := r.sm.GetFeedRetention(0, nil)
	if got.MaxAgeS != 86400 || got.MaxNotifications != 10_000_000 || got.Start != 0 || got.Last != 0 {
		t.Fatalf("defaults: %+v", got)
	}
	r.moves(1500) // 1,500 notifications over 1,500 s
	before := r.sm.Digest()
	for _, bad := range [][2]uint64{{59, 1000}, {60, 999}, {365*86400 + 1, 1000}, {60, 100_000_001}, {}} {
		_, err := r.sm.SetFeedRetention(r.ts(), &core.FeedRetention{MaxAgeS: bad[0], MaxNotifications: bad[1]})
		if e, ok := err.(*core.Error); !ok || e.Code != core.InvalidArgument.Code {
			t.Fatalf("%+v: %v", bad, err)
		}
	}
	if r.sm.Digest() != before {
		t.Fatal("a rejected retention changed the state")
	}

	// By count: the newest 1,000 stay, the feed's start moves on, and a
	// read from before it is FEED_TRIMMED.
	rep, err := r.set(3600, 1000)
	if err != nil {
		t.Fatal(err)
	}
	start, n := r.extent()
	if n != 1000 || start != 501<<32+1 || rep.Start != start || rep.Last != 1500<<32+1 || rep.MaxAgeS != 3600 || rep.MaxNotifications != 1000 {
		t.Fatalf("after count 1000: start %d n %d reply %+v", start, n, rep)
	}
	if _, err := r.sm.ReadFeed(0, &core.FeedRequest{After: 400 << 32}); err == nil {
		t.Fatal("a read from before the start succeeded")
	}
	r.moves(10)
	if start, n = r.extent(); n != 1000 || start != 511<<32+1 {
		t.Fatalf("10 entries later: start %d n %d", start, n)
	}

	// By age: a minute keeps the notifications of the last 60 s of
	// operation time (the set is entry 1512 at second 1512).
	if _, err := r.set(60, 1000); err != nil {
		t.Fatal(err)
	}
	if start, n = r.extent(); n != 59 || start != 1452<<32+1 {
		t.Fatalf("after age 60 s: start %d n %d", start, n)
	}
	r.entry += 100 // 100 s with no entries, then one transition
	r.moves(1)
	if start, n = r.extent(); n != 1 || start != uint64(r.entry)<<32+1 {
		t.Fatalf("100 s later: start %d n %d", start, n)
	}
	if got, _ := r.sm.GetFeedRetention(0, nil); got.MaxAgeS != 60 || got.Start != start || got.Last != start {
		t.Fatalf("get: %+v", got)
	}
}

// TestFeedRetentionSnapshot: retention is in snapshots and the digest; a
// state that never set it has no retention section (its snapshots are
// those of before it) and reads back with the defaults.
func TestFeedRetentionSnapshot(t *testing.T) {
	r := newRetentionFeed(t)
	r.moves(20)
	var plain bytes.Buffer
	if err := r.sm.WriteSnapshot(&plain); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(plain.Bytes(), []byte(retentionMagic)) {
		t.Fatal("a state that never set retention wrote the section")
	}
	d0 := r.sm.Digest()
	if _, err := r.set(120, 5000); err != nil {
		t.Fatal(err)
	}
	if r.sm.Digest() == d0 {
		t.Fatal("retention is not in the digest")
	}
	cp, b := restored(t, r.sm)
	if cp.Digest() != r.sm.Digest() {
		t.Fatal("the restored state's digest differs")
	}
	if got, _ := cp.GetFeedRetention(0, nil); got.MaxAgeS != 120 || got.MaxNotifications != 5000 {
		t.Fatalf("restored retention %+v", got)
	}
	// The restored state trims as the original: 200 s on, by age.
	r.entry += 200
	r.moves(1)
	cpr := &retentionFeed{t: t, sm: cp, entry: r.entry - 1, in: !r.in}
	cpr.moves(1)
	if cp.Digest() != r.sm.Digest() {
		t.Fatal("the restored state trimmed differently")
	}
	old, err := ReadSnapshot(bytes.NewReader(plain.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := old.GetFeedRetention(0, nil); got.MaxAgeS != 86400 || got.MaxNotifications != 10_000_000 {
		t.Fatalf("a snapshot without the section: %+v", got)
	}
	// Damaged bounds are corruption, not a state.
	bad := bytes.Clone(b)
	at := bytes.LastIndex(bad, []byte(retentionMagic))
	copy(bad[at+4+8:], []byte{1, 0, 0, 0, 0, 0, 0, 0}) // a count of 1
	body := bad[:len(bad)-4]
	binary.LittleEndian.PutUint32(bad[len(body):], crc32.Checksum(body, castagnoli))
	if _, err := ReadSnapshot(bytes.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "retention") {
		t.Fatalf("a snapshot with a retention of 1 notification: %v", err)
	}
}

// TestFeedEnd: After FeedEnd reads from the newest notification made,
// and every page says what that is.
func TestFeedEnd(t *testing.T) {
	r := newRetentionFeed(t)
	p, err := r.sm.ReadFeed(0, &core.FeedRequest{After: core.FeedEnd})
	if err != nil || p.Next != 0 || p.Last != 0 || len(p.Notifications) != 0 {
		t.Fatalf("empty feed: %+v %v", p, err)
	}
	r.moves(3)
	p, err = r.sm.ReadFeed(0, &core.FeedRequest{After: core.FeedEnd})
	if err != nil || p.Next != 3<<32+1 || p.Last != 3<<32+1 || len(p.Notifications) != 0 || p.HasMore {
		t.Fatalf("at the end: %+v %v", p, err)
	}
	r.moves(1)
	p, err = r.sm.ReadFeed(0, &core.FeedRequest{After: p.Next})
	if err != nil || len(p.Notifications) != 1 || p.Notifications[0].Seq != 4<<32+1 || p.Last != 4<<32+1 {
		t.Fatalf("after the end: %+v %v", p, err)
	}
}

// retainedSnapshot is a snapshot with hooks and a retention section, a
// seed of FuzzReadSnapshot.
func retainedSnapshot(t testing.TB) []byte {
	sm := hookedState(t)
	if _, err := sm.SetFeedRetention(epoch, &core.FeedRetention{MaxAgeS: 600, MaxNotifications: 2000}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := sm.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
