package statemachine

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"slices"

	"github.com/geoevent/geoevent/core"
)

// Snapshot format, version 1. Integers are little-endian.
//
//	offset size field
//	     0    8 magic "GEOSNAP1"
//	     8    8 lastTS: the largest timestamp assigned so far
//	    16    8 entity count N
//	then N entities, each id once, each:
//	          8 expiresAt (0 = never)
//	          4 event count K >= 1
//	      128*K events, ascending timestamp; the last is the latest
//	then      4 CRC-32C (Castagnoli) of every byte before it
//
// WriteSnapshot writes the entities in storage order: one sequential pass,
// no sort, which keeps the replica's event loop short while it snapshots a
// large state. Digest hashes the canonical form, the same encoding with the
// entities in ascending id order, which depends only on the state and not
// on the order it was built in. ReadSnapshot reads either.
const snapshotMagic = "GEOSNAP1"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// WriteSnapshot encodes the whole state to w.
func (sm *StateMachine) WriteSnapshot(w io.Writer) error {
	v := sm.liveView()
	return writeSnapshot(w, &v)
}

// writeSnapshot writes v's entities in storage order, with the checksum.
// encode hands w pieces of 32 KiB or more, so w needs no buffer of its own.
func writeSnapshot(w io.Writer, v *storeView) error {
	crc := crc32.New(castagnoli)
	if err := v.encode(io.MultiWriter(w, crc), nil); err != nil {
		return err
	}
	var sum [4]byte
	binary.LittleEndian.PutUint32(sum[:], crc.Sum32())
	_, err := w.Write(sum[:])
	return err
}

