// Package store is GeoEvent's synchronous file layer: the Raft log in
// segment files, the hard state (term, vote, commit) and snapshots, all in
// one data directory, with checksums on everything and fsync wherever
// durability is promised. It is not safe for concurrent use; the event loop
// calls it from one disk goroutine.
//
// # Files in the data directory
//
//	log-<first index, 20 digits>.seg                  log segments
//	log-<first index, 20 digits>.seg.tmp              a segment being created (removed by OpenLog)
//	log.manifest, log.manifest.tmp                    the log's first and last segments (durable.go)
//	hardstate, hardstate.tmp                          hard state and its replacement in progress
//	snapshot-<index, 20 digits>-<term, 20 digits>.snap         snapshots
//	snapshot-<index, 20 digits>-<term, 20 digits>.snap.tmp     a snapshot being written (ignored; removed by SaveSnapshot)
//
// All integers are little-endian. Every checksum is CRC-32C (Castagnoli).
//
// # Log segment
//
// A segment is a header page of segmentHeaderSize (4 KiB) bytes followed
// by records, back to back, then possibly zero bytes up to the end of the
// file (the runway, below). The header page:
//
//	offset size field
//	     0    8 magic "GEOLOG02"
//	     8    8 first index: the index of the segment's first record (equals the file name's)
//	    16    4 reserved, zero
//	    20    4 CRC-32C of bytes 0..19
//	   512   32 durable-end slot 0 (durable.go)
//	  1024   32 durable-end slot 1
//	          every other byte zero
//
// The first format, "GEOLOG01" (a 24-byte header, no slots, no manifest),
// recorded nothing of how far it was synced; OpenLog refuses it (see
// errOldFormat) rather than guess, as it did, that a short tail was torn.
//
// A record (RecordHeaderSize = 24 bytes, then the data):
//
//	offset size field
//	     0    4 data length n, at most MaxDataBytes (16 MiB + 64)
//	     4    4 CRC-32C of bytes 0..3, then bytes 8..23+n (length, index, term, data)
//	     8    8 index (>= 1)
//	    16    8 term
//	    24    n data
//
// # Invariants
//
//   - Segments, in file name order, hold contiguous indexes: a segment's first
//     index is the previous segment's first index plus its record count, and
//     the records within a segment have consecutive indexes from its first
//     index. Terms never decrease.
//   - A segment file exists under its final name only with a complete, fsynced
//     header: it is written as .tmp, fsynced and renamed.
//   - Only the last segment receives appends. Before a new segment is created
//     the current one is fsynced and the directory fsynced, so every segment
//     but the last is complete and durable, and only the newest segment's
//     directory entry can be missing after a crash. Damage anywhere but the
//     tail of the last segment is therefore corruption, never a torn write.
//   - Only the last segment may be empty (header only): after Reset, or after a
//     crash right after a segment was created.
//   - A segment's durable end (the newest whole slot in its header) never
//     claims more than was durable when it was written, and the manifest
//     names every segment that holds an acknowledged entry (see "The
//     durable end"). So the records below a segment's durable end, and the
//     segments the manifest names, were synced: if they are not all there,
//     entries that may have been acknowledged are lost, and that is damage.
//   - A torn tail is what a crash leaves at the end of the last segment,
//     beyond its durable end: an incomplete or checksum-failing record, or
//     zeros, with no valid record after it. OpenLog truncates it, and
//     removes the segments the manifest does not name (created after the
//     last Sync). A log that ends before its durable end (cut, zeroed, or a
//     named segment missing), a bad record followed by a valid one (an
//     index in the range that could follow), or damage in any other
//     segment, stops OpenLog with a Corruption error naming the file, the
//     byte offset and the indexes lost — unless LogOptions.Repair is set (a
//     replica with peers to repair from): OpenLog then cuts the log just
//     before the damage (see Damage).
//   - Removals keep the log contiguous at every step a crash could interrupt:
//     TruncateAfter, Reset and OpenLog's cut before damage delete segments
//     newest first, CompactBefore oldest first, and each fsyncs the directory
//     before it truncates a file or creates a new one. Each first replaces
//     the manifest when it names a segment that goes, and lowers a durable
//     end (fsynced) before it cuts a file below it.
//
// # The durable end
//
// A torn write can only be what was never synced, so recovery must know
// what was. Two records tell it, neither costing an fsync per Sync:
//
//   - The slots. After each fdatasync of the active segment, Sync writes
//     (pwrite, no fsync) the segment's new durable end, its byte offset and
//     the index after it, into the older of the header's two slots, with a
//     larger sequence number. The next fdatasync carries it to the disk
//     with the next records; the kernel's writeback may carry it earlier,
//     and a process that is killed leaves it in the page cache, which
//     reaches the disk all the same.
//   - The manifest (log.manifest) names the first and last segments. A Sync
//     after a segment was created replaces it (temporary file, fsync,
//     rename, directory fsync) before it returns; a removal replaces it
//     before it removes a segment it names. That is once per segment
//     (64 MiB by default), not per Sync.
//
// Why recovery never calls synced data torn, nor a torn write damage,
// whatever subset of the writes between two fsyncs a crash keeps, in
// whatever order the disk wrote them:
//
//   - A slot is written only after the fdatasync that made durable what it
//     claims has returned; a slot never claims more than was durable at
//     any instant it could reach the disk. Any slot on disk is therefore a
//     lower bound of the durable end, the newest whole one the best, and a
//     record below it missing or bad was synced: damage, never torn.
//   - Slots alternate, and the newest is never overwritten: a write torn
//     by a crash (its checksum fails) leaves the previous one, which claims
//     less, so the lower bound still holds. A write that fails is retried
//     in the same slot.
//   - What lies beyond the durable end may be acknowledged data whose slot
//     had not reached the disk: only after a crash of the machine (a killed
//     process loses no write) and for the last Sync before it. There a
//     record that is whole is kept; a record cut or zeroed can only be
//     what that crash did, and is judged torn. Damage there, after such a
//     crash and before the next Sync, is the one case not told apart.
//   - Lowering a durable end (TruncateAfter, OpenLog's cut before damage)
//     writes and fsyncs the slot before the file is cut, so a crash between
//     the two leaves a slot that claims no more than the file holds.
//   - The manifest names a segment only once its directory entry is
//     durable (the directory is fsynced first), and before any of its
//     entries is reported durable by a Sync; it stops naming one before the
//     segment is removed. A segment it names is therefore owed: missing, it
//     is damage. One it does not name (beyond its last, or before its
//     first) holds nothing acknowledged: created since the last Sync, or
//     being removed; OpenLog removes it. Running out of space (ErrNoSpace)
//     takes back to the last entry of a named segment, so it needs no
//     manifest write, which could fail for want of space too.
//   - A new directory gets a manifest naming nothing before its first
//     segment is created: a segment without a manifest is damage (or the
//     first format). So is a directory with neither, whose hard state says
//     entries were committed (the replica opens its log before it saves a
//     hard state): the log was deleted whole.
//
// # The runway
//
// fdatasync after writing into blocks the file already has is much cheaper
// than after appending: an append changes the file's size, and the
// journal must commit that too. On the project's VM a 10 KiB write and
// fdatasync took about 180 µs appended and 110 µs written in place. So
// after a small write (a burst of single events) Sync first extends the
// active segment with runwayBytes of zeros, fdatasynced with it once,
// and the next small writes land in them. Records are written at their
// offsets (pwrite), not appended. A large write does not bother: its own
// cost dominates, and zeros would double the bytes written.
//
// A run of zero bytes from a record boundary to the end of a file is
// therefore not damage: OpenLog takes it as the clean end of the segment
// (in the last segment, written but unsynced records whose blocks never
// reached the disk read as zeros too, and were never acknowledged). It
// truncates it from the last segment; the runway of the others is cut
// when the log moves on to a new segment, and Close cuts the active
// one's. No record is ever left beyond a segment's end: TruncateAfter and
// OpenLog's cuts shrink the file, so the runway holds only zeros written
// after the last record.
//
// # The page cache
//
// Once a segment's records are durable, the log drops their pages from the
// kernel's page cache (posix_fadvise DONTNEED; on Linux, elsewhere it does
// nothing). It never reads them in normal running: appended entries are
// kept in memory until every replica holds them, and only a follower that
// fell behind, or a restart, reads the log back, from the disk then. Kept,
// the pages would fill memory with a copy of everything written, and each
// write would copy into pages the kernel has just taken from its free
// memory. On the project's VM that first use of a page is dear (the host
// backs guest memory lazily): writing the log was 18% of the machine's
// time in a one-replica insert run, and dropping what is durable lets the
// next writes reuse the pages just freed. One replica's batched inserts
// ran 8% faster and a 3-replica cluster's 6% (medians of five and six
// alternated pairs; less, 2.5%, once earlier runs had freed many cached
// pages: see the README). The last, partly written page stays, since the
// next records complete it, and with it the rest of the folio (up to
// 2 MiB) the kernel keeps it in, until a later fsync covers that whole
// (see redropBytes). Snapshots are dropped once fsynced too.
//
// # Waiting for fdatasync
//
// The package is synchronous: Sync returns once the data is durable. But on
// Linux its fdatasyncs wait without holding a Go processor (P): they are
// submitted by AIO and their completion read from an eventfd through Go's
// poller (sync_linux.go), so that while the disk goroutine waits, the event
// loop and the connections' goroutines run, even with GOMAXPROCS=1. Where
// AIO is unavailable it makes the plain call, and PlainSyncs says why: for
// good on a kernel without it, for ten seconds at a time while the system
// is short of AIO contexts (aio-max-nr reached), after which it tries
// again.
//
// # Running out of space
//
// A write that fails for want of space (ENOSPC, EDQUOT) leaves the log
// usable (ErrNoSpace): it takes back everything appended since the last
// Sync, and the entries of segments the manifest does not name yet (a
// roll synced them, but no Sync reported them durable). Those segments go
// (the directory is fsynced before anything more is written: back after a
// crash, one would overlap the segment before it; OpenLog would remove
// them anyway), and the active file is cut at the last durable entry's
// end, so neither a record cut short nor old runway stays behind it. None
// of it writes the manifest, which could fail for want of space too. The caller appends the entries again once there is space. A failed
// fsync is different: the kernel may have dropped the pages it failed to
// write, so the log is unusable until the process restarts and recovers.
//
// The hard state and snapshot formats are documented in hardstate.go and
// snapshot.go.
package store

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/geoevent/geoevent/core"
)

