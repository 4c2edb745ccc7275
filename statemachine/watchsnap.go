package statemachine

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/geoevent/geoevent/core"
)

// The fences and feed section of a snapshot (version 3), after the
// entities and before the checksum:
//
//	  8 the feed's log index (BeginEntry)
//	  8 its operation time
//	  8 the sequence of the newest notification made (0: none)
//	  8 the sequence of the newest notification dropped (0: none)
//	  4 fence count F
//	F fences in name order, each a u32 length and put_fence's request
//	  encoding (core.PutFence) of the definition
//	  8 notification count M
//	M notifications, oldest first, each: u64 seq, u8 type, u16 fence
//	  name length and name, the packed event, u8 has_prev, i64 prev lat,
//	  i64 prev lon, u64 op_ns
//
// Fences are stored as defined and prepared again on reading (their
// coverings and polygons are the same computation on every replica of a
// build).

// watchView is the fences and the feed as a snapshot sees them. Fences
// (but for the feed's cache of a name's number, which a snapshot does not
// read) and notifications are never modified in place (fences.go,
// feed.go), so a frozen view shares them.
type watchView struct {
	fences                        []*fence // name order
	feed                          feedStore
	index, opNS, lastSeq, dropped uint64
	hooks                         hookView // the section after this one (hooks.go)
	retainNS                      uint64   // and the retention section's
	retainCount                   int
}

func (sm *StateMachine) watchView() watchView {
	fs := &sm.watch.fences
	v := watchView{fences: make([]*fence, len(fs.names))}
	for i, n := range fs.names {
		v.fences[i] = fs.byName[n]
	}
	f := &sm.watch.feed
	v.feed = f.view()
	v.index, v.opNS, v.lastSeq, v.dropped = f.index, f.opNS, f.lastSeq, f.dropped
	v.hooks = sm.hookView()
	v.retainNS, v.retainCount = f.retainNS, f.retainCount
	return v
}

// appendWatch appends the section, handing pieces to flush as
// appendEncoding does.
func (v *watchView) appendWatch(buf []byte, flush func([]byte) bool) ([]byte, bool) {
	le := binary.LittleEndian
	buf = le.AppendUint64(buf, v.index)
	buf = le.AppendUint64(buf, v.opNS)
	buf = le.AppendUint64(buf, v.lastSeq)
	buf = le.AppendUint64(buf, v.dropped)
	buf = le.AppendUint32(buf, uint32(len(v.fences)))
	spill := func() bool {
		if flush != nil && len(buf) >= 1<<15 {
			if !flush(buf) {
				return false
			}
			buf = buf[:0]
		}
		return true
	}
	for _, f := range v.fences {
		at := len(buf)
		buf = append(buf, 0, 0, 0, 0)
		buf, _ = core.PutFence.AppendRequest(buf, &f.def) // a definition that was accepted encodes
		le.PutUint32(buf[at:], uint32(len(buf)-at-4))
		if !spill() {
			return buf, false
		}
	}
	buf = le.AppendUint64(buf, uint64(v.feed.n))
	for i := range v.feed.n {
		n := v.feed.at(i)
		buf = le.AppendUint64(buf, n.Seq)
		buf = append(buf, byte(n.Type))
		buf = le.AppendUint16(buf, uint16(len(n.Fence)))
		buf = append(buf, n.Fence...)
		buf = appendPacked(buf, &n.Event)
		if n.HasPrev {
			buf = append(buf, 1)
		} else {
			buf = append(buf, 0)
		}
		buf = le.AppendUint64(buf, uint64(n.Prev.LatNano))
		buf = le.AppendUint64(buf, uint64(n.Prev.LonNano))
		buf = le.AppendUint64(buf, n.OpNS)
		if !spill() {
			return buf, false
		}
	}
	return buf, true
}

