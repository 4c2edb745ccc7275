package btree

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/geoevent/geoevent/core"
)

// smallKey draws from a domain of 21*2*4 keys, so collisions are frequent.
var smallKey = rapid.Custom(func(t *rapid.T) Key {
	return Key{
		A: rapid.Uint64Range(0, 20).Draw(t, "a"),
		ID: core.Uint128{
			Hi: rapid.Uint64Range(0, 1).Draw(t, "hi") << 63,
			Lo: rapid.Uint64Range(0, 3).Draw(t, "lo"),
		},
	}
})

var largeKey = rapid.Custom(func(t *rapid.T) Key {
	return Key{
		A:  rapid.Uint64().Draw(t, "a"),
		ID: core.Uint128{Hi: rapid.Uint64().Draw(t, "hi"), Lo: rapid.Uint64().Draw(t, "lo")},
	}
})

var anyKey = rapid.OneOf(smallKey, smallKey, largeKey)

// keyFrom derives a key from r in one of several shapes.
func keyFrom(r *rand.Rand, shape int) Key {
	switch shape {
	case 0: // small domain
		return Key{A: r.Uint64N(21), ID: core.Uint128{Hi: r.Uint64N(2) << 63, Lo: r.Uint64N(4)}}
	case 1: // shared A, distinct ids
		return Key{A: r.Uint64N(3), ID: core.Uint128{Hi: r.Uint64(), Lo: r.Uint64()}}
	default: // large domain
		return Key{A: r.Uint64(), ID: core.Uint128{Hi: r.Uint64(), Lo: r.Uint64()}}
	}
}

func TestTreeModel(t *testing.T) {
	for _, kind := range harnessKinds {
		t.Run(kind.name, func(t *testing.T) { testTreeModel(t, kind.new) })
	}
}

