package statemachine

import (
	"cmp"
	"math/bits"
	"slices"
)

// The index of fence coverings: which fences' coverings may hold a leaf
// cell. An event's candidates are the fences whose covering holds its
// leaf cell; only they get the exact test (fences.go).
//
// Most covering cells (those of blockLevel or finer) live in blocks: a
// block is a cell of blockLevel (about 5 to 10 km across) with one bucket
// for each of its descendants at bucketLevel (about 75 to 150 m across).
// A bucket lists each covering cell that intersects it, as a fenceEnt of
// 8 bytes: the cell's id bits below bucketLevel (a cell coarser than the
// bucket is listed as the whole bucket) and its fence's slot. All of a
// block's entries are one flat array, by bucket and then slot, with the
// start of each bucket in a table. An event's lookup is a small map
// lookup (the blocks, a few hundred for a city or region: they stay in
// cache), one read of the table and one of a short run of entries, where
// a map keyed by covering cell costs a cache miss at each covering level.
// The entries hold no pointers, so the collector does not scan them.
//
// Cells coarser than blockLevel (fences wider than a few km) are in a
// map, big, looked up at each of its levels.
//
// Puts append a block's new entries to a pending list and mark the block
// dirty; the next lookup of the block merges them in (flush), so that
// loading many fences costs one sort for each block. A delete clears its
// fence's slot and flushes the blocks it touched at once, which drops its
// entries; only then is the slot free for another fence, so that an entry
// never names a fence other than its own.

// The blocks' levels.
const (
	blockLevel  = 10
	bucketLevel = 16
	blockBits   = 1 << (2 * (bucketLevel - blockLevel)) // buckets of a block
	// subBits: a cell id's bits below bucketLevel, those of a fenceEnt.
	subBits = 61 - 2*bucketLevel
	subMask = 1<<subBits - 1
)

// fenceEnt is a covering cell in a bucket: sub is the cell id's bits
// below bucketLevel (the bucket itself, 1<<(subBits-1), for a cell as
// coarse as the bucket or coarser), ref the fence's slot times 2 plus 1
// when the cell is inside the fence.
type fenceEnt struct {
	sub, ref uint32
}

// holds reports whether the leaf cell whose bits below bucketLevel are
// leafSub lies in the entry's cell.
func (x fenceEnt) holds(leafSub uint32) bool {
	lsb := x.sub & -x.sub
	return leafSub >= x.sub-(lsb-1) && leafSub <= x.sub+(lsb-1)
}

// fenceAdd is a pending entry of a block: its bucket and entry.
type fenceAdd struct {
	bucket uint32
	ent    fenceEnt
}

// fenceBlock is a block of the index.
type fenceBlock struct {
	// start[i] to start[i+1] are bucket i's entries in ents.
	start [blockBits + 1]uint32
	ents  []fenceEnt
	pend  []fenceAdd // entries not yet in ents, in no order
	cells int        // covering cells in the block, pending or not
}

// fenceRef is an entry of big: a fence whose covering has the cell, and
// whether the cell is inside it.
type fenceRef struct {
	f      *fence
	inside bool
}

// parentAt is the ancestor of cell c at level l (c's level is at least l).
func parentAt(c uint64, l int) uint64 {
	lsb := uint64(1) << (2 * (30 - l))
	return c&-lsb | lsb
}

func cellLevel(c uint64) int { return 30 - bits.TrailingZeros64(c)/2 }

// bucketOf is the bucket of its block that the leaf cell lies in.
func bucketOf(leaf uint64) uint32 {
	return uint32(leaf>>subBits) & (blockBits - 1)
}

// fenceBlockUse is a block a fence's covering has cells in, and how many.
type fenceBlockUse struct {
	key   uint64
	cells uint32
}

