package history

import (
	"cmp"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"pgregory.net/rapid"

	"github.com/geoevent/geoevent/core"
)

// model is the history store as a map: entity, then timestamp.
type model map[core.Uint128]map[uint64]core.GeoEvent

func (m model) clone() model {
	c := make(model, len(m))
	for id, evs := range m {
		c[id] = make(map[uint64]core.GeoEvent, len(evs))
		for ts, e := range evs {
			c[id][ts] = e
		}
	}
	return c
}

func (m model) apply(writes []core.HistoryWrite) {
	for _, w := range writes {
		switch w.Kind {
		case core.HistoryPut:
			id := w.Event.EntityID
			if m[id] == nil {
				m[id] = map[uint64]core.GeoEvent{}
			}
			m[id][w.Event.TimestampNS] = w.Event
		case core.HistoryDeleteEntity:
			delete(m, w.EntityID)
		case core.HistoryDeleteExpired:
			for ts, e := range m[w.EntityID] {
				if modelExpired(e, w.TS) {
					delete(m[w.EntityID], ts)
				}
			}
		}
	}
}

// events are id's events, oldest first.
func (m model) events(id core.Uint128) []core.GeoEvent {
	var out []core.GeoEvent
	for _, e := range m[id] {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b core.GeoEvent) int { return cmp.Compare(a.TimestampNS, b.TimestampNS) })
	return out
}

func (m model) rangeOf(r core.HistoryRange) (out []core.GeoEvent, more bool) {
	for _, e := range m.events(r.EntityID) {
		if e.TimestampNS < r.SinceNS || e.TimestampNS > r.UntilNS {
			continue
		}
		if r.ExpiredAt != 0 && modelExpired(e, r.ExpiredAt) {
			continue
		}
		if len(out) == r.Limit {
			return out, true
		}
		out = append(out, e)
	}
	return out, false
}

// modelExpired is the definition of core.HistoryDeleteExpired.
func modelExpired(e core.GeoEvent, t uint64) bool {
	return e.TTLSeconds != 0 && core.AddSecondsNS(e.TimestampNS, uint64(e.TTLSeconds)) <= t
}

func (m model) digest() [32]byte {
	var ids []core.Uint128
	for id := range m {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b core.Uint128) int {
		if a.Hi != b.Hi {
			return cmp.Compare(a.Hi, b.Hi)
		}
		return cmp.Compare(a.Lo, b.Lo)
	})
	h := sha256.New()
	var rec []byte
	for _, id := range ids {
		for _, e := range m.events(id) {
			rec = e.AppendRecord(rec[:0])
			h.Write(rec)
		}
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum
}

// The small id and time spaces make writes collide: puts replace, deletes
// hit. The largest id checks the end of the key space.
var modelIDs = []core.Uint128{{Lo: 1}, {Lo: 2}, {Hi: 1, Lo: 1}, {Hi: ^uint64(0), Lo: ^uint64(0)}}

func genID(t *rapid.T, label string) core.Uint128 {
	return rapid.SampledFrom(modelIDs).Draw(t, label)
}

func genTS(t *rapid.T, label string) uint64 {
	return rapid.Uint64Range(0, 12).Draw(t, label) * 1_000_000_000
}

func genEvent(t *rapid.T) core.GeoEvent {
	return core.GeoEvent{
		EntityID:      genID(t, "id"),
		TimestampNS:   genTS(t, "ts"),
		CorrelationID: core.Uint128{Hi: rapid.Uint64().Draw(t, "corrHi"), Lo: rapid.Uint64().Draw(t, "corrLo")},
		UserData:      core.Uint128{Lo: rapid.Uint64().Draw(t, "user")},
		CellID:        rapid.Uint64().Draw(t, "cell"),
		LatNano:       rapid.Int64Range(-90e9, 90e9).Draw(t, "lat"),
		LonNano:       rapid.Int64Range(-180e9, 180e9).Draw(t, "lon"),
		GroupID:       rapid.Uint64Range(0, 3).Draw(t, "group"),
		AltitudeMM:    rapid.Int32().Draw(t, "alt"),
		VelocityMMS:   rapid.Uint32().Draw(t, "vel"),
		TTLSeconds:    rapid.SampledFrom([]uint32{0, 0, 1, 3, 6, ^uint32(0)}).Draw(t, "ttl"),
		AccuracyMM:    rapid.Uint32().Draw(t, "acc"),
		HeadingCdeg:   rapid.Uint16Range(0, 35999).Draw(t, "heading"),
		Flags:         rapid.Uint16().Draw(t, "flags"),
	}
}

func genWrite(t *rapid.T) core.HistoryWrite {
	switch rapid.IntRange(0, 9).Draw(t, "kind") {
	case 0:
		return core.HistoryWrite{Kind: core.HistoryDeleteEntity, EntityID: genID(t, "id")}
	case 1:
		return core.HistoryWrite{Kind: core.HistoryDeleteExpired, EntityID: genID(t, "id"),
			TS: genTS(t, "at") + rapid.Uint64Range(0, 2e9).Draw(t, "atOffset")}
	default:
		return put(genEvent(t))
	}
}

type entry struct {
	index  uint64
	writes []core.HistoryWrite
}

