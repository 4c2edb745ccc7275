// Package btree is an in-memory B+tree specialised for the state machine's
// ordered indexes: a (uint64, 128-bit id) key mapping to a uint32 value.
//
// It is not generic and takes no comparator: the key comparison is inlined
// into the searches. Keys and values live in the leaves, which are linked in
// both directions for cursor walks. Nodes are fixed-size arrays: a leaf
// holds up to 72 entries, an inner node up to 64 children, so a tree of n
// random entries has about n/50 leaves and n/2500 inner nodes.
//
// A tree made by [NewByValue] stores no ids in its leaves: the ID part of
// an entry's key is a function of its value (the state machine's spatial
// index maps (cell, entity id) to the entity's slot, which names the
// entity). Its leaves are 896 bytes instead of 2,048, and an insert or
// delete shifts the A and value arrays only. Separators in inner nodes
// keep their ids, since they need not be keys of entries still present.
//
// The tree is deterministic: its shape depends only on the sequence of
// operations applied to it. It is not safe for concurrent use.
package btree

import (
	"math/bits"
	"unsafe"

	"github.com/geoevent/geoevent/core"
)

// Key orders by A, then by ID (as an unsigned 128-bit number: Hi then Lo).
type Key struct {
	A  uint64
	ID core.Uint128
}

// Less reports whether k orders before o.
func (k Key) Less(o Key) bool {
	if k.A != o.A {
		return k.A < o.A
	}
	if k.ID.Hi != o.ID.Hi {
		return k.ID.Hi < o.ID.Hi
	}
	return k.ID.Lo < o.ID.Lo
}

// Compare returns -1, 0 or +1 as k orders before, equal to or after o.
func (k Key) Compare(o Key) int {
	switch {
	case k.A < o.A:
		return -1
	case k.A > o.A:
		return 1
	}
	return k.ID.Compare(o.ID)
}

const (
	// leafCap is the number of entries a leaf holds. A non-root leaf that
	// is not the rightmost one holds at least leafMin; two neighbouring
	// leaves are merged when together they hold at most leafMergeMax,
	// otherwise redistributed.
	//
	// 72 entries fill the runtime's 896-byte size class, the ids being
	// elsewhere (in their own 1,152-byte array, or not stored at all).
	leafCap      = 72
	leafMin      = leafCap / 3
	leafMergeMax = 2 * leafMin

	// innerCap is the number of children an inner node holds. Every inner
	// node has at least two children; one that is not on the right spine
	// has at least innerMin.
	innerCap      = 64
	innerMin      = innerCap / 3
	innerMergeMax = 2 * innerMin

	// pad fills the A slots of a node past its last key, so that searches
	// can scan whole arrays without depending on the node's fill.
	pad = ^uint64(0)

	// maxHeight bounds the number of inner levels. Below the root only the
	// right spine may hold fewer than innerMin children or leafMin entries,
	// so a tree with h inner levels holds at least innerMin^(h-1) * leafMin
	// entries: over 10^15 for h = maxHeight, far beyond memory.
	maxHeight = 12
)

// Searches look at the A arrays in blocks of 8, one cache line.
var _ [0]struct{} = [leafCap % 8]struct{}{}
var _ [0]struct{} = [innerCap % 8]struct{}{}

// leaf holds n entries in ascending key order, keys split into A and ID
// arrays: searches scan the A array (its lines fetched in parallel) and
// look at ids only on a tie of A. as[n:] holds pad. ids is nil exactly in
// a by-value tree, where entry i's ID is idOf(vals[i]).
type leaf struct {
	prev *leaf
	next *leaf
	n    int
	ids  *[leafCap]core.Uint128
	as   [leafCap]uint64
	vals [leafCap]uint32
}

func (t *Tree) newLeaf() *leaf {
	l := &leaf{}
	if t.idOf == nil {
		l.ids = new([leafCap]core.Uint128)
	}
	fillPad(l.as[:])
	return l
}

func fillPad(as []uint64) {
	for i := range as {
		as[i] = pad
	}
}