// addIndex adds f's covering, with f in a free slot, and drops f.cells
// and f.inside: the index holds them.
func (fs *fenceSet) addIndex(f *fence) {
	if n := len(fs.free); n > 0 {
		f.slot = fs.free[n-1]
		fs.free = fs.free[:n-1]
	} else {
		f.slot = uint32(len(fs.slots))
		fs.slots = append(fs.slots, nil)
	}
	fs.slots[f.slot] = f
	if fs.blocks == nil {
		fs.blocks = make(map[uint64]*fenceBlock)
	}
	for i, c := range f.cells {
		l := cellLevel(c)
		if l < blockLevel {
			if fs.big == nil {
				fs.big = make(map[uint64][]fenceRef)
			}
			fs.big[c] = append(fs.big[c], fenceRef{f, f.inside[i]})
			fs.bigLevels[l]++
			fs.bigMsk |= 1 << l
			f.big = append(f.big, c)
			continue
		}
		k := parentAt(c, blockLevel)
		b := fs.blocks[k]
		if b == nil {
			b = new(fenceBlock)
			fs.blocks[k] = b
		}
		b.cells++
		if j := slices.IndexFunc(f.blocks, func(u fenceBlockUse) bool { return u.key == k }); j >= 0 {
			f.blocks[j].cells++
		} else {
			f.blocks = append(f.blocks, fenceBlockUse{k, 1})
		}
		ref := f.slot<<1 | uint32(b2u(f.inside[i]))
		if l >= bucketLevel {
			b.pend = append(b.pend, fenceAdd{bucketOf(c), fenceEnt{uint32(c & subMask), ref}})
			continue
		}
		// A coarser cell is listed in each bucket it spans.
		lsb := uint64(1) << (2 * (30 - bucketLevel))
		half := c&-c - 1 // c spans the leaves c-half to c+half
		for x := parentAt(c-half, bucketLevel); x <= c+half; x += 2 * lsb {
			b.pend = append(b.pend, fenceAdd{bucketOf(x), fenceEnt{1 << (subBits - 1), ref}})
		}
	}
	// Sorted, so that the order of work at removal does not follow the
	// covering's.
	slices.SortFunc(f.blocks, func(a, b fenceBlockUse) int { return cmp.Compare(a.key, b.key) })
	f.cells, f.inside = nil, nil
}

// removeIndex removes f's covering and frees its slot.
func (fs *fenceSet) removeIndex(f *fence) {
	fs.slots[f.slot] = nil
	for _, c := range f.big {
		list := fs.big[c]
		if i := slices.IndexFunc(list, func(r fenceRef) bool { return r.f == f }); i >= 0 {
			list = slices.Delete(list, i, i+1)
		}
		if len(list) == 0 {
			delete(fs.big, c)
		} else {
			fs.big[c] = list
		}
		l := cellLevel(c)
		if fs.bigLevels[l]--; fs.bigLevels[l] == 0 {
			fs.bigMsk &^= 1 << l
		}
	}
	for _, u := range f.blocks {
		b := fs.blocks[u.key]
		if b.cells -= int(u.cells); b.cells == 0 {
			delete(fs.blocks, u.key)
			continue
		}
		fs.flush(b)
	}
	fs.free = append(fs.free, f.slot)
}

// flush merges b's pending entries into its buckets and drops the
// entries of cleared slots.
func (fs *fenceSet) flush(b *fenceBlock) {
	slices.SortFunc(b.pend, func(x, y fenceAdd) int {
		if x.bucket != y.bucket {
			return cmp.Compare(x.bucket, y.bucket)
		}
		return cmp.Compare(x.ent.ref, y.ent.ref)
	})
	out := make([]fenceEnt, 0, len(b.ents)+len(b.pend))
	live := func(x fenceEnt) bool { return fs.slots[x.ref>>1] != nil }
	pend := b.pend
	lo := b.start[0]
	for i := range uint32(blockBits) {
		hi := b.start[i+1]
		b.start[i] = uint32(len(out))
		old := b.ents[lo:hi]
		n := 0
		for n < len(pend) && pend[n].bucket == i {
			n++
		}
		add := pend[:n]
		pend = pend[n:]
		// Merge old and add by ref; each is in ref order.
		for len(old) > 0 || len(add) > 0 {
			var x fenceEnt
			if len(add) == 0 || len(old) > 0 && old[0].ref <= add[0].ent.ref {
				x, old = old[0], old[1:]
			} else {
				x, add = add[0].ent, add[1:]
			}
			if live(x) {
				out = append(out, x)
			}
		}
		lo = hi
	}
	b.start[blockBits] = uint32(len(out))
	b.ents = out
	clear(b.pend)
	b.pend = b.pend[:0]
}

