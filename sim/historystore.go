package sim

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/geoevent/geoevent/core"
	histstore "github.com/geoevent/geoevent/io/history"
	"github.com/geoevent/geoevent/replica"
)

// histStore is one replica's history store in the simulator: production's
// (package io/history, over pebble) on pebble's crashable memory
// filesystem, one each. The disk (disk.go) keeps, with each snapshot, the
// name of the store's checkpoint taken when the snapshot was asked for;
// a crash keeps only what the filesystem had synced, and recovery keeps
// the store or restores the checkpoint of the snapshot it recovers, as
// production does (io/historian.go).
type histStore struct {
	n     *node
	fs    *vfs.MemFS
	store *histstore.Store
	seq   int // checkpoints taken, for their names
	// openDamage is the damage that opening the store met (store is then
	// nil), for verify.
	openDamage error

	// The snapshot the last recovery started from (its index, and its
	// checkpoint: "" for none), for digestAt.
	recIndex uint64
	recFrom  string

	// The history stream of the leader's last EncodeSnapshot (a
	// checkpoint, read a chunk at a time), and the stream of a leader's
	// snapshot being written (staging).
	out      *histstore.Stream
	outIndex uint64
	outDir   string
	in       *histstore.Receiver
	inIndex  uint64
}

// simStaging is where a follower writes a leader's history stream.
const simStaging = "staging"

const simLiveHistory = "history"

// simHistoryCache is each store's block cache: the simulator's histories
// are small.
const simHistoryCache = 1 << 20

func newHistStore(n *node) *histStore {
	h := &histStore{n: n, fs: vfs.NewCrashableMem()}
	h.open()
	return h
}

func (h *histStore) open() {
	st, err := histstore.Open(h.fs, simLiveHistory, histstore.Options{CacheBytes: simHistoryCache})
	h.openDamage = nil
	if ce := (*histstore.CorruptionError)(nil); errors.As(err, &ce) {
		h.openDamage = ce // found by opening: the recovery rebuilds (disk.recovered)
		return
	}
	if err != nil {
		h.n.w.fail("replica %d cannot open its history store: %v", h.n.idx, err)
		return
	}
	h.store = st
}

// failed fails the run when err is set, and reports whether it was.
func (h *histStore) failed(what string, err error) bool {
	if err != nil {
		h.n.w.fail("replica %d history store: %s: %v", h.n.idx, what, err)
		return true
	}
	return false
}

// apply applies the writes of the log entry at index.
func (h *histStore) apply(index uint64, writes []core.HistoryWrite) {
	if h.store != nil {
		h.failed("apply", h.store.Apply(index, writes))
	}
}

// answer answers reads from the store as it is now.
func (h *histStore) answer(reads []core.HistoryRead) []core.HistoryAnswer {
	if h.store == nil {
		return make([]core.HistoryAnswer, len(reads))
	}
	v := h.store.View()
	defer v.Close()
	return core.AnswerHistoryReads(v, reads)
}

// openStream checkpoints the store as it is now as the stream of the
// snapshot at index (replacing the one before) and returns its size.
func (h *histStore) openStream(index uint64) uint64 {
	h.dropStream(h.outIndex)
	dir := h.checkpoint()
	if dir == "" {
		return 0
	}
	st, err := histstore.OpenStream(h.fs, dir)
	if h.failed("open a stream", err) {
		return 0
	}
	h.out, h.outIndex, h.outDir = st, index, dir
	return uint64(st.Size())
}

// readStream reads a chunk of the stream of the snapshot at index (nil:
// not that stream).
func (h *histStore) readStream(index, offset uint64, max int) []byte {
	if h.out == nil || h.outIndex != index || offset >= uint64(h.out.Size()) {
		return nil
	}
	b, err := h.out.ReadChunk(int64(offset), max)
	if h.failed("read a stream", err) {
		return nil
	}
	return b
}

// dropStream removes the stream of the snapshot at index, if it is the one.
func (h *histStore) dropStream(index uint64) {
	if h.out != nil && h.outIndex == index {
		h.remove(h.outDir)
		h.out, h.outIndex, h.outDir = nil, 0, ""
	}
}

// writeStream writes a chunk of a leader's stream for the snapshot at
// index, and reports whether the receiver took it.
func (h *histStore) writeStream(index, offset uint64, data []byte) bool {
	if offset == 0 {
		h.closeReceiver()
		in, err := histstore.NewReceiver(h.fs, simStaging)
		if h.failed("stage a stream", err) {
			return false
		}
		h.in, h.inIndex = in, index
	}
	if h.in == nil || h.inIndex != index {
		return false
	}
	err := h.in.Write(int64(offset), data)
	if err != nil && !errors.Is(err, histstore.ErrStreamOffset) {
		h.closeReceiver() // unusable: the leader starts over
	}
	return err == nil
}

func (h *histStore) closeReceiver() {
	if h.in != nil {
		h.failed("close a stream", h.in.Close())
		h.in = nil
	}
}

// checkpoint checkpoints the store as it is now and returns the
// checkpoint's directory.
func (h *histStore) checkpoint() string {
	if h.store == nil {
		return ""
	}
	h.seq++
	dir := fmt.Sprintf("checkpoint-%d", h.seq)
	_, err := h.store.Checkpoint(dir)
	h.failed("checkpoint", err)
	return dir
}

// remove removes a checkpoint no snapshot needs any longer.
func (h *histStore) remove(dir string) {
	if dir != "" {
		h.failed("remove a checkpoint", h.fs.RemoveAll(dir))
	}
}

