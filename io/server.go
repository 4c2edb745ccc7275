package io

import (
	"context"
	"errors"
	"fmt"
	stdio "io"
	"net"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"go.uber.org/zap"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/io/store"
	"github.com/geoevent/geoevent/replica"
)

// Options configure a Server. Only Addresses is required.
type Options struct {
	// Addresses lists every replica's binary-protocol address (host:port),
	// in replica order; the server listens on its own replica's entry. Its
	// length must be the cluster's replica count.
	Addresses []string
	// Logger receives the server's structured logs (nil: none).
	Logger *zap.Logger
	// TickInterval is how often the replica's Tick runs (default 10 ms).
	TickInterval time.Duration
	// SendQueueBytes and SendQueueFrames bound each connection's queue of
	// replies not yet written (defaults 16 MiB and 4096 frames): a client
	// that lets it fill up is disconnected. While the connection's writer
	// keeps writing (it took replies within the last second), the queue
	// may hold up to 8 times SendQueueBytes: a client whose sessions share
	// one connection can have a large answer pending for each of them.
	SendQueueBytes  int
	SendQueueFrames int
	// PeerQueueBytes and PeerQueueFrames bound the queue of messages to
	// each other replica not yet written (defaults 32 MiB and 4096
	// frames): beyond them messages are dropped, and Raft sends again.
	PeerQueueBytes  int
	PeerQueueFrames int
	// WriteTimeout closes a connection one of whose writes takes longer
	// (default 30 s; negative: none).
	WriteTimeout time.Duration
	// ReadTimeout closes a connection that has not completed a frame
	// ReadTimeout after the frame's first byte came (default 30 s;
	// negative: none). Time spent waiting for the read budget does not
	// count.
	ReadTimeout time.Duration
	// IdleTimeout closes a client connection after this long with nothing
	// read, nothing written and none of its requests waiting for an answer
	// (default 5 minutes; negative: none). Connections from the other
	// replicas have none.
	IdleTimeout time.Duration
	// MaxConnections bounds the open binary-protocol connections, clients'
	// and other replicas' alike (default 10,000; negative: none); one
	// more is answered with a MsgError CLUSTER_BUSY (retryable) and
	// closed. In-process connections (DialLocal) do not count.
	MaxConnections int
	// ReadBudgetBytes bounds the memory of the buffers that all
	// connections read frames into, the frames the loop has yet to handle
	// included (default 64 MiB): above it, a connection that starts
	// reading a frame waits (its socket is not read meanwhile), and a
	// frame that needs its buffer grown beyond it is answered with a
	// MsgError CLUSTER_BUSY and its connection closed. Each reading
	// connection holds at least a 64 KiB chunk of it.
	ReadBudgetBytes int
	// Replica tunes the replica (MaxSessions, MaxPendingEntries,
	// SnapshotEvery, CleanupEveryNS, Version). Its Cluster, ReplicaIndex,
	// ReplicaCount and Addresses are ignored: they come from the cluster file
	// and Addresses.
	Replica replica.Config
	// SegmentBytes is the log segment size (0: package store's default).
	SegmentBytes int64
	// Metrics, when set, receives the server's metrics (see Health and
	// docs/operations.md); one server per set.
	Metrics *metrics.Set
	// HistoryCacheBytes is the history store's block cache (0: package
	// history's default).
	HistoryCacheBytes int64
}

func (o *Options) setDefaults() {
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.TickInterval <= 0 {
		o.TickInterval = 10 * time.Millisecond
	}
	if o.SendQueueBytes <= 0 {
		o.SendQueueBytes = 16 << 20
	}
	if o.SendQueueFrames <= 0 {
		o.SendQueueFrames = 4096
	}
	if o.PeerQueueBytes <= 0 {
		o.PeerQueueBytes = 32 << 20
	}
	if o.PeerQueueFrames <= 0 {
		o.PeerQueueFrames = 4096
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = 30 * time.Second
	}
	if o.ReadTimeout == 0 {
		o.ReadTimeout = 30 * time.Second
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = 5 * time.Minute
	}
	if o.MaxConnections == 0 {
		o.MaxConnections = 10000
	}
	if o.ReadBudgetBytes <= 0 {
		o.ReadBudgetBytes = 64 << 20
	}
	// At least one chunk for each of a connection's buffers: a smaller
	// budget would hold every frame back.
	o.ReadBudgetBytes = max(o.ReadBudgetBytes, (readAhead+1)*readChunk)
}

// ErrServerClosed is returned by Run on a Server that was closed or already
// run.
var ErrServerClosed = errors.New("io: server closed")

