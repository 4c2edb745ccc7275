package hugepages

import (
	"reflect"
	"testing"
)

func TestHeapRegions(t *testing.T) {
	maps := `00400000-00c74000 r-xp 00000000 fd:00 1234                               /usr/bin/replica
00c74000-02dbc000 rw-p 00874000 fd:00 1234                               /usr/bin/replica
0f4b7000-0f4d8000 rw-p 00000000 00:00 0                                  [heap]
3d35bc000000-3d35bc400000 rw-p 00000000 00:00 0 
3d35bc400000-3d35c0000000 ---p 00000000 00:00 0 
3d35c0000000-3d35c1400000 rw-p 00000000 00:00 0
7f98b5a1b000-7f98b621b000 rw-p 00000000 00:00 0 
7f98b8c00000-7f98b8e00000 rw-p 00000000 00:00 0
7ffd1c000000-7ffd1c400000 rw-p 00000000 00:00 0                          [stack]
not a line
`
	want := [][2]uint64{{0x3d35bc000000, 0x3d35bc400000}, {0x3d35c0000000, 0x3d35c1400000}}
	if got := heapRegions([]byte(maps)); !reflect.DeepEqual(got, want) {
		t.Fatalf("heap regions %x, want %x", got, want)
	}
}