// TestModel runs random writes, reads, checkpoints, clean reopens and
// crashes against the store on pebble's crashable memory filesystem and
// against a map. After a crash, the latest checkpoint restored and opened
// equals the map as of the checkpoint's index, and replaying the log
// above it equals the map again.
func TestModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		fs := vfs.NewCrashableMem()
		const dir = "db"
		s, err := Open(fs, dir, Options{CacheBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = s.Close() }()
		m := model{}
		var log []entry
		index := uint64(0)
		ckptDir, ckptIndex, ckptModel := "", uint64(0), model{}
		nCkpt := 0

		check := func(what string) {
			want := m.digest()
			got, err := s.Digest()
			if err != nil {
				t.Fatalf("%s: digest: %v", what, err)
			}
			if got != want {
				t.Fatalf("%s: store differs from the model", what)
			}
		}

		t.Repeat(map[string]func(*rapid.T){
			"apply": func(t *rapid.T) {
				index += rapid.Uint64Range(1, 3).Draw(t, "step")
				writes := rapid.SliceOfN(rapid.Custom(genWrite), 1, 6).Draw(t, "writes")
				if err := s.Apply(index, writes); err != nil {
					t.Fatalf("apply %d: %v", index, err)
				}
				m.apply(writes)
				log = append(log, entry{index, writes})
			},
			"replay": func(t *rapid.T) {
				if len(log) == 0 {
					t.Skip("empty log")
				}
				// Replaying an applied entry, even with other writes, changes nothing.
				e := rapid.SampledFrom(log).Draw(t, "entry")
				if err := s.Apply(e.index, []core.HistoryWrite{{Kind: core.HistoryDeleteEntity, EntityID: modelIDs[0]}}); err != nil {
					t.Fatal(err)
				}
				check("replay")
			},
			"range": func(t *rapid.T) {
				r := core.HistoryRange{
					EntityID:  genID(t, "id"),
					SinceNS:   genTS(t, "since"),
					UntilNS:   genTS(t, "until"),
					ExpiredAt: genTS(t, "expiredAt") + rapid.Uint64Range(0, 1).Draw(t, "expiredAtOffset"),
					Limit:     rapid.IntRange(1, 8).Draw(t, "limit"),
				}
				v := s.View()
				defer v.Close()
				got, more, err := v.Range(r, nil)
				if err != nil {
					t.Fatal(err)
				}
				want, wantMore := m.rangeOf(r)
				if !slices.Equal(got, want) || more != wantMore {
					t.Fatalf("range %+v: got %v (more %v), want %v (more %v)", r, got, more, want, wantMore)
				}
			},
			"get": func(t *rapid.T) {
				id, ts := genID(t, "id"), genTS(t, "ts")
				v := s.View()
				defer v.Close()
				got, found, err := v.Get(id, ts)
				if err != nil {
					t.Fatal(err)
				}
				want, wantFound := m[id][ts]
				if found != wantFound || got != want {
					t.Fatalf("get %v@%d: got %v %v, want %v %v", id, ts, got, found, want, wantFound)
				}
			},
			"expired": func(t *rapid.T) {
				id, at := genID(t, "id"), genTS(t, "at")
				v := s.View()
				defer v.Close()
				n, soonest, err := v.Expired(id, at)
				if err != nil {
					t.Fatal(err)
				}
				wantN, wantSoonest := 0, uint64(0)
				for _, e := range m[id] {
					if e.TTLSeconds == 0 {
						continue
					}
					if modelExpired(e, at) {
						wantN++
					} else if x := e.ExpiresAtNS(); wantSoonest == 0 || x < wantSoonest {
						wantSoonest = x
					}
				}
				if n != wantN || soonest != wantSoonest {
					t.Fatalf("expired %v at %d: got %d %d, want %d %d", id, at, n, soonest, wantN, wantSoonest)
				}
			},
			"checkpoint": func(t *rapid.T) {
				nCkpt++
				d := fmt.Sprintf("ckpt-%d", nCkpt)
				got, err := s.Checkpoint(d)
				if err != nil {
					t.Fatal(err)
				}
				if got != index {
					t.Fatalf("checkpoint holds %d, applied %d", got, index)
				}
				ckptDir, ckptIndex, ckptModel = d, got, m.clone()
			},
			"reopen": func(t *rapid.T) {
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				s, err = Open(fs, dir, Options{CacheBytes: 1 << 20})
				if err != nil {
					t.Fatal(err)
				}
				if s.Applied() != index {
					t.Fatalf("reopened at %d, applied %d", s.Applied(), index)
				}
				check("reopen")
			},
			"crash": func(t *rapid.T) {
				seed := rapid.Int64().Draw(t, "seed")
				unsynced := rapid.IntRange(0, 100).Draw(t, "unsyncedPercent")
				crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: unsynced, RNG: rand.New(rand.NewPCG(uint64(seed), 0))})
				_ = s.Close()
				fs = crashed
				if ckptDir == "" {
					// No checkpoint yet: recovery starts from an empty store.
					if err := fs.RemoveAll(dir); err != nil {
						t.Fatal(err)
					}
				} else if err := Restore(fs, ckptDir, dir); err != nil {
					t.Fatal(err)
				}
				s, err = Open(fs, dir, Options{CacheBytes: 1 << 20})
				if err != nil {
					t.Fatal(err)
				}
				if s.Applied() != ckptIndex {
					t.Fatalf("restored at %d, checkpoint %d", s.Applied(), ckptIndex)
				}
				m = ckptModel.clone()
				check("restore")
				for _, e := range log {
					if err := s.Apply(e.index, e.writes); err != nil {
						t.Fatal(err)
					}
					if e.index > ckptIndex {
						m.apply(e.writes)
					}
				}
				check("replay after restore")
			},
			"": func(t *rapid.T) { check("state") },
		})
	})
}
