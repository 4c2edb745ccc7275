package statemachine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/geoevent/geoevent/core"
	"pgregory.net/rapid"
)

// feedModel is the feed as a plain slice of notifications, with the
// sequence and retention rules of feed.go written out one notification
// at a time.
type feedModel struct {
	notes                      []core.Notification
	index, opNS, last, dropped uint64
	retainNS                   uint64
	retainCount                int
}

func (m *feedModel) push(ev core.GeoEvent, prev core.Coordinate, hasPrev bool, notes []fenceNote) {
	for _, x := range notes {
		m.last = max(m.last+1, m.index<<32+1)
		m.notes = append(m.notes, core.Notification{Seq: m.last, Type: x.t, Fence: x.f.def.Name, Event: ev, Prev: prev, HasPrev: hasPrev, OpNS: m.opNS})
		m.trim()
	}
}

func (m *feedModel) trim() {
	for len(m.notes) > 0 && (len(m.notes) > m.retainCount || m.opNS >= m.retainNS && m.notes[0].OpNS < m.opNS-m.retainNS) {
		m.dropped = m.notes[0].Seq
		m.notes = m.notes[1:]
	}
}

// readAll reads sm's whole feed through ReadFeed, page by page.
func readAll(t *rapid.T, sm *StateMachine) []core.Notification {
	out := make([]core.Notification, 0, sm.watch.feed.n)
	after := sm.watch.feed.dropped
	for {
		p, err := sm.ReadFeed(0, &core.FeedRequest{After: after, Limit: core.MaxFeedLimit})
		if err != nil {
			t.Fatalf("read after %d: %v", after, err)
		}
		out = append(out, p.Notifications...)
		if !p.HasMore {
			return out
		}
		after = p.Next
	}
}

// checkFeed fails unless sm's feed reads back as want, through ReadFeed
// and by position, and states the same extent.
func checkFeed(t *rapid.T, what string, sm *StateMachine, want []core.Notification, last, dropped uint64) {
	f := &sm.watch.feed
	if f.lastSeq != last || f.dropped != dropped || f.n != len(want) {
		t.Fatalf("%s: last %d dropped %d n %d, want %d %d %d", what, f.lastSeq, f.dropped, f.n, last, dropped, len(want))
	}
	got := readAll(t, sm)
	if len(got) != len(want) {
		t.Fatalf("%s: read %d notifications, want %d", what, len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] || f.at(i) != want[i] || f.seq(i) != want[i].Seq {
			t.Fatalf("%s: notification %d is %+v, want %+v", what, i, got[i], want[i])
		}
	}
}

// TestFeedStoreModel: a feed pushed with the notifications of many events
// (fence names reused, their fences long gone), trimmed by count and by
// age, frozen and snapshotted, reads back as the plain slice of its model
// does, and so do its frozen views and the feeds read from its snapshots.
func TestFeedStoreModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sm := New()
		m := &feedModel{retainNS: uint64(rapid.IntRange(60, 600).Draw(t, "age_s")) * 1e9,
			retainCount: rapid.IntRange(core.MinFeedRetentionCount, 2*core.MinFeedRetentionCount).Draw(t, "count")}
		sm.setFeedRetention(m.retainNS, m.retainCount)
		fences := make([]*fence, rapid.IntRange(1, 100).Draw(t, "names"))
		for i := range fences {
			fences[i] = &fence{def: core.Fence{Name: fmt.Sprintf("f%d", i)}}
		}
		type frozen struct {
			f             *Frozen
			want          []core.Notification
			last, dropped uint64
		}
		var views []frozen
		var (
			last    *core.GeoEvent // the last event pushed
			prev    core.Coordinate
			hasPrev bool
		)
		t.Repeat(map[string]func(*rapid.T){
			"entry": func(t *rapid.T) {
				m.index += rapid.Uint64Range(0, 2).Draw(t, "step")
				m.opNS += rapid.Uint64Range(0, 300e9).Draw(t, "dt")
				sm.BeginEntry(m.index, m.opNS)
			},
			"events": func(t *rapid.T) {
				// The events come from a seed: thousands of them, to turn
				// chunks over, at a small cost in draws.
				r := rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 0))
				// A few names at a time, so that names leave the feed as
				// it turns over and others take their numbers.
				lo, width := rapid.IntRange(0, len(fences)-1).Draw(t, "lo"), rapid.IntRange(1, 6).Draw(t, "width")
				for range rapid.IntRange(1, 800).Draw(t, "events") {
					if r.IntN(4) > 0 || last == nil { // else the last event again, as after an entry of the same time
						evs := []core.GeoEvent{{EntityID: core.Uint128{Lo: 1 + r.Uint64N(50)}, TimestampNS: 1 + r.Uint64N(1e18),
							LatNano: r.Int64N(180e9) - 90e9, LonNano: r.Int64N(360e9) - 180e9,
							UserData: core.Uint128{Lo: r.Uint64N(3)}, TTLSeconds: r.Uint32N(3)}}
						AssignCells(evs)
						last = &evs[0]
						hasPrev = r.IntN(2) == 0
						prev = core.Coordinate{}
						if hasPrev {
							prev = core.Coordinate{LatNano: r.Int64N(180e9) - 90e9, LonNano: r.Int64N(360e9) - 180e9}
						}
					}
					notes := make([]fenceNote, r.IntN(5))
					for i := range notes {
						notes[i] = fenceNote{fences[(lo+r.IntN(width))%len(fences)], core.NotifyType(1 + r.IntN(3))}
					}
					m.push(*last, prev, hasPrev, notes)
					sm.watch.feed.pushEvent(last, prev, hasPrev, notes)
				}
			},
			"retention": func(t *rapid.T) {
				m.retainNS = uint64(rapid.IntRange(60, 600).Draw(t, "age_s")) * 1e9
				m.retainCount = rapid.IntRange(core.MinFeedRetentionCount, 2*core.MinFeedRetentionCount).Draw(t, "count")
				m.trim()
				if _, err := sm.SetFeedRetention(0, &core.FeedRetention{MaxAgeS: m.retainNS / 1e9, MaxNotifications: uint64(m.retainCount)}); err != nil {
					t.Fatal(err)
				}
			},
			"freeze": func(t *rapid.T) {
				views = append(views, frozen{sm.Freeze(), slices.Clone(m.notes), m.last, m.dropped})
			},
			"snapshot": func(t *rapid.T) {
				cp, b := restored(t, sm)
				checkFeed(t, "read from a snapshot", cp, m.notes, m.last, m.dropped)
				var again bytes.Buffer
				if err := cp.WriteSnapshot(&again); err != nil || !bytes.Equal(again.Bytes(), b) {
					t.Fatalf("a snapshot read and written again differs (%v)", err)
				}
			},
			"read": func(t *rapid.T) {
				checkFeed(t, "live", sm, m.notes, m.last, m.dropped)
			},
		})
		checkFeed(t, "live", sm, m.notes, m.last, m.dropped)
		for _, v := range views {
			cp, err := ReadSnapshot(bytes.NewReader(v.f.AppendSnapshot(nil)))
			if err != nil {
				t.Fatal(err)
			}
			sm.Release(v.f)
			checkFeed(t, "frozen", cp, v.want, v.last, v.dropped)
		}
	})
}