// Server is one running replica: its storage recovered, its listener open,
// its replica built. Run serves; Close stops.
type Server struct {
	opts  Options
	log   *zap.Logger
	dir   string
	lock  *DirLock // the data directory's, released once the log is closed
	info  ClusterInfo
	ln    net.Listener
	clock *Clock
	disk  *disk
	hist  *historian       // the history store's goroutine
	r     *replica.Replica // owned by the loop once Run has started
	rcfg  replica.Config   // r's, for a rebuild's new replica

	// rebuilding (loop-owned; rebuild.go): the disk's and the historian's
	// answers are a discarded replica's until each answers its last
	// discard;
	// gen counts rebuilds, so that work done beside the loop for a
	// discarded replica is not answered to the new one. damage is a
	// history store's corruption that such work met.
	rebuilding struct {
		disk, hist int // discards not yet answered
		gen        uint64
	}
	damage error

	events chan netEvent
	conns  map[core.ConnID]*conn // loop-owned
	connID atomic.Uint64         // the last connection id handed out
	status replica.Status        // loop-owned: the replica's last logged role, term and leader

	health  atomic.Pointer[Health] // the loop's last published state (metrics.go)
	dataAt  time.Time              // loop-owned: when health's Data was taken
	metrics *serverMetrics         // nil: none recorded
	backups backupBusy             // one Backup at a time (backup.go)

	feedNews  news         // the feed's newest sequence, for the feed's readers (publish.go)
	feedLast  uint64       // loop-owned: the sequence feedNews last got
	positions positionRing // the applied entries' writes, while someone listens (publish.go)

	peers      []*peer // outbound connections, by replica index (nil: this replica)
	peerCtx    context.Context
	peerCancel context.CancelFunc // at shutdown: stops dialing
	// peerFrame receives each replica-to-replica frame on the loop; the
	// payload is valid until it returns. It is the replica's ReceivePeer
	// (tests observe the transport by replacing it before Run).
	peerFrame    func(h core.Header, payload []byte)
	peerRefusals refusals // rate-limits the warnings of refused peer hellos (peers.go)

	// replay is the log recovered after the snapshot, which the replica
	// applies before it answers clients (loop-owned; to is 0 once it has).
	replay struct {
		to      uint64 // the last recovered entry's index
		entries int
		start   time.Time
		logged  time.Time // the last progress line
	}

	// budget bounds the memory of the connections' read buffers.
	budget   *readBudget
	readPrep readPrep // reads prepared beside the loop (prepareRead)
	// refusing holds a token per connection over MaxConnections being
	// turned away (refuseConn).
	refusing chan struct{}
	// lastRelief is when relieve last gave memory back (UnixNano).
	lastRelief atomic.Int64
	// The log lines that a client can set off, at most one a second each;
	// admitLog's (admission.go), at most one every 10 s.
	frameLog, busyLog, timeoutLog, limitLog, admitLog rateLog
	// admit refuses clients' writes while the history store is behind
	// (admission.go; loop-owned).
	admit admission

	// replyBufs holds the memory of written replies (core.IO.SendReply)
	// for the loop to encode replies into again (core.IO.ReplyBuffer).
	replyBufs chan []byte

	besideDone chan func()   // the answers of work done beside the loop, for the loop to run
	peerLost   chan uint32   // replicas whose connection broke, for Replica.PeerLost (notePeerLost)
	loopDone   chan struct{} // closed when the loop has exited (or never will run)
	// loopStarted is closed once the loop has published its first Health:
	// from then on probes answer from the replica's state.
	loopStarted chan struct{}
	stop        chan struct{}  // closed by Close
	wg          sync.WaitGroup // accept, readers, writers, peer dialers and watchers, work beside the loop

	mu       sync.Mutex
	live     map[*conn]struct{}    // connections to close at shutdown
	refused  map[net.Conn]struct{} // connections over MaxConnections being closed (refuseConn)
	peakLive int                   // the most live connections since the last relieve they called for
	closing  bool
	started  bool
	closed   bool
	runDone  chan struct{}
	stopOnce sync.Once
	downOnce sync.Once
	downErr  error
}

