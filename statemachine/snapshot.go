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
	"math/bits"
	"slices"

	"github.com/geoevent/geoevent/core"
)

// Snapshot format, version 3. Integers are little-endian.
//
//	offset size field
//	     0    8 magic "GEOSNAP3"
//	     8    8 lastTS: the largest timestamp assigned so far
//	    16    8 entity count N
//	then N entities, each id once, each:
//	       1-10 expiresAt, uvarint (0 = never)
//	       1-5  older event count K, uvarint
//	       1-10 K > 0 only: first, uvarint: at most the oldest older
//	            event's timestamp, below the latest's
//	       1-10 K > 0 only: due, uvarint: at most the soonest removal due
//	            of the older events (0: none)
//	            the latest event, packed
//	then        the fences and the feed (watchsnap.go)
//	then        the hooks, once there are any (hooks.go)
//	then      4 CRC-32C (Castagnoli) of every byte before it
//
// A snapshot holds memory's state alone: an entity's older events are in
// the history store, whose checkpoint is saved beside the snapshot (see
// core/history.go), and memory keeps only facts of them (see older). Its
// size does not grow with history.
//
// A packed event is the event's 128-byte record (core.GeoEvent.PutRecord)
// without its zero words:
//
//	  2 mask: bit w is set when bytes 8w to 8w+7 of the record are
//	    not all zero (w = 0..15)
//	8*M those words in ascending w, M = the mask's bits, each non-zero
//
// Records are sparse: the last 20 bytes are reserved zeros, and most
// fleets leave several fields zero (correlation id, user data, altitude,
// velocity, TTL...). A record of id, timestamp, cell, position and group
// packs into 58 bytes. There is one encoding of a state: a packed word
// that is zero, or a varint longer than its shortest form, is corruption.
//
// WriteSnapshot writes the entities in storage order: one sequential pass,
// no sort, which keeps the replica's event loop short while it snapshots a
// large state. Digest hashes the canonical form, the same encoding with the
// entities in ascending id order, which depends only on the state and not
// on the order it was built in. ReadSnapshot reads either.
const snapshotMagic = "GEOSNAP3"

// snapshotMagicV2 marks the version that held every event in memory,
// refused by name, as is version 1 (snapshotMagicV1).
const snapshotMagicV2 = "GEOSNAP2"

// snapshotMagicV1 marks the version this one replaced, which is refused
// by name.
const snapshotMagicV1 = "GEOSNAP1"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// WriteSnapshot encodes the whole state to w.
func (sm *StateMachine) WriteSnapshot(w io.Writer) error {
	v, wv := sm.liveView(), sm.watchView()
	return writeSnapshot(w, &v, &wv)
}

// writeSnapshot writes v's entities in storage order, with the checksum.
// encode hands w pieces of 32 KiB or more, so w needs no buffer of its own.
func writeSnapshot(w io.Writer, v *storeView, wv *watchView) error {
	crc := crc32.New(castagnoli)
	if err := v.encode(io.MultiWriter(w, crc), nil, wv); err != nil {
		return err
	}
	var sum [4]byte
	binary.LittleEndian.PutUint32(sum[:], crc.Sum32())
	_, err := w.Write(sum[:])
	return err
}

// appendSnapshot appends what writeSnapshot writes to dst.
func appendSnapshot(dst []byte, v *storeView, wv *watchView) []byte {
	start := len(dst)
	dst = v.appendEncoding(dst, nil, nil, wv)
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
	v, wv := sm.liveView(), sm.watchView()
	_ = v.encode(h, slots, &wv) // writes to a hash cannot fail
	var d [32]byte
	h.Sum(d[:0])
	return d
}