const (
	segmentMagic   = "GEOLOG02"
	segmentMagicV1 = "GEOLOG01" // the first format: refused (errOldFormat)
	// segmentHeaderSize: the header page, the fixed header and the two
	// durable-end slots; records start after it.
	segmentHeaderSize = SegmentHeaderSize
	// segmentFixedSize: the header's fixed fields.
	segmentFixedSize = 24

	// DefaultSegmentBytes is the segment size used when LogOptions leaves it 0.
	DefaultSegmentBytes = 64 << 20

	writeBufferSize = 256 << 10
	scanBufferSize  = 1 << 20

	// runwayBytes of zeros (no more than the segment's size allows) extend
	// the active segment after a write of at most runwayMaxWrite bytes that
	// left less than runwayLow of runway.
	runwayBytes    = 1 << 20
	runwayLow      = 256 << 10
	runwayMaxWrite = 64 << 10
)

// SegmentHeaderSize is the size of a log segment's header page: its first
// record starts at this byte offset.
const SegmentHeaderSize = 4096

// zeroRunway is what extends a segment.
var zeroRunway [runwayBytes]byte

var (
	// ErrCompacted: the requested index lies before the log's first entry.
	ErrCompacted = errors.New("store: index compacted away")
	// ErrOutOfRange: the requested index lies after the log's last entry.
	ErrOutOfRange = errors.New("store: index beyond the end of the log")
	// ErrClosed: the log has been closed.
	ErrClosed = errors.New("store: log closed")
	// ErrNoSpace: a write to the log failed for want of space (ENOSPC or
	// EDQUOT). The log has taken back everything appended since the last
	// Sync and stays usable: it ends at its last durable entry
	// (LastIndex), and what came after can be appended again once there is
	// space. A failed fsync is never taken back: it makes the log unusable.
	ErrNoSpace = errors.New("store: no space left for the log")
)

// LogOptions tunes a Log.
type LogOptions struct {
	// SegmentBytes: start a new segment once the records of the current
	// one hold at least this many bytes (0 means DefaultSegmentBytes). A
	// segment's records exceed it by at most one record.
	SegmentBytes int64

	// Repair, when set, makes OpenLog cut the log just before damage that
	// is not a torn tail (see Damage) instead of failing with a Corruption
	// error: every entry from the damaged one on is dropped, later segments
	// included. Repair is called first, before anything is changed, and
	// must make durable that the log is being repaired (the replica's hard
	// state flag Repairing): a crash during the cut then leaves either the
	// damage in place, found again by the next OpenLog, or the flag set. An
	// error from Repair is returned by OpenLog, which then changes nothing.
	// Only a replica that can fetch the lost entries from its peers may set
	// it; the cut drops entries that may have been acknowledged.
	Repair func(Damage) error
}

// Damage is what OpenLog found wrong that is not a torn write: a record
// that fails its checksum (or declares an impossible length, or ends
// early) with more of the log after it, the log ending (cut, zeroed) before
// the durable end its segment's header records, a record whose index or
// term does not follow its predecessor, a damaged segment header, a
// segment whose first index does not follow the segment before it, or a
// segment the manifest names missing (the log's whole, manifest included,
// when the hard state says entries were committed). What precedes it is
// intact.
type Damage struct {
	File   string // the segment file
	Offset int64  // byte offset of the damaged record in File; within the header when the whole segment is rejected
	// Index is the index the damaged record (or the rejected segment's
	// first record) should have had: cutting keeps the entries before it,
	// so the log then ends at Index-1.
	Index uint64
	// LostThrough is the last durable index lost with it, when the log
	// knows it (the durable end in the segment's header); 0 when unknown.
	LostThrough uint64
	Reason      string // what is wrong, without the file and offset; it names the indexes lost
	// WholeSegment: the segment's header or place is what is wrong, so the
	// cut removes the whole file; otherwise it truncates File at Offset.
	WholeSegment bool
}

// Err is the Corruption error OpenLog returns for d without LogOptions.Repair.
func (d Damage) Err() error { return corruptAt(d.File, d.Offset, "%s", d.Reason) }

// damageError is how scan reports Damage: seg is the damaged segment's
// position in Log.segs.
type damageError struct {
	Damage
	seg int
}

func (e *damageError) Error() string { return e.Err().Error() }
func (e *damageError) Unwrap() error { return e.Err() }

// RecoveryInfo reports what OpenLog found.
type RecoveryInfo struct {
	FirstIndex, LastIndex uint64 // as FirstIndex() and LastIndex() report after opening
	TruncatedBytes        int64  // size of the torn tail cut off, 0 when none
	TruncatedFile         string // the segment it was cut from, "" when none
	// UnlistedSegments counts the segment files removed because the
	// manifest did not name them (created after the last Sync that would
	// have named them, or being removed when a crash came): they held
	// nothing acknowledged.
	UnlistedSegments int
	// Damage is the damage cut off under LogOptions.Repair, nil when none;
	// the log then ends at Damage.Index-1. DroppedSegments counts the
	// whole segment files that cut removed.
	Damage          *Damage
	DroppedSegments int
}

type termRun struct{ start, term uint64 }

type segment struct {
	first   uint64
	path    string
	offsets []int64   // offsets[i]: byte offset of the record with index first+i
	terms   []termRun // runs of equal term, ascending start
	size    int64     // end of the last record, counting bytes still in the write buffer
	f       *os.File  // the active segment's write handle, or a lazily opened read handle
	// advisedTo: the active segment's pages below this offset have been
	// advised out of the page cache once durable (see "The page cache").
	advisedTo int64
	// durable is the newest whole slot of the header (seq), as on disk or
	// on its way there, except that after a failed slot write its end and
	// next are those the write tried: an upper bound of what any slot
	// claims.
	durable durableEnd
}

func (s *segment) count() uint64 { return uint64(len(s.offsets)) }
func (s *segment) end() uint64   { return s.first + s.count() } // index after the last

func (s *segment) addTerm(index, term uint64) {
	if n := len(s.terms); n == 0 || s.terms[n-1].term != term {
		s.terms = append(s.terms, termRun{index, term})
	}
}

func (s *segment) term(index uint64) uint64 {
	k := sort.Search(len(s.terms), func(i int) bool { return s.terms[i].start > index })
	return s.terms[k-1].term
}

// cut keeps the first keep records.
func (s *segment) cut(keep uint64) {
	if keep < s.count() {
		s.size = s.offsets[keep]
	}
	s.offsets = s.offsets[:keep]
	end := s.first + keep
	k := sort.Search(len(s.terms), func(i int) bool { return s.terms[i].start >= end })
	s.terms = s.terms[:k]
}

