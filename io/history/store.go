package history

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/geoevent/geoevent/core"
)

// Options tunes a Store.
type Options struct {
	CacheBytes int64 // block cache; 0: a default (64 MiB)

	// uncompressed stores blocks without compression, so that tests can
	// look for a value's bytes in the files.
	uncompressed bool
	// holdCompactions keeps the compaction gate shut until gate.release
	// (Recover, until it keeps the store: one it does not keep closes
	// without waiting for a compaction; tests, to pile tables up in L0);
	// opened, a test sees the store before the gate opens.
	holdCompactions bool
	opened          func(*pebble.DB)
}

const defaultCacheBytes = 64 << 20

// Store is the history store of one replica: one pebble database.
// Apply, Checkpoint and Close are serialised; View and the View's reads may
// run on other goroutines meanwhile.
type Store struct {
	db  *pebble.DB
	fs  vfs.FS
	dir string

	mu      sync.Mutex // serialises Apply, Checkpoint and Close
	closed  bool
	applied uint64 // written under mu; read under mu or by the one writer

	// erasures compacts erased entity ranges in the background; Close
	// waits for it (pebble's Compact must not outlive its DB).
	erasures *eraser
	gate     *openGate // the compaction scheduler
}

// quietLogger drops pebble's informational logs and errors (every error
// that matters reaches the caller as a value). Fatalf, which pebble calls
// only for a broken invariant of its own and expects not to return,
// panics.
type quietLogger struct{}

func (quietLogger) Infof(string, ...interface{})  {}
func (quietLogger) Errorf(string, ...interface{}) {}
func (quietLogger) Fatalf(format string, args ...interface{}) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}

// pebbleOptions are the store's pebble options, tuned for the fleet track
// load (see bench_test.go): many entities, each appending events with
// increasing timestamps, so that every flush spans the whole key space.
// Measured there (process CPU time an event over 6 M events, flushes and
// compactions included): 16 MiB memtables 1.47-1.77 µs, 64 MiB 1.95-2.09
// µs (a larger skiplist costs more an insert than the rarer flushes save).
// Below L0, zstd at pebble's default level 3: in a track load zstd was a
// third of the replica's CPU time (compactions rewrite every level's
// tables many times over), and against level 7 the replica used 9.5% less
// CPU time an event (median of 3 alternated 6 M-event loads, 13.8 against
// 15.3 s) for 4.4% more bytes once compacted (32.7 against 31.4 bytes an
// event, BenchmarkBytesPerEvent; level 1 stores 33.1 and cost no less
// than 3 within the noise). 32 KiB blocks (measured at level 7): 31.4
// bytes an event once compacted and a warm p50 of 179 µs for one
// entity's latest 1,000 events, against 31.6 and 198 µs with 16 KiB and
// 33.0 and 253 µs with 4 KiB. No bloom filters: reads are range scans of
// one entity, which a whole-key filter does not serve, and a filter would
// cost about 1.25 bytes an event.
func pebbleOptions(fs vfs.FS, so Options) *pebble.Options {
	cache := so.CacheBytes
	if cache <= 0 {
		cache = defaultCacheBytes
	}
	o := &pebble.Options{
		FS:                 fs,
		FormatMajorVersion: pebble.FormatNewest, // columnar blocks: keys prefix-compressed, trailers packed
		DisableWAL:         true,                // the Raft log is the write-ahead log
		Logger:             quietLogger{},
		EventListener: &pebble.EventListener{
			// The default listener exits the process on corruption; the
			// store reports it as a *CorruptionError instead.
			DataCorruption: func(pebble.DataCorruptionInfo) {},
		},
		MemTableSize:                16 << 20,
		MemTableStopWritesThreshold: 4,
		L0CompactionThreshold:       4,
		L0StopWritesThreshold:       24,
		LBaseMaxBytes:               256 << 20,
	}
	o.CacheSize = cache
	for i := range o.Levels {
		l := &o.Levels[i]
		l.BlockSize = 32 << 10
		l.IndexBlockSize = 256 << 10
		switch {
		case so.uncompressed:
			l.Compression = func() *sstable.CompressionProfile { return sstable.NoCompression }
		case i == 0:
			l.Compression = func() *sstable.CompressionProfile { return sstable.SnappyCompression }
		default:
			l.Compression = func() *sstable.CompressionProfile { return sstable.ZstdCompression }
		}
	}
	o.EnsureDefaults()
	return o
}

