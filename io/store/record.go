package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/geoevent/geoevent/core"
)

// Entry is one log record: Index >= 1, Term, opaque Data.
type Entry struct {
	Index, Term uint64
	Data        []byte
}

const (
	// MaxDataBytes bounds an entry's Data: a whole client batch (10,000
	// events of 128 bytes is 1.28 MB) fits with a wide margin. A record that
	// declares a longer Data is corruption, never an allocation.
	MaxDataBytes = 16<<20 + 64

	// RecordHeaderSize is the fixed part of a record before its Data.
	RecordHeaderSize = 24

	// MaxRecordBytes is the largest encoded record.
	MaxRecordBytes = RecordHeaderSize + MaxDataBytes
)

// ErrIncomplete is returned by DecodeRecord when b ends before the record
// does: more bytes might complete it. At the end of the log's last segment it
// marks a torn write.
var ErrIncomplete = errors.New("store: incomplete record")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// recordCRC is CRC-32C over the length, index, term and data of a record
// whose header is h (the checksum field, h[4:8], is skipped).
func recordCRC(h []byte, data []byte) uint32 {
	c := crc32.Update(0, castagnoli, h[0:4])
	c = crc32.Update(c, castagnoli, h[8:RecordHeaderSize])
	return crc32.Update(c, castagnoli, data)
}

// putRecordHeader fills h (RecordHeaderSize bytes) with e's record header.
// len(e.Data) must be at most MaxDataBytes.
func putRecordHeader(h []byte, e Entry) {
	binary.LittleEndian.PutUint32(h[0:4], uint32(len(e.Data)))
	binary.LittleEndian.PutUint64(h[8:16], e.Index)
	binary.LittleEndian.PutUint64(h[16:24], e.Term)
	binary.LittleEndian.PutUint32(h[4:8], recordCRC(h, e.Data))
}

// appendRecord appends e's encoded record to dst.
func appendRecord(dst []byte, e Entry) []byte {
	var h [RecordHeaderSize]byte
	putRecordHeader(h[:], e)
	dst = append(dst, h[:]...)
	return append(dst, e.Data...)
}

// DecodeRecord decodes the record at the start of b. It returns the entry,
// whose Data aliases b (nothing is copied or allocated), and the number of
// bytes the record occupies.
//
// The error is ErrIncomplete when b ends before the record does (the declared
// length is within bounds but the bytes are not all there), and a
// core.Corruption error when the bytes cannot be a record: a declared length
// above MaxDataBytes (reported as soon as the length field is readable, so a
// damaged length never makes a caller wait for or allocate gigabytes), a
// checksum mismatch, or index 0. The corruption message names no file or
// offset; the log adds them.
func DecodeRecord(b []byte) (Entry, int, error) {
	if len(b) < 4 {
		return Entry{}, 0, ErrIncomplete
	}
	n := binary.LittleEndian.Uint32(b[0:4])
	if n > MaxDataBytes {
		return Entry{}, 0, core.Errorf(core.Corruption, "record declares %d data bytes, above the limit %d", n, MaxDataBytes)
	}
	size := RecordHeaderSize + int(n)
	if len(b) < size {
		return Entry{}, 0, ErrIncomplete
	}
	stored := binary.LittleEndian.Uint32(b[4:8])
	if got := recordCRC(b[:RecordHeaderSize], b[RecordHeaderSize:size]); got != stored {
		return Entry{}, 0, core.Errorf(core.Corruption, "record checksum mismatch (stored %08x, computed %08x)", stored, got)
	}
	index := binary.LittleEndian.Uint64(b[8:16])
	if index == 0 {
		return Entry{}, 0, core.Errorf(core.Corruption, "record has index 0")
	}
	return Entry{
		Index: index,
		Term:  binary.LittleEndian.Uint64(b[16:24]),
		Data:  b[RecordHeaderSize:size:size],
	}, size, nil
}

// recordNeed is how many bytes starting at b the record there needs, judged
// from its length field: RecordHeaderSize when the field is not readable or
// out of bounds (DecodeRecord then decides).
func recordNeed(b []byte) int {
	if len(b) < 4 {
		return RecordHeaderSize
	}
	n := binary.LittleEndian.Uint32(b[0:4])
	if n > MaxDataBytes {
		return RecordHeaderSize
	}
	return RecordHeaderSize + int(n)
}

// IsCorruption reports whether err is (or wraps) a core.Corruption error.
func IsCorruption(err error) bool {
	var ce *core.Error
	return errors.As(err, &ce) && ce.Code == core.Corruption.Code
}

// corruptAt is the Corruption error for damage in file path at byte off.
func corruptAt(path string, off int64, format string, args ...any) error {
	return core.Errorf(core.Corruption, "%s at byte %d: %s (a replica cannot repair this itself: restore its data directory from a replica that is intact)",
		path, off, fmt.Sprintf(format, args...))
}

// reason is the message of a DecodeRecord error without its code prefix.
func reason(err error) string {
	var ce *core.Error
	if errors.As(err, &ce) {
		return ce.Message
	}
	if errors.Is(err, ErrIncomplete) {
		return "incomplete record: the file ends inside it"
	}
	return err.Error()
}