func (s *segment) closeFile() error {
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}

// Log is the replicated log on disk. See the package comment for the format.
type Log struct {
	dir      string
	segBytes int64
	segs     []*segment // ascending; the last is the active one
	w        *os.File   // active segment's handle (== segs[last].f), nil when there are no segments
	bw       *bufio.Writer
	out      segmentWriter // bw's destination: w, from the end of its records on
	fileEnd  int64         // the size of w's file: its records, then the runway
	next     uint64        // LastIndex()+1
	lastTerm uint64        // term of the last entry (0 when empty)

	syncedSize int64 // bytes of the active segment known durable
	// listed is what the manifest says (hasManifest: that there is one).
	listed      span
	hasManifest bool
	unlisted    []*segment // OpenLog: segments the manifest does not name, to remove
	logGone     uint64     // OpenLog: no manifest, no segment, yet the hard state's commit index is this
	dirDirty    bool       // an entry of dir was created since the last directory fsync
	err         error      // sticky: set by a failed write or fsync
	closed      bool
	hdr         [RecordHeaderSize]byte
}

func segmentName(first uint64) string { return fmt.Sprintf("log-%020d.seg", first) }

// parseSegmentName returns the first index in a segment file name. isSeg
// reports whether name looks like a segment file at all.
func parseSegmentName(name string) (first uint64, isSeg, ok bool) {
	if !strings.HasPrefix(name, "log-") || !strings.HasSuffix(name, ".seg") {
		return 0, false, false
	}
	digits := name[len("log-") : len(name)-len(".seg")]
	if len(digits) != 20 {
		return 0, true, false
	}
	v, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || v == 0 {
		return 0, true, false
	}
	return v, true, true
}

// segmentHeader is the header page of a new segment: its fixed fields and
// both slots saying that nothing is durable yet.
func segmentHeader(first uint64) []byte {
	h := make([]byte, segmentHeaderSize)
	copy(h, segmentMagic)
	binary.LittleEndian.PutUint64(h[8:16], first)
	binary.LittleEndian.PutUint32(h[20:24], crc32.Checksum(h[0:20], castagnoli))
	for seq := uint64(0); seq < 2; seq++ {
		copy(h[slotOffsets[seq%2]:], encodeSlot(first, durableEnd{seq: seq, end: segmentHeaderSize, next: first}))
	}
	return h
}

// OpenLog opens (creating if absent) the log in dir. It scans every segment,
// verifying every record's checksum and that indexes are contiguous. A torn
// tail (an incomplete or checksum-failing record, or zeros, at the end of
// the last segment, after its durable end and with no valid record after
// it) is truncated and reported in RecoveryInfo; so are segments created
// after the manifest last named one (they hold nothing acknowledged). Any
// other damage, a log that ends before its durable end (a segment the
// manifest names missing included), returns a Corruption error naming the
// file, the byte offset and the indexes lost or, when opts.Repair is set,
// is cut off with everything after it (see LogOptions.Repair) and reported
// in RecoveryInfo.Damage: the log then ends just before it, and when
// nothing is left it is empty as after Reset(Damage.Index). Leftover .tmp
// segment files are removed. A log of the first format (errOldFormat) is
// refused. Before returning it fsyncs the last segment and the directory,
// so whatever it reports as the log is durable (the previous process may
// have died with writes in the page cache only).
func OpenLog(dir string, opts LogOptions) (*Log, RecoveryInfo, error) {
	if opts.SegmentBytes <= 0 {
		opts.SegmentBytes = DefaultSegmentBytes
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, RecoveryInfo{}, fmt.Errorf("store: create log directory: %w", err)
	}
	names, err := os.ReadDir(dir)
	if err != nil {
		return nil, RecoveryInfo{}, fmt.Errorf("store: read log directory: %w", err)
	}
	l := &Log{dir: dir, segBytes: opts.SegmentBytes, next: 1, bw: bufio.NewWriterSize(io.Discard, writeBufferSize)}
	for _, de := range names {
		name := de.Name()
		if strings.HasPrefix(name, "log-") && strings.HasSuffix(name, ".seg.tmp") {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return nil, RecoveryInfo{}, fmt.Errorf("store: remove leftover %s: %w", name, err)
			}
			continue
		}
		first, isSeg, ok := parseSegmentName(name)
		if !isSeg {
			continue
		}
		path := filepath.Join(dir, name)
		if !ok || !de.Type().IsRegular() {
			return nil, RecoveryInfo{}, corruptAt(path, 0, "not a valid segment file name or not a regular file")
		}
		l.segs = append(l.segs, &segment{first: first, path: path})
	}
	sort.Slice(l.segs, func(i, j int) bool { return l.segs[i].first < l.segs[j].first })
	var info RecoveryInfo
	if err := l.openManifest(); err != nil {
		return nil, RecoveryInfo{}, err
	}

	if err := l.scan(&info); err != nil {
		var de *damageError
		if !errors.As(err, &de) {
			l.closeFiles()
			return nil, RecoveryInfo{}, err
		}
		if de.LostThrough == 0 {
			de.Reason += commitHint(dir, de.Index)
		}
		if opts.Repair == nil {
			l.closeFiles()
			return nil, RecoveryInfo{}, de.Err()
		}
		if err := opts.Repair(de.Damage); err != nil {
			l.closeFiles()
			return nil, RecoveryInfo{}, err
		}
		if err := l.cutDamage(de, &info); err != nil {
			l.closeFiles()
			return nil, RecoveryInfo{}, err
		}
		d := de.Damage
		info.Damage = &d
	}
	if err := l.removeUnlisted(&info); err != nil {
		l.closeFiles()
		return nil, RecoveryInfo{}, err
	}
	if l.w != nil {
		if err := syncFile(l.w); err != nil {
			l.closeFiles()
			return nil, RecoveryInfo{}, fmt.Errorf("store: fsync %s: %w", l.w.Name(), err)
		}
		// Records found beyond the durable end are durable now.
		if s := l.segs[len(l.segs)-1]; s.size != s.durable.end {
			if err := writeSlot(s, l.w, s.size, s.end()); err != nil {
				l.closeFiles()
				return nil, RecoveryInfo{}, err
			}
		}
	}
	if err := syncDir(dir); err != nil {
		l.closeFiles()
		return nil, RecoveryInfo{}, err
	}
	l.dirDirty = false
	if sp := l.span(); !l.hasManifest || sp != l.listed {
		if err := l.saveManifest(sp); err != nil {
			l.closeFiles()
			return nil, RecoveryInfo{}, err
		}
	}
	if l.w != nil {
		l.writeAt(l.segs[len(l.segs)-1].size)
	}
	info.FirstIndex, info.LastIndex = l.FirstIndex(), l.LastIndex()
	return l, info, nil
}

// commitHint is what the hard state in dir says of the entries from index
// on, when a damage lost them without a record of how far they went: that
// it had seen entries up to its commit index committed.
func commitHint(dir string, index uint64) string {
	if hs, ok, err := LoadHardState(dir); err == nil && ok && hs.Commit >= index {
		return fmt.Sprintf("; the hard state's commit index is %d, so entries %d to %d at least were committed", hs.Commit, index, hs.Commit)
	}
	return ""
}

// openManifest reads the manifest and sets aside (in l.unlisted, for
// removeUnlisted) the segments it does not name: those before its first (a compaction removes them after it moved
// the manifest on) and after its last (created since the last Sync, or
// being removed by a truncation that had already taken them out of the
// manifest); neither holds anything acknowledged. A directory with
// segments and no manifest is of the first format, or damaged.
func (l *Log) openManifest() error {
	sp, ok, err := loadManifest(l.dir)
	if err != nil {
		return err
	}
	if !ok {
		if len(l.segs) == 0 {
			// A new log (OpenLog writes the manifest), unless the hard
			// state, which is saved only after the log was opened once,
			// says entries were committed: then the log was deleted.
			if hs, ok, err := LoadHardState(l.dir); err == nil && ok && hs.Commit > 0 {
				l.logGone = hs.Commit
			}
			return nil
		}
		s := l.segs[0]
		if b, err := os.ReadFile(s.path); err == nil && len(b) >= 8 && string(b[:8]) == segmentMagicV1 {
			return errOldFormat(l.dir)
		}
		return corruptAt(filepath.Join(l.dir, manifestName), 0,
			"the log manifest is missing, yet segments %s to %s exist: segments the log held may be missing",
			filepath.Base(s.path), filepath.Base(l.segs[len(l.segs)-1].path))
	}
	l.listed, l.hasManifest = sp, true
	var keep []*segment
	for _, s := range l.segs {
		if sp == (span{}) || s.first < sp.lo || s.first > sp.hi {
			l.unlisted = append(l.unlisted, s)
		} else {
			keep = append(keep, s)
		}
	}
	l.segs = keep
	return nil
}

