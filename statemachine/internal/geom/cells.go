package geom

import (
	"math"
	"math/bits"

	"github.com/golang/geo/r3"
	"github.com/golang/geo/s2"
)

// This file holds the cube-face arithmetic of S2 that package s2 does not
// export: a point's face and (s,t) coordinates, and the cell id of a face
// and (i,j) leaf coordinates. They follow package s2 exactly (quadratic
// projection, the same Hilbert curve); the tests check them against it.

const (
	maxLevel = 30
	maxSize  = 1 << maxLevel // leaf cells per face side

	lookupBits = 4
	swapMask   = 1
	invertMask = 2
)

// lookupPos maps 4 bits of i, 4 bits of j and 2 bits of orientation
// ("iiiijjjjoo") to 8 bits of Hilbert position and 2 bits of orientation
// ("ppppppppoo"), as in package s2.
var lookupPos [1 << (2*lookupBits + 2)]uint16

// lookupIJ is the inverse of lookupPos: "ppppppppoo" to "iiiijjjjoo".
var lookupIJ [1 << (2*lookupBits + 2)]uint16

func init() {
	for o := 0; o < 4; o++ {
		initLookupPos(0, 0, 0, o, 0, o)
	}
}

func initLookupPos(level, i, j, origOrientation, pos, orientation int) {
	if level == lookupBits {
		ij := i<<lookupBits + j
		lookupPos[ij<<2+origOrientation] = uint16(pos<<2 + orientation)
		lookupIJ[pos<<2+origOrientation] = uint16(ij<<2 + orientation)
		return
	}
	// posToIJ and posToOrientation of package s2.
	posToIJ := [4][4]int{{0, 1, 3, 2}, {0, 2, 3, 1}, {3, 2, 0, 1}, {3, 1, 0, 2}}
	posToOrientation := [4]int{swapMask, 0, 0, invertMask | swapMask}
	level++
	i <<= 1
	j <<= 1
	pos <<= 2
	r := posToIJ[orientation]
	for k := 0; k < 4; k++ {
		initLookupPos(level, i+r[k]>>1, j+r[k]&1, origOrientation, pos+k, orientation^posToOrientation[k])
	}
}

// cellIDFromFaceIJ is the leaf cell of face f (0..5) at leaf coordinates
// (i, j), each in [0, maxSize).
func cellIDFromFaceIJ(f, i, j int) s2.CellID {
	return cellIDFromFaceIJLevel(f, i, j, maxLevel)
}

// cellIDFromFaceIJLevel is the cell at the given level of face f at
// coordinates (i, j) of that level, each in [0, 2^level).
func cellIDFromFaceIJLevel(f, i, j, level int) s2.CellID {
	var one [1]s2.CellID
	return appendFaceIJBlock(one[:0], f, level, i, i, j, j)[0]
}

// appendFaceIJBlock appends the cells at the given level of face f whose
// coordinates of that level are i0 <= i <= i1 and j0 <= j <= j1 (each in
// [0, 2^level)), in row order.
func appendFaceIJBlock(dst []s2.CellID, f, level, i0, i1, j0, j1 int) []s2.CellID {
	const mask = 1<<lookupBits - 1
	shift := maxLevel - level
	lsb := uint64(1) << (2 * shift)
	// Nibble k of the leaf coordinates gives position bits 8k..8k+7; those
	// below the level's (the lowest 2*shift) do not matter.
	kMin := shift / 4
	// Nibbles shared by the whole block are looked up once.
	n := uint64(f) << (2 * maxLevel)
	bits := f & swapMask
	I0, J0 := i0<<shift, j0<<shift
	I1, J1 := i1<<shift, j1<<shift
	k := 7
	for ; k >= kMin; k-- {
		s := k * lookupBits
		if I0>>s != I1>>s || J0>>s != J1>>s {
			break
		}
		bits += (I0 >> s & mask) << (lookupBits + 2)
		bits += (J0 >> s & mask) << 2
		bits = int(lookupPos[bits])
		n |= uint64(bits>>2) << (2 * s)
		bits &= swapMask | invertMask
	}
	for i := i0; i <= i1; i++ {
		for j := j0; j <= j1; j++ {
			I, J := i<<shift, j<<shift
			nn, bb := n, bits
			for kk := k; kk >= kMin; kk-- {
				s := kk * lookupBits
				bb += (I >> s & mask) << (lookupBits + 2)
				bb += (J >> s & mask) << 2
				bb = int(lookupPos[bb])
				nn |= uint64(bb>>2) << (2 * s)
				bb &= swapMask | invertMask
			}
			dst = append(dst, s2.CellID((nn*2+1)&-lsb|lsb))
		}
	}
	return dst
}

