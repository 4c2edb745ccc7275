package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
)

// This file holds the two records by which recovery tells a torn write from
// lost data (see "The durable end" in the package comment): the slots in
// each segment's header that record how far its records are durable, and
// the manifest that records which segments exist.

// The durable-end slots. A segment's header page holds two slots of
// slotSize bytes, each alone in its own 512-byte sector:
//
//	offset size field
//	     0    8 sequence number: the slot with the larger one (of those
//	            whose checksum holds) is the segment's durable end
//	     8    8 end: byte offset where the durable records end
//	    16    8 next: the index after the last durable record
//	    24    4 reserved, zero
//	    28    4 CRC-32C of bytes 0..27, then the segment's first index (8 bytes)
//
// A slot of sequence number n is written at slotOffsets[n%2]: the newest
// slot is never overwritten, so a write torn by a crash leaves the other.
const slotSize = 32

var slotOffsets = [2]int64{512, 1024}

// durableEnd is what a slot records.
type durableEnd struct {
	seq  uint64
	end  int64
	next uint64
}

func encodeSlot(first uint64, d durableEnd) []byte {
	b := make([]byte, slotSize)
	binary.LittleEndian.PutUint64(b[0:8], d.seq)
	binary.LittleEndian.PutUint64(b[8:16], uint64(d.end))
	binary.LittleEndian.PutUint64(b[16:24], d.next)
	binary.LittleEndian.PutUint32(b[28:32], slotCRC(b, first))
	return b
}

func slotCRC(b []byte, first uint64) uint32 {
	var f [8]byte
	binary.LittleEndian.PutUint64(f[:], first)
	return crc32.Update(crc32.Checksum(b[0:28], castagnoli), castagnoli, f[:])
}

// decodeSlot decodes the slot b of the segment whose first index is first;
// ok is false when its checksum or its fields are wrong.
func decodeSlot(b []byte, first uint64) (d durableEnd, ok bool) {
	if binary.LittleEndian.Uint32(b[28:32]) != slotCRC(b, first) || binary.LittleEndian.Uint32(b[24:28]) != 0 {
		return durableEnd{}, false
	}
	d = durableEnd{
		seq:  binary.LittleEndian.Uint64(b[0:8]),
		end:  int64(binary.LittleEndian.Uint64(b[8:16])),
		next: binary.LittleEndian.Uint64(b[16:24]),
	}
	// Each record takes at least RecordHeaderSize bytes.
	if d.end < segmentHeaderSize || d.next < first || (d.end-segmentHeaderSize)/RecordHeaderSize < int64(d.next-first) {
		return durableEnd{}, false
	}
	return d, true
}

// newestSlot returns the newest valid slot of a segment's header page h.
func newestSlot(h []byte, first uint64) (durableEnd, bool) {
	a, aok := decodeSlot(h[slotOffsets[0]:slotOffsets[0]+slotSize], first)
	b, bok := decodeSlot(h[slotOffsets[1]:slotOffsets[1]+slotSize], first)
	switch {
	case aok && (!bok || a.seq > b.seq):
		return a, true
	case bok:
		return b, true
	}
	return durableEnd{}, false
}

// writeSlot records in s's header that its records up to end (the index
// after them: next) are durable. Every caller has made them durable
// already: a slot never claims more than is durable, whatever subset of
// the writes a crash keeps. The slot is not fsynced here: the next fsync
// of the file carries it, and until then it only understates the durable
// end. A failed write leaves the sequence number as it was, so the retry
// goes to the same slot and the newest one stays whole.
func writeSlot(s *segment, f *os.File, end int64, next uint64) error {
	d := durableEnd{seq: s.durable.seq + 1, end: end, next: next}
	off := slotOffsets[d.seq%2]
	if _, err := faultyWrite(encodeSlot(s.first, d), func(p []byte) (int, error) { return f.WriteAt(p, off) }); err != nil {
		// The slot may have been written all the same: keep the larger
		// end, so that a cut below it lowers it first (lowerDurableEnd).
		s.durable.end, s.durable.next = max(s.durable.end, end), max(s.durable.next, next)
		return fmt.Errorf("store: write the durable end of %s: %w", s.path, err)
	}
	s.durable = d
	return nil
}