// removeUnlisted removes, newest first, the segments openManifest found
// the manifest does not name.
func (l *Log) removeUnlisted(info *RecoveryInfo) error {
	for i := len(l.unlisted) - 1; i >= 0; i-- {
		if err := os.Remove(l.unlisted[i].path); err != nil {
			return fmt.Errorf("store: remove %s, which the log manifest does not name: %w", l.unlisted[i].path, err)
		}
		info.UnlistedSegments++
	}
	l.unlisted = nil
	return nil // OpenLog fsyncs the directory
}

// writeAt points the writer at offset end of the active segment, whose
// records end there (and so does its file: scan, createSegment and the
// truncations leave no runway). The buffer must be empty.
func (l *Log) writeAt(end int64) {
	l.out = segmentWriter{io.NewOffsetWriter(l.w, end)}
	l.bw.Reset(l.out)
	l.fileEnd = end
}

// segmentWriter writes to the active segment from an offset on.
type segmentWriter struct{ ow *io.OffsetWriter }

func (w segmentWriter) Write(p []byte) (int, error) { return faultyWrite(p, w.ow.Write) }

// scan reads every segment, builds the in-memory index and truncates a torn
// tail. It leaves the last segment open for appending.
func (l *Log) scan(info *RecoveryInfo) error {
	if l.logGone != 0 {
		return &damageError{Damage: Damage{File: filepath.Join(l.dir, manifestName), Index: 1, WholeSegment: true, LostThrough: l.logGone,
			Reason: fmt.Sprintf("the log manifest and every log segment are missing, yet the hard state's commit index is %d: entries 1 to %d were committed, and those no snapshot holds are lost",
				l.logGone, l.logGone)}}
	}
	sp := l.listed
	if sp.lo != 0 && (len(l.segs) == 0 || l.segs[0].first != sp.lo) {
		which := "first"
		if sp.lo == sp.hi {
			which = "only"
		}
		return l.missingSegment(0, sp.lo, sp.lo, which)
	}
	sc := &scanner{buf: make([]byte, scanBufferSize)}
	for i, s := range l.segs {
		last := i == len(l.segs)-1
		var err error
		if last {
			s.f, err = os.OpenFile(s.path, os.O_RDWR, 0)
		} else {
			s.f, err = os.Open(s.path)
		}
		if err != nil {
			return fmt.Errorf("store: open segment: %w", err)
		}
		if i > 0 && s.first != l.next {
			prev := l.segs[i-1]
			return &damageError{seg: i, Damage: Damage{File: s.path, Offset: 8, Index: l.next, WholeSegment: true,
				Reason: fmt.Sprintf("first index %d does not follow %s, which ends at index %d: a segment is missing or overlaps",
					s.first, filepath.Base(prev.path), prev.end()-1)}}
		}
		if err := l.scanSegment(sc, i, last, info); err != nil {
			return err
		}
		l.next = s.end()
		if !last {
			if err := s.closeFile(); err != nil {
				return fmt.Errorf("store: close segment: %w", err)
			}
		}
	}
	n := len(l.segs)
	if n > 0 {
		l.w = l.segs[n-1].f
		l.syncedSize = l.segs[n-1].size
	}
	if sp.hi != 0 && l.segs[n-1].first != sp.hi {
		return l.missingSegment(n, sp.hi, l.next, "last")
	}
	return nil
}

// missingSegment is the damage of segment first, which the manifest names
// (as the log's first or last: which) but the directory lacks: the entries
// from index on are lost, and how far they went was recorded in that
// segment only. seg is where it would stand in l.segs.
func (l *Log) missingSegment(seg int, first, index uint64, which string) error {
	return &damageError{seg: seg, Damage: Damage{File: filepath.Join(l.dir, segmentName(first)), Index: index, WholeSegment: true,
		Reason: fmt.Sprintf("the log manifest names this segment as the log's %s, but it is missing: the entries from index %d on are lost (how far they went was recorded in the segment only)",
			which, index)}}
}

// scanSegment scans l.segs[i]. Damage comes back as a *damageError.
func (l *Log) scanSegment(sc *scanner, i int, last bool, info *RecoveryInfo) error {
	s := l.segs[i]
	headerDamage := func(off int64, format string, args ...any) error {
		return &damageError{seg: i, Damage: Damage{File: s.path, Offset: off, Index: s.first, WholeSegment: true,
			Reason: fmt.Sprintf(format, args...)}}
	}
	recordDamage := func(pos int64, format string, args ...any) error {
		return &damageError{seg: i, Damage: Damage{File: s.path, Offset: pos, Index: s.end(),
			Reason: fmt.Sprintf(format, args...)}}
	}
	st, err := s.f.Stat()
	if err != nil {
		return fmt.Errorf("store: stat segment: %w", err)
	}
	fileSize := st.Size()
	sc.reset(s.f)
	h, err := sc.window(0, segmentHeaderSize)
	if err != nil {
		return fmt.Errorf("store: read %s: %w", s.path, err)
	}
	switch {
	case len(h) >= 8 && string(h[0:8]) == segmentMagicV1:
		return errOldFormat(l.dir)
	case len(h) < segmentHeaderSize:
		return headerDamage(int64(len(h)), "segment header is %d bytes, need %d%s", len(h), segmentHeaderSize, l.lostAfter(s.first))
	case string(h[0:8]) != segmentMagic:
		return headerDamage(0, "bad segment magic %q%s", h[0:8], l.lostAfter(s.first))
	case binary.LittleEndian.Uint32(h[20:24]) != crc32.Checksum(h[0:20], castagnoli):
		return headerDamage(0, "segment header (bytes 0-23) checksum mismatch")
	case binary.LittleEndian.Uint32(h[16:20]) != 0:
		return headerDamage(16, "segment header reserved field is not zero")
	case binary.LittleEndian.Uint64(h[8:16]) != s.first:
		return headerDamage(8, "segment header says first index %d, file name says %d", binary.LittleEndian.Uint64(h[8:16]), s.first)
	}
	if off := nonZeroPadding(h); off >= 0 {
		return headerDamage(off, "segment header page has a nonzero byte outside its fields")
	}
	d, ok := newestSlot(h, s.first)
	if !ok {
		return headerDamage(slotOffsets[0], "both durable-end slots of the segment header fail their checks%s", l.lostAfter(s.first))
	}
	s.durable = d
	pos := int64(segmentHeaderSize)
	s.size = pos
	for {
		if pos == d.end && s.end() != d.next {
			return recordDamage(pos, "the durable end recorded in the header is byte %d after index %d, but the records there end at index %d",
				d.end, d.next-1, s.end()-1)
		}
		b, err := sc.window(pos, RecordHeaderSize)
		if err != nil {
			return fmt.Errorf("store: read %s: %w", s.path, err)
		}
		if len(b) == 0 { // the file's end
			if pos < d.end {
				return l.lostTail(s, pos, "the file ends here")
			}
			return nil // clean end
		}
		if need := recordNeed(b); len(b) < need {
			if b, err = sc.window(pos, need); err != nil {
				return fmt.Errorf("store: read %s: %w", s.path, err)
			}
		}
		e, n, derr := DecodeRecord(b)
		if derr == nil && pos < d.end && pos+int64(n) > d.end {
			derr = core.Errorf(core.Corruption, "the record reaches past the durable end recorded in the header (byte %d)", d.end)
		}
		if derr != nil {
			if pos < d.end {
				what := reason(derr)
				if zero, err := zeroFrom(s.f, pos, min(fileSize, d.end)); err != nil {
					return fmt.Errorf("store: read %s: %w", s.path, err)
				} else if zero {
					what = "zeros from here on"
				}
				return l.lostTail(s, pos, what)
			}
			return l.badRecord(s, last, pos, fileSize, derr, info, recordDamage)
		}
		if want := s.end(); e.Index != want {
			return recordDamage(pos, "record has index %d, expected %d", e.Index, want)
		}
		if e.Term < l.lastTerm {
			return recordDamage(pos, "record %d has term %d, below the previous record's term %d", e.Index, e.Term, l.lastTerm)
		}
		s.offsets = append(s.offsets, pos)
		s.addTerm(e.Index, e.Term)
		l.lastTerm = e.Term
		pos += int64(n)
		s.size = pos
	}
}