// Open opens (creating if absent) the store in dir on fs. Pebble's WAL is
// off: the Raft log is the only write-ahead log. What survives a crash is
// whatever pebble flushed, whole batches: the store reopens at the
// Applied() of its last flush. Recover decides whether a recovering
// replica keeps it or restores a checkpoint (Restore).
func Open(fs vfs.FS, dir string, o Options) (*Store, error) {
	po := pebbleOptions(fs, o)
	gate := newOpenGate()
	po.Experimental.CompactionScheduler = gate
	db, err := pebble.Open(dir, po)
	if err != nil {
		return nil, wrapErr(err, core.Uint128{})
	}
	if o.opened != nil {
		o.opened(db)
	}
	s := &Store{db: db, fs: fs, dir: dir, gate: gate}
	v, closer, err := db.Get(appliedKey)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		_ = db.Close()
		return nil, wrapErr(err, core.Uint128{})
	default:
		if len(v) != 8 {
			_ = closer.Close()
			_ = db.Close()
			return nil, &CorruptionError{File: dir, Detail: fmt.Sprintf("applied index of %d bytes", len(v))}
		}
		s.applied = binary.BigEndian.Uint64(v)
		_ = closer.Close()
	}
	s.erasures = newEraser(db)
	if !o.holdCompactions {
		gate.release()
	}
	return s, nil
}

// Applied is the index of the last Apply the store holds (0 for a new
// store); it is kept in the same pebble batch as that Apply's writes.
func (s *Store) Applied() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applied
}

var errClosed = errors.New("history: store closed")

// Apply applies the writes of the log entry at index, in order, as one
// batch, unsynced. An index at or below Applied() is skipped (replay is
// idempotent). index may skip numbers (entries with no history writes are
// not passed). A write of an unknown kind rejects the whole entry: the
// store is then as before.
func (s *Store) Apply(index uint64, writes []core.HistoryWrite) error {
	return s.ApplyEntries([]Entry{{Index: index, Writes: writes}})
}

// Entry is one log entry's history writes.
type Entry struct {
	Index  uint64
	Writes []core.HistoryWrite
}

// ApplyEntries applies entries, in ascending index order, as Apply does
// each, in one batch: the store holds all of them or none. Entries at or
// below Applied() are skipped. One batch for the entries a queue holds
// costs one commit instead of one an entry: single-event writes commit
// each in its own entry.
func (s *Store) ApplyEntries(entries []Entry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	for len(entries) > 0 && entries[0].Index <= s.applied {
		entries = entries[1:]
	}
	if len(entries) == 0 {
		return nil
	}
	// A HistoryDeleteExpired reads the events it deletes, including those
	// earlier writes of the batch put: only an indexed batch can be read.
	indexed := false
	for _, e := range entries {
		for i := range e.Writes {
			if e.Writes[i].Kind == core.HistoryDeleteExpired {
				indexed = true
			}
		}
	}
	var b *pebble.Batch
	if indexed {
		b = s.db.NewIndexedBatch()
	} else {
		b = s.db.NewBatch()
	}
	defer b.Close()
	var erased []core.Uint128
	key := make([]byte, 0, keyLen)
	val := make([]byte, 0, 64)
	last := s.applied
	for _, e := range entries {
		if e.Index <= last {
			return fmt.Errorf("history: entry %d after entry %d: entries must ascend", e.Index, last)
		}
		last = e.Index
		for i := range e.Writes {
			w := &e.Writes[i]
			var err error
			switch w.Kind {
			case core.HistoryPut:
				key = appendKey(key[:0], w.Event.EntityID, w.Event.TimestampNS)
				val = appendValue(val[:0], &w.Event)
				err = b.Set(key, val, nil)
			case core.HistoryDeleteEntity:
				lo, hi := entityBounds(w.EntityID)
				err = b.DeleteRange(lo, hi, nil)
				erased = append(erased, w.EntityID)
			case core.HistoryDeleteExpired:
				err = deleteExpired(b, w.EntityID, w.TS)
			default:
				err = fmt.Errorf("history: write %d of entry %d: unknown kind %d", i, e.Index, w.Kind)
			}
			if err != nil {
				return wrapErr(err, w.EntityID)
			}
		}
	}
	var idx [8]byte
	binary.BigEndian.PutUint64(idx[:], last)
	if err := b.Set(appliedKey, idx[:], nil); err != nil {
		return err
	}
	if err := s.db.Apply(b, pebble.NoSync); err != nil {
		return wrapErr(err, core.Uint128{})
	}
	s.applied = last
	for _, id := range erased {
		s.erasures.erase(id)
	}
	return nil
}

