package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDecodeRecord(t *testing.T) {
	e := Entry{Index: 42, Term: 7, Data: []byte("hello, log")}
	rec := appendRecord(nil, e)
	if len(rec) != RecordHeaderSize+len(e.Data) {
		t.Fatalf("record is %d bytes", len(rec))
	}
	got, n, err := DecodeRecord(append(bytes.Clone(rec), "trailing"...))
	if err != nil || n != len(rec) || got.Index != 42 || got.Term != 7 || !bytes.Equal(got.Data, e.Data) {
		t.Fatalf("decode: %+v %d %v", got, n, err)
	}
	// Every proper prefix is incomplete, never corrupt.
	for i := 0; i < len(rec); i++ {
		if _, _, err := DecodeRecord(rec[:i]); !errors.Is(err, ErrIncomplete) {
			t.Fatalf("prefix %d: %v", i, err)
		}
	}
	// Every single-bit flip is detected (a flip in the length makes it
	// incomplete, longer, or corrupt, never a different valid record).
	for i := 0; i < len(rec)*8; i++ {
		bad := bytes.Clone(rec)
		bad[i/8] ^= 1 << (i % 8)
		if _, _, err := DecodeRecord(bad); err == nil {
			t.Fatalf("bit %d flipped: accepted", i)
		}
	}
	// Index 0 is corrupt even with a valid checksum.
	if _, _, err := DecodeRecord(appendRecord(nil, Entry{Index: 0, Term: 1})); !IsCorruption(err) {
		t.Fatalf("index 0: %v", err)
	}
	// An all-zero header is corrupt, not a valid empty record.
	if _, _, err := DecodeRecord(make([]byte, 64)); !IsCorruption(err) {
		t.Fatalf("zeros: %v", err)
	}
}

// TestDecodeRecordBound: a declared length above the bound is corruption as
// soon as the length field is readable, and decoding allocates nothing.
func TestDecodeRecordBound(t *testing.T) {
	for _, n := range []uint32{MaxDataBytes + 1, 1 << 31, 0xffffffff} {
		b := make([]byte, 4)
		binary.LittleEndian.PutUint32(b, n)
		if _, _, err := DecodeRecord(b); !IsCorruption(err) {
			t.Fatalf("length %d: %v", n, err)
		}
	}
	b := make([]byte, 4)
	binary.LittleEndian.PutUint32(b, MaxDataBytes)
	if _, _, err := DecodeRecord(b); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("length at the bound: %v", err)
	}
	rec := appendRecord(nil, Entry{Index: 1, Term: 1, Data: make([]byte, 1000)})
	if a := testing.AllocsPerRun(100, func() { DecodeRecord(rec) }); a != 0 {
		t.Fatalf("DecodeRecord allocates %v times", a)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add([]byte{})
	f.Add(make([]byte, 24))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add(appendRecord(nil, Entry{Index: 1, Term: 1}))
	f.Add(appendRecord(nil, Entry{Index: 1<<64 - 1, Term: 1<<64 - 1, Data: []byte("data")}))
	f.Add(appendRecord(nil, Entry{Index: 9, Term: 3, Data: bytes.Repeat([]byte{0xab}, 300)})[:100])
	two := appendRecord(appendRecord(nil, Entry{Index: 5, Term: 2, Data: []byte("a")}), Entry{Index: 6, Term: 2, Data: []byte("bc")})
	f.Add(two)
	f.Fuzz(func(t *testing.T, b []byte) {
		e, n, err := DecodeRecord(b)
		if err != nil {
			if n != 0 || e.Data != nil {
				t.Fatalf("error %v with n %d", err, n)
			}
			if !errors.Is(err, ErrIncomplete) && !IsCorruption(err) {
				t.Fatalf("error neither incomplete nor corruption: %v", err)
			}
			if errors.Is(err, ErrIncomplete) && len(b) >= MaxRecordBytes {
				t.Fatalf("incomplete with %d bytes", len(b))
			}
			return
		}
		if n < RecordHeaderSize || n > len(b) || n > MaxRecordBytes || len(e.Data) != n-RecordHeaderSize || e.Index == 0 {
			t.Fatalf("accepted: n %d of %d bytes, %d data bytes, index %d", n, len(b), len(e.Data), e.Index)
		}
		// Data aliases the input (no allocation) and cannot grow into what follows.
		if len(e.Data) > 0 && &e.Data[0] != &b[RecordHeaderSize] {
			t.Fatal("Data does not alias the input")
		}
		if cap(e.Data) != len(e.Data) {
			t.Fatalf("Data capacity %d reaches past the record", cap(e.Data))
		}
		// Re-encoding yields the same bytes.
		if re := appendRecord(nil, e); !bytes.Equal(re, b[:n]) {
			t.Fatalf("re-encoding differs:\n%x\n%x", re, b[:n])
		}
		// Every prefix is incomplete.
		if _, _, err := DecodeRecord(b[:n-1]); !errors.Is(err, ErrIncomplete) {
			t.Fatalf("prefix of an accepted record: %v", err)
		}
	})
}

