package history

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/geoevent/geoevent/core"
)

// layoutVariant is one way to lay out and tune the track load in pebble:
// the store's options changed by tune (nil: as they are), and the key
// (entity, ts) when gen is 0, else (generation, entity, ts) with
// generation = (history events written before this one) / gen.
type layoutVariant struct {
	name string
	gen  uint64
	tune func(*pebble.Options)
}

var layoutVariants = []layoutVariant{
	{name: "today"},
	{name: "snappy-upper", tune: func(o *pebble.Options) {
		// Snappy in every level but the bottom one, zstd there.
		for i := range o.Levels {
			if i < len(o.Levels)-1 {
				o.Levels[i].Compression = func() *sstable.CompressionProfile { return sstable.SnappyCompression }
			}
		}
	}},
	{name: "fewer-rewrites", tune: fewerRewrites},
	{name: "gen4M", gen: 4_000_000},
	{name: "gen16M", gen: 16_000_000},
	{name: "gen4M-fewer-rewrites", gen: 4_000_000, tune: fewerRewrites},
}

// fewerRewrites compacts L0 less often into a larger Lbase, in larger
// files: less CPU an event in a long track load, more L0 tables for a
// read to merge (see docs/performance.md, History on disk).
func fewerRewrites(o *pebble.Options) {
	o.L0CompactionThreshold = 16
	o.L0StopWritesThreshold = 64
	o.LBaseMaxBytes = 1 << 30
	o.TargetFileSizes[0] = 16 << 20
	for i := 1; i < len(o.TargetFileSizes); i++ {
		o.TargetFileSizes[i] = o.TargetFileSizes[i-1] * 2
	}
}

// Generation-major key: 'g', generation (4 bytes), entity id, timestamp,
// all big-endian: each generation's keys sort after every older one's.
const (
	keyPrefixGen = 'g'
	genKeyLen    = 1 + 4 + 16 + 8
)

func (v *layoutVariant) appendKey(b []byte, written uint64, id core.Uint128, ts uint64) []byte {
	if v.gen == 0 {
		return appendKey(b, id, ts)
	}
	b = append(b, keyPrefixGen)
	b = binary.BigEndian.AppendUint32(b, uint32(written/v.gen))
	b = binary.BigEndian.AppendUint64(b, id.Hi)
	b = binary.BigEndian.AppendUint64(b, id.Lo)
	return binary.BigEndian.AppendUint64(b, ts)
}

// bounds returns the key range of id's events in generation g (every
// event of id when the key has no generation).
func (v *layoutVariant) bounds(g uint32, id core.Uint128) (lo, hi []byte) {
	lo, hi = entityBounds(id)
	if v.gen == 0 {
		return lo, hi
	}
	pre := func(g uint32, rest []byte) []byte {
		out := binary.BigEndian.AppendUint32([]byte{keyPrefixGen}, g)
		return append(out, rest...)
	}
	if len(hi) == 1 {
		// id is the largest: its range ends where generation g+1 begins.
		return pre(g, lo[1:]), pre(g+1, nil)
	}
	return pre(g, lo[1:]), pre(g, hi[1:])
}

// span is the key range that holds every event of the variant.
func (v *layoutVariant) span() (lo, hi []byte) {
	p := byte(keyPrefixEvent)
	if v.gen != 0 {
		p = keyPrefixGen
	}
	return []byte{p}, []byte{p + 1}
}

// decode reads an event stored under k with value val.
func (v *layoutVariant) decode(k, val []byte) (core.GeoEvent, error) {
	if v.gen == 0 {
		return decodeEvent(k, val)
	}
	if len(k) != genKeyLen || k[0] != keyPrefixGen {
		return core.GeoEvent{}, errKey
	}
	var ek [keyLen]byte
	ek[0] = keyPrefixEvent
	copy(ek[1:], k[5:])
	return decodeEvent(ek[:], val)
}

