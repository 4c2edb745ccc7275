package statemachine

import (
	"fmt"
	"testing"

	"github.com/geoevent/geoevent/core"
	"pgregory.net/rapid"
)

// idFixture is an idIndex over a store of its own, in which every put
// first gives the id a slot of its own (the index finds an id by the
// entity in its slot) and every remove releases the id's slot, so that
// slots are reused by other ids, as in the state machine.
type idFixture struct {
	st    entityStore
	x     idIndex
	slots map[core.Uint128]uint32
}

func newIDFixture() *idFixture {
	f := &idFixture{slots: map[core.Uint128]uint32{}}
	f.x = newIDIndex(&f.st)
	return f
}

// put maps id to a new slot holding it (releasing its old one) and
// returns the slot.
func (f *idFixture) put(id core.Uint128) uint32 {
	s := f.st.alloc()
	f.st.mut(s).id = id
	f.x.put(id, s)
	if old, ok := f.slots[id]; ok {
		f.st.release(old)
	}
	f.slots[id] = s
	return s
}

func (f *idFixture) remove(id core.Uint128) {
	f.x.remove(id)
	if old, ok := f.slots[id]; ok {
		f.st.release(old)
		delete(f.slots, id)
	}
}

// TestIDIndexAgainstMap drives the table and a Go map with the same random
// puts and removes (ids from a small domain, so collisions, replacements
// and runs are frequent) and compares every lookup and the length.
func TestIDIndexAgainstMap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		f := newIDFixture()
		x := &f.x
		ref := map[core.Uint128]uint32{}
		domain := rapid.Uint64Range(1, 5000).Draw(t, "domain")
		steps := rapid.IntRange(0, 3000).Draw(t, "steps")
		if rapid.Bool().Draw(t, "grow") {
			// Enough distinct ids and puts that the table grows, with
			// puts and removes of ids in both tables while it migrates.
			domain = rapid.Uint64Range(1500, 3000).Draw(t, "growDomain")
			steps = rapid.IntRange(2500, 4000).Draw(t, "growSteps")
		}
		id := func(label string) core.Uint128 {
			v := rapid.Uint64Range(1, domain).Draw(t, label)
			return core.Uint128{Hi: v % 3, Lo: v}
		}
		for ; steps > 0; steps-- {
			k := id("id")
			switch rapid.IntRange(0, 2).Draw(t, "op") {
			case 0, 1:
				ref[k] = f.put(k)
			case 2:
				f.remove(k)
				delete(ref, k)
			}
			if err := x.check(); err != nil {
				t.Fatal(err)
			}
			want, in := ref[k]
			if got, ok := x.get(k); ok != in || got != want {
				t.Fatalf("after step: get(%v) = %d, %v; want %d, %v", k, got, ok, want, in)
			}
		}
		if x.len() != len(ref) {
			t.Fatalf("len %d, map %d", x.len(), len(ref))
		}
		for k, s := range ref {
			if got, ok := x.get(k); !ok || got != s {
				t.Fatalf("get(%v) = %d, %v; want %d", k, got, ok, s)
			}
		}
		for v := uint64(1); v <= domain; v++ {
			k := core.Uint128{Hi: v % 3, Lo: v}
			if _, in := ref[k]; !in {
				if _, ok := x.get(k); ok {
					t.Fatalf("get(%v) found a removed id", k)
				}
			}
		}
		if got := len(x.appendIDs(nil)); got != len(ref) {
			t.Fatalf("appendIDs gave %d ids, want %d", got, len(ref))
		}
	})
}

