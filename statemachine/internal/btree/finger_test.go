package btree

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/geoevent/geoevent/core"
)

// Sorted batches through fingers on a tree of three inner levels: every
// descent that starts below the root is exercised, and splits and merges
// in the middle of a batch send the next one back to the root.
func TestFingerLargeBatches(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	tr := New()
	ref := map[Key]uint32{}
	const n = 300_000
	keyAt := func() Key { return Key{A: r.Uint64N(2 * n), ID: core.Uint128{Lo: r.Uint64N(2)}} }
	for i := range n {
		k := keyAt()
		tr.Set(k, uint32(i))
		ref[k] = uint32(i)
	}
	if tr.height < 3 {
		t.Fatalf("height %d: the test wants at least 3 inner levels", tr.height)
	}
	type change struct {
		k   Key
		v   uint32
		del bool
	}
	present := make([]Key, 0, len(ref))
	for k := range ref {
		present = append(present, k)
	}
	slices.SortFunc(present, Key.Compare) // map order must not decide the test
	next := uint32(n)
	for batch := range 20 {
		cs := make([]change, 0, 3000)
		for range cap(cs) {
			switch r.IntN(4) {
			case 0, 1:
				cs = append(cs, change{k: keyAt(), v: next})
				next++
			case 2: // a present key, with its value or another
				k := present[r.IntN(len(present))]
				cs = append(cs, change{k: k, v: ref[k] + uint32(r.IntN(2)), del: true})
			case 3:
				cs = append(cs, change{k: keyAt(), v: 7, del: true})
			}
		}
		slices.SortStableFunc(cs, func(a, b change) int { return a.k.Compare(b.k) })
		f, ahead := tr.Finger(), tr.Finger()
		for j, c := range cs {
			if j%16 == 0 {
				for _, a := range cs[min(j+16, len(cs)):min(j+32, len(cs))] {
					ahead.Touch(a.k)
				}
			}
			if c.del {
				want := false
				if v, ok := ref[c.k]; ok && v == c.v {
					delete(ref, c.k)
					want = true
				}
				if got := f.DeleteEntry(c.k, c.v); got != want {
					t.Fatalf("batch %d change %d: DeleteEntry(%v, %d) = %v, want %v", batch, j, c.k, c.v, got, want)
				}
			} else {
				_, had := ref[c.k]
				ref[c.k] = c.v
				if got := f.Set(c.k, c.v); got != had {
					t.Fatalf("batch %d change %d: Set(%v) replaced %v, want %v", batch, j, c.k, got, had)
				}
			}
		}
		if err := tr.checkInvariants(); err != nil {
			t.Fatalf("batch %d: %v", batch, err)
		}
		if tr.Len() != len(ref) {
			t.Fatalf("batch %d: %d entries, want %d", batch, tr.Len(), len(ref))
		}
		count := 0
		for it := tr.First(); it.Valid(); it.Next() {
			if v, ok := ref[it.Key()]; !ok || v != it.Value() {
				t.Fatalf("batch %d: the tree holds %v=%d, the reference %d, %v", batch, it.Key(), it.Value(), v, ok)
			}
			count++
		}
		if count != len(ref) {
			t.Fatalf("batch %d: iterated %d entries, want %d", batch, count, len(ref))
		}
		present = present[:0]
		for k := range ref {
			present = append(present, k)
		}
		slices.SortFunc(present, Key.Compare)
	}
}
