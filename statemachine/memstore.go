package statemachine

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"maps"
	"slices"

	"github.com/geoevent/geoevent/core"
)

// MemStore is a history store in memory: a map of each entity's events by
// timestamp, answering every read by looking at all of them. It is simple
// and plainly what core/history.go says a store does: the reference that
// tests hold the state machine and the on-disk store against, and the
// store of harnesses that keep history in memory. It is a SyncStore.
type MemStore struct {
	events map[core.Uint128]map[uint64]core.GeoEvent
}

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore { return &MemStore{events: map[core.Uint128]map[uint64]core.GeoEvent{}} }

// Clone returns a copy of s, as a checkpoint of the store would be.
func (s *MemStore) Clone() *MemStore {
	c := NewMemStore()
	for id, m := range s.events {
		c.events[id] = maps.Clone(m)
	}
	return c
}

func (s *MemStore) Apply(writes []core.HistoryWrite) {
	for _, w := range writes {
		switch w.Kind {
		case core.HistoryPut:
			m := s.events[w.EntityID]
			if m == nil {
				m = map[uint64]core.GeoEvent{}
				s.events[w.EntityID] = m
			}
			m[w.Event.TimestampNS] = w.Event
		case core.HistoryDeleteEntity:
			delete(s.events, w.EntityID)
		case core.HistoryDeleteExpired:
			for ts, ev := range s.events[w.EntityID] {
				if core.HistoryExpiredAt(&ev, w.TS) {
					delete(s.events[w.EntityID], ts)
				}
			}
		}
	}
}

// Events returns the entity's events in ascending timestamp order.
func (s *MemStore) Events(id core.Uint128) []core.GeoEvent {
	out := slices.Collect(maps.Values(s.events[id]))
	slices.SortFunc(out, func(a, b core.GeoEvent) int { return cmp.Compare(a.TimestampNS, b.TimestampNS) })
	return out
}

// Digest is a SHA-256 over every stored event in (entity id, timestamp)
// order, each as its 128-byte record.
func (s *MemStore) Digest() [32]byte {
	ids := slices.SortedFunc(maps.Keys(s.events), core.Uint128.Compare)
	h := sha256.New()
	var rec [core.RecordSize]byte
	for _, id := range ids {
		for _, ev := range s.Events(id) {
			ev.PutRecord(rec[:])
			h.Write(rec[:])
		}
	}
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(ids)))
	h.Write(n[:])
	var d [32]byte
	h.Sum(d[:0])
	return d
}

// Answer answers reads (core.AnswerHistoryReads).
func (s *MemStore) Answer(reads []core.HistoryRead) []core.HistoryAnswer {
	return core.AnswerHistoryReads(s, reads)
}

// Get returns the event of id at ts (core.HistoryReader).
func (s *MemStore) Get(id core.Uint128, ts uint64) (core.GeoEvent, bool, error) {
	ev, ok := s.events[id][ts]
	return ev, ok, nil
}

// Range answers r, appending to dst (core.HistoryReader).
func (s *MemStore) Range(r core.HistoryRange, dst []core.GeoEvent) ([]core.GeoEvent, bool, error) {
	n := len(dst)
	for _, ev := range s.Events(r.EntityID) {
		if ev.TimestampNS < r.SinceNS || ev.TimestampNS > r.UntilNS {
			continue
		}
		if r.ExpiredAt != 0 && core.HistoryExpiredAt(&ev, r.ExpiredAt) {
			continue
		}
		if len(dst)-n == r.Limit {
			return dst, true, nil
		}
		dst = append(dst, ev)
	}
	return dst, false, nil
}

// AppendSection appends, after state, the store's events as a history
// section (core.AppendHistorySection): the history stream of the tests'
// IO, which send a follower a MemStore's events this way.
func (s *MemStore) AppendSection(state []byte) []byte {
	b, _ := core.AppendHistorySection(state, s, slices.Collect(maps.Keys(s.events))) // a MemStore's reads do not fail
	return b
}

// Install makes s hold exactly events (a history section's: see
// core.SplitHistory).
func (s *MemStore) Install(events []core.GeoEvent) {
	clear(s.events)
	w := make([]core.HistoryWrite, len(events))
	for i := range events {
		w[i] = core.HistoryWrite{Kind: core.HistoryPut, EntityID: events[i].EntityID, TS: events[i].TimestampNS, Event: events[i]}
	}
	s.Apply(w)
}
