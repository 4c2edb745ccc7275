package btree

// SeekGENear moves it to the first entry >= k, like SeekGE, for a scan
// that moves forward: when k lies within it's current leaf or the next
// one, it finds k there without descending from the root (a descent costs
// a cache miss or more per level; the next leaf is usually one miss).
func (t *Tree) SeekGENear(it *Iter, k Key) {
	if l := it.l; l != nil && l.n > 0 && !t.after(l, 0, k) {
		if !t.before(l, l.n-1, k) {
			it.i = t.lowerBound(l, k)
			return
		}
		// k is past l: the first entry >= k is in the next leaf when k is
		// at most that leaf's last key.
		if nx := l.next; nx != nil && nx.n > 0 && !t.before(nx, nx.n-1, k) {
			it.l, it.i = nx, t.lowerBound(nx, k)
			return
		}
	}
	*it = t.SeekGE(k)
}