// id returns the ID part of the key of l's entry i.
func (t *Tree) id(l *leaf, i int) core.Uint128 {
	if l.ids != nil {
		return l.ids[i]
	}
	return t.idOf(l.vals[i])
}

// key returns the key of l's entry i.
func (t *Tree) key(l *leaf, i int) Key { return Key{A: l.as[i], ID: t.id(l, i)} }

// The comparisons of l's entry i with k below look at the entry's id only
// on a tie of A (in a by-value tree, that reads what the value names).

// is reports whether l's entry i has key k.
func (t *Tree) is(l *leaf, i int, k Key) bool {
	return l.as[i] == k.A && t.id(l, i) == k.ID
}

// before reports whether l's entry i orders before k.
func (t *Tree) before(l *leaf, i int, k Key) bool {
	if l.as[i] != k.A {
		return l.as[i] < k.A
	}
	return t.id(l, i).Less(k.ID)
}

// after reports whether l's entry i orders after k.
func (t *Tree) after(l *leaf, i int, k Key) bool {
	if l.as[i] != k.A {
		return l.as[i] > k.A
	}
	return k.ID.Less(t.id(l, i))
}

// move copies the entries src[from:to] to l[at:], which may overlap. Both
// leaves belong to the same tree, so both have ids or neither has.
func (l *leaf) move(at int, src *leaf, from, to int) {
	copy(l.as[at:], src.as[from:to])
	if l.ids != nil {
		copy(l.ids[at:], src.ids[from:to])
	}
	copy(l.vals[at:], src.vals[from:to])
}

// child is a reference to a child node: in on inner levels above the
// lowest, lf on the lowest inner level. Exactly one is set.
type child struct {
	in *inner
	lf *leaf
}

// inner routes a key k to kids[i] where i is the number of its n-1
// separators that are <= k: every key under kids[i] is >= separator i-1
// and < separator i. as[n-1:] holds pad.
//
// n and as come first: routing reads n and the heads of as, and Go checks
// the node's pointer by loading its first byte, which then lies on a line
// routing reads anyway (with kids first, that check cost a cache line
// more a node: BenchmarkSeek16 1.15 and BenchmarkGet 1.06 times as fast
// this way, medians of six alternated pairs each).
type inner struct {
	n    int // number of children
	as   [innerCap]uint64
	kids [innerCap]child
	ids  [innerCap - 1]core.Uint128
}

func newInner() *inner {
	in := &inner{}
	fillPad(in.as[:])
	return in
}

func (in *inner) key(i int) Key { return Key{A: in.as[i], ID: in.ids[i]} }

func (in *inner) setKey(i int, k Key) { in.as[i], in.ids[i] = k.A, k.ID }

// moveKeys copies the separators src[from:to] to in[at:], which may overlap.
func (in *inner) moveKeys(at int, src *inner, from, to int) {
	copy(in.as[at:], src.as[from:to])
	copy(in.ids[at:], src.ids[from:to])
}

const (
	leafBytes  = uint64(unsafe.Sizeof(leaf{}))
	idsBytes   = uint64(unsafe.Sizeof([leafCap]core.Uint128{}))
	innerBytes = uint64(unsafe.Sizeof(inner{}))
	treeBytes  = uint64(unsafe.Sizeof(Tree{}))
)

// Tree is an ordered map from Key to uint32. Use New or NewByValue to
// create one.
type Tree struct {
	root   child
	height int // number of inner levels; 0 when the root is a leaf
	n      int
	head   *leaf // leftmost leaf
	tail   *leaf // rightmost leaf
	leaves int
	inners int
	idOf   func(v uint32) core.Uint128 // nil: the leaves store ids
	// shape counts the changes of nodes' key ranges: splits, merges,
	// rebalancing, a new or removed root, Clear. A Finger's path is good
	// while it has not changed.
	shape uint64
}

// New returns an empty tree.
func New() *Tree {
	t := &Tree{}
	t.Clear()
	return t
}