// install makes the store the stream written for the leader's snapshot at
// index (complete: the replica installs only then) and returns a
// checkpoint of it.
func (h *histStore) install(index uint64) string {
	if h.in == nil || h.inIndex != index || !h.in.Complete() {
		h.n.w.fail("replica %d installs the snapshot at index %d without its whole history stream", h.n.idx, index)
		return ""
	}
	h.closeReceiver()
	h.close()
	if h.failed("install a stream", histstore.Restore(h.fs, simStaging, simLiveHistory)) {
		return ""
	}
	h.failed("clear the staging", h.fs.RemoveAll(simStaging))
	h.open()
	return h.checkpoint()
}

// digestAt is the digest of the store as of the entries up to applied:
// the store's own, unless recovery kept a store that holds entries above
// applied (before the replay has passed them). Then, at the snapshot
// recovery started from, it is the digest of that snapshot's checkpoint
// (of an empty store without one): what a restore would have made the
// store, and what the replay goes on from; at any other index no store
// holds that state, and ok is false.
func (h *histStore) digestAt(applied uint64) (d [32]byte, ok bool) {
	if h.store == nil || h.store.Applied() <= applied {
		return h.digest(), true
	}
	if applied != h.recIndex {
		return d, false
	}
	if h.recFrom == "" {
		return sha256.Sum256(nil), true // Store.Digest of no events
	}
	const scratch = "digest-scratch"
	if h.failed("restore for a digest", histstore.Restore(h.fs, h.recFrom, scratch)) {
		return d, false
	}
	st, err := histstore.Open(h.fs, scratch, histstore.Options{CacheBytes: simHistoryCache})
	if h.failed("open for a digest", err) {
		return d, false
	}
	d, err = st.Digest()
	h.failed("digest", errors.Join(err, st.Close(), h.fs.RemoveAll(scratch)))
	return d, true
}

func (h *histStore) digest() [32]byte {
	if h.store == nil {
		return [32]byte{}
	}
	d, err := h.store.Digest()
	h.failed("digest", err)
	return d
}

func (h *histStore) close() {
	if h.store != nil {
		h.failed("close", h.store.Close())
		h.store = nil
	}
}

// damage overwrites bytes in the first data block of every table in dir
// (a checkpoint, or the live store, whose tables may be links to the
// checkpoint's: an overwrite, unlike a flip, damages a linked table the
// same whether it is reached once or twice), and returns how many tables
// it damaged.
func (h *histStore) damage(dir string) int {
	if _, err := h.fs.Stat(dir); err != nil {
		return 0 // no such store (none was opened since the last rebuild)
	}
	names, err := h.fs.List(dir)
	if h.failed("list a checkpoint", err) {
		return 0
	}
	n := 0
	for _, name := range names {
		if !strings.HasSuffix(name, ".sst") {
			continue
		}
		f, err := h.fs.OpenReadWrite(h.fs.PathJoin(dir, name), vfs.WriteCategoryUnspecified)
		if h.failed("open a table to damage", err) {
			return n
		}
		b := make([]byte, 16)
		if k, _ := f.ReadAt(b, 200); k == len(b) && string(b) != strings.Repeat("\xa5", len(b)) {
			for i := range b {
				b[i] = 0xa5
			}
			if _, err := f.WriteAt(b, 200); !h.failed("damage a table", err) {
				n++
			}
		}
		h.failed("close a damaged table", errors.Join(f.Sync(), f.Close()))
	}
	return n
}

// verify reads every event of the store (its digest), and returns the
// damage that finds, or nil.
func (h *histStore) verify() error {
	if h.store == nil {
		return h.openDamage
	}
	_, err := h.store.Digest()
	var ce *histstore.CorruptionError
	if errors.As(err, &ce) {
		return ce
	}
	h.failed("verify", err)
	return nil
}

// crash keeps what the filesystem synced, nothing else.
func (h *histStore) crash() {
	h.closeReceiver()
	out := h.outDir
	h.out, h.outIndex, h.outDir = nil, 0, ""
	h.close()
	h.fs = h.fs.CrashClone(vfs.CrashCloneCfg{})
	// The stream's checkpoint and the staging are no snapshot's: a
	// restarted replica has no use for them.
	if out != "" {
		h.remove(out)
	}
	h.failed("clear the staging", h.fs.RemoveAll(simStaging))
}

// recover opens the store for the replica recovering rec, as production
// does (io/historian.go, history.Recover): the store as the crash left it
// when the replay can go on from it, otherwise the checkpoint from (""
// with no snapshot: empty).
func (h *histStore) recover(from string, rec replica.Recovered) {
	h.close()
	st, kept, err := histstore.Recover(h.fs, simLiveHistory, histstore.Recovery{
		SnapshotIndex: rec.SnapshotIndex, Checkpoint: from,
		Committed: rec.KnownCommitted(h.n.cfg.ReplicaCount), FirstRead: replica.FirstHistoryRead(rec.Entries),
	}, histstore.Options{CacheBytes: simHistoryCache})
	h.openDamage = nil
	if ce := (*histstore.CorruptionError)(nil); errors.As(err, &ce) {
		h.openDamage = ce // found by opening: the recovery rebuilds (disk.recovered)
		return
	}
	if h.failed("recover", err) {
		return
	}
	h.store, h.recIndex, h.recFrom = st, rec.SnapshotIndex, from
	if kept && st.Applied() > rec.SnapshotIndex {
		h.n.w.tracef("replica %d kept its history store, which holds the entries up to %d (snapshot %d)", h.n.idx, st.Applied(), rec.SnapshotIndex)
	}
}

// empty replaces the live store by an empty one (a rebuild: the damaged
// store is never opened again).
func (h *histStore) empty() {
	h.close()
	if h.failed("remove the damaged store", h.fs.RemoveAll(simLiveHistory)) {
		return
	}
	h.recover("", replica.Recovered{})
}
