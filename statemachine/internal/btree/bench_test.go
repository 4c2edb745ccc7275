package btree

import (
	"math/rand/v2"
	"testing"

	"github.com/geoevent/geoevent/core"
)

const benchN = 1_000_000

func randomKey(r *rand.Rand) Key {
	return Key{A: r.Uint64(), ID: core.Uint128{Hi: r.Uint64(), Lo: r.Uint64()}}
}

// benchRandom is a tree of benchN random keys, shared by the benchmarks;
// each leaves it holding exactly keys.
var benchRandom struct {
	t    *Tree
	keys []Key
	r    *rand.Rand
}

func randomTree(b *testing.B) (*Tree, []Key, *rand.Rand) {
	s := &benchRandom
	if s.t == nil {
		s.r = rand.New(rand.NewPCG(1, 2))
		s.t = New()
		s.keys = make([]Key, benchN)
		for i := range s.keys {
			s.keys[i] = randomKey(s.r)
			s.t.Set(s.keys[i], uint32(i))
		}
	}
	if s.t.Len() != benchN {
		b.Fatalf("shared tree holds %d keys", s.t.Len())
	}
	return s.t, s.keys, s.r
}

// BenchmarkSetRandom inserts new random keys into a tree of 1M-1.1M keys.
func BenchmarkSetRandom(b *testing.B) {
	t, _, r := randomTree(b)
	const pool = 100_000
	fresh := make([]Key, pool)
	refill := func() {
		for i := range fresh {
			fresh[i] = randomKey(r)
		}
	}
	refill()
	b.ResetTimer()
	for i := range b.N {
		j := i % pool
		if j == 0 && i > 0 {
			b.StopTimer()
			for _, k := range fresh {
				t.Delete(k)
			}
			refill()
			b.StartTimer()
		}
		t.Set(fresh[j], uint32(i))
	}
	b.StopTimer()
	for _, k := range fresh[:min(b.N, pool)] {
		t.Delete(k)
	}
}

// BenchmarkDeleteInsertRandom deletes one random key and inserts another
// per op, at 1M keys: the spatial index's upsert pattern. The keys are
// random, so deleting them oldest first deletes at random places.
func BenchmarkDeleteInsertRandom(b *testing.B) {
	t, keys, r := randomTree(b)
	fresh := make([]Key, 1<<16)
	for i := range fresh {
		fresh[i] = randomKey(r)
	}
	b.ResetTimer()
	for i := range b.N {
		j := i % len(keys)
		if _, ok := t.Delete(keys[j]); !ok {
			b.Fatal("missing key")
		}
		k := fresh[i&(1<<16-1)]
		k.A += uint64(i) // distinct from earlier rounds
		keys[j] = k
		t.Set(k, uint32(i))
	}
}

// BenchmarkAppendIncreasing appends increasing keys past the maximum of a
// tree of 1M-2M increasing keys: the time index's insert pattern.
func BenchmarkAppendIncreasing(b *testing.B) {
	var t *Tree
	build := func() {
		t = New()
		for i := range benchN {
			t.Set(Key{A: uint64(i) << 8, ID: core.Uint128{Lo: uint64(i)}}, uint32(i))
		}
	}
	build()
	b.ResetTimer()
	for i := range b.N {
		j := i % benchN
		if j == 0 && i > 0 {
			b.StopTimer()
			build()
			b.StartTimer()
		}
		t.Set(Key{A: uint64(benchN+j) << 8, ID: core.Uint128{Lo: uint64(i)}}, uint32(i))
	}
}

// BenchmarkAppendDeleteRandom appends one increasing key and deletes one
// random key per op, at 1M keys: the time index's steady state.
func BenchmarkAppendDeleteRandom(b *testing.B) {
	t := New()
	keys := make([]Key, benchN)
	for i := range keys {
		keys[i] = Key{A: uint64(i), ID: core.Uint128{Lo: uint64(i)}}
		t.Set(keys[i], uint32(i))
	}
	r := rand.New(rand.NewPCG(5, 6))
	idx := make([]int32, 1<<16)
	for i := range idx {
		idx[i] = int32(r.IntN(len(keys)))
	}
	b.ResetTimer()
	for i := range b.N {
		j := idx[i&(1<<16-1)]
		t.Delete(keys[j])
		k := Key{A: uint64(benchN + i), ID: core.Uint128{Lo: uint64(i)}}
		keys[j] = k
		t.Set(k, uint32(i))
	}
}

// BenchmarkGet looks up random present keys in a tree of 1M keys.
func BenchmarkGet(b *testing.B) {
	t, keys, r := randomTree(b)
	queries := make([]Key, 1<<16)
	for i := range queries {
		queries[i] = keys[r.IntN(len(keys))]
	}
	b.ResetTimer()
	var sum uint32
	for i := range b.N {
		v, _ := t.Get(queries[i&(1<<16-1)])
		sum += v
	}
	sink = sum
}

// BenchmarkSeekGEAndScan64 seeks to a random key and walks 64 entries.
func BenchmarkSeekGEAndScan64(b *testing.B) {
	t, _, r := randomTree(b)
	seeks := make([]Key, 1<<16)
	for i := range seeks {
		seeks[i] = randomKey(r)
	}
	b.ResetTimer()
	var sum uint32
	for i := range b.N {
		it := t.SeekGE(seeks[i&(1<<16-1)])
		for n := 0; n < 64 && it.Valid(); n++ {
			sum += it.Value()
			it.Next()
		}
	}
	sink = sum
}

var sink uint32