// NewByValue returns an empty tree whose leaves store no ids: the ID part
// of an entry's key is idOf of its value. The caller guarantees that every
// entry (k, v) has idOf(v) == k.ID from when it is set until it is
// deleted: Set(k, v) requires idOf(v) == k.ID, and what idOf reads must
// not change meanwhile. The tree calls idOf on a tie of A, for keys that
// become separators (on splits and rebalancing), and for keys that an
// Iter, Min, Max or SweepLeaf reports.
func NewByValue(idOf func(v uint32) core.Uint128) *Tree {
	t := &Tree{idOf: idOf}
	t.Clear()
	return t
}

// Clear removes every entry, releasing all nodes but one empty leaf.
func (t *Tree) Clear() {
	lf := t.newLeaf()
	*t = Tree{root: child{lf: lf}, head: lf, tail: lf, leaves: 1, idOf: t.idOf, shape: t.shape + 1}
}

// Len returns the number of entries.
func (t *Tree) Len() int { return t.n }

// Bytes estimates the memory held by the tree's nodes.
func (t *Tree) Bytes() uint64 {
	lb := leafBytes
	if t.idOf == nil {
		lb += idsBytes
	}
	return treeBytes + uint64(t.leaves)*lb + uint64(t.inners)*innerBytes
}

// lowerBound returns the index of the first entry of l >= k, or l.n.
func (t *Tree) lowerBound(l *leaf, k Key) int {
	i := countLess(l.as[:], k.A)
	for i < l.n && l.as[i] == k.A && t.id(l, i).Less(k.ID) {
		i++
	}
	return i
}

// upperBound returns the index of the first entry of l > k, or l.n.
func (t *Tree) upperBound(l *leaf, k Key) int {
	i := countLess(l.as[:], k.A)
	for i < l.n && l.as[i] == k.A && !k.ID.Less(t.id(l, i)) {
		i++
	}
	return i
}

// route returns the index of the child whose key range holds k: the
// number of separators <= k.
func (in *inner) route(k Key) int {
	i := countLess(in.as[:], k.A)
	for i < in.n-1 && in.as[i] == k.A && !k.ID.Less(in.ids[i]) {
		i++
	}
	return i
}

// countLess returns the number of elements of the ascending as, whose
// length is a multiple of 8, that are less than a. It first counts the
// block heads as[8], as[16], ... below a: independent loads, one per cache
// line, so that their misses overlap. Then it counts within the one block
// of 8 that holds the answer. Nothing branches on the data.
func countLess(as []uint64, a uint64) int {
	var h uint64
	for j := 8; j < len(as); j += 8 {
		_, b := bits.Sub64(as[j], a, 0)
		h += b
	}
	s := int(h) * 8
	var c uint64
	for _, x := range as[s : s+8] {
		_, b := bits.Sub64(x, a, 0)
		c += b
	}
	return s + int(c)
}

// findLeaf returns the leaf whose key range holds k.
func (t *Tree) findLeaf(k Key) *leaf {
	if t.height == 0 {
		return t.root.lf
	}
	in := t.root.in
	for h := t.height; h > 1; h-- {
		in = in.kids[in.route(k)].in
	}
	return in.kids[in.route(k)].lf
}

// Get returns the value stored under k.
func (t *Tree) Get(k Key) (uint32, bool) {
	l := t.findLeaf(k)
	i := t.lowerBound(l, k)
	if i < l.n && t.is(l, i, k) {
		return l.vals[i], true
	}
	return 0, false
}

// Min returns the smallest entry.
func (t *Tree) Min() (Key, uint32, bool) {
	l := t.head
	if l.n == 0 {
		return Key{}, 0, false
	}
	return t.key(l, 0), l.vals[0], true
}

// Max returns the largest entry.
func (t *Tree) Max() (Key, uint32, bool) {
	l := t.tail
	if l.n == 0 {
		return Key{}, 0, false
	}
	return t.key(l, l.n-1), l.vals[l.n-1], true
}

// step records one level of a root-to-leaf descent.
type step struct {
	in *inner
	i  int
}