// appendSnapshot appends what writeSnapshot writes to dst.
func appendSnapshot(dst []byte, v *storeView) []byte {
	start := len(dst)
	dst = v.appendEncoding(dst, nil, nil)
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// Digest is SHA-256 of the canonical encoding: two state machines holding the
// same state have the same digest, however they got there.
func (sm *StateMachine) Digest() [32]byte {
	ids := sm.ids.appendIDs(make([]core.Uint128, 0, sm.ids.len()))
	slices.SortFunc(ids, core.Uint128.Compare)
	slots := make([]uint32, len(ids))
	for i, id := range ids {
		slots[i], _ = sm.ids.get(id)
	}
	h := sha256.New()
	v := sm.liveView()
	_ = v.encode(h, slots) // writes to a hash cannot fail
	var d [32]byte
	h.Sum(d[:0])
	return d
}

// encode writes the snapshot without its checksum: the entities of slots
// in that order (the canonical order: ascending ids), or with slots nil
// every entity in storage order. It hands w pieces of 32 KiB or more.
func (v *storeView) encode(w io.Writer, slots []uint32) error {
	var err error
	buf := v.appendEncoding(make([]byte, 0, 1<<16), slots, func(b []byte) bool {
		_, err = w.Write(b)
		return err == nil
	})
	if err != nil {
		return err
	}
	_, err = w.Write(buf)
	return err
}

// appendEncoding appends the snapshot without its checksum (as encode) to
// dst. With flush nil it appends it whole. Otherwise, whenever the bytes
// appended reach 32 KiB, it hands them to flush and starts dst again from
// empty; it stops early when flush returns false. It returns what it has
// not handed to flush.
func (v *storeView) appendEncoding(dst []byte, slots []uint32, flush func([]byte) bool) []byte {
	n := v.entities
	if slots != nil {
		n = len(slots)
	}
	buf := append(dst, snapshotMagic...)
	buf = binary.LittleEndian.AppendUint64(buf, v.lastTS)
	buf = binary.LittleEndian.AppendUint64(buf, uint64(n))
	put := func(e *entity) bool {
		buf = binary.LittleEndian.AppendUint64(buf, e.expiresAt)
		older := v.older(e)
		buf = binary.LittleEndian.AppendUint32(buf, uint32(older.len()+1))
		buf = older.appendRecords(buf)
		buf = e.latest.AppendRecord(buf)
		if flush != nil && len(buf) >= 1<<15 {
			if !flush(buf) {
				return false
			}
			buf = buf[:0]
		}
		return true
	}
	if slots != nil {
		for _, slot := range slots {
			if !put(v.at(slot)) {
				return buf
			}
		}
	} else {
		for slot := range v.n {
			if e := v.at(slot); !e.latest.EntityID.IsZero() { // released slots are zeroed
				if !put(e) {
					return buf
				}
			}
		}
	}
	return buf
}

// ReadSnapshot decodes a snapshot written by WriteSnapshot into a new state
// machine. A damaged snapshot (checksum, structure or field ranges) is a
// 501 CORRUPTION error that names the byte offset; nothing of it is trusted.
func ReadSnapshot(r io.Reader) (*StateMachine, error) {
	d := snapshotReader{r: bufio.NewReaderSize(r, 1<<16), crc: crc32.New(castagnoli)}
	sm := New()
	if string(d.bytes(8)) != snapshotMagic {
		return nil, d.fail("not a GeoEvent snapshot (bad magic)")
	}
	sm.lastTS = d.u64()
	n := d.u64()
	// The spatial index is built a sorted run at a time (spatialbatch.go),
	// not one random key after another.
	sm.deferSpatial = true
	// An entity's older events go straight into its history, a block at a
	// time past the first 256: no scratch of a long history's size.
	for i := uint64(0); i < n && d.err == nil; i++ {
		if len(sm.pendingSpatial) >= restoreSpatialRun {
			sm.flushSpatial()
		}
		expiresAt := d.u64()
		k := d.u32()
		if d.err == nil && (k == 0 || uint64(k) > 1<<32-1) {
			return nil, d.fail(fmt.Sprintf("entity %d has %d events", i, k))
		}
		var older history
		if k > 1 {
			older.small = make([]core.GeoEvent, 0, min(int(k)-1, histBlockLen))
		}
		var first, prev core.GeoEvent
		for j := uint32(0); j < k && d.err == nil; j++ {
			ev, err := core.DecodeRecord(d.bytes(core.RecordSize))
			if d.err != nil {
				break
			}
			if err != nil {
				return nil, d.fail(err.Error())
			}
			if c := ev.Validate(); c.Code != 0 || !validLeaf(ev.CellID) {
				return nil, d.fail(fmt.Sprintf("event %d of entity %d is invalid", j, i))
			}
			if j > 0 && (ev.EntityID != first.EntityID || ev.TimestampNS <= prev.TimestampNS) {
				return nil, d.fail(fmt.Sprintf("events of entity %d are out of order", i))
			}
			if ev.TimestampNS > sm.lastTS {
				return nil, d.fail("an event is newer than the snapshot's last timestamp")
			}
			if j == 0 {
				first = ev
			}
			if j+1 < k {
				older.push(&ev) // the last is the latest
			}
			prev = ev
		}
		if d.err != nil {
			break
		}
		if _, dup := sm.ids.get(first.EntityID); dup {
			return nil, d.fail(fmt.Sprintf("entity %d appears twice", i))
		}
		sm.restoreEntity(&prev, older, expiresAt)
	}
	sm.flushSpatial()
	sm.deferSpatial = false
	want := d.crc.Sum32()
	got := d.u32Raw()
	if d.err != nil {
		return nil, d.err
	}
	if got != want {
		return nil, d.fail(fmt.Sprintf("checksum mismatch: stored %08x, computed %08x", got, want))
	}
	return sm, nil
}

// restoreSpatialRun is how many spatial keys ReadSnapshot sorts and adds
// at a time.
const restoreSpatialRun = 1 << 16

// restoreEntity adds an entity read from a snapshot: its latest event and
// its older events, which it keeps.
func (sm *StateMachine) restoreEntity(latest *core.GeoEvent, older history, expiresAt uint64) {
	slot := sm.store.alloc()
	e := sm.store.mut(slot)
	*e = entity{latest: *latest}
	if older.n > 0 {
		*sm.store.historyFor(e) = older
	}
	sm.ids.put(e.latest.EntityID, slot)
	sm.indexLatest(slot, e)
	sm.setExpiry(slot, e, expiresAt)
	sm.events += uint64(older.n) + 1
}

// snapshotReader reads fixed fields, feeding the checksum, and remembers
// the first error and the offset it happened at.
type snapshotReader struct {
	r   *bufio.Reader
	crc hash.Hash32
	off int64
	err error
	buf [core.RecordSize]byte
}

func (d *snapshotReader) bytes(n int) []byte {
	if d.err != nil {
		return d.buf[:n]
	}
	if _, err := io.ReadFull(d.r, d.buf[:n]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			d.err = d.fail("truncated")
		} else {
			d.err = err
		}
		return d.buf[:n]
	}
	d.crc.Write(d.buf[:n])
	d.off += int64(n)
	return d.buf[:n]
}

func (d *snapshotReader) u64() uint64 { return binary.LittleEndian.Uint64(d.bytes(8)) }
func (d *snapshotReader) u32() uint32 { return binary.LittleEndian.Uint32(d.bytes(4)) }

// u32Raw reads the trailing checksum, which is not part of what it covers.
func (d *snapshotReader) u32Raw() uint32 {
	if d.err != nil {
		return 0
	}
	var b [4]byte
	if _, err := io.ReadFull(d.r, b[:]); err != nil {
		d.err = d.fail("truncated checksum")
		return 0
	}
	return binary.LittleEndian.Uint32(b[:])
}

func (d *snapshotReader) fail(msg string) error {
	return core.Errorf(core.Corruption, "snapshot at byte %d: %s", d.off, msg)
}