// FuzzOpenLogTail writes a segment holding three valid records, cut at a
// fuzzed offset and followed by fuzzed bytes, and opens it: OpenLog must
// either fail with a Corruption error or return a log whose entries are the
// intact records before the cut followed by whatever valid, contiguous
// records the fuzzed bytes hold; never panic or allocate without bound.
// With synced, the header's durable end says the three records were
// synced: unless that slot itself was cut, OpenLog must then return all
// three or fail.
func FuzzOpenLogTail(f *testing.F) {
	fastSync(f)
	base := segmentHeader(1)
	var ends []int
	for i := uint64(1); i <= 3; i++ {
		base = appendRecord(base, Entry{Index: i, Term: 2, Data: dataFor(i, int(i)*10)})
		ends = append(ends, len(base))
	}
	synced := bytes.Clone(base)
	copy(synced[slotOffsets[0]:], encodeSlot(1, durableEnd{seq: 2, end: int64(len(base)), next: 4}))
	for _, sy := range []bool{false, true} {
		f.Add(uint16(len(base)), []byte{}, sy)
		f.Add(uint16(len(base)), []byte{1, 2, 3}, sy)
		f.Add(uint16(len(base)-5), []byte{}, sy)
		f.Add(uint16(ends[0]), appendRecord(nil, Entry{Index: 2, Term: 3, Data: []byte("x")}), sy)
		f.Add(uint16(ends[0]+3), base[ends[1]:], sy)
		f.Add(uint16(ends[1]), appendRecord(nil, Entry{Index: 4, Term: 2}), sy)
		f.Add(uint16(ends[1]), make([]byte, 100), sy)
		f.Add(uint16(10), []byte{}, sy)
	}
	f.Fuzz(func(t *testing.T, at uint16, tail []byte, sy bool) {
		cut := int(at) % (len(base) + 1)
		src := base
		if sy {
			src = synced
		}
		file := append(bytes.Clone(src[:cut]), tail...)
		dir := t.TempDir()
		path := filepath.Join(dir, segmentName(1))
		if err := os.WriteFile(path, file, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, manifestName), encodeManifest(span{1, 1}), 0o644); err != nil {
			t.Fatal(err)
		}
		l, info, err := OpenLog(dir, LogOptions{})
		if err != nil {
			if !IsCorruption(err) || !strings.Contains(err.Error(), path) {
				t.Fatalf("OpenLog: %v", err)
			}
			return
		}
		defer l.Close()
		intact := 0
		for _, e := range ends {
			if e <= cut {
				intact++
			}
		}
		slot := slotOffsets[0]
		if sy && int64(len(file)) >= slot+slotSize && bytes.Equal(file[slot:slot+slotSize], synced[slot:slot+slotSize]) && l.LastIndex() < 3 {
			t.Fatalf("lost synced records: last %d (cut at %d)", l.LastIndex(), cut)
		}
		if len(file) < segmentFixedSize || !bytes.Equal(file[:segmentFixedSize], base[:segmentFixedSize]) {
			t.Fatalf("opened a segment whose header is not intact (cut at %d)", cut)
		}
		if l.LastIndex() < uint64(intact) {
			t.Fatalf("lost intact records: last %d, %d intact", l.LastIndex(), intact)
		}
		if info.TruncatedBytes < 0 || info.TruncatedBytes > int64(len(file)) {
			t.Fatalf("info %+v", info)
		}
		if l.LastIndex() == 0 {
			return
		}
		es, err := l.Entries(1, l.LastIndex()+1)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range es {
			if i < intact && !bytes.Equal(e.Data, dataFor(e.Index, int(e.Index)*10)) {
				t.Fatalf("entry %d changed", e.Index)
			}
		}
		// The file keeps what was not cut as torn, except that zeros after
		// the last record are the runway's clean end (see "The runway"),
		// which OpenLog cuts from the last segment without reporting it.
		got, kept := fileSize(t, path), int64(len(file))-info.TruncatedBytes
		if end := l.segs[len(l.segs)-1].size; got != kept && (got != end || got > kept || !allZero(file[got:kept])) {
			t.Fatalf("file is %d bytes, expected %d (or %d, its records' end, with zeros after it)", got, kept, end)
		}
	})
}