// Set stores v under k, reporting whether an existing value was replaced.
func (t *Tree) Set(k Key, v uint32) (replaced bool) {
	// Fast path: k is at or after the rightmost leaf's first key, so it
	// belongs in that leaf, which has room. Increasing keys come here.
	if l := t.tail; l.n > 0 && l.n < leafCap && !t.after(l, 0, k) {
		if n := l.n; t.before(l, n-1, k) {
			l.as[n] = k.A
			if l.ids != nil {
				l.ids[n] = k.ID
			}
			l.vals[n] = v
			l.n++
			t.n++
			return false
		}
		return t.setIn(l, k, v)
	}
	return t.set(k, v)
}

// setIn stores v under k in l, which must be k's leaf and not full.
func (t *Tree) setIn(l *leaf, k Key, v uint32) bool {
	i := t.lowerBound(l, k)
	if i < l.n && t.is(l, i, k) {
		l.vals[i] = v
		return true
	}
	l.insertAt(i, k, v)
	t.n++
	return false
}

// descend returns the leaf where k belongs, recording in path the inner
// node and child index taken at each level (path[0] is the root's).
func (t *Tree) descend(k Key, path *[maxHeight]step) *leaf {
	if t.height == 0 {
		return t.root.lf
	}
	in := t.root.in
	for d := 0; ; d++ {
		i := in.route(k)
		path[d] = step{in, i}
		if d == t.height-1 {
			return in.kids[i].lf
		}
		in = in.kids[i].in
	}
}

func (t *Tree) set(k Key, v uint32) bool {
	var path [maxHeight]step
	return t.setLeaf(t.descend(k, &path), &path, k, v)
}

// setLeaf stores v under k in l, k's leaf, which a descent recorded in
// path reached.
func (t *Tree) setLeaf(l *leaf, path *[maxHeight]step, k Key, v uint32) bool {
	i := t.lowerBound(l, k)
	if i < l.n && t.is(l, i, k) {
		l.vals[i] = v
		return true
	}
	t.n++
	if l.n < leafCap {
		l.insertAt(i, k, v)
		return false
	}

	// Split the leaf and insert the new right sibling into the parents.
	t.shape++
	r := t.splitLeaf(l, i, k, v)
	sep := t.key(r, 0)
	right := child{lf: r}
	for d := t.height - 1; d >= 0; d-- {
		p := path[d]
		if p.in.n < innerCap {
			p.in.insertAt(p.i, sep, right)
			return false
		}
		// Appending at the end of a rightmost inner node splits it
		// unevenly, leaving the left node full, as for leaves.
		rightmost := p.i == innerCap-1
		for e := 0; e < d && rightmost; e++ {
			rightmost = path[e].i == path[e].in.n-1
		}
		var ri *inner
		ri, sep = t.splitInner(p.in, p.i, sep, right, rightmost)
		right = child{in: ri}
	}
	// The root split: grow a new root.
	root := newInner()
	root.n = 2
	root.setKey(0, sep)
	root.kids[0] = t.root
	root.kids[1] = right
	t.root = child{in: root}
	t.height++
	t.inners++
	return false
}

func (l *leaf) insertAt(i int, k Key, v uint32) {
	if i < l.n {
		l.move(i+1, l, i, l.n)
	}
	l.as[i] = k.A
	if l.ids != nil {
		l.ids[i] = k.ID
	}
	l.vals[i] = v
	l.n++
}

func (l *leaf) removeAt(i int) {
	l.move(i, l, i+1, l.n)
	l.n--
	l.as[l.n] = pad
}