// openLocked is Open once dir's lock is taken: lock is it, held; the
// server releases it once closed.
func openLocked(dir string, lock *DirLock, opts Options) (s *Server, err error) {
	opts.setDefaults()
	info, err := ReadClusterFile(dir)
	if err != nil {
		return nil, err
	}
	if len(opts.Addresses) != int(info.ReplicaCount) {
		return nil, fmt.Errorf("%d address(es) given, but the cluster in %s has %d replica(s): list every replica's binary-protocol address, in replica order (replica %d listens on entry %d)",
			len(opts.Addresses), dir, info.ReplicaCount, info.ReplicaIndex, info.ReplicaIndex)
	}
	for i, a := range opts.Addresses {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, fmt.Errorf("address %d, %q, is not host:port: %v", i, a, err)
		}
	}
	lg := opts.Logger.With(zap.Uint32("replica", info.ReplicaIndex))

	log, rec, err := recoverStorage(dir, opts.SegmentBytes, info.ReplicaCount, lg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			log.Close()
		}
	}()

	ln, err := net.Listen("tcp", opts.Addresses[info.ReplicaIndex])
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", opts.Addresses[info.ReplicaIndex], err)
	}
	defer func() {
		if err != nil {
			ln.Close()
		}
	}()

	s = &Server{
		opts: opts, log: lg, dir: dir, lock: lock, info: info, ln: ln, clock: NewClock(),
		events:      make(chan netEvent, 256),
		conns:       make(map[core.ConnID]*conn),
		status:      replica.Status{Leader: replica.NoLeader},
		replyBufs:   make(chan []byte, reusedReplies),
		budget:      &readBudget{limit: opts.ReadBudgetBytes},
		readPrep:    readPrep{builds: make(chan struct{}, maxPrepareBuilds)},
		refusing:    make(chan struct{}, maxRefusing),
		frameLog:    rateLog{interval: time.Second},
		busyLog:     rateLog{interval: time.Second},
		timeoutLog:  rateLog{interval: time.Second},
		limitLog:    rateLog{interval: time.Second},
		admitLog:    rateLog{interval: 10 * time.Second},
		admit:       newAdmission(),
		besideDone:  make(chan func(), 1),
		peerLost:    make(chan uint32, 8),
		loopDone:    make(chan struct{}),
		loopStarted: make(chan struct{}),
		stop:        make(chan struct{}),
		live:        make(map[*conn]struct{}),
		refused:     make(map[net.Conn]struct{}),
		runDone:     make(chan struct{}),
	}
	s.budget.drained = s.relieve
	hst, err := openHistoryOrRebuild(dir, log, &rec, info.ReplicaCount, opts.HistoryCacheBytes, lg)
	if err != nil {
		return nil, err
	}
	s.disk = newDisk(dir, log, rec.SnapshotIndex, s.loopDone, s.log)
	if err := removeStreamDirs(dir); err != nil {
		return nil, fmt.Errorf("remove the history streams left: %w", err)
	}
	s.hist = newHistorian(dir, hst, s.log)
	defer func() {
		if err != nil {
			hst.Close()
		}
	}()
	s.disk.inCluster = info.ReplicaCount > 1 // others go on without it: it stops after a while out of space
	s.peers = s.newPeers()
	if opts.Metrics != nil {
		s.metrics = newServerMetrics(s, opts.Metrics)
		s.disk.m = &s.metrics.disk
	}
	s.peerCtx, s.peerCancel = context.WithCancel(context.Background())

	cfg := opts.Replica
	cfg.Cluster, cfg.ReplicaIndex, cfg.ReplicaCount = info.Cluster, info.ReplicaIndex, info.ReplicaCount
	cfg.Addresses = append([]string(nil), opts.Addresses...)
	cfg.Addresses[info.ReplicaIndex] = ln.Addr().String() // the real port when asked for port 0
	s.r, err = replica.New(cfg, replicaIO{s}, s.clock, NewRand(), rec)
	if err != nil {
		s.peerCancel()
		return nil, fmt.Errorf("start the replica on what %s holds: %w", dir, err)
	}
	s.rcfg = cfg
	s.peerFrame = func(h core.Header, payload []byte) { s.r.ReceivePeer(h, payload) } // s.r changes on a rebuild
	if n := len(rec.Entries); n > 0 {
		s.replay.to, s.replay.entries = rec.Entries[n-1].Index, n
	}
	go s.disk.run()
	go s.hist.run()
	lg.Info("listening", zap.String("cluster", info.Cluster.String()), zap.Stringer("address", ln.Addr()),
		zap.Uint32("replica_count", info.ReplicaCount), zap.String("data", dir),
		zap.Int("processors", runtime.GOMAXPROCS(0))) // GOMAXPROCS: see the README's "Running the server next to its clients"
	return s, nil
}