// bucket returns the entries of the bucket that holds the leaf cell, in
// slot order (nil when there are none).
func (fs *fenceSet) bucket(leaf uint64) []fenceEnt {
	b := fs.blocks[parentAt(leaf, blockLevel)]
	if b == nil {
		return nil
	}
	if len(b.pend) > 0 {
		fs.flush(b)
	}
	i := bucketOf(leaf)
	return b.ents[b.start[i]:b.start[i+1]]
}

// appendCandidates appends the fences whose covering holds the leaf cell
// (marked candNew) and, when other is not 0, those whose covering holds
// that leaf cell (marked candPrev), each fence once, in no particular
// order.
func (fs *fenceSet) appendCandidates(dst []fenceCand, leaf, other uint64) []fenceCand {
	n0 := len(dst)
	a := fs.bucket(leaf)
	ls := uint32(leaf & subMask)
	if other == 0 {
		for _, x := range a {
			if x.holds(ls) {
				dst = append(dst, fenceCand{f: fs.slots[x.ref>>1], via: candNew, inner: candNew * uint8(x.ref&1)})
			}
		}
	} else if parentAt(leaf, bucketLevel) == parentAt(other, bucketLevel) {
		// One bucket: both leaves are judged in one pass.
		os := uint32(other & subMask)
		// A fence's entries are adjacent; two of them may hold one leaf
		// each.
		for _, x := range a {
			via := candNew*b2u(x.holds(ls)) | candPrev*b2u(x.holds(os))
			if via == 0 {
				continue
			}
			f := fs.slots[x.ref>>1]
			if n := len(dst); n > n0 && dst[n-1].f == f {
				dst[n-1].via |= via
				dst[n-1].inner |= via * uint8(x.ref&1)
				continue
			}
			dst = append(dst, fenceCand{f: f, via: via, inner: via * uint8(x.ref&1)})
		}
	} else {
		// Two buckets: those of leaf first, in slot order, then other's
		// merged into them (each list holds a fence at most once, as its
		// covering cells are disjoint).
		for _, x := range a {
			if x.holds(ls) {
				dst = append(dst, fenceCand{f: fs.slots[x.ref>>1], via: candNew, inner: candNew * uint8(x.ref&1)})
			}
		}
		os := uint32(other & subMask)
		i, n1 := n0, len(dst)
		for _, y := range fs.bucket(other) {
			if !y.holds(os) {
				continue
			}
			slot := y.ref >> 1
			for i < n1 && dst[i].f.slot < slot {
				i++
			}
			if i < n1 && dst[i].f.slot == slot {
				dst[i].via |= candPrev
				dst[i].inner |= candPrev * uint8(y.ref&1)
				continue
			}
			dst = append(dst, fenceCand{f: fs.slots[slot], via: candPrev, inner: candPrev * uint8(y.ref&1)})
		}
	}
	if fs.bigMsk == 0 {
		return dst
	}
	// Fences wider than a block: looked up at each level, and merged
	// with those found above (a fence may be in both, through different
	// leaves).
	for m := fs.bigMsk; m != 0; m &= m - 1 {
		l := bits.TrailingZeros32(m)
		c := parentAt(leaf, l)
		o := c
		if other != 0 {
			o = parentAt(other, l)
		}
		via := uint8(candNew)
		if other != 0 && o == c {
			via |= candPrev
		}
		for _, r := range fs.big[c] {
			dst = append(dst, fenceCand{f: r.f, via: via, inner: via * b2u(r.inside)})
		}
		if other != 0 && o != c {
			for _, r := range fs.big[o] {
				dst = append(dst, fenceCand{f: r.f, via: candPrev, inner: candPrev * b2u(r.inside)})
			}
		}
	}
	merged := mergeCands(dst[n0:])
	clear(dst[n0+len(merged):])
	return dst[:n0+len(merged)]
}