func testTreeModel(t *testing.T, newHarness func() *harness) {
	rapid.Check(t, func(rt *rapid.T) {
		h := newHarness()
		ok := func(err error) {
			if err != nil {
				rt.Fatal(err)
			}
		}
		rt.Repeat(map[string]func(*rapid.T){
			"": func(rt *rapid.T) { ok(h.check()) },
			"Set": func(rt *rapid.T) {
				ok(h.set(anyKey.Draw(rt, "k"), rapid.Uint32().Draw(rt, "v")))
			},
			"Get": func(rt *rapid.T) { ok(h.get(anyKey.Draw(rt, "k"))) },
			"Delete": func(rt *rapid.T) {
				ok(h.delete(anyKey.Draw(rt, "k")))
			},
			"DeletePresent": func(rt *rapid.T) {
				if len(h.m.es) == 0 {
					rt.Skip("empty")
				}
				i := rapid.IntRange(0, len(h.m.es)-1).Draw(rt, "i")
				ok(h.delete(h.m.es[i].k))
			},
			"DeleteEntry": func(rt *rapid.T) {
				ok(h.deleteEntry(anyKey.Draw(rt, "k"), rapid.Uint32Range(0, 3).Draw(rt, "v")))
			},
			"DeleteEntryPresent": func(rt *rapid.T) {
				if len(h.m.es) == 0 {
					rt.Skip("empty")
				}
				e := h.m.es[rapid.IntRange(0, len(h.m.es)-1).Draw(rt, "i")]
				ok(h.deleteEntry(e.k, e.v+rapid.Uint32Range(0, 1).Draw(rt, "off")))
			},
			"MinMax": func(rt *rapid.T) { ok(h.minMax()) },
			"FingerBatch": func(rt *rapid.T) {
				// A batch of sets and deletes sorted by key (stably), as
				// the state machine's spatial batches: one finger applies
				// them, another touches ahead.
				type change struct {
					k   Key
					v   uint32
					del bool
				}
				var cs []change
				for range rapid.IntRange(0, 200).Draw(rt, "n") {
					c := change{k: anyKey.Draw(rt, "k"), v: rapid.Uint32Range(0, 3).Draw(rt, "v"), del: rapid.Bool().Draw(rt, "del")}
					if c.del && len(h.m.es) > 0 && rapid.Bool().Draw(rt, "present") {
						e := h.m.es[rapid.IntRange(0, len(h.m.es)-1).Draw(rt, "i")]
						c.k, c.v = e.k, e.v
					}
					cs = append(cs, c)
				}
				slices.SortStableFunc(cs, func(a, b change) int { return a.k.Compare(b.k) })
				f, ahead := h.t.Finger(), h.t.Finger()
				for j, c := range cs {
					if j+8 < len(cs) {
						ahead.Touch(cs[j+8].k)
					}
					if c.del {
						ok(h.fingerDeleteEntry(&f, c.k, c.v))
					} else {
						ok(h.fingerSet(&f, c.k, c.v))
					}
				}
				ok(h.check())
			},
			"Touch": func(rt *rapid.T) { h.t.Touch(anyKey.Draw(rt, "k")) }, // reads only
			"SeekGENext": func(rt *rapid.T) {
				ok(h.seekGE(anyKey.Draw(rt, "k"), rapid.IntRange(0, 300).Draw(rt, "steps")))
			},
			"SeekGEFrom": func(rt *rapid.T) {
				// From an iterator anywhere (or at the end), to any key.
				it := h.t.SeekGE(anyKey.Draw(rt, "from"))
				for n := rapid.IntRange(0, 100).Draw(rt, "walk"); n > 0 && it.Valid(); n-- {
					it.Next()
				}
				k := anyKey.Draw(rt, "k")
				h.t.SeekGEFrom(&it, k)
				ok(h.checkIter(fmt.Sprintf("SeekGEFrom(%v)", k), it, h.m.seekGE(k), +1, rapid.IntRange(0, 100).Draw(rt, "steps")))
			},
			"SweepLeaf": func(rt *rapid.T) {
				ok(h.sweepLeaf(anyKey.Draw(rt, "from"), rapid.IntRange(1, 100).Draw(rt, "max"),
					rapid.SampledFrom([]float64{0, 0.1, 0.5, 0.9, 1}).Draw(rt, "p"), rapid.Uint64().Draw(rt, "seed")))
			},
			"SweepAll": func(rt *rapid.T) {
				// A whole pass, as the state machine's sweep does it.
				p := rapid.SampledFrom([]float64{0.3, 0.9, 1}).Draw(rt, "p")
				seed := rapid.Uint64().Draw(rt, "seed")
				for from, more := (Key{}), true; more; {
					var err error
					from, more, err = h.sweepStep(from, rapid.IntRange(1, 80).Draw(rt, "max"), p, seed)
					ok(err)
					seed++
				}
				ok(h.check())
			},
			"RunSkip": func(rt *rapid.T) {
				// Walk by runs, skipping part of each, against the model.
				k := anyKey.Draw(rt, "k")
				it := h.t.SeekGE(k)
				i := h.m.seekGE(k)
				for steps := rapid.IntRange(0, 20).Draw(rt, "steps"); steps > 0 && it.Valid(); steps-- {
					as, vals := it.Run()
					if len(as) == 0 || len(as) != len(vals) || i+len(as) > len(h.m.es) {
						rt.Fatalf("Run at %d: %d keys, %d values, %d entries left", i, len(as), len(vals), len(h.m.es)-i)
					}
					for j := range as {
						if e := h.m.es[i+j]; as[j] != e.k.A || vals[j] != e.v {
							rt.Fatalf("Run at %d: entry %d is %d=%d, want %v=%d", i, j, as[j], vals[j], e.k, e.v)
						}
					}
					n := rapid.IntRange(1, len(as)).Draw(rt, "skip")
					it.Skip(n)
					i += n
				}
				ok(h.checkIter("after Run/Skip", it, i, +1, 5))
			},
			"SeekLEPrev": func(rt *rapid.T) {
				ok(h.seekLE(anyKey.Draw(rt, "k"), rapid.IntRange(0, 300).Draw(rt, "steps")))
			},
			"FirstLast": func(rt *rapid.T) {
				ok(h.firstLast(rapid.IntRange(0, 300).Draw(rt, "steps")))
			},
			"BulkSet": func(rt *rapid.T) {
				n := rapid.IntRange(1, 5000).Draw(rt, "n")
				shape := rapid.IntRange(0, 3).Draw(rt, "shape")
				r := rand.New(rand.NewPCG(rapid.Uint64().Draw(rt, "seed"), 1))
				next := uint64(1 << 40)
				if k, _, ok := h.t.Max(); ok && k.A < 1<<62 {
					next = k.A + 1
				}
				for i := range n {
					var k Key
					if shape == 3 { // increasing, as the time index
						next += r.Uint64N(3)
						k = Key{A: next, ID: core.Uint128{Lo: r.Uint64N(1 << 20)}}
					} else {
						k = keyFrom(r, shape)
					}
					ok(h.set(k, uint32(i)))
				}
			},
			"BulkDelete": func(rt *rapid.T) {
				n := rapid.IntRange(1, 5000).Draw(rt, "n")
				r := rand.New(rand.NewPCG(rapid.Uint64().Draw(rt, "seed"), 2))
				front := rapid.Bool().Draw(rt, "front")
				for range n {
					if len(h.m.es) == 0 {
						return
					}
					i := 0
					if !front {
						i = r.IntN(len(h.m.es))
					}
					ok(h.delete(h.m.es[i].k))
				}
			},
			"Clear": func(rt *rapid.T) {
				if rapid.IntRange(0, 9).Draw(rt, "c") == 0 {
					h.clear()
				}
			},
		})
		ok(h.checkAll())
	})
}

