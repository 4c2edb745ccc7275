package btree

import (
	"testing"

	"github.com/geoevent/geoevent/core"
)

// FuzzTreeOps interprets the input as operations of three bytes each: an
// opcode and two operand bytes (x, y), applied to a tree and the model,
// once for each kind of tree.
func FuzzTreeOps(f *testing.F) {
	f.Add([]byte{0, 1, 2, 0, 3, 4, 1, 1, 2, 3, 0, 0, 4, 9, 9})
	f.Add([]byte{6, 40, 0, 3, 0, 0, 4, 255, 255, 7, 20, 0, 5, 0, 0})
	f.Add([]byte{6, 255, 0, 6, 255, 1, 7, 255, 3, 7, 255, 0, 7, 255, 0, 7, 255, 0})
	f.Add([]byte{0, 10, 1, 0, 10, 2, 0, 10, 129, 1, 10, 1, 3, 10, 0, 4, 10, 255})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, kind := range harnessKinds {
			fuzzTreeOps(t, kind.new(), data)
		}
	})
}

func fuzzTreeOps(t *testing.T, h *harness, data []byte) {
	next := uint64(1000) // next key of a bulk append
	for n := 0; len(data) >= 3 && n < 2000; n++ {
		op, x, y := data[0], data[1], data[2]
		data = data[3:]
		// Keys span 256 values of A, two of Hi and eight of Lo.
		k := Key{A: uint64(x), ID: core.Uint128{Hi: uint64(y>>7) << 63, Lo: uint64(y & 7)}}
		var err error
		switch op % 8 {
		case 0:
			err = h.set(k, uint32(n))
		case 1: // Delete, or every other time DeleteEntry of k's value
			if v, _ := h.m.get(k); n%2 == 1 {
				err = h.deleteEntry(k, v)
			} else {
				err = h.delete(k)
			}
		case 2:
			err = h.get(k)
		case 3:
			err = h.seekGE(k, int(y))
		case 4:
			err = h.seekLE(k, int(y))
		case 5:
			err = h.minMax()
		case 6: // bulk append, or a bulk increasing run from k
			for i := range int(x) * 8 {
				if y&1 == 0 {
					err = h.set(Key{A: next}, uint32(i))
					next++
				} else {
					err = h.set(Key{A: uint64(x), ID: core.Uint128{Lo: uint64(i)}}, uint32(i))
				}
				if err != nil {
					break
				}
			}
		case 7: // bulk delete of x*8 entries from index y*len/256 on
			for range int(x) * 8 {
				if len(h.m.es) == 0 {
					break
				}
				if err = h.delete(h.m.es[int(y)*len(h.m.es)/256].k); err != nil {
					break
				}
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := h.check(); err != nil {
			t.Fatalf("after op %d: %v", n, err)
		}
	}
	if err := h.checkAll(); err != nil {
		t.Fatal(err)
	}
}
