package statemachine

import "github.com/geoevent/geoevent/core"

// idIndex maps entity ids to entity slots: an open-addressing hash table
// with linear probing and backward-shift deletion (no tombstones), which
// grows incrementally.
//
// An entry is 8 bytes: 32 bits of the id's hash and the slot. The id
// itself is not stored: the entity in the slot holds it, and a lookup
// whose hash matches an entry compares the id there. That load is the
// one the caller makes next anyway (it wants the entity), so a lookup
// usually costs the table's cache miss and the entity's; and a table of
// 8-byte entries (16 MB for a million entities) stays in the processor's
// cache far more than one of 24-byte entries holding the ids did. (A Go
// map costs two misses before the entity's.) The table's order never
// reaches a reply or a snapshot.
//
// Growing never rehashes everything at once: growing to 8 million slots
// (3 million ids) that way took 0.3 s, during which the replica answered
// nothing (and a leader sent no heartbeat). Instead a full table becomes
// old, a table twice its size becomes cur, and every later put or remove
// copies the entries of migrateStep old positions into cur (the stored
// hash gives their new home: no entity is read); migrating ends before cur
// is half full, so a growth never starts while one is under way. old is
// only read and marked: an id leaves it by being copied (its position
// falls below mig) or by being marked dead, never by moving, so its probe
// runs stay intact.
//
// Invariants:
//   - Each stored id is in exactly one of cur and old's live entries: those
//     at positions at or after mig and not dead. old is empty (entries nil)
//     unless a migration is under way; cur has no dead entry.
//   - The entity in a live entry's slot holds the entry's id, and the
//     entry's hash is idHash of that id. (Callers put an id after writing
//     it into its slot and remove it before releasing the slot; a dead
//     entry's slot may since hold anything.)
//   - In each table: capacity is a power of two, at most 2^32; ref 0
//     marks an empty entry; every entry, live or not, lies in the run of
//     non-empty entries that starts at its home position (hash & mask), so
//     a lookup stops at the first empty entry.
//   - cur holds at most 3/4 of its capacity; n counts a table's live ids.
type idIndex struct {
	cur, old idTable
	mig      uint64       // the next position of old to migrate
	store    *entityStore // holds each live entry's id
}

// idTable is one linear-probing table.
type idTable struct {
	entries []idEntry
	mask    uint64
	n       int
}

// idEntry is one position of a table: empty (ref 0), live (ref is the
// slot plus one) or dead (ref deadRef: only in old, an id removed or
// replaced during the migration).
type idEntry struct {
	hash uint32 // idHash of the id
	ref  uint32
}

const deadRef = ^uint32(0)

const (
	idIndexMinCap = 1024
	// migrateStep is how many old positions each put or remove migrates.
	// A table grows at 3/4 full into one of twice its capacity c: the
	// migration's c/migrateStep steps leave cur at most (3/4 + 1/16) c of
	// 2c full, so it ends long before cur must grow again, and lookups
	// that miss (new ids) look in two tables during only the first twelfth
	// of the puts between two growths. A step copies at most 16 entries.
	migrateStep = 16
)

func newIDIndex(store *entityStore) idIndex {
	return idIndex{cur: newIDTable(idIndexMinCap), store: store}
}

func newIDTable(capacity int) idTable {
	return idTable{entries: make([]idEntry, capacity), mask: uint64(capacity - 1)}
}

// idHash mixes both halves of id, so that sequential ids spread evenly;
// an id's home in a table is its hash's low bits.
func idHash(id core.Uint128) uint32 {
	h := (id.Lo ^ id.Hi*0x9e3779b97f4a7c15) * 0xbf58476d1ce4e5b9
	return uint32(h ^ h>>31)
}

// find returns the position of id's live entry in t (in old, perhaps one
// already copied: below mig).
func (x *idIndex) find(t *idTable, h uint32, id core.Uint128) (uint64, bool) {
	for i := uint64(h) & t.mask; ; i = (i + 1) & t.mask {
		e := t.entries[i]
		if e.ref == 0 {
			return 0, false
		}
		if e.hash == h && e.ref != deadRef && x.store.at(e.ref-1).id == id {
			return i, true
		}
	}
}