// BenchmarkLayout compares key layouts and pebble options on the fleet
// track load at the scale where levels below L0 matter: it runs only with
// GEOEVENT_LAYOUT_EVENTS=E (a multiple of 20,000), e.g.
//
//	go test -c -o history.test ./io/history
//	for v in today gen4M today gen4M; do
//	    GEOEVENT_LAYOUT_EVENTS=30000000 ./history.test -test.run '^$' \
//	        -test.bench "Layout/$v\$" -test.benchtime 1x -test.timeout 2h
//	done
//
// Each variant writes E events of 10,000 entities reporting in turn to
// pebble in a real temporary directory, with the store's options
// (pebbleOptions: WAL off, its memtables, block sizes and compression),
// in batches of 20,000 (the historian's cap) holding the applied index as
// the store's do, values encoded by the codec. It waits for the flushes
// and compactions the load left, then reports: the process's CPU time an
// event (the load generator's own, measured alone first, taken off),
// wall time an event, write stalls, bytes flushed and compacted an
// event and their ratio to the bytes flushed (pebble's WriteAmp divides
// by the WAL's bytes, 0 here), bytes an event on disk as left, one
// entity's latest 1,000 events read newest first (warm: 2,000 random
// entities read once, then timed), and bytes an event after a full
// compaction. -count would run each variant its count of times in a row:
// to alternate them, run one variant a process, as above.
func BenchmarkLayout(b *testing.B) {
	events, _ := strconv.Atoi(os.Getenv("GEOEVENT_LAYOUT_EVENTS"))
	if events <= 0 || events%20_000 != 0 {
		b.Skip("set GEOEVENT_LAYOUT_EVENTS to a multiple of 20,000")
	}
	for i := range layoutVariants {
		v := &layoutVariants[i]
		b.Run(v.name, func(b *testing.B) { benchLayout(b, v, events) })
	}
}

const layoutEntities = 10_000

func benchLayout(b *testing.B, v *layoutVariant, events int) {
	runtime.GC()
	// The generator's CPU time an event, measured alone.
	gen := newTrack(layoutEntities, 9)
	var ws []core.HistoryWrite
	genEvents := min(events, 2_000_000)
	c0 := cpuTime()
	for n := 0; n < genEvents; n += layoutEntities {
		ws = gen.next(ws[:0])
	}
	genCPU := float64(cpuTime()-c0) / float64(genEvents)

	dir := b.TempDir()
	o := pebbleOptions(vfs.Default, Options{})
	if v.tune != nil {
		v.tune(o)
	}
	var stalls atomic.Int64
	var stallNS atomic.Int64
	var stallAt atomic.Int64
	o.EventListener.WriteStallBegin = func(pebble.WriteStallBeginInfo) {
		stalls.Add(1)
		stallAt.Store(time.Now().UnixNano())
	}
	o.EventListener.WriteStallEnd = func() {
		stallNS.Add(time.Now().UnixNano() - stallAt.Load())
	}
	db, err := pebble.Open(dir, o)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if db != nil {
			_ = db.Close()
		}
	}()

	tr := newTrack(layoutEntities, 7)
	bt := db.NewBatch()
	key := make([]byte, 0, genKeyLen)
	val := make([]byte, 0, 64)
	var idx [8]byte
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	written := uint64(0)
	for index := uint64(1); written < uint64(events); index++ {
		ws = tr.next(ws[:0])
		ws = tr.next(ws)
		for i := range ws {
			e := &ws[i].Event
			key = v.appendKey(key[:0], written+uint64(i), e.EntityID, e.TimestampNS)
			val = appendValue(val[:0], e)
			if err := bt.Set(key, val, nil); err != nil {
				b.Fatal(err)
			}
		}
		binary.BigEndian.PutUint64(idx[:], index)
		if err := bt.Set(appliedKey, idx[:], nil); err != nil {
			b.Fatal(err)
		}
		if err := db.Apply(bt, pebble.NoSync); err != nil {
			b.Fatal(err)
		}
		bt.Reset()
		written += uint64(len(ws))
	}
	_ = bt.Close()
	loaded := time.Since(start)
	if err := db.Flush(); err != nil {
		b.Fatal(err)
	}
	waitCompactions(db)
	wall, cpu := time.Since(start), cpuTime()-cpu0
	b.StopTimer()

	m := db.Metrics()
	var flushed, compacted, moved uint64
	levels := 0
	for i := range m.Levels {
		l := &m.Levels[i]
		flushed += l.TableBytesFlushed
		compacted += l.TableBytesCompacted
		moved += l.TableBytesMoved
		if l.TablesCount > 0 {
			levels++
		}
	}
	live := m.DiskSpaceUsage()
	p50, p99 := layoutReads(b, db, v, written)

	lo, hi := v.span()
	fc0, ft0 := cpuTime(), time.Now()
	if err := db.Compact(context.Background(), lo, hi, true); err != nil {
		b.Fatal(err)
	}
	fullCPU, fullWall := cpuTime()-fc0, time.Since(ft0)
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	db = nil
	compactBytes := dirBytes(b, dir)

	E := float64(written)
	b.ReportMetric((float64(cpu)-genCPU*E)/E/1e3, "cpu-µs/event")
	b.ReportMetric(genCPU/1e3, "gen-cpu-µs/event")
	b.ReportMetric(float64(wall)/E/1e3, "wall-µs/event")
	b.ReportMetric(E/loaded.Seconds(), "load-events/s")
	b.ReportMetric(float64(stalls.Load()), "stalls")
	b.ReportMetric(time.Duration(stallNS.Load()).Seconds(), "stall-s")
	b.ReportMetric(float64(flushed)/E, "flushed-B/event")
	b.ReportMetric(float64(compacted)/E, "compacted-B/event")
	b.ReportMetric(float64(moved)/E, "moved-B/event")
	b.ReportMetric(float64(flushed+compacted)/float64(flushed), "write-amp")
	b.ReportMetric(float64(levels), "levels")
	b.ReportMetric(float64(live)/E, "live-B/event")
	b.ReportMetric(float64(p50.Microseconds()), "read-p50-µs")
	b.ReportMetric(float64(p99.Microseconds()), "read-p99-µs")
	b.ReportMetric(float64(fullCPU)/E/1e3, "fullcompact-cpu-µs/event")
	b.ReportMetric(fullWall.Seconds(), "fullcompact-s")
	b.ReportMetric(float64(compactBytes)/E, "B/event")
	b.ReportMetric(0, "ns/op") // one run; the figures above are per event
}

