package statemachine

import (
	"testing"

	"github.com/geoevent/geoevent/core"
	"pgregory.net/rapid"
)

// TestIDIndexAgainstMap drives the table and a Go map with the same random
// puts and removes (ids from a small domain, so collisions, replacements
// and runs are frequent) and compares every lookup and the length.
func TestIDIndexAgainstMap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		x := newIDIndex()
		ref := map[core.Uint128]uint32{}
		domain := rapid.Uint64Range(1, 5000).Draw(t, "domain")
		id := func(label string) core.Uint128 {
			v := rapid.Uint64Range(1, domain).Draw(t, label)
			return core.Uint128{Hi: v % 3, Lo: v}
		}
		for step := rapid.IntRange(0, 3000).Draw(t, "steps"); step > 0; step-- {
			k := id("id")
			switch rapid.IntRange(0, 2).Draw(t, "op") {
			case 0, 1:
				s := rapid.Uint32().Draw(t, "slot")
				x.put(k, s)
				ref[k] = s
			case 2:
				x.remove(k)
				delete(ref, k)
			}
			if x.n*4 > len(x.entries)*3 {
				t.Fatalf("%d ids in %d entries: over the 3/4 load bound", x.n, len(x.entries))
			}
		}
		if x.len() != len(ref) {
			t.Fatalf("len %d, map %d", x.len(), len(ref))
		}
		for k, s := range ref {
			if got, ok := x.get(k); !ok || got != s {
				t.Fatalf("get(%v) = %d, %v; want %d", k, got, ok, s)
			}
		}
		for v := uint64(1); v <= domain; v++ {
			k := core.Uint128{Hi: v % 3, Lo: v}
			if _, in := ref[k]; !in {
				if _, ok := x.get(k); ok {
					t.Fatalf("get(%v) found a removed id", k)
				}
			}
		}
		if got := len(x.appendIDs(nil)); got != len(ref) {
			t.Fatalf("appendIDs gave %d ids, want %d", got, len(ref))
		}
	})
}

// TestIDIndexLarge fills the table through several growths with sequential
// ids (the common case for clients), removes every other one, and checks
// lookups and the load bound throughout.
func TestIDIndexLarge(t *testing.T) {
	x := newIDIndex()
	const n = 200_000
	for i := uint64(1); i <= n; i++ {
		x.put(core.Uint128{Hi: 9, Lo: i}, uint32(i))
		if x.n*4 > len(x.entries)*3 {
			t.Fatalf("%d ids in %d entries: over the 3/4 load bound", x.n, len(x.entries))
		}
	}
	for i := uint64(2); i <= n; i += 2 {
		x.remove(core.Uint128{Hi: 9, Lo: i})
	}
	for i := uint64(1); i <= n+10; i++ {
		s, ok := x.get(core.Uint128{Hi: 9, Lo: i})
		if want := i%2 == 1 && i <= n; ok != want || (ok && s != uint32(i)) {
			t.Fatalf("get(%d) = %d, %v", i, s, ok)
		}
	}
	if x.len() != n/2 {
		t.Fatalf("len %d, want %d", x.len(), n/2)
	}
}
