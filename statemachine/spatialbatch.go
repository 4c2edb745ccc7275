package statemachine

import (
	"github.com/geoevent/geoevent/statemachine/internal/btree"
)

// Batched changes of the spatial index.
//
// An insert or upsert batch moves random keys of the spatial index: each
// change on its own descends from the root and misses the cache at the
// lowest inner level and at the leaf. So changes are deferred: spatialDelete
// and spatialSet append to sm.pendingSpatial, and flushSpatial applies the
// list sorted by cell id (consecutive changes then share their inner nodes,
// which stay in cache) and reads each leaf a few changes ahead
// (spatialAhead), so that the misses of several leaves overlap. Both go
// through btree.Fingers, which descend from the lowest node the previous
// key shares with the next.
//
// The list outlives the write that made it: a write applies it only once
// it holds spatialFlushAt changes, and the index is otherwise brought up to
// date by the next operation that reads it. With 131,072 changes pending a
// leaf of a million-entity index receives several at once, where the
// 10,000 of one batch mostly met a leaf each: inserts went 1.41 -> 1.91 M
// events/s and upserts 1.13 -> 1.26 M (BenchmarkInsertBatch10k and
// BenchmarkUpsertBatch10k, six alternated runs each, p = 0.002). Followers
// serve no queries, so they apply only at the threshold; three replicas
// ingested 0.40-0.44 M events/s before and 0.45 M after (two alternated
// pairs). The price is a longer pause:
// at a million entities the upsert batch that applies 131,072 changes
// took 33 ms (the longest batch was 13 ms before), and a query after a
// build-up waits about 21 ms for its flush. 2^19 changes gained 8% more
// for four times that pause; 2^15 lost 13%.
//
// Invariants and why the result is the same as applying the changes in
// order:
//   - The sort is stable and by A alone: changes of the same key keep their
//     order (equal keys have equal A), and changes of different keys
//     commute. The set of entries after a flush depends only on the
//     operations applied; the tree's shape may differ between replicas
//     (the leader flushes for its queries, which are not in the log).
//     Query results, cursors and scan budgets count keys and ranges, not
//     nodes; only Stats' index_bytes, a memory figure, reflects the shape.
//   - The spatial index is by value (see New): every entry's slot must
//     name the entity of its key's id whenever the tree is touched. A slot
//     only changes its entity through remove(), which flushes first and
//     applies its own delete at once; put() re-creates the same entity
//     only after that.
//   - Everything that reads the spatial index flushes first: the radius
//     and polygon queries and Stats (and remove, as above).

// spatialOp is a deferred change of the spatial index: delete k (which
// holds slot) or set k to slot.
type spatialOp struct {
	k    btree.Key
	slot uint32
	del  bool
}

// spatialDelete removes k, the key of the entity in slot.
func (sm *StateMachine) spatialDelete(k btree.Key, slot uint32) {
	if sm.deferSpatial {
		sm.pendingSpatial = append(sm.pendingSpatial, spatialOp{k: k, slot: slot, del: true})
		return
	}
	sm.spatial.DeleteEntry(k, slot)
}

// spatialSet adds k, the key of the entity in slot.
func (sm *StateMachine) spatialSet(k btree.Key, slot uint32) {
	if sm.deferSpatial {
		sm.pendingSpatial = append(sm.pendingSpatial, spatialOp{k: k, slot: slot})
		return
	}
	sm.spatial.Set(k, slot)
}

// spatialFlushAt is how many pending changes a write applies at its end
// (see above).
const spatialFlushAt = 1 << 17

func (sm *StateMachine) flushLimit() int {
	if sm.flushAt > 0 {
		return sm.flushAt
	}
	return spatialFlushAt
}

// spatialAhead is how many changes ahead flushSpatial reads leaves.
const spatialAhead = 16

// flushSpatial applies the pending changes of the spatial index.
func (sm *StateMachine) flushSpatial() {
	ops := sm.pendingSpatial
	if len(ops) == 0 {
		return
	}
	items := sm.sortItems[:0]
	for i := range ops {
		items = append(items, sortItem{ops[i].k.A, uint32(i)})
	}
	tmp := append(sm.sortTmp[:0], items...)
	sorted := radixSortByA(items, tmp)
	sm.sortItems, sm.sortTmp = items, tmp
	// The changes ascend by cell: one finger applies them, another runs
	// ahead touching leaves, each descending only from the lowest node its
	// previous key shares with the next.
	f, ahead := sm.spatial.Finger(), sm.spatial.Finger()
	for j := range sorted {
		if j%spatialAhead == 0 {
			var s uint64
			for _, it := range sorted[min(j+spatialAhead, len(sorted)):min(j+2*spatialAhead, len(sorted))] {
				s += ahead.Touch(ops[it.i].k)
			}
			sm.touchSink = s
		}
		o := &ops[sorted[j].i]
		if o.del {
			f.DeleteEntry(o.k, o.slot)
		} else {
			f.Set(o.k, o.slot)
		}
	}
	sm.pendingSpatial = ops[:0]
}

// smallSort is the size up to which radixSortByA sorts by insertion.
const smallSort = 32

// sortItem is a pending change's A and index, as radixSortByA sorts them.
type sortItem struct {
	a uint64
	i uint32
}

// radixSortByA sorts items by a, stably: a least-significant-digit radix
// sort on bytes, which skips the bytes that all items share (the cell ids
// of a region share their leading bytes). tmp is scratch of the same
// length; it returns whichever of the two holds the result.
func radixSortByA(items, tmp []sortItem) []sortItem {
	if len(items) <= smallSort {
		// Zeroing and scanning the counts would cost more than the sort:
		// insertion sort, stable too.
		for i := 1; i < len(items); i++ {
			for j := i; j > 0 && items[j].a < items[j-1].a; j-- {
				items[j], items[j-1] = items[j-1], items[j]
			}
		}
		return items
	}
	var counts [8][256]uint32
	for _, it := range items {
		for d := range 8 {
			counts[d][byte(it.a>>(8*d))]++
		}
	}
	for d := range 8 {
		c := &counts[d]
		if int(c[byte(items[0].a>>(8*d))]) == len(items) {
			continue // every item has the same byte d
		}
		var pos uint32
		for b := range c {
			n := c[b]
			c[b] = pos
			pos += n
		}
		shift := 8 * d
		for _, it := range items {
			b := byte(it.a >> shift)
			tmp[c[b]] = it
			c[b]++
		}
		items, tmp = tmp, items
	}
	return items
}
