package statemachine

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/statemachine/internal/btree"
)

func TestRadixSortByA(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, n := range []int{0, 1, 2, 7, smallSort, smallSort + 1, 300, 5000} {
		for _, shape := range []int{0, 1, 2} {
			items := make([]sortItem, n)
			for i := range items {
				a := r.Uint64()
				switch shape {
				case 1: // a shared prefix, as the cell ids of a region
					a = 0x47<<56 | a>>20
				case 2: // few distinct values: stability matters
					a = r.Uint64N(4) << 40
				}
				items[i] = sortItem{a, uint32(i)}
			}
			want := slices.Clone(items)
			slices.SortStableFunc(want, func(x, y sortItem) int {
				switch {
				case x.a < y.a:
					return -1
				case x.a > y.a:
					return 1
				}
				return 0
			})
			got := radixSortByA(items, make([]sortItem, n))
			if !slices.Equal(got, want) {
				t.Fatalf("n %d shape %d: radix sort differs from a stable sort", n, shape)
			}
		}
	}
}

// TestDeferredSpatialBatch writes batches whose events move the same
// entities several times, to shared positions (ties of cell id, where the
// by-value spatial index reads entity ids through the slots), back and
// forth, and after their expiry (a remove and re-create within the batch),
// and compares the result with the same events written one per batch.
func TestDeferredSpatialBatch(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 3))
	batched, single := New(), New()
	now := uint64(epoch)
	positions := [][2]int64{{38_110_000_000, 13_360_000_000}, {38_110_000_001, 13_360_000_000}, {38_200_000_000, 13_100_000_000}, {-10, 20}}
	for round := range 30 {
		now += 3e9 // TTLs of 1 and 2 seconds expire between rounds
		evs := make([]core.GeoEvent, 200)
		for i := range evs {
			p := positions[r.IntN(len(positions))]
			evs[i] = core.GeoEvent{
				EntityID:    core.Uint128{Hi: uint64(r.IntN(2)), Lo: uint64(1 + r.IntN(40))},
				LatNano:     p[0],
				LonNano:     p[1],
				TimestampNS: now - 1000 + uint64(i), // explicit, so both runs store the same events
				TTLSeconds:  uint32(r.IntN(3)),
			}
		}
		AssignCells(evs)
		upsert := round%2 == 1
		write := func(sm *StateMachine, evs []core.GeoEvent) {
			req := &core.InsertRequest{Events: evs}
			var rep core.InsertReply
			var err error
			if upsert {
				rep, err = sm.Upsert(now, req)
			} else {
				rep, err = sm.Insert(now, req)
			}
			if err != nil {
				t.Fatal(err)
			}
			_ = rep
		}
		write(batched, slices.Clone(evs))
		for i := range evs {
			write(single, evs[i:i+1:i+1])
		}
		for _, sm := range []*StateMachine{batched, single} {
			if err := sm.checkInvariants(); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if batched.Digest() != single.Digest() {
			t.Fatalf("round %d: digests differ", round)
		}
		if a, b := spatialKeys(batched), spatialKeys(single); !slices.Equal(a, b) {
			t.Fatalf("round %d: spatial indexes differ:\n%v\n%v", round, a, b)
		}
	}
}

func spatialKeys(sm *StateMachine) []btree.Key {
	sm.flushSpatial()
	var ks []btree.Key
	for it := sm.spatial.First(); it.Valid(); it.Next() {
		ks = append(ks, it.Key())
	}
	return ks
}
