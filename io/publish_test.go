package io

import (
	"testing"

	"github.com/geoevent/geoevent/core"
)

// TestPositionRing: the ring keeps writes only while someone listens,
// hands each listener every batch once in order, and tells one that fell
// more than the ring behind; FeedNews wakes its waiters once per change.
func TestPositionRing(t *testing.T) {
	s := &Server{}
	put := func(n int) []core.HistoryWrite { return make([]core.HistoryWrite, n) }
	s.positions.offer(1, put(3)) // nobody listens
	cur := s.PositionsListen()
	if b, next, ch, behind := s.PositionsAfter(cur, nil); len(b) != 0 || next != cur || ch == nil || behind {
		t.Fatalf("kept writes with no listener: %d batches", len(b))
	}
	_, _, ch, _ := s.PositionsAfter(cur, nil)
	s.positions.offer(2, put(2))
	select {
	case <-ch:
	default:
		t.Fatal("a waiting listener was not woken")
	}
	s.positions.offer(3, put(1))
	b, next, ch, behind := s.PositionsAfter(cur, nil)
	if len(b) != 2 || b[0].Index != 2 || b[1].Index != 3 || len(b[0].Writes) != 2 || ch != nil || behind {
		t.Fatalf("batches %+v", b)
	}
	// A second listener starts at the next batch; the first falls behind
	// once more than the ring's writes come after its cursor.
	cur2 := s.PositionsListen()
	for i := range positionRingWrites/1000 + 1 {
		s.positions.offer(uint64(4+i), put(1000))
	}
	if _, _, _, behind := s.PositionsAfter(next, nil); !behind {
		t.Fatal("a listener more than the ring behind was not told")
	}
	if _, _, _, behind := s.PositionsAfter(cur2, nil); !behind {
		t.Fatal("the second listener too is behind")
	}
	if s.positions.writes > positionRingWrites || s.positions.next-s.positions.first > positionRingBatches {
		t.Fatalf("the ring holds %d writes in %d batches", s.positions.writes, s.positions.next-s.positions.first)
	}
	s.PositionsUnlisten()
	s.PositionsUnlisten()
	s.positions.offer(1000, put(1))
	if s.positions.writes != 0 || s.positions.first != s.positions.next {
		t.Fatal("the ring kept writes after the last listener left")
	}

	v, ch := s.FeedNews()
	if v != 0 {
		t.Fatalf("news %d", v)
	}
	s.feedNews.set(7)
	select {
	case <-ch:
	default:
		t.Fatal("FeedNews did not wake its waiter")
	}
	if v, _ := s.FeedNews(); v != 7 {
		t.Fatalf("news %d, want 7", v)
	}
}
