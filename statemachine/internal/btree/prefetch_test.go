package btree

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/geoevent/geoevent/core"
)

// TestPrefetchChangesNothing: Prefetch takes any starts (none, more than
// PrefetchMax, the extremes of A) on trees of every height, by-value or
// not, and leaves each tree as it was.
func TestPrefetchChangesNothing(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, leafCap, leafCap + 1, 5_000, 200_000} {
		for _, byValue := range []bool{false, true} {
			var ids []core.Uint128
			tr := New()
			if byValue {
				tr = NewByValue(func(v uint32) core.Uint128 { return ids[v] })
			}
			keys := make([]Key, n)
			for i := range keys {
				keys[i] = randomKey(r)
				ids = append(ids, keys[i].ID)
				tr.Set(keys[i], uint32(i))
			}
			for _, m := range []int{0, 1, PrefetchMax, PrefetchMax + 5} {
				ks := make([]Key, m)
				for i := range ks {
					ks[i] = randomKey(r)
				}
				if m > 0 {
					ks[0].A, ks[m-1].A = 0, ^uint64(0)
				}
				tr.Prefetch(ks)
			}
			if err := tr.checkInvariants(); err != nil {
				t.Fatalf("n %d by value %v: %v", n, byValue, err)
			}
			if tr.Len() != n {
				t.Fatalf("n %d: Len %d", n, tr.Len())
			}
			for i, k := range keys {
				if v, ok := tr.Get(k); !ok || v != uint32(i) {
					t.Fatalf("n %d: Get(key %d) = %d, %v", n, i, v, ok)
				}
			}
		}
	}
}

// TestPrefetchTakesEachStartsLeaf: the leaf Prefetch takes for a start
// (the child that the inner node bottoms finds for it routes to, descending
// for 16 starts at once) is the leaf a seek to the start finds.
func TestPrefetchTakesEachStartsLeaf(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{leafCap + 1, 5_000, 200_000} {
		tr := New()
		for i := 0; i < n; i++ {
			// A parts from a small set, so that starts fall on ties.
			k := randomKey(r)
			k.A = r.Uint64N(uint64(n)) << 40
			tr.Set(k, uint32(i))
		}
		var starts [PrefetchMax]Key
		var nodes [PrefetchMax]*inner
		for q := 0; q < 2_000; q += PrefetchMax {
			for i := range starts {
				starts[i] = randomKey(r)
				starts[i].A = r.Uint64N(uint64(n)) << 40
			}
			slices.SortFunc(starts[:], Key.Compare)
			tr.bottoms(starts[:], &nodes)
			for i, start := range starts {
				if in := nodes[i]; in.kids[in.route(start)].lf != tr.findLeaf(start) {
					t.Fatalf("n %d: the leaf taken for a start is not the one a seek to it finds", n)
				}
			}
		}
	}
}

// benchmarkSeek16 seeks to 16 random keys in ascending order (as a spatial
// scan seeks to the starts of its ranges), prefetching them first or not.
func benchmarkSeek16(b *testing.B, prefetch bool) {
	t, _, r := randomTree(b)
	groups := make([][]Key, 1<<12)
	for i := range groups {
		g := make([]Key, 16)
		for j := range g {
			g[j] = randomKey(r)
		}
		slices.SortFunc(g, Key.Compare)
		groups[i] = g
	}
	b.ResetTimer()
	var sum uint64
	for i := range b.N {
		g := groups[i&(len(groups)-1)]
		if prefetch {
			t.Prefetch(g)
		}
		for _, k := range g {
			if it := t.SeekGE(k); it.Valid() {
				sum += uint64(it.Value())
			}
		}
	}
	sink = uint32(sum)
}

func BenchmarkSeek16(b *testing.B)         { benchmarkSeek16(b, false) }
func BenchmarkPrefetchSeek16(b *testing.B) { benchmarkSeek16(b, true) }