// encode writes the snapshot without its checksum: the entities of slots
// in that order (the canonical order: ascending ids), or with slots nil
// every entity in storage order. It hands w pieces of 32 KiB or more.
func (v *storeView) encode(w io.Writer, slots []uint32, wv *watchView) error {
	var err error
	buf := v.appendEncoding(make([]byte, 0, 1<<16), slots, func(b []byte) bool {
		_, err = w.Write(b)
		return err == nil
	}, wv)
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
func (v *storeView) appendEncoding(dst []byte, slots []uint32, flush func([]byte) bool, wv *watchView) []byte {
	n := v.entities
	if slots != nil {
		n = len(slots)
	}
	buf := append(dst, snapshotMagic...)
	buf = binary.LittleEndian.AppendUint64(buf, v.lastTS)
	buf = binary.LittleEndian.AppendUint64(buf, uint64(n))
	put := func(slot uint32) bool {
		e, x := v.pair(slot)
		buf = binary.AppendUvarint(buf, e.expiresAt)
		h := v.older(x)
		buf = binary.AppendUvarint(buf, uint64(h.len()))
		if h.len() > 0 {
			buf = binary.AppendUvarint(buf, h.first)
			buf = binary.AppendUvarint(buf, h.due)
		}
		var latest core.GeoEvent
		fillEvent(&latest, e, x)
		buf = appendPacked(buf, &latest)
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
			if !put(slot) {
				return buf
			}
		}
	} else {
		for slot := range v.n {
			if e, _ := v.pair(slot); !e.id.IsZero() { // released slots are zeroed
				if !put(slot) {
					return buf
				}
			}
		}
	}
	buf, _ = wv.appendWatch(buf, flush)
	buf = wv.hooks.append(buf)
	buf = wv.appendRetention(buf)
	return buf
}

// ReadSnapshot decodes a snapshot written by WriteSnapshot, which is all
// that r holds, into a new state machine. A damaged snapshot (checksum,
// structure, field ranges, bytes after the checksum) is a 501 CORRUPTION
// error that names the byte offset; nothing of it is trusted.
func ReadSnapshot(r io.Reader) (*StateMachine, error) {
	d := snapshotReader{r: bufio.NewReaderSize(r, 1<<16), crc: crc32.New(castagnoli)}
	sm := New()
	switch string(d.bytes(8)) {
	case snapshotMagic:
	case snapshotMagicV2:
		return nil, d.fail("snapshot format version 2 (GEOSNAP2), which held every event in memory, is no longer read: this version writes version 3, whose history is on disk")
	case snapshotMagicV1:
		return nil, d.fail("snapshot format version 1 (GEOSNAP1) is no longer read: this version writes version 3")
	default:
		return nil, d.fail("not a GeoEvent snapshot (bad magic)")
	}
	sm.lastTS = d.u64()
	n := d.u64()
	// The spatial index is built a sorted run at a time (spatialbatch.go),
	// not one random key after another.
	for i := uint64(0); i < n && d.err == nil; i++ {
		if len(sm.pendingSpatial) >= restoreSpatialRun {
			sm.flushSpatial()
		}
		expiresAt := d.uvarint()
		k := d.uvarint()
		var h older
		if k > 0 {
			h.first, h.due = d.uvarint(), d.uvarint()
		}
		if d.err != nil {
			break
		}
		if k > 1<<40 {
			return nil, d.fail(fmt.Sprintf("entity %d has %d older events", i, k))
		}
		h.n = int(k)
		ev, err := d.packed()
		if d.err != nil {
			break
		}
		if err != nil {
			return nil, err
		}
		if c := ev.Validate(); c.Code != 0 || !validLeaf(ev.CellID) {
			return nil, d.fail(fmt.Sprintf("the latest event of entity %d is invalid", i))
		}
		if ev.TimestampNS > sm.lastTS {
			return nil, d.fail("an event is newer than the snapshot's last timestamp")
		}
		if k > 0 && h.first >= ev.TimestampNS {
			return nil, d.fail(fmt.Sprintf("entity %d's older events are not older than its latest", i))
		}
		if _, dup := sm.ids.get(ev.EntityID); dup {
			return nil, d.fail(fmt.Sprintf("entity %d appears twice", i))
		}
		sm.restoreEntity(&ev, h, expiresAt)
	}
	sm.flushSpatial()
	if d.err == nil {
		if err := d.readWatch(sm); err != nil {
			return nil, err
		}
		if err := d.readHooks(sm); err != nil {
			return nil, err
		}
		if err := d.readRetention(sm); err != nil {
			return nil, err
		}
	}
	want := d.crc.Sum32()
	got := d.u32Raw()
	if d.err != nil {
		return nil, d.err
	}
	if got != want {
		return nil, d.fail(fmt.Sprintf("checksum mismatch: stored %08x, computed %08x", got, want))
	}
	if _, err := d.r.ReadByte(); err != io.EOF {
		return nil, d.fail("bytes follow the checksum")
	}
	return sm, nil
}

