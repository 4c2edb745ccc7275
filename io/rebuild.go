package io

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/io/history"
	"github.com/geoevent/geoevent/io/store"
	"github.com/geoevent/geoevent/replica"
)

// A damaged history store. A block of the history store that fails its
// checksum (or a key or value it cannot read) is never answered from: the
// read that meets it gets a *history.CorruptionError, which reaches the
// loop as the replica's failure (a read for an entry being applied, or for
// a client's history query, which is answered 501 CORRUPTION), as the
// historian's (a write that had to read), or from the encoding of a
// snapshot for a follower. The loop logs the damaged file and key range,
// then:
//
//   - A replica of a cluster of one has no peer to get the history from:
//     the server stops, naming the file and the key range, and the data
//     directory must be restored from a backup.
//   - A replica with peers rebuilds (Server.rebuild): it discards its log,
//     its snapshots, its history store and its in-memory state, and starts
//     a new replica on the empty log with the hard state's Repairing flag
//     set. The leader's first append does not match the empty log, so the
//     leader sends its log from the start or, once it has compacted it, a
//     snapshot with its history (the install path).
//
// Raft's safety holds through the rebuild because it is the log repair of
// recovery (recoverStorage) with the whole log cut: the replica may have
// acknowledged entries, and voted, before it discarded them.
//
//   - Storage makes the Repairing flag durable before it removes anything
//     (disk.discard), so a crash midway restarts repairing too.
//   - A repairing replica neither votes nor campaigns (replica.New raises
//     its term, so it cannot vote twice in a term it voted in; it grants no
//     vote until the flag is cleared): an empty log would otherwise grant a
//     vote to a candidate lacking entries whose commit counted this
//     replica's acknowledgement.
//   - It acknowledges only what its new log durably holds (min(durable,
//     verified)), and its commit starts at 0, not at the commit the old
//     hard state recorded for entries it no longer holds.
//   - It clears the flag once it durably holds, from a leader of a later
//     term than any in which it acknowledged, an entry of that term that
//     the leader committed: every entry committed with its old
//     acknowledgements precedes that one, so it holds them all again.
//
// A majority of the others must be intact for the rebuild to end; until it
// ends, a cluster of three with another replica down cannot elect a leader.
// Requests waiting on the discarded replica get no answer: their clients
// time out and retry (their sessions make the retry safe).

// historyDamage returns the history store's corruption among err's causes,
// or nil.
func historyDamage(err error) *history.CorruptionError {
	var ce *history.CorruptionError
	if errors.As(err, &ce) {
		return ce
	}
	return nil
}

// damaged handles a failure err of the replica or the history store that
// is the history store's corruption ce: a replica with peers rebuilds (nil:
// the loop goes on), a lone one stops with the error returned.
func (s *Server) damaged(err error, ce *history.CorruptionError) error {
	fields := []zap.Field{zap.String("file", ce.File), zap.String("keys", ce.Keys), zap.String("detail", ce.Detail), zap.Error(err)}
	if !ce.Entity.IsZero() {
		fields = append(fields, zap.String("entity", ce.Entity.String()))
	}
	if s.info.ReplicaCount == 1 {
		s.log.Error("the history store is damaged and a cluster of one replica has no peer to rebuild it from; stopping: restore the data directory from a backup", fields...)
		return fmt.Errorf("the history store in %s is damaged (%v): a cluster of one replica has no peer to rebuild it from; restore the data directory from a backup", s.dir, ce)
	}
	s.log.Error("the history store is damaged: discarding this replica's log, snapshots, history and state, and rebuilding them from the leader", fields...)
	return s.rebuild()
}

// rebuild discards the replica's storage and state and starts a new
// replica on the empty log, repairing (see above). Storage does the
// discarding in queue order: the disk's opDiscard after every storage
// request of the old replica, the historian's histDiscard after every
// history request and once the disk's is done. Their answers to the old
// replica's requests are dropped until each answers its discard.
func (s *Server) rebuild() error {
	st := s.r.Status()
	diskDone := make(chan error, 1)
	s.disk.push(diskOp{kind: opDiscard, history: diskDone})
	s.hist.push(histOp{kind: histDiscard, after: diskDone, diskExited: s.disk.exited})
	s.rebuilding.disk++
	s.rebuilding.hist++
	s.rebuilding.gen++
	s.replay.to = 0
	// The new replica's term is above the old one's (replica.New raises
	// a repairing replica's term), and its first hard state follows the
	// discard in the disk's queue.
	rec := replica.Recovered{HardState: core.HardState{Term: st.Term, Vote: core.NoVote, Repairing: true}}
	r, err := replica.New(s.rcfg, replicaIO{s}, s.clock, NewRand(), rec)
	if err != nil {
		return fmt.Errorf("start an empty replica to rebuild: %w", err)
	}
	s.r = r
	s.status = replica.Status{Leader: replica.NoLeader}
	return nil
}