// recoverStorage opens the log and reads back what the replica needs.
//
// A damaged record before the log's tail (not a torn write: see package
// store) may hold an entry this replica acknowledged. A replica of a
// cluster of one cannot get it back: the log's Corruption error, naming the
// file and the offset, stops it. A replica with peers repairs it: it first
// durably sets the hard state's Repairing flag (term, vote and commit as
// they are), then cuts the log just before the damaged record, dropping
// everything after it, and recovers from what is left; the replica then
// neither votes nor campaigns until a leader of a later term has given the
// lost entries back (core.HardState.Repairing). A crash between the two
// steps leaves the flag set, or the damage in place to be found again.
func recoverStorage(dir string, segmentBytes int64, replicaCount uint32, lg *zap.Logger) (*store.Log, replica.Recovered, error) {
	opts := store.LogOptions{SegmentBytes: segmentBytes}
	if replicaCount > 1 {
		opts.Repair = func(store.Damage) error { return markRepairing(dir) }
	}
	log, ri, err := store.OpenLog(dir, opts)
	if err != nil {
		return nil, replica.Recovered{}, fmt.Errorf("open the log: %w", err)
	}
	if ri.TruncatedBytes > 0 {
		lg.Warn("truncated a torn write at the end of the log (a crash interrupted it; it was never acknowledged)",
			zap.String("file", ri.TruncatedFile), zap.Int64("bytes", ri.TruncatedBytes))
	}
	if d := ri.Damage; d != nil {
		lg.Warn("cut the log before a damaged record: repairing it from the other replicas (this replica neither votes nor campaigns until a leader has given back what was cut)",
			zap.String("file", d.File), zap.Int64("offset", d.Offset), zap.String("damage", d.Reason),
			zap.Uint64("damaged_index", d.Index), zap.Uint64("log_last", ri.LastIndex),
			zap.Int("dropped_segments", ri.DroppedSegments))
	}
	rec, err := readRecovered(dir, log, lg)
	if err != nil {
		log.Close()
		return nil, replica.Recovered{}, err
	}
	lg.Info("recovered",
		zap.Uint64("term", rec.HardState.Term), zap.Uint64("commit", rec.HardState.Commit),
		zap.Uint64("snapshot_index", rec.SnapshotIndex), zap.Int("snapshot_bytes", len(rec.Snapshot)),
		zap.Uint64("log_first", ri.FirstIndex), zap.Uint64("log_last", ri.LastIndex), zap.Int("entries_after_snapshot", len(rec.Entries)))
	return log, rec, nil
}

// markRepairing durably sets the Repairing flag of the hard state in dir,
// keeping its term, vote and commit (those of a new replica when there is
// none yet).
func markRepairing(dir string) error {
	hs, ok, err := store.LoadHardState(dir)
	if err != nil {
		return fmt.Errorf("load the hard state to mark the damaged log as being repaired: %w", err)
	}
	if !ok {
		hs = store.HardState{Vote: store.NoVote}
	}
	hs.Repairing = true
	if err := store.SaveHardState(dir, hs); err != nil {
		return fmt.Errorf("save the hard state before cutting the damaged log: %w", err)
	}
	return nil
}

func readRecovered(dir string, log *store.Log, lg *zap.Logger) (replica.Recovered, error) {
	rec := replica.Recovered{HardState: core.HardState{Vote: core.NoVote}}
	hs, ok, err := store.LoadHardState(dir)
	if err != nil {
		return rec, fmt.Errorf("load the hard state: %w", err)
	}
	if ok {
		rec.HardState = core.HardState(hs)
	}
	snap, ok, err := store.LoadLatestSnapshot(dir)
	if err != nil {
		return rec, fmt.Errorf("load the snapshot: %w", err)
	}
	for _, d := range snap.Damaged {
		lg.Error("passed over a damaged snapshot", zap.Error(d))
	}
	if ok {
		data, err := stdio.ReadAll(snap.Body)
		snap.Body.Close()
		if err != nil {
			return rec, fmt.Errorf("read the snapshot %s: %w", snap.File, err)
		}
		rec.Snapshot, rec.SnapshotIndex, rec.SnapshotTerm = data, snap.Index, snap.Term
	}
	from := rec.SnapshotIndex + 1
	what := func() string {
		if rec.SnapshotIndex > 0 {
			return "the newest valid snapshot covers up to index " + strconv.FormatUint(rec.SnapshotIndex, 10)
		}
		return "there is no snapshot"
	}
	switch {
	case log.FirstIndex() == 0 && log.LastIndex()+1 == from:
		// Empty, and the next append follows the snapshot (or, with none,
		// starts the log).
	case log.LastIndex() < from || (rec.SnapshotIndex > 0 && snapshotReplacesLog(log, rec.SnapshotIndex, rec.SnapshotTerm)):
		// The snapshot covers the whole log (a follower installed the
		// leader's snapshot, or the log was emptied after one and a crash
		// interrupted that), or the log holds the snapshot's index with
		// another term (a follower installing a snapshot over entries of
		// another history): none of the log is needed, and the next
		// append must follow the snapshot.
		lg.Info("the snapshot replaces the whole log: emptying it",
			zap.Uint64("snapshot_index", rec.SnapshotIndex), zap.Uint64("snapshot_term", rec.SnapshotTerm),
			zap.Uint64("log_first", log.FirstIndex()), zap.Uint64("log_last", log.LastIndex()))
		if err := log.Reset(from); err != nil {
			return rec, fmt.Errorf("reset the log after snapshot %d: %w", rec.SnapshotIndex, err)
		}
	case log.FirstIndex() == 0:
		// Empty, but restarted after a snapshot beyond the one we have.
		return rec, core.Errorf(core.Corruption, "%s: the log is empty after index %d but %s: entries %d..%d are missing (restore the data directory from an intact replica)",
			dir, log.LastIndex(), what(), from, log.LastIndex())
	case log.FirstIndex() > from:
		return rec, core.Errorf(core.Corruption, "%s: the log starts at index %d but %s: entries %d..%d are missing (restore the data directory from an intact replica)",
			dir, log.FirstIndex(), what(), from, log.FirstIndex()-1)
	default:
		es, err := log.Entries(from, log.LastIndex()+1)
		if err != nil {
			return rec, fmt.Errorf("read the log: %w", err)
		}
		rec.Entries = make([]core.LogEntry, len(es))
		for i, e := range es {
			rec.Entries[i] = core.LogEntry{Index: e.Index, Term: e.Term, Data: e.Data}
		}
	}
	return rec, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Cluster is what the data directory's cluster file says.
func (s *Server) Cluster() ClusterInfo { return s.info }

// Run serves until ctx is done, Close is called or the replica or its
// storage fails, then shuts down as Close does. It returns nil after a
// clean stop and the failure otherwise. It may be called once.
func (s *Server) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.started || s.closed {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.started = true
	s.mu.Unlock()
	defer close(s.runDone)

	// Connections are accepted at once: the replica holds client frames
	// until it has applied what it recovered (and a follower may not sync
	// anything until it hears from a leader, which needs this listener).
	s.wg.Add(1)
	go s.accept()
	for _, p := range s.peers {
		if p != nil {
			s.wg.Add(1)
			go s.runPeer(p)
		}
	}
	err := s.loop(ctx)
	s.downOnce.Do(s.shutdown)
	if err == nil {
		err = s.downErr
	}
	return err
}

// Started is closed once Run's event loop has published the replica's
// state for the first time (Health), so that a probe made after it
// answers from that state rather than "not running".
func (s *Server) Started() <-chan struct{} { return s.loopStarted }

// Close stops the server gracefully: it stops accepting, closes every
// connection, lets the disk goroutine finish what the replica queued (the
// Sync in flight included) and closes the files. It waits for Run to
// return. It is safe to call more than once and from any goroutine.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	started := s.started
	s.mu.Unlock()
	s.stopOnce.Do(func() { close(s.stop) })
	if started {
		<-s.runDone
	} else {
		s.downOnce.Do(s.shutdown)
	}
	return s.downErr
}