// blob reads n bytes into new memory, feeding the checksum.
func (d *snapshotReader) blob(n int) []byte {
	if d.err != nil {
		return nil
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(d.r, b); err != nil {
		d.err = d.fail("truncated")
		return nil
	}
	d.crc.Write(b)
	d.off += int64(n)
	return b
}

// readWatch reads the section into sm.
func (d *snapshotReader) readWatch(sm *StateMachine) error {
	f := &sm.watch.feed
	f.index, f.opNS, f.lastSeq, f.dropped = d.u64(), d.u64(), d.u64(), d.u64()
	nf := binary.LittleEndian.Uint32(d.bytes(4))
	if d.err == nil && nf > core.MaxFences {
		return d.fail(fmt.Sprintf("%d fences exceed %d", nf, core.MaxFences))
	}
	prev := ""
	for i := uint32(0); i < nf && d.err == nil; i++ {
		l := binary.LittleEndian.Uint32(d.bytes(4))
		if d.err != nil {
			break
		}
		if l > core.MaxFramePayload {
			return d.fail(fmt.Sprintf("fence %d is %d bytes", i, l))
		}
		b := d.blob(int(l))
		if d.err != nil {
			break
		}
		def, err := core.PutFence.DecodeRequest(b)
		if err != nil {
			return d.fail(fmt.Sprintf("fence %d: %v", i, err))
		}
		if i > 0 && def.Name <= prev {
			return d.fail(fmt.Sprintf("fence %d is out of order", i))
		}
		prev = def.Name
		if _, err := sm.PutFence(0, def); err != nil {
			return d.fail(fmt.Sprintf("fence %d: %v", i, err))
		}
	}
	m := d.u64()
	if d.err == nil && m > core.MaxFeedRetentionCount { // the feed's compact form numbers no more (feed.go)
		return d.fail(fmt.Sprintf("%d notifications exceed %d", m, core.MaxFeedRetentionCount))
	}
	var last uint64
	for i := uint64(0); i < m && d.err == nil; i++ {
		var n core.Notification
		n.Seq = d.u64()
		n.Type = core.NotifyType(d.bytes(1)[0])
		name := d.blob(int(binary.LittleEndian.Uint16(d.bytes(2))))
		ev, err := d.packed()
		if d.err != nil {
			break
		}
		if err != nil {
			return err
		}
		n.Fence, n.Event = string(name), ev
		switch d.bytes(1)[0] {
		case 0:
		case 1:
			n.HasPrev = true
		default:
			return d.fail("a notification's has_prev is not 0 or 1")
		}
		n.Prev = core.Coordinate{LatNano: int64(d.u64()), LonNano: int64(d.u64())}
		n.OpNS = d.u64()
		if d.err != nil {
			break
		}
		if n.Seq <= last || n.Seq > f.lastSeq || n.Seq <= f.dropped || n.Type < core.NotifyEnter || n.Type > core.NotifyInside || !core.ValidFenceName(n.Fence) {
			return d.fail(fmt.Sprintf("notification %d is invalid", i))
		}
		last = n.Seq
		f.append(&n)
	}
	return d.err
}

// The retention section of a snapshot, after the hooks section, present
// only once retention has been set (so that a state that never set it
// encodes, and digests, as before, and older snapshots read with the
// defaults):
//
//	4 magic "RETN"
//	8 the age bound in nanoseconds of operation time
//	8 the count bound
//
// Both are the bounds in force, within set_feed_retention's limits.
const retentionMagic = "RETN"

// appendRetention appends the section.
func (v *watchView) appendRetention(buf []byte) []byte {
	if v.retainNS == 0 && v.retainCount == 0 {
		return buf
	}
	f := feedLog{retainNS: v.retainNS, retainCount: v.retainCount}
	ns, n := f.retention()
	buf = append(buf, retentionMagic...)
	buf = binary.LittleEndian.AppendUint64(buf, ns)
	return binary.LittleEndian.AppendUint64(buf, uint64(n))
}

// readRetention reads the section into sm when the snapshot has one.
func (d *snapshotReader) readRetention(sm *StateMachine) error {
	if d.err != nil {
		return d.err
	}
	if p, _ := d.r.Peek(5); len(p) < 5 {
		return nil
	}
	if string(d.bytes(4)) != retentionMagic {
		return d.fail("bytes after the feed are neither the hooks nor the retention section")
	}
	ns, n := d.u64(), d.u64()
	if d.err != nil {
		return d.err
	}
	const s = 1_000_000_000
	if ns < core.MinFeedRetentionAgeS*s || ns > core.MaxFeedRetentionAgeS*s || ns%s != 0 ||
		n < core.MinFeedRetentionCount || n > core.MaxFeedRetentionCount {
		return d.fail(fmt.Sprintf("feed retention %d ns, %d notifications is out of range", ns, n))
	}
	f := &sm.watch.feed
	f.retainNS, f.retainCount = ns, int(n)
	if f.n > f.retainCount {
		return d.fail(fmt.Sprintf("%d notifications exceed the retention of %d", f.n, f.retainCount))
	}
	return nil
}