// insertNew stores an entry whose id t does not hold. It does not grow t.
func (t *idTable) insertNew(e idEntry) {
	for i := uint64(e.hash) & t.mask; ; i = (i + 1) & t.mask {
		if t.entries[i].ref == 0 {
			t.entries[i] = e
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
		if e.ref == 0 {
			break
		}
		// e may move back to i if i lies on its probe path: from its home
		// (inclusive) to j (exclusive), cyclically.
		if (j-uint64(e.hash)&t.mask)&t.mask >= (j-i)&t.mask {
			t.entries[i] = e
			i = j
		}
	}
	t.entries[i] = idEntry{}
}

func (x *idIndex) len() int { return x.cur.n + x.old.n }

func (x *idIndex) migrating() bool { return x.old.entries != nil }

func (x *idIndex) get(id core.Uint128) (uint32, bool) {
	h := idHash(id)
	if i, ok := x.find(&x.cur, h, id); ok {
		return x.cur.entries[i].ref - 1, true
	}
	if i, ok := x.findOld(h, id); ok {
		return x.old.entries[i].ref - 1, true
	}
	return 0, false
}

// findOld returns the position of id among old's live entries.
func (x *idIndex) findOld(h uint32, id core.Uint128) (uint64, bool) {
	if !x.migrating() {
		return 0, false
	}
	i, ok := x.find(&x.old, h, id)
	if !ok || i < x.mig {
		return 0, false
	}
	return i, true
}

// killOld marks old's live entry at i dead.
func (x *idIndex) killOld(i uint64) {
	x.old.entries[i].ref = deadRef
	x.old.n--
}

// put stores id -> slot, replacing an existing mapping; the entity in slot
// holds id.
func (x *idIndex) put(id core.Uint128, slot uint32) {
	if !x.migrating() && (x.cur.n+1)*4 > len(x.cur.entries)*3 {
		x.old = x.cur
		x.cur = newIDTable(2 * len(x.old.entries))
		x.mig = 0
	}
	h := idHash(id)
	if i, ok := x.findOld(h, id); ok {
		x.killOld(i)
	}
	if i, ok := x.find(&x.cur, h, id); ok {
		x.cur.entries[i].ref = slot + 1
	} else {
		x.cur.insertNew(idEntry{hash: h, ref: slot + 1})
	}
	x.migrate()
}

// remove deletes id, whose entity is still in its slot.
func (x *idIndex) remove(id core.Uint128) {
	h := idHash(id)
	if i, ok := x.find(&x.cur, h, id); ok {
		x.cur.removeAt(i)
	} else if i, ok := x.findOld(h, id); ok {
		x.killOld(i)
	}
	x.migrate()
}

// migrate copies the live entries of up to migrateStep old positions into
// cur, and drops old once every position is done or no live id is left.
func (x *idIndex) migrate() {
	if !x.migrating() {
		return
	}
	for end := min(x.mig+migrateStep, uint64(len(x.old.entries))); x.mig < end; x.mig++ {
		if e := x.old.entries[x.mig]; e.ref != 0 && e.ref != deadRef {
			x.cur.insertNew(e)
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
	h := uint64(idHash(id))
	s := uint64(x.cur.entries[h&x.cur.mask].ref)
	if x.migrating() {
		s += uint64(x.old.entries[h&x.old.mask].ref)
	}
	return s
}

// appendIDs appends every stored id (in table order) to dst.
func (x *idIndex) appendIDs(dst []core.Uint128) []core.Uint128 {
	for _, e := range x.cur.entries {
		if e.ref != 0 {
			dst = append(dst, x.store.at(e.ref-1).id)
		}
	}
	if x.migrating() {
		for _, e := range x.old.entries[x.mig:] {
			if e.ref != 0 && e.ref != deadRef {
				dst = append(dst, x.store.at(e.ref-1).id)
			}
		}
	}
	return dst
}

func (x *idIndex) bytes() uint64 { return uint64(len(x.cur.entries)+len(x.old.entries)) * 8 }