// TestIDIndexLarge fills the table through several growths with sequential
// ids (the common case for clients), removes every other one, and checks
// lookups and the load bound throughout.
func TestIDIndexLarge(t *testing.T) {
	f := newIDFixture()
	x := &f.x
	const n = 200_000
	for i := uint64(1); i <= n; i++ {
		f.put(core.Uint128{Hi: 9, Lo: i})
		if i%997 == 0 {
			if err := x.check(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := uint64(2); i <= n; i += 2 {
		f.remove(core.Uint128{Hi: 9, Lo: i})
	}
	for i := uint64(1); i <= n+10; i++ {
		id := core.Uint128{Hi: 9, Lo: i}
		s, ok := x.get(id)
		if want := i%2 == 1 && i <= n; ok != want || (ok && s != f.slots[id]) {
			t.Fatalf("get(%d) = %d, %v", i, s, ok)
		}
	}
	if x.len() != n/2 {
		t.Fatalf("len %d, want %d", x.len(), n/2)
	}
}

// check verifies the invariants of idIndex's doc comment.
func (x *idIndex) check() error {
	if x.cur.n*4 > len(x.cur.entries)*3 {
		return fmt.Errorf("%d ids in %d entries: over the 3/4 load bound", x.cur.n, len(x.cur.entries))
	}
	if !x.migrating() && (x.old.n != 0 || x.mig != 0) {
		return fmt.Errorf("no migration, but old holds %d and mig is %d", x.old.n, x.mig)
	}
	for ti, t := range []*idTable{&x.cur, &x.old} {
		n := 0
		for i, e := range t.entries {
			if e.ref == 0 {
				continue
			}
			if e.ref == deadRef && ti == 0 {
				return fmt.Errorf("cur holds a dead entry at %d", i)
			}
			if e.ref == deadRef || (ti == 1 && uint64(i) < x.mig) {
				// Dead or copied: its slot may hold anything now; it
				// must only lie on its home's run.
				if !t.onRun(e.hash, uint64(i)) {
					return fmt.Errorf("table %d: the dead or copied entry at %d is off its home's run", ti, i)
				}
				continue
			}
			id := x.store.at(e.ref - 1).id
			if id.IsZero() || e.hash != idHash(id) {
				return fmt.Errorf("table %d: entry %d (hash %08x) names slot %d, holding id %v", ti, i, e.hash, e.ref-1, id)
			}
			if j, ok := x.find(t, e.hash, id); !ok || j != uint64(i) {
				return fmt.Errorf("table %d: %v at %d is not found from its home (%d, %v)", ti, id, i, j, ok)
			}
			n++
			if ti == 1 {
				if _, in := x.find(&x.cur, e.hash, id); in {
					return fmt.Errorf("%v is in both tables", id)
				}
			}
		}
		if n != t.n {
			return fmt.Errorf("table %d holds %d live ids but counts %d", ti, n, t.n)
		}
	}
	return nil
}

// onRun reports whether no empty entry lies between the home of hash h and
// position i.
func (t *idTable) onRun(h uint32, i uint64) bool {
	for j := uint64(h) & t.mask; j != i; j = (j + 1) & t.mask {
		if t.entries[j].ref == 0 {
			return false
		}
	}
	return true
}

// TestIDIndexGrowsIncrementally checks that no put moves more than a few
// ids: the cost of growing is spread over the puts that follow.
func TestIDIndexGrowsIncrementally(t *testing.T) {
	f := newIDFixture()
	x := &f.x
	grew := 0
	for i := uint64(1); i <= 100_000; i++ {
		before := len(x.cur.entries)
		f.put(core.Uint128{Hi: 1, Lo: i})
		if len(x.cur.entries) != before {
			grew++
			if x.cur.n > 1+migrateStep {
				t.Fatalf("growing to %d entries moved %d ids at once", len(x.cur.entries), x.cur.n)
			}
		}
	}
	if grew < 5 {
		t.Fatalf("grew %d times", grew)
	}
	if err := x.check(); err != nil {
		t.Fatal(err)
	}
}

// TestIDIndexDuringMigration puts, replaces and removes ids on both sides
// of a migration under way: copied ones (below mig, now in cur) and ones
// still waiting in old.
func TestIDIndexDuringMigration(t *testing.T) {
	f := newIDFixture()
	x := &f.x
	id := func(i uint64) core.Uint128 { return core.Uint128{Hi: 3, Lo: i} }
	n := uint64(idIndexMinCap * 3 / 4)
	for i := uint64(1); i <= n+1; i++ {
		f.put(id(i))
	}
	if !x.migrating() {
		t.Fatal("no migration after filling the table")
	}
	var copied, waiting []uint64
	for i := uint64(1); i <= n; i++ {
		if _, ok := x.find(&x.cur, idHash(id(i)), id(i)); ok {
			copied = append(copied, i)
		} else {
			waiting = append(waiting, i)
		}
	}
	if len(copied) == 0 || len(waiting) == 0 {
		t.Fatalf("%d copied, %d waiting", len(copied), len(waiting))
	}
	for k, i := range append(copied[:4:4], waiting[:4]...) {
		switch k % 2 {
		case 0:
			f.remove(id(i))
		case 1:
			f.put(id(i))
		}
		if err := x.check(); err != nil {
			t.Fatal(err)
		}
	}
	for i := uint64(1); i <= n+1; i++ {
		want, in := f.slots[id(i)]
		if got, ok := x.get(id(i)); ok != in || got != want {
			t.Fatalf("get(%d) = %d, %v; want %d, %v", i, got, ok, want, in)
		}
	}
}