// faceST returns the cube face of p (its largest component, as in package s2)
// and p's (s,t) coordinates on that face, each in [0,1]. p need not be unit.
func faceST(p r3.Vector) (face int, s, t float64) {
	ax, ay, az := math.Abs(p.X), math.Abs(p.Y), math.Abs(p.Z)
	var u, v float64
	switch {
	case ax > ay && ax > az:
		if p.X >= 0 {
			face, u, v = 0, p.Y/p.X, p.Z/p.X
		} else {
			face, u, v = 3, p.Z/p.X, p.Y/p.X
		}
	case ay > az:
		if p.Y >= 0 {
			face, u, v = 1, -p.X/p.Y, p.Z/p.Y
		} else {
			face, u, v = 4, p.Z/p.Y, -p.X/p.Y
		}
	default:
		if p.Z >= 0 {
			face, u, v = 2, -p.X/p.Z, -p.Y/p.Z
		} else {
			face, u, v = 5, -p.Y/p.Z, -p.X/p.Z
		}
	}
	return face, uvToST(u), uvToST(v)
}

// uvToST is the inverse of the quadratic projection, as in package s2.
func uvToST(u float64) float64 {
	if u >= 0 {
		return 0.5 * math.Sqrt(1+3*u)
	}
	return 1 - 0.5*math.Sqrt(1-3*u)
}

// stToUV is the quadratic projection, as in package s2.
func stToUV(s float64) float64 {
	if s >= 0.5 {
		return (1 / 3.) * (4*s*s - 1)
	}
	return (1 / 3.) * (1 - 4*(1-s)*(1-s))
}

// faceUVToXYZ is the (not unit) point of face f at (u, v), as in package s2.
func faceUVToXYZ(f int, u, v float64) r3.Vector {
	switch f {
	case 0:
		return r3.Vector{X: 1, Y: u, Z: v}
	case 1:
		return r3.Vector{X: -u, Y: 1, Z: v}
	case 2:
		return r3.Vector{X: -u, Y: -v, Z: 1}
	case 3:
		return r3.Vector{X: -1, Y: -v, Z: -u}
	case 4:
		return r3.Vector{X: v, Y: -1, Z: -u}
	}
	return r3.Vector{X: v, Y: u, Z: -1}
}

// prefilterLevel is the level to which approxLeafPoint decodes a leaf: its
// cells are at most prefilterSlack radians across.
const (
	prefilterLevel = 22
	prefilterSlack = 6e-7 // > the diagonal of a level-22 cell (about 5.4e-7 rad)
)

