package btree

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/geoevent/geoevent/core"
)

// TestPrefetchChangesNothing: Prefetch takes any spans (none, more than
// PrefetchMax, the extremes of A, ends before their starts) on trees of
// every height, by-value or not, and leaves each tree as it was.
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
				ends := make([]uint64, m)
				for i := range ks {
					ks[i] = randomKey(r)
					ends[i] = r.Uint64()
				}
				if m > 0 {
					ks[0].A, ks[m-1].A = 0, ^uint64(0)
					ends[0] = ^uint64(0)
				}
				tr.Prefetch(ks, ends)
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

// TestPrefetchReachesTheSpansLeaves: the leaves Prefetch takes for a span
// (spanEnd's children of the inner node that bottoms finds for its start,
// descending for 16 starts at once) begin with the leaf a seek to its start
// finds, include every leaf after it, under that node and within spanAhead
// of it, that holds a key the span reaches, and include no leaf after the
// first whose keys the separators put above the span's end.
func TestPrefetchReachesTheSpansLeaves(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{leafCap + 1, 5_000, 200_000} {
		tr := New()
		for i := 0; i < n; i++ {
			// A parts from a small set, so that spans end on ties.
			k := randomKey(r)
			k.A = r.Uint64N(uint64(n)) << 40
			tr.Set(k, uint32(i))
		}
		var starts [PrefetchMax]Key
		var nodes [PrefetchMax]*inner
		for q := 0; q < 2_000; q++ {
			if q%PrefetchMax == 0 {
				for i := range starts {
					starts[i] = randomKey(r)
					starts[i].A = r.Uint64N(uint64(n)) << 40
				}
				slices.SortFunc(starts[:], Key.Compare)
				tr.bottoms(starts[:], &nodes)
			}
			start, in := starts[q%PrefetchMax], nodes[q%PrefetchMax]
			// Spans of none to hundreds of keys, and to the end of A.
			end := start.A + r.Uint64N(uint64(1)<<(40+r.IntN(10)))
			switch {
			case q%100 == 0:
				end = ^uint64(0)
			case q%2 == 0:
				end = start.A + r.Uint64N(200)<<40 // on a key's A
			}
			c := in.route(start)
			last := spanEnd(in, c, end)
			if in.kids[c].lf != tr.findLeaf(start) {
				t.Fatalf("n %d: the span's first leaf is not the one a seek to its start finds", n)
			}
			for j := c + 1; j < in.n && j <= c+spanAhead; j++ {
				l := in.kids[j].lf
				reached := l.n > 0 && l.as[0] <= end
				switch {
				case reached && j > last:
					t.Fatalf("n %d: leaf %d past the start's (%d) holds A %x <= end %x but is not taken (last %d)", n, j-c, c, l.as[0], end, last-c)
				case j <= last && in.as[j-1] > end:
					t.Fatalf("n %d: leaf %d past the start's is taken, but its separator %x is above end %x", n, j-c, in.as[j-1], end)
				}
			}
			if last-c > spanAhead || last >= in.n {
				t.Fatalf("n %d: spanEnd %d from child %d of %d", n, last, c, in.n)
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
	var ends [16]uint64 // each span its start's leaf alone
	b.ResetTimer()
	var sum uint64
	for i := range b.N {
		g := groups[i&(len(groups)-1)]
		if prefetch {
			t.Prefetch(g, ends[:])
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
