package btree

import "fmt"

// checkInvariants verifies the tree's structure: uniform depth, key order
// and separator bounds, node fill bounds, cleared spare child slots, leaf
// links, head and tail, the entry and node counts, and that the leaves
// store ids exactly when the tree is not by value.
func (t *Tree) checkInvariants() error {
	var leaves []*leaf
	count, inners := 0, 0

	var walk func(c child, depth int, lo, hi *Key, rightSpine bool) error
	walk = func(c child, depth int, lo, hi *Key, rightSpine bool) error {
		isRoot := depth == 0
		if depth == t.height {
			l := c.lf
			if l == nil || c.in != nil {
				return fmt.Errorf("depth %d: expected a leaf child", depth)
			}
			if l.n < 0 || l.n > leafCap {
				return fmt.Errorf("leaf fill %d out of range", l.n)
			}
			if !isRoot && l.n < 1 {
				return fmt.Errorf("empty non-root leaf")
			}
			if !isRoot && !rightSpine && l.n < leafMin {
				return fmt.Errorf("leaf fill %d below minimum %d", l.n, leafMin)
			}
			if (l.ids == nil) != (t.idOf != nil) {
				return fmt.Errorf("leaf ids %p in a tree with idOf %v", l.ids, t.idOf != nil)
			}
			for i := 0; i < l.n; i++ {
				k := t.key(l, i)
				if i > 0 && !t.key(l, i-1).Less(k) {
					return fmt.Errorf("leaf keys out of order at %d: %v, %v", i, t.key(l, i-1), k)
				}
				if lo != nil && k.Less(*lo) {
					return fmt.Errorf("leaf key %v below separator %v", k, *lo)
				}
				if hi != nil && !k.Less(*hi) {
					return fmt.Errorf("leaf key %v not below separator %v", k, *hi)
				}
			}
			for i := l.n; i < leafCap; i++ {
				if l.as[i] != pad {
					return fmt.Errorf("leaf A slot %d past fill %d not padded", i, l.n)
				}
			}
			count += l.n
			leaves = append(leaves, l)
			return nil
		}
		in := c.in
		if in == nil || c.lf != nil {
			return fmt.Errorf("depth %d: expected an inner child", depth)
		}
		inners++
		if in.n < 2 || in.n > innerCap {
			return fmt.Errorf("inner fill %d out of range", in.n)
		}
		if !isRoot && !rightSpine && in.n < innerMin {
			return fmt.Errorf("inner fill %d below minimum %d", in.n, innerMin)
		}
		for i := 0; i < in.n-1; i++ {
			k := in.key(i)
			if i > 0 && !in.key(i-1).Less(k) {
				return fmt.Errorf("inner keys out of order at %d", i)
			}
			if lo != nil && !lo.Less(k) {
				return fmt.Errorf("inner key %v not above lower bound %v", k, *lo)
			}
			if hi != nil && !k.Less(*hi) {
				return fmt.Errorf("inner key %v not below upper bound %v", k, *hi)
			}
		}
		for i := in.n - 1; i < innerCap; i++ {
			if in.as[i] != pad {
				return fmt.Errorf("inner A slot %d past fill %d not padded", i, in.n)
			}
		}
		for i := in.n; i < innerCap; i++ {
			if in.kids[i] != (child{}) {
				return fmt.Errorf("spare child slot %d not cleared", i)
			}
		}
		for i := 0; i < in.n; i++ {
			clo, chi := lo, hi
			if i > 0 {
				k := in.key(i - 1)
				clo = &k
			}
			if i < in.n-1 {
				k := in.key(i)
				chi = &k
			}
			if err := walk(in.kids[i], depth+1, clo, chi, rightSpine && i == in.n-1); err != nil {
				return err
			}
		}
		return nil
	}
	if t.height < 0 || t.height > maxHeight {
		return fmt.Errorf("height %d out of range", t.height)
	}
	if err := walk(t.root, 0, nil, nil, true); err != nil {
		return err
	}
	if count != t.n {
		return fmt.Errorf("Len %d, counted %d entries", t.n, count)
	}
	if len(leaves) != t.leaves || inners != t.inners {
		return fmt.Errorf("node counts %d leaves %d inners, counted %d and %d", t.leaves, t.inners, len(leaves), inners)
	}
	if t.head != leaves[0] || t.tail != leaves[len(leaves)-1] {
		return fmt.Errorf("head or tail is not the first or last leaf")
	}
	for i, l := range leaves {
		var prev, next *leaf
		if i > 0 {
			prev = leaves[i-1]
		}
		if i+1 < len(leaves) {
			next = leaves[i+1]
		}
		if l.prev != prev || l.next != next {
			return fmt.Errorf("leaf %d: links inconsistent", i)
		}
	}
	return nil
}
