package statemachine

import "github.com/geoevent/geoevent/core"

// idIndex maps entity ids to entity slots: an open-addressing hash table
// with linear probing and backward-shift deletion (no tombstones).
//
// Invariants: capacity is a power of two; at most 3/4 of it is used; the
// zero id marks an empty entry (no entity has the zero id); every stored id
// lies in the run of non-empty entries that starts at its home position
// (hash & mask), so a lookup stops at the first empty entry.
//
// It replaces a Go map because a lookup here usually costs one cache miss
// (the entry holds id and slot together), where the map costs two; the
// table's order never reaches a reply or a snapshot.
type idIndex struct {
	entries []idEntry
	mask    uint64
	n       int
}

type idEntry struct {
	id   core.Uint128
	slot uint32
}

const idIndexMinCap = 1024

func newIDIndex() idIndex {
	return idIndex{entries: make([]idEntry, idIndexMinCap), mask: idIndexMinCap - 1}
}

// home is where id's probe starts: a multiplicative mix of both halves, so
// sequential ids spread evenly.
func (x *idIndex) home(id core.Uint128) uint64 {
	h := (id.Lo ^ id.Hi*0x9e3779b97f4a7c15) * 0xbf58476d1ce4e5b9
	return (h ^ h>>31) & x.mask
}

func (x *idIndex) len() int { return x.n }

func (x *idIndex) get(id core.Uint128) (uint32, bool) {
	for i := x.home(id); ; i = (i + 1) & x.mask {
		e := &x.entries[i]
		if e.id == id {
			return e.slot, true
		}
		if e.id.IsZero() {
			return 0, false
		}
	}
}

// put stores id -> slot, replacing an existing mapping.
func (x *idIndex) put(id core.Uint128, slot uint32) {
	if (x.n+1)*4 > len(x.entries)*3 {
		x.grow()
	}
	for i := x.home(id); ; i = (i + 1) & x.mask {
		e := &x.entries[i]
		if e.id == id {
			e.slot = slot
			return
		}
		if e.id.IsZero() {
			*e = idEntry{id, slot}
			x.n++
			return
		}
	}
}

// remove deletes id, shifting later entries of its run back so that no
// entry ends up before an empty one on its probe path.
func (x *idIndex) remove(id core.Uint128) {
	i := x.home(id)
	for ; x.entries[i].id != id; i = (i + 1) & x.mask {
		if x.entries[i].id.IsZero() {
			return
		}
	}
	x.n--
	for j := (i + 1) & x.mask; ; j = (j + 1) & x.mask {
		e := x.entries[j]
		if e.id.IsZero() {
			break
		}
		// e may move back to i if i lies on its probe path: from its home
		// (inclusive) to j (exclusive), cyclically.
		if (j-x.home(e.id))&x.mask >= (j-i)&x.mask {
			x.entries[i] = e
			i = j
		}
	}
	x.entries[i] = idEntry{}
}

func (x *idIndex) grow() {
	old := x.entries
	x.entries = make([]idEntry, 2*len(old))
	x.mask = uint64(len(x.entries) - 1)
	x.n = 0
	for _, e := range old {
		if !e.id.IsZero() {
			x.put(e.id, e.slot)
		}
	}
}

// appendIDs appends every stored id (in table order) to dst.
func (x *idIndex) appendIDs(dst []core.Uint128) []core.Uint128 {
	for _, e := range x.entries {
		if !e.id.IsZero() {
			dst = append(dst, e.id)
		}
	}
	return dst
}

func (x *idIndex) bytes() uint64 { return uint64(len(x.entries)) * 24 }