// lostTail is the damage of segment s whose records stop at pos (for the
// reason what) before the durable end its header records: entries that
// were synced, and may have been acknowledged, are lost.
func (l *Log) lostTail(s *segment, pos int64, what string) error {
	d := s.durable
	return &damageError{seg: l.segIndex(s), Damage: Damage{File: s.path, Offset: pos, Index: s.end(), LostThrough: d.next - 1,
		Reason: fmt.Sprintf("%s, before the durable end recorded in the segment header (byte %d): entries %d to %d were synced, may have been acknowledged, and are lost",
			what, d.end, s.end(), d.next-1)}}
}

// lostAfter is what a damaged header of the segment that starts at first
// loses, for a message.
func (l *Log) lostAfter(first uint64) string {
	return fmt.Sprintf(": the entries from index %d on are lost (how far they went was recorded in this header)", first)
}

func (l *Log) segIndex(s *segment) int {
	for i, t := range l.segs {
		if t == s {
			return i
		}
	}
	return len(l.segs)
}

// nonZeroPadding returns the offset of the first nonzero byte of the
// header page h outside its fixed fields and its slots, or -1.
func nonZeroPadding(h []byte) int64 {
	from := int64(segmentFixedSize)
	for _, to := range []int64{slotOffsets[0], slotOffsets[1], segmentHeaderSize} {
		for p := from; p < to; p++ {
			if h[p] != 0 {
				return p
			}
		}
		from = to + slotSize
	}
	return -1
}

// badRecord decides what the bad record at pos in s is: a torn tail (last
// segment, no valid record after it), which it truncates, or damage, which
// it reports through damage.
func (l *Log) badRecord(s *segment, last bool, pos, fileSize int64, derr error, info *RecoveryInfo,
	damage func(pos int64, format string, args ...any) error) error {
	zero, err := zeroFrom(s.f, pos, fileSize)
	if err != nil {
		return fmt.Errorf("store: read %s: %w", s.path, err)
	}
	if zero { // the runway: the segment's clean end
		if !last || pos == fileSize {
			return nil
		}
		if err := s.f.Truncate(pos); err != nil {
			return fmt.Errorf("store: truncate the runway of %s: %w", s.path, err)
		}
		if err := syncFile(s.f); err != nil {
			return fmt.Errorf("store: fsync %s: %w", s.path, err)
		}
		return nil
	}
	if !last {
		return damage(pos, "%s, in a segment that is not the last", reason(derr))
	}
	found, at, index, err := findValidRecord(s.f, pos+1, fileSize, s.end(), pos)
	if err != nil {
		return fmt.Errorf("store: read %s: %w", s.path, err)
	}
	if found {
		return damage(pos, "%s, yet a valid record (index %d) follows at byte %d", reason(derr), index, at)
	}
	if err := s.f.Truncate(pos); err != nil {
		return fmt.Errorf("store: truncate torn tail of %s: %w", s.path, err)
	}
	if err := syncFile(s.f); err != nil {
		return fmt.Errorf("store: fsync %s: %w", s.path, err)
	}
	info.TruncatedBytes = fileSize - pos
	info.TruncatedFile = s.path
	return nil
}

// cutDamage removes what scan found damaged and everything after it, the
// segments after the damaged one first, newest first (so that a crash leaves
// the log a prefix of itself, as TruncateAfter does), and makes the result
// durable: the log then ends just before d.Index. When no segment is left,
// an empty one at d.Index takes its place, as after Reset(d.Index).
func (l *Log) cutDamage(d *damageError, info *RecoveryInfo) error {
	keep := d.seg + 1 // segments kept
	if d.WholeSegment {
		keep = d.seg
	}
	keep = min(keep, len(l.segs))
	var after span
	if keep > 0 {
		after = span{l.segs[0].first, l.segs[keep-1].first}
	}
	if err := l.unlist(after); err != nil {
		return err
	}
	for len(l.segs) > keep {
		s := l.segs[len(l.segs)-1]
		s.closeFile()
		l.segs = l.segs[:len(l.segs)-1]
		if err := os.Remove(s.path); err != nil {
			return fmt.Errorf("store: remove %s: %w", s.path, err)
		}
		info.DroppedSegments++
	}
	if info.DroppedSegments > 0 {
		if err := syncDir(l.dir); err != nil {
			return err
		}
	}
	if len(l.segs) == 0 {
		l.next, l.lastTerm = d.Index, 0
		return l.createSegment(d.Index)
	}
	// The last segment left becomes the active one: the damaged one
	// (truncated at the damage) or the one before the rejected segment.
	s := l.segs[len(l.segs)-1]
	s.closeFile()
	f, err := os.OpenFile(s.path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("store: open segment: %w", err)
	}
	s.f = f
	// The durable end comes back to the records kept first: a crash
	// after the cut then finds no damage (the hard state says the log is
	// being repaired, see LogOptions.Repair).
	if err := l.lowerDurableEnd(s, f); err != nil {
		return err
	}
	// Cut what follows the records kept: the damage (scan indexed the
	// records before it, so s.size == d.Offset) or, when the damaged
	// segment went whole, any runway left on the one before it.
	if err := f.Truncate(s.size); err != nil {
		return fmt.Errorf("store: truncate %s at the damaged record: %w", s.path, err)
	}
	if err := syncFile(f); err != nil {
		return fmt.Errorf("store: fsync %s: %w", s.path, err)
	}
	l.w, l.syncedSize = f, s.size
	l.next = s.end()
	return nil
}

// lowerDurableEnd makes s's durable end (the slot in its header) no
// further than its records now end, before a cut of the file below the
// end it recorded: a crash during the cut must not leave a slot that
// claims records the file no longer holds. Records below s.size are
// durable. It fsyncs the slot only when it lowered it.
func (l *Log) lowerDurableEnd(s *segment, f *os.File) error {
	if s.durable.end <= s.size {
		return nil
	}
	if err := writeSlot(s, f, s.size, s.end()); err != nil {
		return err
	}
	if err := syncFile(f); err != nil {
		return fmt.Errorf("store: fsync %s: %w", s.path, err)
	}
	return nil
}

// zeroFrom reports whether bytes [from, size) of f are all zero.
func zeroFrom(f *os.File, from, size int64) (bool, error) {
	buf := make([]byte, min(size-from, 64<<10))
	for p := from; p < size; {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), size-p)], p)
		for _, b := range buf[:n] {
			if b != 0 {
				return false, nil
			}
		}
		p += int64(n)
		if err == io.EOF {
			return true, nil // the file is shorter than it was
		}
		if err != nil {
			return false, err
		}
	}
	return true, nil
}

// findValidRecord looks for a record with a valid checksum starting anywhere
// in [from, size) of f whose index could follow a bad record at badPos that
// should have had index want: want <= index <= want + (size-badPos)/24. The
// cheap checks on the length and index fields reject almost every position
// before a checksum is computed.
func findValidRecord(f *os.File, from, size int64, want uint64, badPos int64) (found bool, at int64, index uint64, err error) {
	maxIndex := want + uint64((size-badPos)/RecordHeaderSize)
	sc := &scanner{buf: make([]byte, scanBufferSize)}
	sc.reset(f)
	for p := from; p+RecordHeaderSize <= size; p++ {
		b, err := sc.window(p, RecordHeaderSize)
		if err != nil {
			return false, 0, 0, err
		}
		if len(b) < RecordHeaderSize {
			break
		}
		n := binary.LittleEndian.Uint32(b[0:4])
		idx := binary.LittleEndian.Uint64(b[8:16])
		if n > MaxDataBytes || idx < want || idx > maxIndex || p+RecordHeaderSize+int64(n) > size {
			continue
		}
		if b, err = sc.window(p, RecordHeaderSize+int(n)); err != nil {
			return false, 0, 0, err
		}
		if e, _, derr := DecodeRecord(b); derr == nil {
			return true, p, e.Index, nil
		}
	}
	return false, 0, 0, nil
}

// scanner reads a file forward through a buffer that grows to hold the
// largest record asked for.
type scanner struct {
	f   *os.File
	buf []byte
	off int64 // file offset of buf[0]
	n   int   // valid bytes in buf
	eof bool
}

func (sc *scanner) reset(f *os.File) { sc.f, sc.off, sc.n, sc.eof = f, 0, 0, false }