// waitCompactions returns once pebble has run no compaction for 100 ms.
func waitCompactions(db *pebble.DB) {
	for idle := 0; idle < 5; {
		time.Sleep(20 * time.Millisecond)
		if db.Metrics().Compact.NumInProgress > 0 {
			idle = 0
		} else {
			idle++
		}
	}
}

// layoutReads reads the latest 1,000 events of 2,000 random entities,
// newest first, once to warm the caches and once timed, and returns the
// timed reads' p50 and p99. With generations it seeks each generation of
// the entity from the newest down until it has 1,000.
func layoutReads(b *testing.B, db *pebble.DB, v *layoutVariant, written uint64) (p50, p99 time.Duration) {
	gens := uint32(1)
	if v.gen != 0 {
		gens = uint32((written + v.gen - 1) / v.gen)
	}
	rng := rand.New(rand.NewPCG(11, 12))
	ids := make([]core.Uint128, 2000)
	for i := range ids {
		ids[i] = core.Uint128{Hi: 0x10000, Lo: uint64(rng.IntN(layoutEntities) + 1)}
	}
	perEntity := int(written / layoutEntities)
	want := min(1000, perEntity)
	dst := make([]core.GeoEvent, 0, 1000)
	read := func(id core.Uint128) {
		it, err := db.NewIter(nil)
		if err != nil {
			b.Fatal(err)
		}
		dst = dst[:0]
		for g := int(gens) - 1; g >= 0 && len(dst) < want; g-- {
			lo, hi := v.bounds(uint32(g), id)
			it.SetBounds(lo, hi)
			for ok := it.Last(); ok && len(dst) < want; ok = it.Prev() {
				val, err := it.ValueAndErr()
				if err != nil {
					b.Fatal(err)
				}
				e, err := v.decode(it.Key(), val)
				if err != nil {
					b.Fatal(err)
				}
				dst = append(dst, e)
			}
		}
		if err := it.Close(); err != nil {
			b.Fatal(err)
		}
		if len(dst) != want {
			b.Fatalf("entity %v: %d events, want %d", id, len(dst), want)
		}
		for i := 1; i < len(dst); i++ {
			if dst[i].EntityID != id || dst[i].TimestampNS >= dst[i-1].TimestampNS {
				b.Fatalf("entity %v: event %d out of order", id, i)
			}
		}
	}
	for _, id := range ids {
		read(id)
	}
	lat := make([]time.Duration, len(ids))
	for i, id := range ids {
		t0 := time.Now()
		read(id)
		lat[i] = time.Since(t0)
	}
	slices.Sort(lat)
	return lat[len(lat)/2], lat[len(lat)*99/100]
}
