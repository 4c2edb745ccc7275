package statemachine

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"

	"github.com/geoevent/geoevent/core"
)

// A frozen view writes the snapshot the state had at Freeze, whatever the
// state machine does afterwards; views may overlap and be released in any
// order.
func TestFrozenSnapshotIgnoresLaterWrites(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		type view struct {
			f    *Frozen
			want []byte
		}
		check := func(v view) {
			// After a prefix, as the replica appends it: the checksum
			// covers the snapshot alone.
			got := v.f.AppendSnapshot([]byte("prefix"))
			if string(got[:6]) != "prefix" || !bytes.Equal(got[6:], v.want) {
				t.Fatalf("a frozen view wrote %d bytes unlike the %d of the state it froze", len(got)-6, len(v.want))
			}
			var w bytes.Buffer
			if err := v.f.WriteSnapshot(&w); err != nil || !bytes.Equal(w.Bytes(), v.want) {
				t.Fatalf("a frozen view streamed %d bytes (%v) unlike the %d of the state it froze", w.Len(), err, len(v.want))
			}
		}
		sm := New()
		var views []view
		for _, o := range genOps(t) {
			o.apply(sm)
			if rapid.IntRange(0, 3).Draw(t, "freeze") == 0 {
				var want bytes.Buffer
				if err := sm.WriteSnapshot(&want); err != nil {
					t.Fatal(err)
				}
				views = append(views, view{sm.Freeze(), want.Bytes()})
			}
			if len(views) > 0 && rapid.IntRange(0, 3).Draw(t, "release") == 0 {
				k := rapid.IntRange(0, len(views)-1).Draw(t, "which")
				check(views[k])
				sm.Release(views[k].f)
				sm.Release(views[k].f) // a second release does nothing
				views = append(views[:k], views[k+1:]...)
			}
		}
		for _, v := range views {
			check(v)
		}
		// The live state is intact: its snapshot restores to its digest.
		var buf bytes.Buffer
		if err := sm.WriteSnapshot(&buf); err != nil {
			t.Fatal(err)
		}
		back, err := ReadSnapshot(&buf)
		if err != nil {
			t.Fatal(err)
		}
		if back.Digest() != sm.Digest() {
			t.Fatal("the live state's snapshot does not restore to its digest")
		}
	})
}

// The frozen view is written on another goroutine while the state machine
// moves, extends, deletes and re-creates entities across several chunks.
// Under the race detector this also shows that the two share nothing that
// is written.
func TestFrozenSnapshotBesideWrites(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	sm := New()
	now := uint64(epoch)
	const n = 5 * chunkSize
	// write applies evs in batches and returns each event's timestamp.
	write := func(upsert bool, evs []core.GeoEvent) []uint64 {
		var ts []uint64
		for len(evs) > 0 {
			k := min(len(evs), 5000)
			now += 1e6
			req := &core.InsertRequest{Events: evs[:k]}
			rep, err := sm.Insert(now, req)
			if upsert {
				rep, err = sm.Upsert(now, req)
			}
			if err != nil || !rep.Committed {
				t.Fatalf("write: %v %+v", err, rep.Results[0])
			}
			for _, res := range rep.Results {
				ts = append(ts, res.TimestampNS)
			}
			evs = evs[k:]
		}
		return ts
	}
	first := write(false, benchEvents(r, 1, n))
	for range 3 {
		write(false, benchEvents(r, 1, n)) // histories of three (their arrays can take a fourth)
	}
	var want bytes.Buffer
	if err := sm.WriteSnapshot(&want); err != nil {
		t.Fatal(err)
	}
	f := sm.Freeze()
	done := make(chan []byte)
	go func() {
		done <- f.AppendSnapshot(nil)
	}()
	// Older events replaced, events inserted within the histories, new
	// latest events, latest events replaced.
	evs := benchEvents(r, 1, n)
	for i := range evs {
		evs[i].TimestampNS = first[i]
	}
	write(true, evs)
	evs = benchEvents(r, 1, n)
	for i := range evs {
		evs[i].TimestampNS = first[i] + 1
	}
	write(false, evs)
	write(false, benchEvents(r, 1, n))
	write(true, benchEvents(r, 1, n))
	ids := make([]core.Uint128, 0, 1000)
	for i := 1; i <= 1000; i++ {
		ids = append(ids, core.Uint128{Hi: 1, Lo: uint64(i * 7)})
	}
	now += 1e6
	if _, err := sm.DeleteEntities(now, &core.DeleteRequest{EntityIDs: ids}); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.TTLSet(now, &core.TTLSetRequest{EntityID: core.Uint128{Hi: 1, Lo: 3}, TTLSeconds: 60}); err != nil {
		t.Fatal(err)
	}
	if got := <-done; !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("the frozen view wrote %d bytes unlike the %d of the state it froze", len(got), want.Len())
	}
	sm.Release(f)
}