// window returns the file's bytes from pos on, as many as are buffered but
// at least need of them unless the file ends first. pos must not go back
// before the previous call's pos.
func (sc *scanner) window(pos int64, need int) ([]byte, error) {
	if pos < sc.off || pos > sc.off+int64(sc.n) {
		sc.off, sc.n, sc.eof = pos, 0, false
	}
	start := int(pos - sc.off)
	if sc.n-start >= need || sc.eof {
		return sc.buf[start:sc.n], nil
	}
	sc.n = copy(sc.buf, sc.buf[start:sc.n])
	sc.off = pos
	if need > len(sc.buf) {
		nb := make([]byte, max(need, 2*len(sc.buf)))
		copy(nb, sc.buf[:sc.n])
		sc.buf = nb
	}
	for sc.n < len(sc.buf) {
		m, err := sc.f.ReadAt(sc.buf[sc.n:], sc.off+int64(sc.n))
		sc.n += m
		if err == io.EOF {
			sc.eof = true
			break
		}
		if err != nil {
			return nil, err
		}
	}
	return sc.buf[:sc.n], nil
}

func (l *Log) closeFiles() {
	for _, s := range l.segs {
		s.closeFile()
	}
	l.w = nil
}

func (l *Log) usable() error {
	if l.closed {
		return ErrClosed
	}
	return l.err
}

// fail makes err sticky: after a failed write or fsync the state of the file
// is unknown (the kernel may have dropped the dirty pages), so the log
// refuses all further work; the process must restart and recover.
func (l *Log) fail(err error) error {
	if l.err == nil {
		l.err = &unusableError{err}
	}
	return l.err
}

// unusableError is the sticky error of a log that failed.
type unusableError struct{ err error }

func (e *unusableError) Error() string {
	return "store: log unusable after an I/O error (restart to recover): " + e.err.Error()
}
func (e *unusableError) Unwrap() error { return e.err }

// NoSpace reports whether err is a failure for want of space (ENOSPC,
// EDQUOT) after which the write can simply be tried again: the log's
// ErrNoSpace (it took back what it could not write), or a snapshot or hard
// state file that was not written (its temporary file is gone). A log that
// failed for good, for want of space or not, is not.
func NoSpace(err error) bool {
	return outOfSpace(err) && !errors.As(err, new(*unusableError))
}

// outOfSpace reports whether err says the device (or the quota) is full.
func outOfSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

func (l *Log) empty() bool {
	return len(l.segs) == 0 || (len(l.segs) == 1 && l.segs[0].count() == 0)
}

// firstIdx is the first index the log holds or, when empty, would hold next.
func (l *Log) firstIdx() uint64 {
	if len(l.segs) == 0 {
		return l.next
	}
	return l.segs[0].first
}

// FirstIndex returns the index of the first entry, 0 when the log is empty.
func (l *Log) FirstIndex() uint64 {
	if l.empty() {
		return 0
	}
	return l.segs[0].first
}

// LastIndex returns the index of the last entry. An empty log returns one
// less than the index it was Reset to (0 for a new log).
func (l *Log) LastIndex() uint64 { return l.next - 1 }

// Append buffers entries at the end of the log. The first entry's Index must
// be LastIndex()+1 or, when the log is empty, any index >= 1 (a log Reset to n
// may thus start elsewhere than n). Indexes must be consecutive, terms must not
// decrease, and Data must be at most MaxDataBytes. Invalid input changes
// nothing. Entries are not durable until Sync, but are readable at once.
// Append does not keep e.Data. Rolling to a new segment fsyncs the full one.
func (l *Log) Append(entries []Entry) error {
	if err := l.usable(); err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}
	next, term := l.next, l.lastTerm
	if l.empty() {
		next, term = entries[0].Index, 0
	}
	for i, e := range entries {
		switch {
		case e.Index == 0:
			return fmt.Errorf("store: append: entry %d has index 0", i)
		case e.Index != next:
			return fmt.Errorf("store: append: entry %d has index %d, expected %d", i, e.Index, next)
		case e.Term < term:
			return fmt.Errorf("store: append: entry %d (index %d) has term %d, below the previous term %d", i, e.Index, e.Term, term)
		case len(e.Data) > MaxDataBytes:
			return fmt.Errorf("store: append: entry %d (index %d) has %d data bytes, above the limit %d", i, e.Index, len(e.Data), MaxDataBytes)
		}
		next, term = e.Index+1, e.Term
	}
	if l.empty() && entries[0].Index != l.next {
		if err := l.restartAt(entries[0].Index); err != nil {
			return l.fail(err)
		}
	}
	for _, e := range entries {
		if err := l.appendOne(e); err != nil {
			return l.failOrRewind(err)
		}
	}
	return nil
}

// restartAt drops the empty log's segment, if any, so that the log can start
// at index first.
func (l *Log) restartAt(first uint64) error {
	if len(l.segs) > 0 {
		s := l.segs[0]
		l.bw.Reset(io.Discard)
		if err := l.unlist(span{}); err != nil {
			return err
		}
		s.closeFile()
		l.w = nil
		l.segs = nil
		if err := os.Remove(s.path); err != nil {
			return fmt.Errorf("store: remove %s: %w", s.path, err)
		}
		if err := syncDir(l.dir); err != nil {
			return err
		}
		l.dirDirty = false
	}
	l.next = first
	return nil
}

func (l *Log) appendOne(e Entry) error {
	if l.w == nil {
		if err := l.createSegment(e.Index); err != nil {
			return err
		}
	} else if s := l.segs[len(l.segs)-1]; s.size-segmentHeaderSize >= l.segBytes && s.count() > 0 {
		if err := l.roll(e.Index); err != nil {
			return err
		}
	}
	s := l.segs[len(l.segs)-1]
	putRecordHeader(l.hdr[:], e)
	if _, err := l.bw.Write(l.hdr[:]); err != nil {
		return fmt.Errorf("store: write %s: %w", s.path, err)
	}
	if len(e.Data) > l.bw.Available() {
		// Large data goes straight to the file: no copy through the buffer.
		if err := l.bw.Flush(); err != nil {
			return fmt.Errorf("store: write %s: %w", s.path, err)
		}
		if _, err := l.out.Write(e.Data); err != nil {
			return fmt.Errorf("store: write %s: %w", s.path, err)
		}
	} else if _, err := l.bw.Write(e.Data); err != nil {
		return fmt.Errorf("store: write %s: %w", s.path, err)
	}
	s.offsets = append(s.offsets, s.size)
	s.addTerm(e.Index, e.Term)
	s.size += int64(RecordHeaderSize + len(e.Data))
	l.next, l.lastTerm = e.Index+1, e.Term
	return nil
}

// roll makes the full active segment durable (data and directory entry) and
// starts a new one at first.
func (l *Log) roll(first uint64) error {
	if err := l.bw.Flush(); err != nil {
		return fmt.Errorf("store: write %s: %w", l.segs[len(l.segs)-1].path, err)
	}
	// The full segment ends at its last record, for good before the next
	// segment exists.
	if err := l.cutRunway(); err != nil {
		return err
	}
	if err := l.syncActive(); err != nil {
		return err
	}
	if l.dirDirty {
		if err := syncDir(l.dir); err != nil {
			return err
		}
		l.dirDirty = false
	}
	// The full segment keeps its handle for reads; appends go to the new one.
	l.w = nil
	return l.createSegment(first)
}