// loop is the event loop: the only goroutine that calls the replica.
func (s *Server) loop(ctx context.Context) error {
	defer close(s.loopDone)
	tick := time.NewTicker(s.opts.TickInterval)
	defer tick.Stop()
	s.logStatus()
	s.publish(time.Now())
	s.publishFeed()
	close(s.loopStarted)
	if s.replay.to > 0 {
		s.replay.start = time.Now()
		s.replay.logged = s.replay.start
		s.log.Info("applying the log recovered after the snapshot",
			zap.Int("entries", s.replay.entries), zap.Uint64("last_index", s.replay.to))
	}
	eventsAhead := 0 // events taken ahead of the backlog since its last step
	for {
		// While committed entries wait to be applied (a restart's recovered
		// log) or reads wait to run, the next part is one more input, ready
		// at once: the select takes it in turn with the others. Frames
		// come first, up to eventsBeforeBacklog of them: taking one costs
		// little (a read is queued, not run), and what it may carry -- a
		// ping, a heartbeat, a vote -- must not wait behind a backlog of
		// expensive reads, one of which runs per step.
		var backlog <-chan struct{}
		taken := false // an event taken ahead of the backlog
		if s.r.Backlog() {
			backlog = alwaysReady
			if eventsAhead < eventsBeforeBacklog {
				select {
				case ev := <-s.events:
					eventsAhead++
					s.handle(ev)
					taken = true
				default:
				}
			}
			if !taken {
				eventsAhead = 0
			}
		}
		if !taken {
			select {
			case <-ctx.Done():
				return nil
			case <-s.stop:
				return nil
			case <-backlog:
				s.r.ApplyMore()
			case ev := <-s.events:
				s.handle(ev)
			case c := <-s.disk.done:
				switch {
				case c.discarded:
					s.rebuilding.disk--
				case c.err == nil && s.rebuilding.disk > 0:
					// The discarded replica's.
				case c.err != nil:
					s.log.Error("storage failed; stopping (restart to recover)", zap.Error(c.err))
					return fmt.Errorf("storage: %w", c.err)
				case c.snapshot:
					s.r.SnapshotSaved(c.index)
				case c.read:
					s.r.LogRead(c.index, c.entries)
				default:
					s.r.Synced(c.index, c.syncs)
				}
			case <-s.hist.done.ready:
				for _, c := range s.hist.done.take() {
					switch {
					case c.discarded:
						s.rebuilding.hist--
						continue
					case c.err != nil && s.rebuilding.hist == 0:
						if ce := historyDamage(c.err); ce != nil {
							if err := s.damaged(c.err, ce); err != nil {
								return err
							}
							continue
						}
						fallthrough
					case c.err != nil:
						s.log.Error("the history store failed; stopping (restart to recover)", zap.Error(c.err))
						return fmt.Errorf("history store: %w", c.err)
					case s.rebuilding.hist > 0:
						continue // the discarded replica's
					}
					if c.stream != nil {
						c.stream()
						continue
					}
					s.r.HistoryRead(c.token, c.answers)
				}
			case answer := <-s.besideDone:
				answer()
			case p := <-s.peerLost:
				s.r.PeerLost(p)
			case now := <-tick.C:
				s.r.Tick()
				s.publish(now)
			}
		}
		if err := s.r.Err(); err != nil || s.damage != nil {
			if err == nil {
				err, s.damage = s.damage, nil
			}
			if ce := historyDamage(err); ce != nil {
				if err := s.damaged(err, ce); err != nil {
					return err
				}
				continue
			}
			s.log.Error("replica stopped", zap.Error(err))
			return fmt.Errorf("replica: %w", err)
		}
		s.logStatus()
		s.publishFeed()
		if s.replay.to > 0 {
			s.logReplay()
		}
	}
}