// splitLeaf splits the full leaf l while inserting (k, v) at index i, and
// returns the new right sibling, already linked.
func (t *Tree) splitLeaf(l *leaf, i int, k Key, v uint32) *leaf {
	r := t.newLeaf()
	r.prev, r.next = l, l.next
	if l.next != nil {
		l.next.prev = r
	} else {
		t.tail = r
	}
	l.next = r
	t.leaves++

	// left is the number of entries the left leaf keeps out of leafCap+1.
	left := (leafCap + 1) / 2
	if i == leafCap && r.next == nil {
		// Appending past the maximum: keep the left leaf full.
		left = leafCap
	}
	if i < left {
		// The new entry goes left; the left leaf keeps left-1 old ones.
		m := left - 1
		r.move(0, l, m, l.n)
		r.n = l.n - m
		fillPad(l.as[m:l.n])
		l.n = m
		l.insertAt(i, k, v)
	} else {
		r.move(0, l, left, l.n)
		r.n = l.n - left
		fillPad(l.as[left:l.n])
		l.n = left
		r.insertAt(i-left, k, v)
	}
	return r
}

// insertAt inserts the child c, whose keys are >= sep, just after kids[i].
func (in *inner) insertAt(i int, sep Key, c child) {
	if i+1 < in.n {
		in.moveKeys(i+1, in, i, in.n-1)
		copy(in.kids[i+2:in.n+1], in.kids[i+1:in.n])
	}
	in.setKey(i, sep)
	in.kids[i+1] = c
	in.n++
}

// splitInner splits the full inner node in while inserting c (with
// separator sep) just after kids[i]. It returns the new right sibling and
// the separator between the two.
func (t *Tree) splitInner(in *inner, i int, sep Key, c child, rightmost bool) (*inner, Key) {
	// Build the overfull node: innerCap separators, innerCap+1 children.
	var as [innerCap]uint64
	var ids [innerCap]core.Uint128
	var kids [innerCap + 1]child
	copy(as[:i], in.as[:i])
	copy(ids[:i], in.ids[:i])
	as[i], ids[i] = sep.A, sep.ID
	copy(as[i+1:], in.as[i:])
	copy(ids[i+1:], in.ids[i:])
	copy(kids[:i+1], in.kids[:i+1])
	kids[i+1] = c
	copy(kids[i+2:], in.kids[i+1:])

	// left is the number of children the left node keeps out of innerCap+1.
	left := (innerCap + 1) / 2
	if rightmost {
		left = innerCap - 1
	}
	r := newInner()
	r.n = innerCap + 1 - left
	t.inners++
	in.n = left
	copy(in.as[:], as[:left-1])
	fillPad(in.as[left-1:])
	copy(in.ids[:], ids[:left-1])
	copy(in.kids[:], kids[:left])
	clear(in.kids[left:])
	copy(r.as[:], as[left:])
	copy(r.ids[:], ids[left:])
	copy(r.kids[:], kids[left:])
	return r, Key{A: as[left-1], ID: ids[left-1]}
}

// Delete removes k, returning the value it held.
func (t *Tree) Delete(k Key) (uint32, bool) {
	return t.delete(k, match{})
}

// DeleteEntry removes k if it holds v, and reports whether it did. In a
// by-value tree, where v must satisfy idOf(v) == k.ID as for Set, it finds
// the entry by A and v, and so calls idOf only for separators.
func (t *Tree) DeleteEntry(k Key, v uint32) bool {
	_, ok := t.delete(k, match{v: v, byValue: true})
	return ok
}

// match is what an entry to delete must hold besides its key.
type match struct {
	v       uint32
	byValue bool // the entry must hold v
}

// indexOf returns the index in l of the entry with key k that m admits,
// or -1.
func (t *Tree) indexOf(l *leaf, k Key, m match) int {
	if m.byValue && l.ids == nil {
		// idOf(m.v) == k.ID: the entry with A == k.A and value m.v has
		// key k, and k's entry, if any, is that one or holds another value.
		for i := countLess(l.as[:], k.A); i < l.n && l.as[i] == k.A; i++ {
			if l.vals[i] == m.v {
				return i
			}
		}
		return -1
	}
	i := t.lowerBound(l, k)
	if i < l.n && t.is(l, i, k) && (!m.byValue || l.vals[i] == m.v) {
		return i
	}
	return -1
}