// createSegment creates segment first via a fsynced .tmp file and a rename,
// and makes it the active segment. Its directory entry is durable at the next
// directory fsync.
func (l *Log) createSegment(first uint64) (err error) {
	path := filepath.Join(l.dir, segmentName(first))
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("store: create segment: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err = faultyWrite(segmentHeader(first), f.Write); err != nil {
		return fmt.Errorf("store: write %s: %w", tmp, err)
	}
	if err = syncFile(f); err != nil {
		return fmt.Errorf("store: fsync %s: %w", tmp, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("store: rename %s: %w", tmp, err)
	}
	l.dirDirty = true
	l.segs = append(l.segs, &segment{first: first, path: path, size: segmentHeaderSize, f: f,
		durable: durableEnd{seq: 1, end: segmentHeaderSize, next: first}})
	l.w = f
	l.writeAt(segmentHeaderSize)
	l.syncedSize = segmentHeaderSize
	l.next = first
	return nil
}

// cutRunway truncates the active segment's file at its last record and
// fdatasyncs it, which also makes durable everything written before. The
// buffer must be empty.
func (l *Log) cutRunway() error {
	s := l.segs[len(l.segs)-1]
	if l.fileEnd <= s.size {
		return nil
	}
	if err := l.w.Truncate(s.size); err != nil {
		return fmt.Errorf("store: truncate the runway of %s: %w", s.path, err)
	}
	if err := syncFile(l.w); err != nil {
		return fmt.Errorf("store: fsync %s: %w", s.path, err)
	}
	l.fileEnd, l.syncedSize = s.size, s.size
	return l.recordDurable(s)
}

// recordDurable records in the active segment's header that its records
// are durable up to syncedSize, which an fsync has just made them; the
// next fsync carries the slot (see "The durable end").
func (l *Log) recordDurable(s *segment) error {
	if s.durable.end == l.syncedSize {
		return nil
	}
	k := sort.Search(len(s.offsets), func(i int) bool { return s.offsets[i] >= l.syncedSize })
	return writeSlot(s, l.w, l.syncedSize, s.first+uint64(k))
}

// syncActive writes out the buffer and fdatasyncs the active segment if it
// holds bytes not yet durable.
func (l *Log) syncActive() error {
	if l.w == nil {
		return nil
	}
	s := l.segs[len(l.segs)-1]
	if err := l.bw.Flush(); err != nil {
		return fmt.Errorf("store: write %s: %w", s.path, err)
	}
	l.fileEnd = max(l.fileEnd, s.size)
	if s.size > l.syncedSize {
		// A small write that left little runway: extend it, within the
		// segment's size.
		if n := min(runwayBytes, segmentHeaderSize+l.segBytes-l.fileEnd); n > 0 && s.size-l.syncedSize <= runwayMaxWrite && l.fileEnd-s.size < runwayLow {
			at := l.fileEnd
			if _, err := faultyWrite(zeroRunway[:n], func(p []byte) (int, error) { return l.w.WriteAt(p, at) }); err != nil {
				return fmt.Errorf("store: write %s: %w", s.path, err)
			}
			l.fileEnd += n
		}
		if err := syncFile(l.w); err != nil {
			return fmt.Errorf("store: fsync %s: %w", s.path, err)
		}
		l.syncedSize = s.size
		l.dropDurable(s)
		return l.recordDurable(s)
	}
	return nil
}

// pageSize is the size of the page cache's pages.
var pageSize = int64(os.Getpagesize())

// redropBytes is the largest folio: the page cache may hold a file's pages
// in folios of up to 2 MiB (x86-64, 4 KiB pages), each aligned to its size
// in the file, and the kernel keeps a folio that reaches outside the range
// advised. So dropDurable advises again from the start of the redropBytes
// block that holds the end of the range it last advised: the folio that
// held the last, partly written page goes once a later call covers it
// whole.
const redropBytes = 2 << 20

// dropDurable drops the active segment's durable whole pages from the page
// cache (see "The page cache"). The page the last record ends in stays:
// the next records are written into it, and the kernel would read it back
// from the disk to complete it.
func (l *Log) dropDurable(s *segment) {
	to := l.syncedSize &^ (pageSize - 1)
	if to > s.advisedTo {
		// Never the header page: the slots are rewritten after every
		// fsync, and a dropped page would be read back for it.
		from := max(s.advisedTo&^(redropBytes-1), (segmentHeaderSize+pageSize-1)&^(pageSize-1))
		if to > from {
			dropCached(l.w, from, to-from)
		}
	}
	s.advisedTo = to // lower too, after a cut
}

// Sync makes everything appended so far durable: it writes out the buffer,
// fdatasyncs the active segment and, when a segment file was created since
// the last directory fsync, fsyncs the directory. With nothing pending it
// does nothing.
func (l *Log) Sync() error {
	if err := l.usable(); err != nil {
		return err
	}
	if err := l.syncActive(); err != nil {
		return l.failOrRewind(err)
	}
	if sp := l.span(); sp != l.listed || !l.hasManifest {
		// A segment was created since: the manifest names it before its
		// entries are reported durable (see "The durable end").
		if err := l.saveManifest(sp); err != nil {
			return l.failOrRewind(err)
		}
	}
	if l.dirDirty {
		if err := syncDir(l.dir); err != nil {
			return l.fail(err)
		}
		l.dirDirty = false
	}
	return nil
}

// flush writes the buffer out to the active segment so that reads see it.
func (l *Log) flush() error {
	if l.bw.Buffered() == 0 {
		return nil
	}
	if err := l.bw.Flush(); err != nil {
		return l.failOrRewind(fmt.Errorf("store: write %s: %w", l.segs[len(l.segs)-1].path, err))
	}
	return nil
}

// rewindable reports whether err is a write that failed for want of
// space, which the log can take back (see ErrNoSpace): not a failed fsync.
func rewindable(err error) bool {
	return outOfSpace(err) && !errors.As(err, new(*fsyncError))
}

// failOrRewind is fail, except for a write that failed for want of space:
// the log then takes back what it cannot make durable (rewind) and
// returns ErrNoSpace.
func (l *Log) failOrRewind(err error) error {
	if !rewindable(err) || l.err != nil {
		return l.fail(err)
	}
	if rerr := l.rewind(); rerr != nil {
		return l.fail(rerr)
	}
	return fmt.Errorf("%w: %w", ErrNoSpace, err)
}

// durableIndex is the index of the last entry known durable and in a
// segment the manifest names: every entry of the named segments before the
// active one (roll syncs a segment before it starts the next one) and
// those of the active one below syncedSize. A segment the manifest does
// not name yet does not count: a crash would remove it (OpenLog), and
// naming it would take a write that may fail for want of space too.
func (l *Log) durableIndex() uint64 {
	if len(l.segs) == 0 {
		return l.next - 1
	}
	s := l.segs[len(l.segs)-1]
	if hi := l.listed.hi; s.first > hi {
		for k := len(l.segs) - 1; k >= 0; k-- {
			if l.segs[k].first <= hi {
				return l.segs[k].end() - 1
			}
		}
		return l.segs[0].first - 1
	}
	k := sort.Search(len(s.offsets), func(i int) bool { return s.offsets[i] >= l.syncedSize })
	return s.first + uint64(k) - 1
}

// rewind takes back everything appended since the last Sync, after a
// write of it failed: the log ends at its last durable entry again, its
// files hold nothing after it (neither a record cut short nor old runway,
// which a crash could leave in front of garbage), and appends go on from
// there. Segments started after that entry hold nothing durable and go.
func (l *Log) rewind() error {
	d := l.durableIndex()
	l.bw.Reset(io.Discard) // never written, or written only in part
	removed := false
	for len(l.segs) > 0 && l.segs[len(l.segs)-1].first > d && l.segs[len(l.segs)-1].first > l.listed.hi {
		if err := l.removeLast(); err != nil {
			return err
		}
		removed = true
	}
	if removed {
		// Durably gone before anything more goes into the segment before:
		// back after a crash, a removed one would overlap it.
		if err := syncDir(l.dir); err != nil {
			return err
		}
		l.dirDirty = false
	}
	if len(l.segs) == 0 {
		l.next = d + 1 // no segment was named: nothing was acknowledged
		return nil
	}
	s := l.segs[len(l.segs)-1]
	if l.w == nil {
		// s was complete and durable (a roll synced it, then could not
		// start the next segment); it becomes the active segment again.
		s.closeFile()
		f, err := os.OpenFile(s.path, os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("store: open segment: %w", err)
		}
		s.f, l.w = f, f
	}
	s.cut(d + 1 - s.first)
	if err := l.w.Truncate(s.size); err != nil {
		return fmt.Errorf("store: truncate %s: %w", s.path, err)
	}
	if err := syncFile(l.w); err != nil {
		return fmt.Errorf("store: fsync %s: %w", s.path, err)
	}
	l.writeAt(s.size)
	l.syncedSize = s.size
	l.next = d + 1
	l.lastTerm = 0
	if s.count() > 0 {
		l.lastTerm = s.term(d)
	}
	return nil
}

// removeLast deletes the last segment's file.
func (l *Log) removeLast() error {
	s := l.segs[len(l.segs)-1]
	if s.f == l.w {
		l.bw.Reset(io.Discard)
		l.w = nil
	}
	s.closeFile()
	l.segs = l.segs[:len(l.segs)-1]
	if err := os.Remove(s.path); err != nil {
		return fmt.Errorf("store: remove %s: %w", s.path, err)
	}
	return nil
}

// TruncateAfter removes the entries with Index > index (a leader overwriting
// a follower's log). It is durable on return. Segments are removed newest
// first and the directory fsynced before the segment holding index is cut,
// so a crash leaves a prefix of the old log. An index before the first entry
// empties the log as Reset(index+1) does.
func (l *Log) TruncateAfter(index uint64) error {
	if err := l.usable(); err != nil {
		return err
	}
	if index+1 >= l.next {
		return nil
	}
	if l.empty() || index < l.segs[0].first {
		return l.Reset(index + 1)
	}
	if err := l.flush(); err != nil {
		return err
	}
	keep := len(l.segs)
	for l.segs[keep-1].first > index {
		keep--
	}
	if err := l.unlist(span{l.segs[0].first, l.segs[keep-1].first}); err != nil {
		return l.fail(err)
	}
	removed := false
	for len(l.segs) > keep {
		if err := l.removeLast(); err != nil {
			return l.fail(err)
		}
		removed = true
	}
	if removed || l.dirDirty {
		if err := syncDir(l.dir); err != nil {
			return l.fail(err)
		}
		l.dirDirty = false
	}
	s := l.segs[len(l.segs)-1]
	if l.w == nil {
		// s was complete and durable; it becomes the active segment.
		s.closeFile()
		f, err := os.OpenFile(s.path, os.O_RDWR, 0)
		if err != nil {
			return l.fail(fmt.Errorf("store: open segment: %w", err))
		}
		s.f, l.w = f, f
		l.writeAt(s.size)
		l.syncedSize = s.size
	}
	if keep := index - s.first + 1; keep < s.count() {
		s.cut(keep)
		if err := l.lowerDurableEnd(s, l.w); err != nil {
			return l.fail(err)
		}
		// The file ends at the last record kept: no record cut, nor any of
		// the runway after them, stays behind to be read after a crash.
		if err := l.w.Truncate(s.size); err != nil {
			return l.fail(fmt.Errorf("store: truncate %s: %w", s.path, err))
		}
		if err := syncFile(l.w); err != nil {
			return l.fail(fmt.Errorf("store: fsync %s: %w", s.path, err))
		}
		l.writeAt(s.size)
		l.syncedSize = s.size
	}
	l.next = index + 1
	l.lastTerm = s.term(index)
	return nil
}

// CompactBefore deletes, oldest first, whole segments all of whose entries
// have Index < index (after a snapshot at index-1 or later). The log keeps
// every entry >= index, and possibly some below it; the last segment is never
// deleted. It is durable (directory fsynced) on return.
func (l *Log) CompactBefore(index uint64) error {
	if err := l.usable(); err != nil {
		return err
	}
	k := 0
	for k+1 < len(l.segs) && l.segs[k+1].first <= index {
		k++
	}
	if k > 0 {
		if err := l.unlist(span{l.segs[k].first, l.segs[len(l.segs)-1].first}); err != nil {
			return l.fail(err)
		}
	}
	removed := false
	for len(l.segs) > 1 && l.segs[1].first <= index {
		s := l.segs[0]
		s.closeFile()
		if err := os.Remove(s.path); err != nil {
			return l.fail(fmt.Errorf("store: remove %s: %w", s.path, err))
		}
		l.segs = l.segs[1:]
		removed = true
	}
	if removed {
		if err := syncDir(l.dir); err != nil {
			return l.fail(err)
		}
		l.dirDirty = false
	}
	return nil
}

// Reset drops every entry and restarts the (empty) log at nextIndex, after a
// snapshot beyond the log's end has been installed: LastIndex() becomes
// nextIndex-1. It is durable on return. Segments are deleted newest first and
// the directory fsynced before the new empty segment is created, so a crash
// leaves a prefix of the old log or an empty log (LastIndex 0); the caller
// holds the snapshot and calls Reset again.
func (l *Log) Reset(nextIndex uint64) error {
	if err := l.usable(); err != nil {
		return err
	}
	if nextIndex == 0 {
		return fmt.Errorf("store: reset: index 0")
	}
	if l.empty() && len(l.segs) == 1 && l.segs[0].first == nextIndex {
		return l.Sync() // already there; make its directory entry durable
	}
	l.bw.Reset(io.Discard)
	if err := l.unlist(span{}); err != nil {
		return l.fail(err)
	}
	for len(l.segs) > 0 {
		if err := l.removeLast(); err != nil {
			return l.fail(err)
		}
	}
	if err := syncDir(l.dir); err != nil {
		return l.fail(err)
	}
	l.dirDirty = false
	if err := l.createSegment(nextIndex); err != nil {
		return l.fail(err)
	}
	if err := l.saveManifest(l.span()); err != nil {
		return l.fail(err)
	}
	l.lastTerm = 0
	return nil
}

func (l *Log) segmentFor(index uint64) *segment {
	k := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].first > index })
	return l.segs[k-1]
}