// eventsBeforeBacklog bounds the events the loop takes ahead of a backlog
// step (see loop), so that a stream of frames cannot starve the applying
// of committed entries.
const eventsBeforeBacklog = 256

// alwaysReady is a closed channel: a select case on it is always ready.
var alwaysReady = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// replayProgressEvery is how often the server logs how far it has applied
// the log recovered after the snapshot.
const replayProgressEvery = 5 * time.Second

// logReplay logs that the replica has applied the log recovered after the
// snapshot, once it has, and how far it has got every
// replayProgressEvery until then.
func (s *Server) logReplay() {
	applied := s.r.AppliedIndex()
	switch {
	case applied >= s.replay.to:
		s.log.Info("applied the recovered log", zap.Int("entries", s.replay.entries),
			zap.Duration("took", time.Since(s.replay.start).Round(time.Millisecond)))
		s.replay.to = 0
	case time.Since(s.replay.logged) >= replayProgressEvery:
		s.replay.logged = time.Now()
		s.log.Info("applying the recovered log", zap.Uint64("applied", applied), zap.Uint64("last_index", s.replay.to))
	}
}

// logStatus logs the replica's role, term and leader when one of them has
// changed since the last call.
func (s *Server) logStatus() {
	st := s.r.Status()
	if st.Role == s.status.Role && st.Term == s.status.Term && st.Leader == s.status.Leader {
		return
	}
	leader := int64(-1) // none known
	if st.Leader != replica.NoLeader {
		leader = int64(st.Leader)
	}
	msg := "role changed"
	if st.Leader != s.status.Leader {
		msg = "leader changed"
		if s.metrics != nil && st.Leader != replica.NoLeader {
			s.metrics.leaderChanges.Inc()
		}
	}
	s.log.Info(msg, zap.Uint64("term", st.Term), zap.Stringer("role", st.Role), zap.Int64("leader", leader),
		zap.Uint64("commit", st.Commit), zap.Uint64("last_index", st.LastIndex))
	s.status = st
	s.disk.leading.Store(st.Role == replica.Leader)
	if s.health.Load() != nil {
		s.publish(time.Now()) // probes see a new role, term or leader at once
	}
}

// prepare runs replica.PrepareRequest on a client frame while the replica
// leads (a hint: the loop copes with a frame prepared or not), on the
// caller's goroutine rather than the loop, which every request shares. A
// follower forwards the frame as it came.
func (s *Server) prepare(h core.Header, payload []byte) []byte {
	s.metrics.countFrame(h, payload)
	if !s.disk.leading.Load() {
		return nil
	}
	return replica.PrepareRequest(h, payload)
}

// prepareFrame prepares a frame of kind on the caller's goroutine: a
// client's batch (prepare) or read (prepareRead), or a read a follower
// forwarded.
func (s *Server) prepareFrame(kind netEventKind, f *netFrame) {
	if kind == evFrame {
		if f.prepared = s.prepare(f.h, f.payload); f.prepared == nil {
			f.read = s.prepareRead(f.h, f.payload, false)
		}
	} else {
		f.read = s.prepareRead(f.h, f.payload, true)
	}
}

// clientFrame hands a client frame of c (a connection or a LocalConn) to
// the replica, prepared if it was, unless c is dead or the frame is a
// write refused while the history store is behind (admission.go).
func (s *Server) clientFrame(c *conn, f netFrame) {
	switch {
	case c.dead:
	case s.refuseWrite(c, &f):
	case f.prepared != nil:
		s.r.ReceivePrepared(c.id, f.h, f.payload, f.prepared)
	case f.read != nil:
		s.r.ReceivePreparedRead(c.id, f.h, f.payload, f.read)
	default:
		s.r.Receive(c.id, f.h, f.payload)
	}
}