func (t *Tree) delete(k Key, m match) (uint32, bool) {
	// Fast paths: k is in the range of the rightmost or the leftmost leaf,
	// which may lose an entry without rebalancing. Deletes of the oldest
	// entries of a time index come here.
	if l := t.tail; l.n > leafMin && !t.after(l, 0, k) {
		return t.deleteIn(l, k, m, nil)
	}
	if l := t.head; l.n > leafMin && !t.before(l, l.n-1, k) {
		return t.deleteIn(l, k, m, nil)
	}
	var path [maxHeight]step
	l := t.descend(k, &path)
	return t.deleteIn(l, k, m, &path)
}

// deleteIn removes k from l, which must be k's leaf, and rebalances along
// path (nil: l may lose an entry without rebalancing).
func (t *Tree) deleteIn(l *leaf, k Key, m match, path *[maxHeight]step) (uint32, bool) {
	i := t.indexOf(l, k, m)
	if i < 0 {
		return 0, false
	}
	v := l.vals[i]
	l.removeAt(i)
	t.n--
	if path != nil {
		t.fixShort(l, path)
	}
	return v, true
}

// fixShort restores the invariants after entries were removed from l, the
// leaf that the descent recorded in path reached: a short leaf (not the
// root) is merged with or evened out against a sibling under the same
// parent, and so on up.
func (t *Tree) fixShort(l *leaf, path *[maxHeight]step) {
	if l.n >= leafMin || t.height == 0 {
		return
	}
	t.shape++

	// The leaf is short: rebalance it with a sibling under the same parent.
	p := path[t.height-1]
	var merged bool
	if p.i+1 < p.in.n {
		merged = t.rebalanceLeaves(l, p.in.kids[p.i+1].lf, p.in, p.i)
	} else {
		merged = t.rebalanceLeaves(p.in.kids[p.i-1].lf, l, p.in, p.i-1)
	}
	// Walk up while merges leave inner nodes short.
	for d := t.height - 1; merged && d > 0; d-- {
		in := path[d].in
		if in.n >= innerMin {
			return
		}
		p := path[d-1]
		if p.i+1 < p.in.n {
			merged = t.rebalanceInners(in, p.in.kids[p.i+1].in, p.in, p.i)
		} else {
			merged = t.rebalanceInners(p.in.kids[p.i-1].in, in, p.in, p.i-1)
		}
	}
	if root := t.root.in; merged && root.n == 1 {
		t.root = root.kids[0]
		t.height--
		t.inners--
	}
}

// SweepLeaf examines up to max entries (max >= 1) of one leaf, in key
// order, from the first entry >= from, and removes those that judge marks:
// judge gets their keys (A and ID parts) and values, and sets drop[i] for
// each entry i to remove. judge must not modify the tree. SweepLeaf
// rebalances as Delete does, and returns the key of the first entry after
// those examined, with more false when they were the tree's last.
//
// A caller that walks a tree in steps of SweepLeaf reads each leaf once
// and descends once per step, where Delete would descend once per entry;
// and judge sees a leaf's values together, so it can read what they refer
// to in one pass of independent loads.
func (t *Tree) SweepLeaf(from Key, max int, judge func(as []uint64, ids []core.Uint128, vals []uint32, drop []bool)) (next Key, more bool) {
	var path [maxHeight]step
	l := t.descend(from, &path)
	i := t.lowerBound(l, from)
	if i == l.n {
		// Every entry of the next leaf is >= its separator > from.
		if l.next == nil {
			return Key{}, false
		}
		from = t.key(l.next, 0)
		l = t.descend(from, &path)
		i = 0
	}
	end := min(i+max, l.n)
	var drop [leafCap]bool
	ids := l.ids
	if ids == nil {
		ids = new([leafCap]core.Uint128)
		for j := i; j < end; j++ {
			ids[j] = t.idOf(l.vals[j])
		}
	}
	judge(l.as[i:end:end], ids[i:end:end], l.vals[i:end:end], drop[:end-i])
	w := i
	for j := i; j < end; j++ {
		if !drop[j-i] {
			l.as[w], l.vals[w] = l.as[j], l.vals[j]
			if l.ids != nil {
				l.ids[w] = l.ids[j]
			}
			w++
		}
	}
	switch {
	case end < l.n:
		next, more = t.key(l, end), true
	case l.next != nil:
		next, more = t.key(l.next, 0), true
	}
	if removed := end - w; removed > 0 {
		l.move(w, l, end, l.n)
		fillPad(l.as[l.n-removed : l.n])
		l.n -= removed
		t.n -= removed
		t.fixShort(l, &path)
	}
	return next, more
}

