package history

import (
	"errors"
	"math"

	"github.com/cockroachdb/pebble/v2"

	"github.com/geoevent/geoevent/core"
)

// View is a consistent read-only view of the store as of the Apply before
// it was taken (a pebble snapshot). Its methods may run on any goroutine
// while Apply goes on, but not concurrently with each other's Close.
type View struct {
	snap *pebble.Snapshot
}

// View is a consistent read-only view of everything applied so far (a
// pebble snapshot); safe to use from another goroutine while Apply goes
// on; Close releases it. An open View keeps the data it sees on disk, the
// data of an erased entity included.
func (s *Store) View() *View {
	return &View{snap: s.db.NewSnapshot()}
}

// Close releases the view.
func (v *View) Close() {
	if v.snap != nil {
		_ = v.snap.Close()
		v.snap = nil
	}
}

var errRangeLimit = errors.New("history: range limit must be positive")

// iterate calls f with each event of id with since <= timestamp <= until,
// oldest first, until f returns false.
func (v *View) iterate(id core.Uint128, since, until uint64, f func(*core.GeoEvent) bool) error {
	if since > until {
		return nil
	}
	lo := appendKey(nil, id, since)
	var hi []byte
	if until == math.MaxUint64 {
		_, hi = entityBounds(id)
	} else {
		hi = appendKey(nil, id, until+1)
	}
	it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return wrapErr(err, id)
	}
	for ok := it.First(); ok; ok = it.Next() {
		val, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return wrapErr(err, id)
		}
		e, err := decodeEvent(it.Key(), val)
		if err != nil {
			_ = it.Close()
			return wrapErr(err, id)
		}
		if !f(&e) {
			break
		}
	}
	// Close reports an error the iteration met (a block that failed its
	// checksum ends the iteration as if the range ended).
	return wrapErr(it.Close(), id)
}

// Range appends to dst the events r asks for (see core.HistoryRange) and
// says whether more events of the range, not expired at r.ExpiredAt, follow
// the last one appended. On an error it returns dst's appended events
// undefined and the error; a damaged block gives a *CorruptionError.
func (v *View) Range(r core.HistoryRange, dst []core.GeoEvent) (events []core.GeoEvent, more bool, err error) {
	if r.Limit <= 0 {
		return dst, false, errRangeLimit
	}
	n := 0
	err = v.iterate(r.EntityID, r.SinceNS, r.UntilNS, func(e *core.GeoEvent) bool {
		if r.ExpiredAt != 0 && expiredAt(e, r.ExpiredAt) {
			return true
		}
		if n == r.Limit {
			more = true
			return false
		}
		dst = append(dst, *e)
		n++
		return true
	})
	if err != nil {
		return dst[:len(dst)-n], false, err
	}
	return dst, more, nil
}

// Get returns the event of id at ts.
func (v *View) Get(id core.Uint128, ts uint64) (ev core.GeoEvent, found bool, err error) {
	val, closer, err := v.snap.Get(appendKey(nil, id, ts))
	if errors.Is(err, pebble.ErrNotFound) {
		return ev, false, nil
	}
	if err != nil {
		return ev, false, wrapErr(err, id)
	}
	defer closer.Close()
	ev.EntityID, ev.TimestampNS = id, ts
	if err := decodeValue(val, &ev); err != nil {
		return core.GeoEvent{}, false, wrapErr(err, id)
	}
	return ev, true, nil
}

// Expired counts the events of id that have expired at t (TTL != 0 and
// ExpiresAtNS() <= t), and returns the soonest expiry among the others
// that have a TTL (0: none).
func (v *View) Expired(id core.Uint128, t uint64) (n int, soonest uint64, err error) {
	err = v.iterate(id, 0, math.MaxUint64, func(e *core.GeoEvent) bool {
		if e.TTLSeconds == 0 {
			return true
		}
		if x := e.ExpiresAtNS(); x <= t {
			n++
		} else if soonest == 0 || x < soonest {
			soonest = x
		}
		return true
	})
	if err != nil {
		return 0, 0, err
	}
	return n, soonest, nil
}