// approxLeafPoint returns a point (not unit) inside the level-22 ancestor of
// leaf cell id, decoding only the 22 levels it needs. It is the center of
// that ancestor, within prefilterSlack radians of every point of the leaf.
func approxLeafPoint(id uint64) r3.Vector {
	f := int(id >> 61)
	orientation := f & swapMask
	i, j := 0, 0
	nbits := maxLevel - 7*lookupBits // the first step decodes 2 levels
	for k := 7; k >= 2; k-- {
		orientation += int(id>>uint(k*2*lookupBits+1)) & (1<<uint(2*nbits) - 1) << 2
		orientation = int(lookupIJ[orientation])
		i += (orientation >> (lookupBits + 2)) << uint(k*lookupBits)
		j += ((orientation >> 2) & (1<<lookupBits - 1)) << uint(k*lookupBits)
		orientation &= swapMask | invertMask
		nbits = lookupBits
	}
	const half = 1 << (maxLevel - prefilterLevel - 1)
	s := float64(i+half) / maxSize
	t := float64(j+half) / maxSize
	return faceUVToXYZ(f, stToUV(s), stToUV(t))
}

// leafDecoder is approxLeafPoint for a sequence of leaf cell ids, such as
// the keys of an index scan: it keeps the decoding state of each step for
// the last id, so an id that shares its leading levels with the previous
// one (neighbours on the Hilbert curve do) decodes only the levels below.
// The last two steps (levels 15 to 22) are decoded for every id and not
// kept: at a scan's densities neighbouring keys seldom share them, and
// keeping them made each id's decoding wait on the stores of the one
// before (BenchmarkPolygonBench20Classify 13.6 ns a judged leaf against
// 14.7, medians of 8; 12.4 with those two steps' numbers constants). The
// zero value is ready to use.
type leafDecoder struct {
	prev  uint64
	valid bool
	// st[k] is the state after decoding step k (k = 7 down to 4): the
	// leaf coordinates decoded so far and the orientation.
	st [8]decodeState
}

type decodeState struct {
	i, j, orientation int
}

// point is approxLeafPoint(id).
func (d *leafDecoder) point(id uint64) r3.Vector {
	i, j := d.ij(id)
	const half = 1 << (maxLevel - prefilterLevel - 1)
	st := float64(i+half) / maxSize
	tt := float64(j+half) / maxSize
	return faceUVToXYZ(int(id>>61), stToUV(st), stToUV(tt))
}

// ij returns the leaf coordinates of the lowest leaf of id's ancestor at
// prefilterLevel (the low 30-22 bits of each are zero).
func (d *leafDecoder) ij(id uint64) (i, j int) {
	// Step k reads the id's bits k*8+1 to k*8+8 (step 7: bits 57 to 60,
	// under the face bits), so its state depends only on bits k*8+1 and
	// above: it still holds when the highest bit in which id differs from
	// the previous id is at most k*8.
	k := 7
	var s decodeState
	if x := id ^ d.prev; d.valid && x < 1<<57 {
		hb := 63 - bits.LeadingZeros64(x) // -1 when x is 0
		r := max((hb+7)/8, 4)
		s = d.st[r]
		k = r - 1
	} else {
		s = decodeState{orientation: int(id>>61) & swapMask}
		o := s.orientation + int(id>>57)&0xf<<2
		o = int(lookupIJ[o])
		s.i = (o >> (lookupBits + 2)) << (7 * lookupBits)
		s.j = ((o >> 2) & (1<<lookupBits - 1)) << (7 * lookupBits)
		s.orientation = o & (swapMask | invertMask)
		d.st[7] = s
		k = 6
	}
	for ; k >= 4; k-- {
		s = s.step(id, k)
		d.st[k] = s
	}
	s = s.step(id, 3).step(id, 2) // (k is 3 here)
	d.prev, d.valid = id, true
	return s.i, s.j
}

// step is the state after decoding step k of id from s, the state after
// step k+1.
func (s decodeState) step(id uint64, k int) decodeState {
	o := s.orientation + int(id>>uint(k*2*lookupBits+1))&0xff<<2
	o = int(lookupIJ[o])
	s.i += (o >> (lookupBits + 2)) << uint(k*lookupBits)
	s.j += ((o >> 2) & (1<<lookupBits - 1)) << uint(k*lookupBits)
	s.orientation = o & (swapMask | invertMask)
	return s
}
