package statemachine

import "github.com/geoevent/geoevent/core"

// idIndex maps entity ids to entity slots: an open-addressing hash table
// with linear probing and backward-shift deletion (no tombstones), which
// grows incrementally.
//
// It replaces a Go map because a lookup here usually costs one cache miss
// (the entry holds id and slot together), where the map costs two; the
// table's order never reaches a reply or a snapshot.
//
// Growing never rehashes everything at once: growing to 8 million slots
// (3 million ids) that way took 0.3 s, during which the replica answered
// nothing (and a leader sent no heartbeat). Instead a full table becomes old, a table twice its size
// becomes cur, and every later put or remove copies the ids of migrateStep
// old positions into cur; migrating ends before cur is half full, so a
// growth never starts while one is under way. old is only read and marked:
// an id leaves it by being copied (its position falls below mig) or by
// being marked dead, never by moving, so its probe runs stay intact.
//
// Invariants:
//   - Each stored id is in exactly one of cur and old's live entries: those
//     at positions at or after mig and not dead. old is empty (entries nil)
//     unless a migration is under way; cur has no dead entry.
//   - In each table: capacity is a power of two; the zero id marks an
//     empty entry (no entity has the zero id); every id in the table, live
//     or not, lies in the run of non-empty entries that starts at its home
//     position (hash & mask), so a lookup stops at the first empty entry.
//   - cur holds at most 3/4 of its capacity; n counts a table's live ids.
type idIndex struct {
	cur, old idTable
	mig      uint64 // the next position of old to migrate
}

// idTable is one linear-probing table.
type idTable struct {
	entries []idEntry
	mask    uint64
	n       int
}

type idEntry struct {
	id   core.Uint128
	slot uint32
	dead bool // only in old: removed or replaced during the migration
}

const (
	idIndexMinCap = 1024
	// migrateStep is how many old positions each put or remove migrates.
	// A table grows at 3/4 full into one of twice its capacity c: the
	// migration's c/migrateStep steps leave cur at most (3/4 + 1/16) c of
	// 2c full, so it ends long before cur must grow again, and lookups
	// that miss (new ids) look in two tables during only the first twelfth
	// of the puts between two growths. A step copies at most 16 ids.
	migrateStep = 16
)

func newIDIndex() idIndex {
	return idIndex{cur: newIDTable(idIndexMinCap)}
}

func newIDTable(capacity int) idTable {
	return idTable{entries: make([]idEntry, capacity), mask: uint64(capacity - 1)}
}

// home is where id's probe starts in t: a multiplicative mix of both
// halves, so sequential ids spread evenly.
func (t *idTable) home(id core.Uint128) uint64 {
	h := (id.Lo ^ id.Hi*0x9e3779b97f4a7c15) * 0xbf58476d1ce4e5b9
	return (h ^ h>>31) & t.mask
}

// find returns id's position in t, dead or not.
func (t *idTable) find(id core.Uint128) (uint64, bool) {
	for i := t.home(id); ; i = (i + 1) & t.mask {
		e := &t.entries[i]
		if e.id == id {
			return i, true
		}
		if e.id.IsZero() {
			return 0, false
		}
	}
}

// put stores id -> slot in t, replacing an existing mapping. It does not
// grow t.
func (t *idTable) put(id core.Uint128, slot uint32) {
	for i := t.home(id); ; i = (i + 1) & t.mask {
		e := &t.entries[i]
		if e.id == id {
			e.slot = slot
			return
		}
		if e.id.IsZero() {
			*e = idEntry{id: id, slot: slot}
			t.n++
			return
		}
	}
}

// removeAt deletes the entry at position i, shifting later entries of its
// run back so that no entry ends up before an empty one on its probe path.
func (t *idTable) removeAt(i uint64) {
	t.n--
	for j := (i + 1) & t.mask; ; j = (j + 1) & t.mask {
		e := t.entries[j]
		if e.id.IsZero() {
			break
		}
		// e may move back to i if i lies on its probe path: from its home
		// (inclusive) to j (exclusive), cyclically.
		if (j-t.home(e.id))&t.mask >= (j-i)&t.mask {
			t.entries[i] = e
			i = j
		}
	}
	t.entries[i] = idEntry{}
}

func (x *idIndex) len() int { return x.cur.n + x.old.n }

func (x *idIndex) migrating() bool { return x.old.entries != nil }

func (x *idIndex) get(id core.Uint128) (uint32, bool) {
	if i, ok := x.cur.find(id); ok {
		return x.cur.entries[i].slot, true
	}
	if i, ok := x.findOld(id); ok {
		return x.old.entries[i].slot, true
	}
	return 0, false
}

// findOld returns the position of id among old's live entries.
func (x *idIndex) findOld(id core.Uint128) (uint64, bool) {
	if !x.migrating() {
		return 0, false
	}
	i, ok := x.old.find(id)
	if !ok || i < x.mig || x.old.entries[i].dead {
		return 0, false
	}
	return i, true
}

// killOld marks old's live entry at i dead.
func (x *idIndex) killOld(i uint64) {
	x.old.entries[i].dead = true
	x.old.n--
}

// put stores id -> slot, replacing an existing mapping.
func (x *idIndex) put(id core.Uint128, slot uint32) {
	if !x.migrating() && (x.cur.n+1)*4 > len(x.cur.entries)*3 {
		x.old = x.cur
		x.cur = newIDTable(2 * len(x.old.entries))
		x.mig = 0
	}
	if i, ok := x.findOld(id); ok {
		x.killOld(i)
	}
	x.cur.put(id, slot)
	x.migrate()
}

// remove deletes id.
func (x *idIndex) remove(id core.Uint128) {
	if i, ok := x.cur.find(id); ok {
		x.cur.removeAt(i)
	} else if i, ok := x.findOld(id); ok {
		x.killOld(i)
	}
	x.migrate()
}

// migrate copies the live ids of up to migrateStep old positions into cur,
// and drops old once every position is done or no live id is left.
func (x *idIndex) migrate() {
	if !x.migrating() {
		return
	}
	for end := min(x.mig+migrateStep, uint64(len(x.old.entries))); x.mig < end; x.mig++ {
		if e := &x.old.entries[x.mig]; !e.id.IsZero() && !e.dead {
			x.cur.put(e.id, e.slot)
			x.old.n--
		}
	}
	if x.mig == uint64(len(x.old.entries)) || x.old.n == 0 {
		x.old = idTable{}
		x.mig = 0
	}
}

// touch loads id's home entry in each table, for prefetching.
func (x *idIndex) touch(id core.Uint128) uint64 {
	s := x.cur.entries[x.cur.home(id)].id.Lo
	if x.migrating() {
		s += x.old.entries[x.old.home(id)].id.Lo
	}
	return s
}

// appendIDs appends every stored id (in table order) to dst.
func (x *idIndex) appendIDs(dst []core.Uint128) []core.Uint128 {
	for _, e := range x.cur.entries {
		if !e.id.IsZero() {
			dst = append(dst, e.id)
		}
	}
	if x.migrating() {
		for _, e := range x.old.entries[x.mig:] {
			if !e.id.IsZero() && !e.dead {
				dst = append(dst, e.id)
			}
		}
	}
	return dst
}

func (x *idIndex) bytes() uint64 { return uint64(len(x.cur.entries)+len(x.old.entries)) * 24 }