// Term returns the term of the entry at index. Term(0) is 0. An index before
// the first entry returns ErrCompacted, after the last ErrOutOfRange.
func (l *Log) Term(index uint64) (uint64, error) {
	if l.closed {
		return 0, ErrClosed
	}
	switch {
	case index == 0:
		return 0, nil
	case index >= l.next:
		return 0, ErrOutOfRange
	case index < l.firstIdx():
		return 0, ErrCompacted
	}
	return l.segmentFor(index).term(index), nil
}

// Entries returns the entries [from, to), read from disk (the page cache in
// practice) and verified against their checksums; entries appended but not
// yet synced are included. The entries of one segment share one buffer.
// from < FirstIndex returns ErrCompacted, to > LastIndex()+1 ErrOutOfRange.
func (l *Log) Entries(from, to uint64) ([]Entry, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	switch {
	case from > to:
		return nil, fmt.Errorf("store: entries: from %d > to %d", from, to)
	case to > l.next:
		return nil, ErrOutOfRange
	case from < l.firstIdx():
		return nil, ErrCompacted
	case from == to:
		return nil, nil
	}
	if err := l.flush(); err != nil {
		return nil, err
	}
	out := make([]Entry, 0, to-from)
	k := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].first > from }) - 1
	for index := from; index < to; k++ {
		s := l.segs[k]
		hi := min(to, s.end())
		start := s.offsets[index-s.first]
		end := s.size
		if hi < s.end() {
			end = s.offsets[hi-s.first]
		}
		f, err := l.readHandle(s)
		if err != nil {
			return nil, err
		}
		buf := make([]byte, end-start)
		if n, err := f.ReadAt(buf, start); n < len(buf) {
			if err == io.EOF {
				return nil, corruptAt(s.path, start+int64(n), "segment ends before the records the log indexed")
			}
			return nil, fmt.Errorf("store: read %s: %w", s.path, err)
		}
		for p := 0; index < hi; index++ {
			e, n, err := DecodeRecord(buf[p:])
			if err != nil {
				return nil, corruptAt(s.path, start+int64(p), "%s", reason(err))
			}
			if e.Index != index {
				return nil, corruptAt(s.path, start+int64(p), "record has index %d, expected %d", e.Index, index)
			}
			out = append(out, e)
			p += n
		}
	}
	return out, nil
}

// EntriesUpTo is Entries(from, to) cut short after the entry whose record
// brings the records' bytes (headers included) to maxBytes or more: at
// least one entry when from < to.
func (l *Log) EntriesUpTo(from, to uint64, maxBytes int64) ([]Entry, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	if from < to && from >= l.firstIdx() && to <= l.next {
		end, n := from, int64(0)
		for end < to && n < maxBytes {
			s := l.segmentFor(end)
			for hi := min(to, s.end()); end < hi && n < maxBytes; end++ {
				next := s.size
				if end+1 < s.end() {
					next = s.offsets[end+1-s.first]
				}
				n += next - s.offsets[end-s.first]
			}
		}
		to = end
	}
	return l.Entries(from, to)
}

func (l *Log) readHandle(s *segment) (*os.File, error) {
	if s.f == nil {
		f, err := os.Open(s.path)
		if err != nil {
			return nil, fmt.Errorf("store: open segment: %w", err)
		}
		s.f = f
	}
	return s.f, nil
}

// Close syncs what was appended, cuts the runway, makes the durable end in
// the active segment's header durable too, and closes the files. The log
// is unusable afterwards.
func (l *Log) Close() error {
	if l.closed {
		return ErrClosed
	}
	err := l.Sync()
	if err == nil && l.w != nil {
		err = l.cutRunway()
	}
	if err == nil && l.w != nil {
		// The slot Sync wrote after its fdatasync: a closed log's durable
		// end is on the disk, exact.
		if err = syncFile(l.w); err != nil {
			err = fmt.Errorf("store: fsync %s: %w", l.w.Name(), err)
		}
	}
	l.closeFiles()
	l.closed = true
	return err
}