func TestKeyOrder(t *testing.T) {
	ks := []Key{
		{A: 0, ID: core.Uint128{}},
		{A: 0, ID: core.Uint128{Lo: 1}},
		{A: 0, ID: core.Uint128{Lo: math.MaxUint64}},
		{A: 0, ID: core.Uint128{Hi: 1}},
		{A: 0, ID: core.Uint128{Hi: 1 << 63}},
		{A: 0, ID: core.Uint128{Hi: math.MaxUint64, Lo: math.MaxUint64}},
		{A: 1, ID: core.Uint128{}},
		{A: 1 << 63, ID: core.Uint128{}},
		{A: math.MaxUint64, ID: core.Uint128{Hi: math.MaxUint64, Lo: math.MaxUint64}},
	}
	for i, a := range ks {
		for j, b := range ks {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := a.Compare(b); got != want {
				t.Errorf("%v.Compare(%v) = %d, want %d", a, b, got, want)
			}
			if got := a.Less(b); got != (want < 0) {
				t.Errorf("%v.Less(%v) = %v", a, b, got)
			}
		}
	}
}

func TestEmpty(t *testing.T) {
	tr := New()
	for _, tr := range []*Tree{tr, func() *Tree { t := New(); t.Set(Key{A: 1}, 1); t.Delete(Key{A: 1}); return t }()} {
		h := &harness{t: tr}
		if err := h.checkAll(); err != nil {
			t.Fatal(err)
		}
		if err := h.minMax(); err != nil {
			t.Fatal(err)
		}
		for _, k := range []Key{{}, {A: 5}, {A: math.MaxUint64, ID: core.Uint128{Hi: math.MaxUint64, Lo: math.MaxUint64}}} {
			if err := h.get(k); err != nil {
				t.Fatal(err)
			}
			if err := h.delete(k); err != nil {
				t.Fatal(err)
			}
			for _, it := range []Iter{tr.SeekGE(k), tr.SeekLE(k), tr.First(), tr.Last(), {}} {
				for range 3 {
					if it.Valid() || it.Key() != (Key{}) || it.Value() != 0 {
						t.Fatalf("iterator on empty tree is valid")
					}
					it.Next()
					it.Prev()
				}
			}
		}
	}
}

func TestDeleteAllRandomOrder(t *testing.T) {
	for _, kind := range harnessKinds {
		t.Run(kind.name, func(t *testing.T) { testDeleteAllRandomOrder(t, kind.new) })
	}
}