// removeKid removes separator i and kids[i+1].
func (in *inner) removeKid(i int) {
	in.moveKeys(i, in, i+1, in.n-1)
	copy(in.kids[i+1:in.n-1], in.kids[i+2:in.n])
	in.n--
	in.kids[in.n] = child{}
	in.as[in.n-1] = pad
}

// rebalanceLeaves merges r into l, or evens them out, where l and r are
// p.kids[si] and p.kids[si+1]. It reports whether they were merged.
func (t *Tree) rebalanceLeaves(l, r *leaf, p *inner, si int) bool {
	if total := l.n + r.n; total > leafMergeMax {
		left := total / 2
		if l.n < left {
			c := left - l.n
			l.move(l.n, r, 0, c)
			r.move(0, r, c, r.n)
			fillPad(r.as[r.n-c : r.n])
		} else {
			c := l.n - left
			r.move(c, r, 0, r.n)
			r.move(0, l, left, l.n)
			fillPad(l.as[left:l.n])
		}
		l.n, r.n = left, total-left
		p.setKey(si, t.key(r, 0))
		return false
	}
	l.move(l.n, r, 0, r.n)
	l.n += r.n
	l.next = r.next
	if r.next != nil {
		r.next.prev = l
	} else {
		t.tail = l
	}
	r.prev, r.next = nil, nil
	p.removeKid(si)
	t.leaves--
	return true
}

// rebalanceInners merges r into l, or evens them out, where l and r are
// p.kids[si] and p.kids[si+1]. It reports whether they were merged.
func (t *Tree) rebalanceInners(l, r *inner, p *inner, si int) bool {
	if total := l.n + r.n; total > innerMergeMax {
		left := total / 2
		if l.n < left {
			// Rotate c children from the front of r to the end of l.
			c := left - l.n
			l.setKey(l.n-1, p.key(si))
			l.moveKeys(l.n, r, 0, c-1)
			copy(l.kids[l.n:left], r.kids[:c])
			p.setKey(si, r.key(c-1))
			r.moveKeys(0, r, c, r.n-1)
			fillPad(r.as[r.n-1-c : r.n-1])
			copy(r.kids[:], r.kids[c:r.n])
			clear(r.kids[r.n-c : r.n])
		} else {
			// Rotate c children from the end of l to the front of r.
			c := l.n - left
			r.moveKeys(c, r, 0, r.n-1)
			copy(r.kids[c:], r.kids[:r.n])
			r.setKey(c-1, p.key(si))
			r.moveKeys(0, l, left, l.n-1)
			copy(r.kids[:c], l.kids[left:l.n])
			p.setKey(si, l.key(left-1))
			fillPad(l.as[left-1 : l.n-1])
			clear(l.kids[left:l.n])
		}
		l.n, r.n = left, total-left
		return false
	}
	l.setKey(l.n-1, p.key(si))
	l.moveKeys(l.n, r, 0, r.n-1)
	copy(l.kids[l.n:], r.kids[:r.n])
	l.n += r.n
	p.removeKid(si)
	t.inners--
	return true
}

// Iter is a cursor over a tree's entries. Any mutation of the tree
// invalidates it; using an invalidated Iter does not panic but yields
// unspecified entries.
type Iter struct {
	t *Tree
	l *leaf
	i int
}

// SeekGE returns an Iter at the first entry >= k.
func (t *Tree) SeekGE(k Key) Iter {
	l := t.findLeaf(k)
	i := t.lowerBound(l, k)
	if i == l.n {
		// Every entry of the following leaf is >= its separator > k.
		return Iter{t: t, l: l.next}
	}
	return Iter{t: t, l: l, i: i}
}

