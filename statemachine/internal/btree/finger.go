package btree

// A Finger applies a run of changes whose keys ascend, as a batch sorted
// by key does: each descent starts from the lowest node of the previous
// one whose key range still holds the key, so the levels near the root,
// which most keys of a batch share, are searched once rather than for
// every key.
//
// Invariants, while ok and shape == t.shape (no node's key range changed
// since the finger's last descent, for the key last):
//   - path[0:t.height] holds the inner node and child index at each level
//     of the descent for last, and leaf the leaf it reached; the tree's
//     own changes (set, delete) rebalance along this path exactly as
//     along a fresh descent's.
//   - hi[d] (when bounded[d]) is the exclusive upper bound of the key
//     range of the node at depth d (0 the root, t.height the leaf); the
//     root's is unbounded. Every node on the path holds last, and a key k
//     >= last lies in the node at depth d when k < hi[d].
//
// A key below last, or any change of the tree's shape, sends the next
// descent from the root.
type Finger struct {
	t       *Tree
	ok      bool
	shape   uint64
	last    Key
	leaf    *leaf
	path    [maxHeight]step
	hi      [maxHeight + 1]Key
	bounded [maxHeight + 1]bool
}

// Finger returns a finger on t, for a run of ascending keys.
func (t *Tree) Finger() Finger { return Finger{t: t} }

// seek returns the leaf where k belongs, descending from as low a node of
// the last descent as still holds k.
func (f *Finger) seek(k Key) *leaf {
	t := f.t
	if !f.ok || f.shape != t.shape || k.Less(f.last) {
		return f.descend(0, k)
	}
	d := t.height
	for d > 0 && f.bounded[d] && !k.Less(f.hi[d]) {
		d--
	}
	if d == t.height {
		f.last = k
		return f.leaf
	}
	return f.descend(d, k)
}

// descend descends to k's leaf from the inner node at depth d of the
// path (the root for 0), recording the path and bounds below it.
func (f *Finger) descend(d int, k Key) *leaf {
	t := f.t
	f.ok, f.shape, f.last = true, t.shape, k
	if t.height == 0 {
		f.leaf = t.root.lf
		return f.leaf
	}
	in := t.root.in
	if d == 0 {
		f.bounded[0] = false
	} else {
		p := f.path[d-1]
		in = p.in.kids[p.i].in
	}
	for ; ; d++ {
		i := in.route(k)
		f.path[d] = step{in, i}
		if i < in.n-1 {
			f.hi[d+1], f.bounded[d+1] = in.key(i), true
		} else {
			f.hi[d+1], f.bounded[d+1] = f.hi[d], f.bounded[d]
		}
		if d == t.height-1 {
			f.leaf = in.kids[i].lf
			return f.leaf
		}
		in = in.kids[i].in
	}
}

// Set is t.Set(k, v) for a key at or after the finger's last.
func (f *Finger) Set(k Key, v uint32) (replaced bool) {
	l := f.seek(k)
	return f.t.setLeaf(l, &f.path, k, v)
}

// DeleteEntry is t.DeleteEntry(k, v) for a key at or after the finger's
// last.
func (f *Finger) DeleteEntry(k Key, v uint32) bool {
	l := f.seek(k)
	_, ok := f.t.deleteIn(l, k, match{v: v, byValue: true}, &f.path)
	return ok
}

// Touch is t.Touch(k) for a key at or after the finger's last. A finger
// that only touches changes nothing, so it may run ahead of another that
// changes the tree.
func (f *Finger) Touch(k Key) uint64 { return touchLeaf(f.seek(k)) }