func testDeleteAllRandomOrder(t *testing.T, newHarness func() *harness) {
	base := newHarness().t.Bytes()
	for _, shape := range []int{0, 1, 2, 3} {
		r := rand.New(rand.NewPCG(uint64(shape), 7))
		h := newHarness()
		const n = 40000
		for i := range n {
			k := keyFrom(r, shape)
			if shape == 3 {
				k = Key{A: uint64(i / 3), ID: core.Uint128{Lo: r.Uint64()}}
			}
			if err := h.set(k, uint32(i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := h.checkAll(); err != nil {
			t.Fatal(err)
		}
		if shape >= 2 && h.t.height < 2 {
			t.Fatalf("height %d: want at least 2 inner levels", h.t.height)
		}
		grown := h.t.Bytes()
		keys := make([]Key, len(h.m.es))
		for i, e := range h.m.es {
			keys[i] = e.k
		}
		r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		for i, k := range keys {
			if err := h.delete(k); err != nil {
				t.Fatal(err)
			}
			if i%997 == 0 || len(keys)-i < 200 {
				if err := h.check(); err != nil {
					t.Fatalf("after %d deletes: %v", i+1, err)
				}
			}
		}
		if err := h.checkAll(); err != nil {
			t.Fatal(err)
		}
		if got := h.t.Bytes(); got != base || h.t.height != 0 {
			t.Fatalf("shape %d: Bytes %d (height %d) after deleting everything, want %d (was %d)", shape, got, h.t.height, base, grown)
		}
	}
}

func TestClear(t *testing.T) {
	tr := New()
	base := tr.Bytes()
	for i := range 10000 {
		tr.Set(Key{A: uint64(i * 7 % 10007)}, uint32(i))
	}
	tr.Clear()
	h := &harness{t: tr}
	if err := h.checkAll(); err != nil {
		t.Fatal(err)
	}
	if tr.Bytes() != base {
		t.Fatalf("Bytes %d after Clear, want %d", tr.Bytes(), base)
	}
	for i := range 1000 {
		if err := h.set(Key{A: uint64(i)}, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.checkAll(); err != nil {
		t.Fatal(err)
	}
}

// TestAppendFill checks that increasing inserts pack leaves full and that
// random deletes and near-end inserts afterwards keep the tree sound.
func TestAppendFill(t *testing.T) {
	tr := New()
	const n = 200000
	r := rand.New(rand.NewPCG(3, 3))
	ref := map[Key]uint32{}
	var keys []Key // the keys of ref, for drawing random ones
	for i := range n {
		k := Key{A: uint64(i), ID: core.Uint128{Lo: r.Uint64()}}
		tr.Set(k, uint32(i))
		ref[k] = uint32(i)
		keys = append(keys, k)
	}
	if err := tr.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	if minLeaves := (n + leafCap - 1) / leafCap; tr.leaves != minLeaves {
		t.Fatalf("%d leaves for %d appended entries, want %d", tr.leaves, n, minLeaves)
	}
	// The time-index pattern: appends, sometimes slightly out of order,
	// with random deletes.
	for i := n; i < 3*n; i++ {
		k := Key{A: uint64(i - r.IntN(2)*r.IntN(100)), ID: core.Uint128{Lo: r.Uint64()}}
		if _, had := ref[k]; tr.Set(k, uint32(i)) != had {
			t.Fatalf("Set(%v): replaced mismatch", k)
		}
		ref[k] = uint32(i)
		keys = append(keys, k)
		j := r.IntN(len(keys))
		d := keys[j]
		keys[j] = keys[len(keys)-1]
		keys = keys[:len(keys)-1]
		if v, ok := tr.Delete(d); !ok || v != ref[d] {
			t.Fatalf("Delete(%v) = %d, %v; want %d", d, v, ok, ref[d])
		}
		delete(ref, d)
		if i%50000 == 0 {
			if err := tr.checkInvariants(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tr.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(keys, Key.Compare)
	h := &harness{t: tr}
	for _, k := range keys {
		h.m.es = append(h.m.es, entry{k, ref[k]})
	}
	if err := h.checkAll(); err != nil {
		t.Fatal(err)
	}
}

// TestLargeRandom runs a long random mix on a deep tree against a map,
// comparing full contents at checkpoints.
func TestLargeRandom(t *testing.T) {
	n := 300000
	if testing.Short() {
		n = 60000
	}
	r := rand.New(rand.NewPCG(11, 12))
	tr := New()
	ref := map[Key]uint32{}
	keyAt := func() Key {
		return Key{A: r.Uint64N(uint64(n)), ID: core.Uint128{Lo: r.Uint64N(2)}}
	}
	for i := range 3 * n {
		k := keyAt()
		switch r.IntN(5) {
		case 0, 1, 2:
			_, had := ref[k]
			if tr.Set(k, uint32(i)) != had {
				t.Fatalf("Set(%v): replaced mismatch", k)
			}
			ref[k] = uint32(i)
		case 3:
			want, had := ref[k]
			if v, ok := tr.Delete(k); ok != had || v != want {
				t.Fatalf("Delete(%v) = %d, %v; want %d, %v", k, v, ok, want, had)
			}
			delete(ref, k)
		case 4:
			want, had := ref[k]
			if v, ok := tr.Get(k); ok != had || v != want {
				t.Fatalf("Get(%v) = %d, %v; want %d, %v", k, v, ok, want, had)
			}
		}
		if i%(n/2) == 0 {
			if err := tr.checkInvariants(); err != nil {
				t.Fatal(err)
			}
			count := 0
			var prev Key
			for it := tr.First(); it.Valid(); it.Next() {
				if count > 0 && !prev.Less(it.Key()) {
					t.Fatalf("iteration out of order")
				}
				if v, ok := ref[it.Key()]; !ok || v != it.Value() {
					t.Fatalf("iteration yields %v=%d not in reference", it.Key(), it.Value())
				}
				prev = it.Key()
				count++
			}
			if count != len(ref) || tr.Len() != len(ref) {
				t.Fatalf("iterated %d, Len %d, want %d", count, tr.Len(), len(ref))
			}
		}
	}
}