// SeekGEFrom moves it to the first entry >= k, like SeekGE, but without
// descending from the root when k lies within the range of it's current
// leaf: a scan that jumps a little forward stays in its leaf.
func (t *Tree) SeekGEFrom(it *Iter, k Key) {
	if l := it.l; l != nil && l.n > 0 && !t.after(l, 0, k) && !t.before(l, l.n-1, k) {
		it.i = t.lowerBound(l, k)
		return
	}
	*it = t.SeekGE(k)
}

// SeekLE returns an Iter at the last entry <= k.
func (t *Tree) SeekLE(k Key) Iter {
	l := t.findLeaf(k)
	i := t.upperBound(l, k) - 1
	if i < 0 {
		if l = l.prev; l == nil {
			return Iter{}
		}
		i = l.n - 1
	}
	return Iter{t: t, l: l, i: i}
}

// First returns an Iter at the smallest entry.
func (t *Tree) First() Iter {
	if t.head.n == 0 {
		return Iter{}
	}
	return Iter{t: t, l: t.head}
}

// Last returns an Iter at the largest entry.
func (t *Tree) Last() Iter {
	if t.tail.n == 0 {
		return Iter{}
	}
	return Iter{t: t, l: t.tail, i: t.tail.n - 1}
}

// Valid reports whether the Iter is at an entry.
func (it *Iter) Valid() bool { return it.l != nil }

// Key returns the current entry's key, or the zero Key if not Valid.
func (it *Iter) Key() Key {
	if it.l == nil {
		return Key{}
	}
	return it.t.key(it.l, it.i)
}

// A returns the A part of the current entry's key, or 0 if not Valid. It
// reads less of the tree than Key.
func (it *Iter) A() uint64 {
	if it.l == nil {
		return 0
	}
	return it.l.as[it.i]
}

// Run returns the A parts of the keys and the values of the entries from
// the current one to the end of its leaf (empty if not Valid): a scan can
// read a run of entries as plain slices, then Skip past them. They are
// valid until the tree changes; the caller must not modify them.
func (it *Iter) Run() (as []uint64, vals []uint32) {
	if it.l == nil {
		return nil, nil
	}
	return it.l.as[it.i:it.l.n:it.l.n], it.l.vals[it.i:it.l.n:it.l.n]
}

// Skip moves n entries forward, n at most the length of Run: to the next
// leaf's first entry when that passes the end of the current leaf.
func (it *Iter) Skip(n int) {
	if it.l == nil {
		return
	}
	it.i += n
	if it.i >= it.l.n {
		it.l, it.i = it.l.next, 0
	}
}

// Value returns the current entry's value, or 0 if not Valid.
func (it *Iter) Value() uint32 {
	if it.l == nil {
		return 0
	}
	return it.l.vals[it.i]
}

// Next moves to the next larger entry; past the largest, Valid is false.
func (it *Iter) Next() {
	if it.l == nil {
		return
	}
	it.i++
	if it.i >= it.l.n {
		it.l, it.i = it.l.next, 0
	}
}

// Prev moves to the next smaller entry; past the smallest, Valid is false.
func (it *Iter) Prev() {
	if it.l == nil {
		return
	}
	it.i--
	if it.i < 0 {
		if it.l = it.l.prev; it.l != nil {
			it.i = it.l.n - 1
		} else {
			it.i = 0
		}
	}
}

// Touch reads the leaf where k belongs, one word of each cache line that
// a search of it reads, and returns their sum (so that the compiler keeps
// the loads). A caller about to change several keys touches them first in
// one pass: the loads of different keys do not depend on each other, so
// the processor overlaps their cache misses.
func (t *Tree) Touch(k Key) uint64 { return touchLeaf(t.findLeaf(k)) }

func touchLeaf(l *leaf) uint64 {
	s := uint64(l.n)
	for j := 0; j < leafCap; j += 8 {
		s += l.as[j]
	}
	return s + uint64(l.vals[0]) + uint64(l.vals[leafCap/2])
}
