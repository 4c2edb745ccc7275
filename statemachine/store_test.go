package statemachine

import "testing"

// pair, at and ext find an entity by arithmetic on its chunk's address
// (compactAt, fullAt); they must give the very entity and ext that indexing
// the chunk gives, in compact and full chunks, in the store and in a view.
func TestStoreFindsEachSlotsEntity(t *testing.T) {
	var s entityStore
	const slots = 3*chunkSize + 5
	for range slots {
		s.alloc()
	}
	s.write(chunkSize+7, true) // chunk 1 turns full
	if !s.full(1) || s.full(0) || s.full(2) {
		t.Fatal("chunk 1 should be the only full chunk")
	}
	v := storeView{chunks: s.chunks, fulls: s.fulls}
	for slot := uint32(0); slot < slots; slot++ {
		c, i := slot/chunkSize, slot%chunkSize
		var wantE *entity
		var wantX *entityExt
		if f := s.fulls[c]; f != nil {
			wantE, wantX = &f[i].e, &f[i].x
		} else {
			wantE = &s.chunks[c][i]
		}
		e, x := s.pair(slot)
		ve, vx := v.pair(slot)
		we, wx := s.write(slot, false)
		if e != wantE || x != wantX || s.at(slot) != wantE || s.ext(slot) != wantX ||
			ve != wantE || vx != wantX || we != wantE || wx != wantX {
			t.Fatalf("slot %d: pair %p %p, at %p, ext %p, view %p %p, write %p %p; want %p %p",
				slot, e, x, s.at(slot), s.ext(slot), ve, vx, we, wx, wantE, wantX)
		}
	}
}
