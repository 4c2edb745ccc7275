package history

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/golang/geo/s2"

	"github.com/geoevent/geoevent/core"
)

// track is the fleet "track" load: entities report in turn, each with a
// later timestamp and a position a little way from its last one.
type track struct {
	rng   *rand.Rand
	round uint64
	cars  []car
}

type car struct {
	lat, lon   float64 // degrees
	heading    float64 // degrees
	speed      float64 // m/s
	altitudeMM int32
}

const trackPeriodNS = 10e9 // each entity reports every 10 s

func newTrack(entities int, seed uint64) *track {
	tr := &track{rng: rand.New(rand.NewPCG(seed, 1)), cars: make([]car, entities)}
	for i := range tr.cars {
		// A metropolitan area about 50 km across.
		tr.cars[i] = car{
			lat:        37.5 + tr.rng.Float64()*0.5,
			lon:        -122.5 + tr.rng.Float64()*0.6,
			heading:    tr.rng.Float64() * 360,
			speed:      tr.rng.Float64() * 25,
			altitudeMM: int32(tr.rng.IntN(100_000)),
		}
	}
	return tr
}

// next appends one report of every entity (one round) to dst.
func (tr *track) next(dst []core.HistoryWrite) []core.HistoryWrite {
	base := uint64(1_767_225_600e9) + tr.round*trackPeriodNS
	tr.round++
	for i := range tr.cars {
		c := &tr.cars[i]
		c.heading += tr.rng.NormFloat64() * 10
		c.speed = max(0, min(35, c.speed+tr.rng.NormFloat64()))
		d := c.speed * trackPeriodNS / 1e9 // metres in one period
		c.lat += d / 111_320 * cosDeg(c.heading)
		c.lon += d / 88_000 * sinDeg(c.heading)
		c.altitudeMM += int32(tr.rng.NormFloat64() * 200)
		latN, lonN := int64(c.lat*1e9), int64(c.lon*1e9)
		e := core.GeoEvent{
			EntityID:    core.Uint128{Hi: 0x10000, Lo: uint64(i + 1)},
			TimestampNS: base + uint64(i)*(trackPeriodNS/uint64(len(tr.cars))) + uint64(tr.rng.IntN(1e6)),
			CellID:      uint64(s2.CellIDFromLatLng(s2.LatLngFromDegrees(float64(latN)/1e9, float64(lonN)/1e9))),
			LatNano:     latN,
			LonNano:     lonN,
			GroupID:     uint64(i%32 + 1),
			AltitudeMM:  c.altitudeMM,
			VelocityMMS: uint32(c.speed * 1000),
			AccuracyMM:  uint32(3000 + tr.rng.IntN(2000)),
			HeadingCdeg: uint16(int(c.heading*100)%36000+36000) % 36000,
		}
		dst = append(dst, put(e))
	}
	return dst
}

func cosDeg(d float64) float64 { return math.Cos(d * math.Pi / 180) }
func sinDeg(d float64) float64 { return math.Sin(d * math.Pi / 180) }

// load applies rounds of tr to s, one entry a round.
func load(b *testing.B, s *Store, tr *track, rounds int) {
	var ws []core.HistoryWrite
	for r := 0; r < rounds; r++ {
		ws = tr.next(ws[:0])
		if err := s.Apply(s.Applied()+1, ws); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkApplyTrack applies 10,000-event entries of the track load of
// 10,000 entities to a store in a real temporary directory (in memory
// with HISTORY_MEMFS=1), and reports events/s and the process's CPU time
// an event, the flushes and compactions the load caused included.
func BenchmarkApplyTrack(b *testing.B) {
	fs, dir := vfs.Default, b.TempDir()
	if os.Getenv("HISTORY_MEMFS") != "" {
		fs, dir = vfs.NewMem(), "db"
	}
	s, err := Open(fs, dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	tr := newTrack(10_000, 1)
	batches := make([][]core.HistoryWrite, 16)
	for i := range batches {
		batches[i] = tr.next(nil)
	}
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	for i := 0; i < b.N; i++ {
		ws := batches[i%len(batches)]
		if i >= len(batches) {
			// Later timestamps, so that every entry adds history.
			for j := range ws {
				ws[j].Event.TimestampNS += uint64(len(batches)) * trackPeriodNS
			}
		}
		if err := s.Apply(uint64(i+1), ws); err != nil {
			b.Fatal(err)
		}
	}
	// Wait for the flushes and compactions the load made, so that the CPU
	// time counts them: on a shared machine, CPU time per event is the
	// steadier figure.
	if err := s.db.Flush(); err != nil {
		b.Fatal(err)
	}
	for idle := 0; idle < 5; {
		time.Sleep(20 * time.Millisecond)
		if s.db.Metrics().Compact.NumInProgress > 0 {
			idle = 0
		} else {
			idle++
		}
	}
	b.ReportMetric(float64(b.N)*10_000/time.Since(start).Seconds(), "events/s")
	b.ReportMetric(float64(cpuTime()-cpu0)/(float64(b.N)*10_000), "cpu-ns/event")
}

// BenchmarkRangeLatest1000 reads one random entity's latest 1,000 events
// from a store of 1,000 entities with 1,500 events each, warm (every
// entity read once before timing).
func BenchmarkRangeLatest1000(b *testing.B) {
	s, err := Open(vfs.Default, b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const entities, rounds = 1000, 1500
	tr := newTrack(entities, 2)
	load(b, s, tr, rounds)
	if err := s.db.Compact(context.Background(), []byte{keyPrefixEvent}, []byte{keyPrefixEvent + 1}, true); err != nil {
		b.Fatal(err)
	}
	v := s.View()
	defer v.Close()
	// Rounds started every trackPeriodNS from the first; the latest 1,000
	// events of an entity are those since the start of round rounds-1000.
	since := uint64(1_767_225_600e9) + (rounds-1000)*trackPeriodNS
	var dst []core.GeoEvent
	read := func(i int) {
		r := core.HistoryRange{EntityID: core.Uint128{Hi: 0x10000, Lo: uint64(i + 1)}, SinceNS: since, UntilNS: ^uint64(0), Limit: 1000}
		got, _, err := v.Range(r, dst[:0])
		if err != nil || len(got) != 1000 {
			b.Fatalf("range: %d events, %v", len(got), err)
		}
		dst = got
	}
	for i := 0; i < entities; i++ {
		read(i)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		read(rng.IntN(entities))
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkBytesPerEvent loads 2 M events of the track load (10,000
// entities, 200 rounds), compacts everything and reports the bytes the
// store's files take per event.
func BenchmarkBytesPerEvent(b *testing.B) {
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		s, err := Open(vfs.Default, dir, Options{})
		if err != nil {
			b.Fatal(err)
		}
		tr := newTrack(10_000, 5)
		load(b, s, tr, 200)
		if err := s.db.Compact(context.Background(), []byte{keyPrefixEvent}, []byte{keyPrefixEvent + 1}, true); err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(dirBytes(b, dir))/2e6, "bytes/event")
	}
}

// dirBytes is the size of the files in dir.
func dirBytes(tb testing.TB, dir string) int64 {
	entries, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	var n int64
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			tb.Fatal(err)
		}
		n += info.Size()
	}
	return n
}