// TestSnapshotFeedCount: a snapshot that claims more notifications than
// any retention keeps is corruption, found before they are read (the
// feed's numbers of groups and names are sized for that bound).
func TestSnapshotFeedCount(t *testing.T) {
	sm := New()
	const index = 0x1122334455667788
	sm.BeginEntry(index, 1)
	var b bytes.Buffer
	if err := sm.WriteSnapshot(&b); err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(b.Bytes())
	at := bytes.Index(bad, binary.LittleEndian.AppendUint64(nil, index))
	if at < 0 {
		t.Fatal("no feed section")
	}
	at += 4*8 + 4 // index, time, last, dropped, no fences: the count
	if binary.LittleEndian.Uint64(bad[at:]) != 0 {
		t.Fatal("the count is not where the format says")
	}
	binary.LittleEndian.PutUint64(bad[at:], core.MaxFeedRetentionCount+1)
	body := bad[:len(bad)-4]
	binary.LittleEndian.PutUint32(bad[len(body):], crc32.Checksum(body, castagnoli))
	if _, err := ReadSnapshot(bytes.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "notifications exceed") {
		t.Fatalf("a snapshot of %d notifications: %v", core.MaxFeedRetentionCount+1, err)
	}
}

// TestFrozenFeedConcurrent: a frozen view's snapshot, written on another
// goroutine while the feed turns over and fence names leave it and
// others take their numbers, is the state at Freeze (run it with -race).
func TestFrozenFeedConcurrent(t *testing.T) {
	sm := New()
	sm.setFeedRetention(0, 2*feedChunkLen)
	fences := make([]*fence, 64)
	for i := range fences {
		fences[i] = &fence{def: core.Fence{Name: fmt.Sprintf("f%d", i)}}
	}
	entry := 0
	push := func(events int) {
		for range events {
			entry++
			sm.BeginEntry(uint64(entry), uint64(entry))
			ev := core.GeoEvent{EntityID: core.Uint128{Lo: uint64(entry)}, TimestampNS: uint64(entry)}
			// Eight names at a time, moving on every 1,000 events.
			lo := entry / 1000 * 8
			notes := []fenceNote{{fences[(lo+entry%8)%len(fences)], core.NotifyEnter}, {fences[(lo+(entry+3)%8)%len(fences)], core.NotifyExit}}
			sm.watch.feed.pushEvent(&ev, core.Coordinate{LatNano: 1, LonNano: 2}, true, notes)
		}
	}
	push(5000)
	var want bytes.Buffer
	if err := sm.WriteSnapshot(&want); err != nil {
		t.Fatal(err)
	}
	f := sm.Freeze()
	got := make(chan []byte)
	go func() { got <- f.AppendSnapshot(nil) }()
	push(20000)
	b := <-got
	sm.Release(f)
	if !bytes.Equal(b, want.Bytes()) {
		t.Fatal("the frozen snapshot differs from the state at Freeze")
	}
}