// deleteExpired deletes, in b, the events of id that have expired at t.
func deleteExpired(b *pebble.Batch, id core.Uint128, t uint64) error {
	lo, hi := entityBounds(id)
	it, err := b.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	var dead [][]byte
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return err
		}
		e, err := decodeEvent(it.Key(), v)
		if err != nil {
			_ = it.Close()
			return err
		}
		if expiredAt(&e, t) {
			dead = append(dead, append([]byte(nil), it.Key()...))
		}
	}
	if err := it.Close(); err != nil {
		return err
	}
	// The iterator saw the batch as it was when made; deleting after it is
	// closed keeps the reads and the deletes apart.
	for _, k := range dead {
		if err := b.Delete(k, nil); err != nil {
			return err
		}
	}
	return nil
}

// expiredAt reports whether e has expired at t: it has a TTL and its
// expiry is at or before t.
func expiredAt(e *core.GeoEvent, t uint64) bool {
	return e.TTLSeconds != 0 && e.ExpiresAtNS() <= t
}

// Checkpoint makes the store as of Applied() durable in dir (flush, then
// pebble checkpoint); dir must not exist. It returns the index the
// checkpoint holds.
func (s *Store) Checkpoint(dir string) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, errClosed
	}
	// With the WAL off, a checkpoint holds only flushed tables: flush the
	// memtable first. s.mu keeps Apply out until the checkpoint is made, so
	// it holds exactly the writes up to s.applied.
	if err := s.db.Flush(); err != nil {
		return 0, wrapErr(err, core.Uint128{})
	}
	if err := s.db.Checkpoint(dir); err != nil {
		return 0, wrapErr(err, core.Uint128{})
	}
	return s.applied, nil
}

// Digest is a SHA-256 over every stored event in key order: the 128-byte
// record (core.GeoEvent.AppendRecord) of each, so that it does not depend
// on the value encoding.
func (s *Store) Digest() ([32]byte, error) {
	var sum [32]byte
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: []byte{keyPrefixEvent},
		UpperBound: []byte{keyPrefixEvent + 1},
	})
	if err != nil {
		return sum, wrapErr(err, core.Uint128{})
	}
	h := sha256.New()
	var rec []byte
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return sum, wrapErr(err, keyEntity(it.Key()))
		}
		e, err := decodeEvent(it.Key(), v)
		if err != nil {
			_ = it.Close()
			return sum, wrapErr(err, keyEntity(it.Key()))
		}
		rec = e.AppendRecord(rec[:0])
		h.Write(rec)
	}
	if err := it.Close(); err != nil {
		return sum, wrapErr(err, core.Uint128{})
	}
	copy(sum[:], h.Sum(nil))
	return sum, nil
}

// DiskBytes is the bytes the store's files take.
func (s *Store) DiskBytes() uint64 {
	return s.db.Metrics().DiskSpaceUsage()
}

// Close waits for the erasure compactions, flushes the memtable (so that a
// store closed cleanly reopens at Applied()) and closes the database. Every
// View must be closed first.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	s.closed = true
	err := s.erasures.close()
	err = errors.Join(err, s.db.Flush())
	err = errors.Join(err, s.db.Close())
	if err != nil {
		return wrapErr(err, core.Uint128{})
	}
	return nil
}
