package btree

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/geoevent/geoevent/core"
)

// model is the reference implementation: a sorted slice of entries.
type model struct {
	es []entry
}

type entry struct {
	k Key
	v uint32
}

func (m *model) find(k Key) (int, bool) {
	return slices.BinarySearchFunc(m.es, k, func(e entry, k Key) int { return e.k.Compare(k) })
}

func (m *model) set(k Key, v uint32) bool {
	i, ok := m.find(k)
	if ok {
		m.es[i].v = v
		return true
	}
	m.es = slices.Insert(m.es, i, entry{k, v})
	return false
}

func (m *model) get(k Key) (uint32, bool) {
	if i, ok := m.find(k); ok {
		return m.es[i].v, true
	}
	return 0, false
}

func (m *model) delete(k Key) (uint32, bool) {
	i, ok := m.find(k)
	if !ok {
		return 0, false
	}
	v := m.es[i].v
	m.es = slices.Delete(m.es, i, i+1)
	return v, true
}

// seekGE returns the index of the first entry >= k (len if none).
func (m *model) seekGE(k Key) int {
	i, _ := m.find(k)
	return i
}

// seekLE returns the index of the last entry <= k (-1 if none).
func (m *model) seekLE(k Key) int {
	i, ok := m.find(k)
	if ok {
		return i
	}
	return i - 1
}

// harness applies each operation to a tree and the model and compares.
//
// For a by-value tree (newByValueHarness), set ignores the value it is
// given and stores the index of the key's ID in ids, which idOf looks up:
// the contract of NewByValue, with an idOf that fails loudly on a value
// the tree made up.
type harness struct {
	t *Tree
	m model

	ids   []core.Uint128          // by value: the ID of value v is ids[v]
	index map[core.Uint128]uint32 // by value: the value of each ID; nil for a plain tree
}

func newHarness() *harness { return &harness{t: New()} }

func newByValueHarness() *harness {
	h := &harness{index: map[core.Uint128]uint32{}}
	h.t = NewByValue(func(v uint32) core.Uint128 {
		if int(v) >= len(h.ids) {
			panic(fmt.Sprintf("idOf(%d): no such value", v))
		}
		return h.ids[v]
	})
	return h
}

// harnessKinds are the kinds of tree the model tests run on.
var harnessKinds = []struct {
	name string
	new  func() *harness
}{{"plain", newHarness}, {"byValue", newByValueHarness}}

// value is the value set stores for (k, v).
func (h *harness) value(k Key, v uint32) uint32 {
	if h.index == nil {
		return v
	}
	x, ok := h.index[k.ID]
	if !ok {
		x = uint32(len(h.ids))
		h.ids = append(h.ids, k.ID)
		h.index[k.ID] = x
	}
	return x
}

func (h *harness) set(k Key, v uint32) error { return h.setWith("Set", h.t.Set, k, v) }

// fingerSet is set through f.
func (h *harness) fingerSet(f *Finger, k Key, v uint32) error {
	return h.setWith("Finger.Set", f.Set, k, v)
}

func (h *harness) setWith(name string, set func(Key, uint32) bool, k Key, v uint32) error {
	v = h.value(k, v)
	got, want := set(k, v), h.m.set(k, v)
	if got != want {
		return fmt.Errorf("%s(%v): replaced %v, want %v", name, k, got, want)
	}
	return nil
}

func (h *harness) get(k Key) error {
	gv, gok := h.t.Get(k)
	wv, wok := h.m.get(k)
	if gv != wv || gok != wok {
		return fmt.Errorf("Get(%v) = %d, %v; want %d, %v", k, gv, gok, wv, wok)
	}
	return nil
}

func (h *harness) delete(k Key) error {
	gv, gok := h.t.Delete(k)
	wv, wok := h.m.delete(k)
	if gv != wv || gok != wok {
		return fmt.Errorf("Delete(%v) = %d, %v; want %d, %v", k, gv, gok, wv, wok)
	}
	return nil
}

// deleteEntry runs DeleteEntry(k, v); in a by-value tree v is replaced by
// k's value, as DeleteEntry requires.
func (h *harness) deleteEntry(k Key, v uint32) error {
	return h.deleteEntryWith("DeleteEntry", h.t.DeleteEntry, k, v)
}

// fingerDeleteEntry is deleteEntry through f.
func (h *harness) fingerDeleteEntry(f *Finger, k Key, v uint32) error {
	return h.deleteEntryWith("Finger.DeleteEntry", f.DeleteEntry, k, v)
}

func (h *harness) deleteEntryWith(name string, del func(Key, uint32) bool, k Key, v uint32) error {
	v = h.value(k, v)
	got := del(k, v)
	want := false
	if mv, ok := h.m.get(k); ok && mv == v {
		h.m.delete(k)
		want = true
	}
	if got != want {
		return fmt.Errorf("%s(%v, %d) = %v, want %v", name, k, v, got, want)
	}
	return nil
}