// discard is the disk's part of a rebuild (opDiscard): it makes the hard
// state's Repairing flag durable, then empties the log (the next append
// starts at index 1) and removes every snapshot file, and tells op.history
// how it went (the historian waits for it before it empties the store: a
// crash in between leaves no snapshot without its history checkpoint).
// Snapshots being written beside the log are waited for first; those
// written before are not reported.
func (d *disk) discard(op *diskOp) (err error) {
	defer func() {
		if err == nil {
			d.report(completion{discarded: true})
		}
		if op.history != nil {
			op.history <- err
			op.history = nil
		}
	}()
	b := make(chan struct{})
	d.snaps <- diskOp{kind: opBarrier, barrier: b}
	<-b
	d.gen++
	if hs := d.pendingHS; hs != nil {
		if err := store.SaveHardState(d.dir, store.HardState(*hs)); err != nil {
			return err
		}
		d.pendingHS = nil
	}
	d.haveSaved = false // the file will differ from savedHS: the next hard state is written
	if err := discardLog(d.dir, d.log); err != nil {
		return err
	}
	d.unsynced, d.sinceSync = nil, 0
	d.lastSnap = 0
	d.logger.Warn("discarded the log and the snapshots; the hard state is marked repairing")
	return nil
}

// discardLog durably sets the Repairing flag of the hard state in dir,
// then empties log (the next append starts at index 1) and removes every
// snapshot file.
func discardLog(dir string, log *store.Log) error {
	if err := markRepairing(dir); err != nil {
		return err
	}
	if err := log.Reset(1); err != nil {
		return fmt.Errorf("empty the log to rebuild: %w", err)
	}
	names, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range names {
		if n := e.Name(); strings.HasPrefix(n, "snapshot-") && (strings.HasSuffix(n, ".snap") || strings.HasSuffix(n, ".snap.tmp")) {
			if err := os.Remove(filepath.Join(dir, n)); err != nil {
				return fmt.Errorf("remove a snapshot to rebuild: %w", err)
			}
		}
	}
	return syncDirPath(dir)
}

// openHistoryOrRebuild is recoverHistory for a replica of count replicas
// whose storage recovered rec from log. A store damaged where opening it
// reads (pebble's MANIFEST, the applied index) stops a replica of one,
// with what to do; a replica with peers discards its log, snapshots and
// history as a rebuild does (rebuild.go), and rec becomes what is left:
// nothing, with the hard state repairing.
func openHistoryOrRebuild(dir string, log *store.Log, rec *replica.Recovered, count uint32, cacheBytes int64, lg *zap.Logger) (*history.Store, error) {
	st, err := recoverHistory(dir, *rec, count, cacheBytes, lg)
	ce := historyDamage(err)
	if ce == nil {
		return st, err
	}
	if count == 1 {
		return nil, fmt.Errorf("%w: a cluster of one replica has no peer to rebuild it from; restore the data directory from a backup", err)
	}
	lg.Error("the history store is damaged: discarding this replica's log, snapshots and history, and rebuilding them from the leader",
		zap.String("file", ce.File), zap.String("keys", ce.Keys), zap.String("detail", ce.Detail), zap.Error(err))
	if err := discardLog(dir, log); err != nil {
		return nil, err
	}
	if err := removeCheckpointsBefore(dir, ^uint64(0)); err != nil {
		return nil, err
	}
	if *rec, err = readRecovered(dir, log, lg); err != nil {
		return nil, err
	}
	return recoverHistory(dir, *rec, count, cacheBytes, lg)
}

// discard is the historian's part of a rebuild (histDiscard): once the
// disk has discarded the log and the snapshots, it replaces the store by
// an empty one and removes every history checkpoint.
func (h *historian) discard(op *histOp) {
	var err error
	select {
	case err = <-op.after:
	case <-op.diskExited:
		err = errors.New("the disk stopped before discarding the log")
	}
	if err == nil {
		err = h.empty()
	}
	if err == nil {
		// The discarded replica's history streams, sent or staged, are
		// no new replica's.
		h.dropStream(h.out.indexOr0())
		h.closeStaging()
		err = removeStreamDirs(h.dir)
	}
	if err != nil {
		h.failed = true
		h.report(histCompletion{err: fmt.Errorf("discard the history store to rebuild: %w", err)})
		return
	}
	h.failed = false
	h.log.Warn("discarded the history store and its checkpoints")
	h.report(histCompletion{discarded: true})
}

// empty replaces the store by an empty one and removes every checkpoint.
func (h *historian) empty() error {
	if err := h.store.Close(); err != nil {
		h.log.Warn("closing the damaged history store", zap.Error(err))
	}
	if err := removeCheckpointsBefore(h.dir, ^uint64(0)); err != nil {
		return err
	}
	live := filepath.Join(h.dir, liveHistoryDir)
	if err := os.RemoveAll(live); err != nil {
		return err
	}
	if err := syncDirPath(h.dir); err != nil {
		return err
	}
	st, err := history.Open(vfs.Default, live, history.Options{})
	if err != nil {
		return fmt.Errorf("open a new history store: %w", err)
	}
	h.store = st
	return nil
}