// The manifest, file "log.manifest", 28 bytes:
//
//	offset size field
//	     0    8 magic "GEOMAN01"
//	     8    8 lo: the first index of the log's first segment (0: no segment is owed)
//	    16    8 hi: the first index of its last segment (0: no segment is owed)
//	    24    4 CRC-32C of bytes 0..23
//
// It is replaced atomically (WriteFileAtomic). Segments lo and hi must
// exist; segments between them are checked by the contiguity of indexes.
const (
	manifestName  = "log.manifest"
	manifestMagic = "GEOMAN01"
	manifestSize  = 28
)

// span is the manifest's content: the first indexes of the first and the
// last segment ({0, 0}: none).
type span struct{ lo, hi uint64 }

func encodeManifest(sp span) []byte {
	b := make([]byte, manifestSize)
	copy(b, manifestMagic)
	binary.LittleEndian.PutUint64(b[8:16], sp.lo)
	binary.LittleEndian.PutUint64(b[16:24], sp.hi)
	binary.LittleEndian.PutUint32(b[24:28], crc32.Checksum(b[0:24], castagnoli))
	return b
}

// loadManifest reads the manifest in dir; ok is false when there is none.
func loadManifest(dir string) (sp span, ok bool, err error) {
	path := filepath.Join(dir, manifestName)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return span{}, false, nil
	}
	if err != nil {
		return span{}, false, fmt.Errorf("store: read the log manifest: %w", err)
	}
	switch {
	case len(b) != manifestSize:
		return span{}, false, corruptAt(path, int64(min(len(b), manifestSize)), "log manifest is %d bytes, want %d", len(b), manifestSize)
	case string(b[0:8]) != manifestMagic:
		return span{}, false, corruptAt(path, 0, "bad log manifest magic %q", b[0:8])
	case binary.LittleEndian.Uint32(b[24:28]) != crc32.Checksum(b[0:24], castagnoli):
		return span{}, false, corruptAt(path, 24, "log manifest checksum mismatch")
	}
	sp = span{lo: binary.LittleEndian.Uint64(b[8:16]), hi: binary.LittleEndian.Uint64(b[16:24])}
	if (sp.lo == 0) != (sp.hi == 0) || sp.lo > sp.hi {
		return span{}, false, corruptAt(path, 8, "log manifest names segments %d to %d", sp.lo, sp.hi)
	}
	return sp, true, nil
}

// span is the segments the log holds now.
func (l *Log) span() span {
	if len(l.segs) == 0 {
		return span{}
	}
	return span{l.segs[0].first, l.segs[len(l.segs)-1].first}
}

// saveManifest makes sp the manifest. The directory is fsynced first when
// a segment was created since the last directory fsync, so that the
// manifest never names a segment whose directory entry a crash could
// still lose.
func (l *Log) saveManifest(sp span) error {
	if l.dirDirty {
		if err := syncDir(l.dir); err != nil {
			return err
		}
		l.dirDirty = false
	}
	if err := WriteFileAtomic(l.dir, manifestName, encodeManifest(sp)); err != nil {
		return err
	}
	l.listed, l.hasManifest = sp, true
	return nil
}

// unlist is called before segments are removed, with the span of those
// that stay: when the manifest names a segment that goes, it first names
// only those that stay, so that a crash never leaves it naming a segment
// that is gone. Segments it does not name (created since the last Sync)
// go without it: they hold nothing that was acknowledged.
func (l *Log) unlist(after span) error {
	switch {
	case !l.hasManifest:
	case after == (span{}) && l.listed == (span{}):
		return nil
	case after != (span{}) && after.lo <= l.listed.lo && after.hi >= l.listed.hi:
		return nil
	}
	return l.saveManifest(after)
}

// errOldFormat is why OpenLog refuses a log of the first format.
func errOldFormat(dir string) error {
	return fmt.Errorf("store: the log in %s is in the format of an earlier version (segment magic %q, no %s), which this version does not open: "+
		"such a log does not record how far it was synced, so a damaged tail would pass for a torn write; "+
		"serve it with the earlier version, or replace the replica's data directory with a copy of an intact replica's", dir, segmentMagicV1, manifestName)
}