func (h *harness) minMax() error {
	k, v, ok := h.t.Min()
	if len(h.m.es) == 0 {
		if ok || k != (Key{}) || v != 0 {
			return fmt.Errorf("Min of empty tree = %v, %d, %v", k, v, ok)
		}
	} else if e := h.m.es[0]; !ok || k != e.k || v != e.v {
		return fmt.Errorf("Min = %v, %d, %v; want %v, %d", k, v, ok, e.k, e.v)
	}
	k, v, ok = h.t.Max()
	if len(h.m.es) == 0 {
		if ok || k != (Key{}) || v != 0 {
			return fmt.Errorf("Max of empty tree = %v, %d, %v", k, v, ok)
		}
	} else if e := h.m.es[len(h.m.es)-1]; !ok || k != e.k || v != e.v {
		return fmt.Errorf("Max = %v, %d, %v; want %v, %d", k, v, ok, e.k, e.v)
	}
	return nil
}

// checkIter compares it against the model from index i over steps moves
// in direction dir (+1 Next, -1 Prev).
func (h *harness) checkIter(what string, it Iter, i, dir, steps int) error {
	for s := 0; ; s++ {
		if i < 0 || i >= len(h.m.es) {
			if it.Valid() || it.Key() != (Key{}) || it.A() != 0 || it.Value() != 0 {
				return fmt.Errorf("%s: step %d: valid at %v, want end", what, s, it.Key())
			}
			return nil
		}
		if !it.Valid() {
			return fmt.Errorf("%s: step %d: invalid, want %v", what, s, h.m.es[i].k)
		}
		if e := h.m.es[i]; it.Key() != e.k || it.A() != e.k.A || it.Value() != e.v {
			return fmt.Errorf("%s: step %d: at %v=%d, want %v=%d", what, s, it.Key(), it.Value(), e.k, e.v)
		}
		if s == steps {
			return nil
		}
		if dir > 0 {
			it.Next()
		} else {
			it.Prev()
		}
		i += dir
	}
}

func (h *harness) seekGE(k Key, steps int) error {
	return h.checkIter(fmt.Sprintf("SeekGE(%v)", k), h.t.SeekGE(k), h.m.seekGE(k), +1, steps)
}

// sweepLeaf runs one SweepLeaf from k, dropping each entry with
// probability p, and checks it against the model.
func (h *harness) sweepLeaf(from Key, max int, p float64, seed uint64) error {
	_, _, err := h.sweepStep(from, max, p, seed)
	if err != nil {
		return err
	}
	return h.check()
}

func (h *harness) sweepStep(from Key, max int, p float64, seed uint64) (Key, bool, error) {
	r := rand.New(rand.NewPCG(seed, 7))
	var seen []entry
	var dropped []Key
	next, more := h.t.SweepLeaf(from, max, func(as []uint64, ids []core.Uint128, vals []uint32, drop []bool) {
		for i := range as {
			seen = append(seen, entry{Key{as[i], ids[i]}, vals[i]})
			if r.Float64() < p {
				drop[i] = true
				dropped = append(dropped, Key{as[i], ids[i]})
			}
		}
	})
	i := h.m.seekGE(from)
	if len(seen) > max || (len(seen) == 0 && i < len(h.m.es)) {
		return next, more, fmt.Errorf("SweepLeaf(%v, %d) examined %d entries; %d lie at or after it", from, max, len(seen), len(h.m.es)-i)
	}
	for j, e := range seen {
		if i+j >= len(h.m.es) || h.m.es[i+j] != e {
			return next, more, fmt.Errorf("SweepLeaf(%v): entry %d is %v, model %v", from, j, e, h.m.es[min(i+j, len(h.m.es)-1)])
		}
	}
	after := i + len(seen)
	if wantMore := after < len(h.m.es); more != wantMore || (more && next != h.m.es[after].k) {
		return next, more, fmt.Errorf("SweepLeaf(%v) = next %v, more %v", from, next, more)
	}
	for _, k := range dropped {
		h.m.delete(k)
	}
	return next, more, nil
}

func (h *harness) seekLE(k Key, steps int) error {
	return h.checkIter(fmt.Sprintf("SeekLE(%v)", k), h.t.SeekLE(k), h.m.seekLE(k), -1, steps)
}

func (h *harness) firstLast(steps int) error {
	if err := h.checkIter("First", h.t.First(), 0, +1, steps); err != nil {
		return err
	}
	return h.checkIter("Last", h.t.Last(), len(h.m.es)-1, -1, steps)
}

func (h *harness) clear() {
	h.t.Clear()
	h.m.es = h.m.es[:0]
}

func (h *harness) check() error {
	if err := h.t.checkInvariants(); err != nil {
		return err
	}
	if h.t.Len() != len(h.m.es) {
		return fmt.Errorf("Len = %d, want %d", h.t.Len(), len(h.m.es))
	}
	return nil
}

// checkAll compares every entry in both directions.
func (h *harness) checkAll() error {
	if err := h.check(); err != nil {
		return err
	}
	return h.firstLast(len(h.m.es))
}