// restoreSpatialRun is how many spatial keys ReadSnapshot sorts and adds
// at a time.
const restoreSpatialRun = 1 << 16

// restoreEntity adds an entity read from a snapshot: its latest event and
// the facts of its older events.
func (sm *StateMachine) restoreEntity(latest *core.GeoEvent, h older, expiresAt uint64) {
	slot := sm.store.alloc()
	e, x := sm.store.write(slot, hasExt(latest) || h.n > 0)
	setLatest(e, x, latest)
	if h.n > 0 {
		*sm.store.olderFor(x) = h
		sm.reindexOlder(slot, e.id, 0, h.due)
	}
	sm.ids.put(e.id, slot)
	sm.indexLatest(slot, e)
	sm.setExpiry(slot, e, expiresAt)
	sm.events += uint64(h.n) + 1
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

// uvarint reads an unsigned varint (encoding/binary's) of at most 64 bits,
// in its shortest form.
func (d *snapshotReader) uvarint() uint64 {
	var x uint64
	for shift := 0; shift < 64 && d.err == nil; shift += 7 {
		b := d.bytes(1)[0]
		if d.err != nil || (shift == 63 && b > 1) {
			break
		}
		x |= uint64(b&0x7f) << shift
		if b < 0x80 {
			if b == 0 && shift > 0 {
				break // not the shortest form
			}
			return x
		}
	}
	if d.err == nil {
		d.err = d.fail("a varint is longer than its shortest form or overflows 64 bits")
	}
	return 0
}

// packed reads a packed event (see the format). A corrupt one is an error
// of d's (d.err) or, when its bytes were read but are not a valid record,
// the returned error.
func (d *snapshotReader) packed() (core.GeoEvent, error) {
	mask := binary.LittleEndian.Uint16(d.bytes(2))
	words := d.bytes(8 * bits.OnesCount16(mask))
	if d.err != nil {
		return core.GeoEvent{}, d.err
	}
	var r [core.RecordSize]byte
	for w := 0; mask != 0; w++ {
		if mask&1 != 0 {
			x := binary.LittleEndian.Uint64(words)
			if x == 0 {
				return core.GeoEvent{}, d.fail("a packed word is zero")
			}
			binary.LittleEndian.PutUint64(r[8*w:], x)
			words = words[8:]
		}
		mask >>= 1
	}
	ev, err := core.DecodeRecord(r[:])
	if err != nil {
		return ev, d.fail(err.Error())
	}
	return ev, nil
}

// appendPacked appends ev packed (see the format).
func appendPacked(dst []byte, ev *core.GeoEvent) []byte {
	var r [core.RecordSize]byte
	ev.PutRecord(r[:])
	at := len(dst)
	dst = append(dst, 0, 0)
	var mask uint16
	for w := range core.RecordSize / 8 {
		if x := binary.LittleEndian.Uint64(r[8*w:]); x != 0 {
			mask |= 1 << w
			dst = binary.LittleEndian.AppendUint64(dst, x)
		}
	}
	binary.LittleEndian.PutUint16(dst[at:], mask)
	return dst
}

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