// replicaFrame hands a replica-to-replica frame to the replica, prepared
// if it was.
func (s *Server) replicaFrame(f netFrame) {
	if f.read != nil {
		s.r.ReceivePeerPrepared(f.h, f.payload, f.read)
		return
	}
	if s.refuseForwarded(f.h, f.payload) {
		return
	}
	s.peerFrame(f.h, f.payload)
}

func (s *Server) handle(ev netEvent) {
	c := ev.c
	switch ev.kind {
	case evOpened:
		s.conns[c.id] = c
	case evFrame:
		s.clientFrame(c, ev.netFrame)
		for _, f := range ev.more {
			s.clientFrame(c, f)
		}
		s.budget.release(ev.buf)
		c.ack <- struct{}{} // never blocks: the reader has at most readAhead events unacked
	case evLocalFrame:
		s.clientFrame(c, ev.netFrame)
	case evPeerFrame:
		if !c.dead {
			s.replicaFrame(ev.netFrame)
			for _, f := range ev.more {
				s.replicaFrame(f)
			}
		}
		s.budget.release(ev.buf)
		c.ack <- struct{}{}
	case evClosed:
		c.q.close()
		delete(s.conns, c.id)
		s.r.Closed(c.id)
	}
}

// shutdown runs once, after the loop has exited or instead of it.
func (s *Server) shutdown() {
	select {
	case <-s.loopDone:
	default:
		close(s.loopDone) // Run never ran the loop
	}
	s.ln.Close()
	s.peerCancel()
	for _, p := range s.peers {
		if p != nil {
			p.close()
		}
	}
	s.mu.Lock()
	s.closing = true
	for c := range s.live {
		c.nc.Close()
		c.q.close()
	}
	for nc := range s.refused {
		nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.disk.close()
	<-s.disk.exited
	s.hist.close()
	<-s.hist.exited
	if err := s.disk.closeErr; err != nil {
		s.log.Error("closing the log", zap.Error(err))
		s.downErr = fmt.Errorf("close the log: %w", err)
	}
	s.lock.Close()
	s.log.Info("stopped")
}

// replicaIO is the core.IO given to the replica. Its methods run on the
// loop goroutine (inside the replica's calls) and never block.
type replicaIO struct{ s *Server }

var _ core.IO = replicaIO{}

func (rio replicaIO) SendClient(id core.ConnID, frame []byte) { rio.s.sendClient(id, frame, false) }

// SendReply queues frame as SendClient does; once the connection's writer
// has written it, its memory goes back to the server's spare reply buffers.
// (An in-process connection's owner keeps what it is sent.)
func (rio replicaIO) SendReply(id core.ConnID, frame []byte) { rio.s.sendClient(id, frame, true) }

func (rio replicaIO) ReplyBuffer() []byte {
	select {
	case b := <-rio.s.replyBufs:
		return b
	default:
		return nil
	}
}

const (
	// reusedReplies bounds the spare reply buffers the server keeps, and
	// maxReusedReply the size of one: a rare megabyte result gets fresh
	// memory rather than staying held.
	reusedReplies  = 256
	maxReusedReply = 64 << 10
)

// reuseReply hands b, written, back to the spare reply buffers, unless
// they are full or b is too large to keep.
func (s *Server) reuseReply(b []byte) {
	if cap(b) > maxReusedReply {
		return
	}
	select {
	case s.replyBufs <- b[:0]:
	default:
	}
}

func (s *Server) sendClient(id core.ConnID, frame []byte, reuse bool) {
	c := s.conns[id]
	if c == nil || c.dead {
		return // closed: the client retries
	}
	if c.local != nil {
		s.sendLocal(c, frame)
		return
	}
	c.answered()
	if c.q.pushFrame(frame, reuse) == queueFull {
		c.dead = true
		c.q.close()
		abort(c.nc) // the reader reports the close
		s.log.Warn("resetting a connection whose client does not read its replies",
			zap.Uint64("conn", uint64(id)), zap.Stringer("remote", c.nc.RemoteAddr()))
	}
}

func (rio replicaIO) SendPeer(to uint32, frame ...[]byte) { rio.s.sendPeer(to, frame...) }

func (rio replicaIO) AppendLog(entries []core.LogEntry) {
	rio.s.disk.push(diskOp{kind: opAppend, entries: entries})
}

func (rio replicaIO) SaveHardState(hs core.HardState) {
	rio.s.disk.push(diskOp{kind: opHardState, hs: hs})
}

func (rio replicaIO) Sync() { rio.s.disk.push(diskOp{kind: opSync}) }

func (rio replicaIO) ReadLog(from, to uint64, maxBytes int) {
	rio.s.disk.push(diskOp{kind: opRead, index: from, to: to, maxBytes: maxBytes})
}

// beside runs work on a goroutine of its own, while the loop goes on (a
// large snapshot takes a second or more to encode or decode), then has the
// loop run answer, unless the loop has ended.
func (s *Server) beside(what string, index uint64, work func(), answer func()) {
	gen, reply := s.rebuilding.gen, answer
	answer = func() {
		if s.rebuilding.gen == gen { // else its replica was discarded (rebuild.go)
			reply()
		}
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		start := time.Now()
		work()
		took := time.Since(start)
		s.metrics.besideDone(what, took)
		s.log.Debug(what, zap.Uint64("index", index), zap.Duration("took", took))
		select {
		case s.besideDone <- answer:
		case <-s.loopDone:
		}
	}()
}

// EncodeSnapshot encodes the state beside the loop and has the historian
// checkpoint the history store, in queue order, as the history stream
// followers read (histstream.go).
func (rio replicaIO) EncodeSnapshot(index uint64, encode func() []byte) {
	s := rio.s
	opened := make(chan streamOpened, 1)
	s.hist.push(histOp{kind: histStreamOpen, index: index, opened: opened})
	var data []byte
	var size int64
	var err error
	s.beside(snapshotEncoded, index, func() {
		data = encode()
		select {
		case o, ok := <-opened:
			if !ok {
				err = errors.New("the history store failed")
				return
			}
			size, err = o.size, o.err
		case <-s.loopDone:
			err = errors.New("stopped")
		}
	}, func() {
		if err != nil {
			if historyDamage(err) != nil {
				s.damage = err // the loop rebuilds, or stops a lone replica
				return
			}
			s.log.Warn("cannot checkpoint the history for a follower's snapshot; it waits for the next", zap.Uint64("index", index), zap.Error(err))
			return
		}
		s.r.SnapshotEncoded(index, data, uint64(size))
	})
}

// ReadSnapshotStream has the historian read the chunk, in queue order.
func (rio replicaIO) ReadSnapshotStream(index, offset uint64, maxBytes int) {
	s := rio.s
	s.hist.push(histOp{kind: histStreamRead, index: index, offset: offset, maxBytes: maxBytes,
		streamDone: func(data []byte, _ bool) func() { return func() { s.r.SnapshotStreamRead(index, offset, data) } }})
}

func (rio replicaIO) DropSnapshotStream(index uint64) {
	rio.s.hist.push(histOp{kind: histStreamDrop, index: index})
}

// WriteSnapshotStream has the historian write the chunk, in queue order.
func (rio replicaIO) WriteSnapshotStream(index, offset uint64, data []byte) {
	s := rio.s
	s.hist.push(histOp{kind: histStreamWrite, index: index, offset: offset, data: data,
		streamDone: func(_ []byte, ok bool) func() { return func() { s.r.SnapshotStreamWritten(index, offset, ok) } }})
}

// WriteHistory queues the writes to the history store.
func (rio replicaIO) WriteHistory(index uint64, writes []core.HistoryWrite) {
	rio.s.hist.push(histOp{kind: histWrite, index: index, writes: writes})
}

// PublishApplied keeps a copy of applied for the position stream while
// someone listens.
func (rio replicaIO) PublishApplied(index uint64, applied []core.HistoryWrite) {
	rio.s.positions.offer(index, applied)
}

// ReadHistory queues the reads; the historian answers from a view taken
// in queue order.
func (rio replicaIO) ReadHistory(token uint64, reads []core.HistoryRead) {
	rio.s.hist.push(histOp{kind: histRead, token: token, reads: reads})
}

func (rio replicaIO) DecodeSnapshot(index uint64, decode func()) {
	rio.s.beside(snapshotDecoded, index, decode, func() { rio.s.r.SnapshotDecoded(index) })
}

// SaveSnapshot installs a leader's snapshot: the history stream written
// for it becomes the history store (in queue order), checkpointed before
// the snapshot's file is written.
func (rio replicaIO) SaveSnapshot(index, term uint64, data []byte) {
	s := rio.s
	done := make(chan error, 1)
	s.hist.push(histOp{kind: histInstall, index: index, result: done})
	s.disk.push(diskOp{kind: opSnapshot, index: index, term: term, encode: writeBytes(data), history: done})
}

// WriteSnapshot is SaveSnapshot with its bytes encoded by the snapshot
// writer as it writes them (see disk), and the history store checkpointed
// in queue order now, before the snapshot's file is written.
func (rio replicaIO) WriteSnapshot(index, term uint64, encode func(w stdio.Writer) error) {
	s := rio.s
	done := make(chan error, 1)
	s.hist.push(histOp{kind: histCheckpoint, index: index, result: done})
	s.disk.push(diskOp{kind: opSnapshot, index: index, term: term, encode: encode, history: done})
}
