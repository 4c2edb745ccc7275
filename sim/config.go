package sim

import (
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
)

// Options tunes a run. The zero value runs the defaults: every knob below is
// drawn from the seed.
type Options struct {
	// Log, when set, receives a line for every event of the run (the
	// simulator's --verbose). It never changes the run.
	Log io.Writer

	// Replicas is the size of the cluster: 1, 3 or 5 (0 = drawn from the
	// seed: 1, 3 or 5 with chances 1/4, 1/2, 1/4). The draw happens either
	// way, so a run with Replicas set to what the seed draws is the same
	// run as one with 0.
	Replicas int
	// Clients is the number of workload clients (0 = 2..8 from the seed).
	Clients int
	// Entities is the size of the entity pool (0 = 4..12 from the seed).
	Entities int
	// Faults is the fault profile (the zero value, FaultsAll, injects
	// every kind of fault at rates drawn from the seed).
	Faults Faults

	// BugForgetSyncedOnCrash is for tests only: the simulated disk breaks
	// its own fault model and loses up to the last three synced log entries
	// on every crash, so that acknowledged writes disappear. The checkers
	// must report it.
	BugForgetSyncedOnCrash bool
	// BugDamageWithoutRepairing is for tests only: when the simulated disk
	// finds a damaged log record on recovery it cuts the log before it but
	// does not set the hard state's Repairing flag, as storage that forgot
	// to would. The damaged replica then votes with a log that lacks
	// entries it acknowledged; the checkers must report the writes lost.
	BugDamageWithoutRepairing bool

	// VisualizeDir, when set, receives a porcupine visualization (HTML) of
	// a partition that is not linearizable.
	VisualizeDir string
}

// tickNS is the simulated time one tick stands for: a millisecond.
const tickNS = 1_000_000

// runConfig is every parameter of one run, drawn from the seed.
type runConfig struct {
	replicas int
	faults   Faults
	clients  int
	entities int

	// Client connections (per message): delay in ticks, loss and
	// duplication; connection drops.
	netMinDelay, netMaxDelay int64
	netLoss, netDup          float64
	connDropPerTick          float64 // chance per tick that one connection drops

	// The network between replicas (per frame): delay in ticks, loss,
	// duplication, and stragglers: frames held back up to straggleMax
	// ticks, so that they arrive long after later ones.
	peerMinDelay, peerMaxDelay int64
	peerLoss, peerDup          float64
	peerStraggle               float64
	straggleMax                int64

	// Partitions between replicas: the chance per tick that one starts
	// (when none is on), and how long it lasts.
	partitionPerTick float64
	partMin, partMax int64

	// Disk.
	syncMin, syncMax int64 // ticks until a Sync completes
	snapMax          int64 // ticks until a SaveSnapshot completes

	// Crashes (of one replica; the chance per tick for the whole cluster).
	crashPerTick     float64
	crashLeader      float64 // the chance that a crash picks the leader
	downMin, downMax int64
	// The chance that a crash also damages a synced record of the crashed
	// replica's log (a cluster only, and only while a majority of the
	// replicas is neither damaged nor repairing; see world.damageLog).
	damagePerCrash float64
	// The chance that a crash also damages the tables of the crashed
	// replica's history checkpoint (same conditions; see
	// world.damageHistory): its recovery finds the damage and rebuilds.
	damageHistoryPerCrash float64
	// The chance that reading the log back (core.IO.ReadLog) finds the
	// record it starts at damaged, and answers nothing, as production
	// storage does.
	readFail float64

	// Clocks: each replica's runs driftPPM[i] parts per million fast or
	// slow, and its realtime starts realOffset[i] ns after clockRealBase.
	driftPPM   []int64
	realOffset []uint64
	monoBase   []uint64

	// Replica configuration.
	maxSessions        int
	maxSessionsPerConn int // 0: the replica's default
	maxScanWork        int // 0: the state machine's default page budget
	maxPending         int
	snapshotEvery      uint64
	snapshotMinBytes   uint64
	shedBatch          uint64
	maxApply           int
	cleanupEveryNS     uint64
	electionTimeoutNS  uint64
	heartbeatNS        uint64
	clockRealBase      uint64

	// Clients.
	requestTimeout   int64   // ticks before a client resends
	reconnectMax     int64   // ticks a client waits, at most, to connect again after a refusal
	newInstance      float64 // chance, after an operation, that a client restarts with a new session
	newConnOnTimeout float64 // chance that a client connects again (to any replica) after a timeout
	switchOnError    float64 // chance that 211/215 makes a client try another replica
	thinkMax         int64   // ticks a client waits between operations
	ttlShare         float64
	invalidShare     float64

	// Checkers.
	digestEvery       int64 // ticks between samples of the replicas' state digests
	settleMax         int64 // ticks after the run for the replicas to converge
	quiet, live, tail int64 // end-of-run phases, see world.phase
}

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

// newRunConfig draws a run's parameters. Every draw happens whatever the
// options say, and the options only override the result, so that a run
// with an option set to what the seed draws is the same run as without it.
func newRunConfig(r *rand.Rand, opts Options) runConfig {
	c := runConfig{
		replicas: pick(r, 1, 3, 3, 5),
		faults:   opts.Faults,
		clients:  2 + r.IntN(7),
		entities: 4 + r.IntN(9),

		netMinDelay: 1,
		netMaxDelay: pick(r, int64(1), 3, 8, 20),
		netLoss:     pick(r, 0, 0.01, 0.05),
		netDup:      pick(r, 0, 0.01, 0.05),

		connDropPerTick: pick(r, 0, 1.0/3000, 1.0/600),

		syncMin: 1,
		syncMax: pick(r, int64(1), 4, 15),
		snapMax: pick(r, int64(2), 30),

		crashPerTick: pick(r, 0, 1.0/6000, 1.0/1500),
		downMin:      10,
		downMax:      pick(r, int64(50), 500),

		maxSessions:   10_000,
		maxPending:    pick(r, 4096, 4096, 16, 3),
		snapshotEvery: pick(r, uint64(0), 0, 40, 7),
		// With snapshotEvery 0, snapshots go by bytes applied.
		snapshotMinBytes: pick(r, uint64(0), 4<<10, 64<<10),
		// Small enough that runs of a few thousand entries shed.
		shedBatch: pick(r, uint64(1), 16, 256),
		// Small enough that a restart's backlog, and sometimes a group of
		// writes, is applied in parts.
		maxApply:       pick(r, 1, 5, 4096),
		cleanupEveryNS: pick(r, uint64(0), 1_000_000_000, 300_000_000),
		clockRealBase:  1_700_000_000_000_000_000 + r.Uint64N(365*24*3600)*1_000_000_000,

		requestTimeout:   pick(r, int64(200), 400, 800),
		newConnOnTimeout: pick(r, 0, 0.3),
		reconnectMax:     pick(r, int64(3), 100),
		thinkMax:         pick(r, int64(5), 30, 80),
		ttlShare:         pick(r, 0.0, 0.1, 0.3),
		invalidShare:     pick(r, 0.0, 0.03),
	}
	if opts.Replicas > 0 {
		c.replicas = opts.Replicas
	}
	if opts.Clients > 0 {
		c.clients = opts.Clients
	}
	if opts.Entities > 0 {
		c.entities = opts.Entities
	}
	switch r.IntN(8) {
	case 0, 1:
		// A small session table: registering evicts sessions, and clients
		// see 201 SESSION_EXPIRED and register again.
		c.maxSessions = c.clients + 3
	case 2:
		// Just enough sessions for the clients and the checker: every
		// register (after a lost reply, or by a restarted client) evicts
		// someone.
		c.maxSessions = c.clients + 1
	case 3:
		// One live session per connection: a register resent after its
		// answer was lost is refused with 205 SESSION_LIMIT (the first
		// one registered), and the client registers on a new connection.
		c.maxSessionsPerConn = 1
	}
	c.newInstance = pick(r, 0, 0.002, 0.01)
	if r.IntN(4) == 0 {
		// A small page budget: radius, polygon and latest queries end
		// their pages early, often empty with has_more, and clients page
		// through them (each page is checked against the model).
		c.maxScanWork = 20 + r.IntN(2000)
	}

	// The cluster: its network, partitions, timing, clocks.
	c.peerMinDelay = 1
	c.peerMaxDelay = pick(r, int64(1), 3, 10, 25)
	c.peerLoss = pick(r, 0, 0.01, 0.05, 0.15)
	c.peerDup = pick(r, 0, 0.01, 0.05)
	c.peerStraggle = pick(r, 0, 0.005, 0.02)
	c.partitionPerTick = pick(r, 0, 1.0/4000, 1.0/1500)
	c.partMin = 100
	c.partMax = pick(r, int64(600), 2000, 4000)
	c.crashLeader = pick(r, 0.2, 0.5)
	c.electionTimeoutNS = pick(r, uint64(150), 200, 300) * tickNS
	c.heartbeatNS = pick(r, uint64(20), 30, 50) * tickNS
	c.straggleMax = int64(2 * c.electionTimeoutNS / tickNS)
	c.switchOnError = pick(r, 0.3, 0.7)
	clusterTimeout := pick(r, 0.3, 0.6)
	drift := pick(r, int64(0), 50, 200)
	offset := pick(r, uint64(0), 1_000_000, 10_000_000)
	for range c.replicas {
		c.driftPPM = append(c.driftPPM, r.Int64N(2*drift+1)-drift)
		c.realOffset = append(c.realOffset, r.Uint64N(offset+1))
		c.monoBase = append(c.monoBase, r.Uint64N(1<<40))
	}
	c.damagePerCrash = pick(r, 0, 0.2, 0.5, 1)
	c.readFail = pick(r, 0, 0.05, 0.3)
	c.damageHistoryPerCrash = pick(r, 0, 0.2, 0.5)
	if c.replicas > 1 {
		// A client that times out may be talking to a replica cut off from
		// the leader: it tries another one.
		c.newConnOnTimeout = clusterTimeout
	}

	f := c.faults
	if !f.network() {
		c.netLoss, c.netDup, c.connDropPerTick = 0, 0, 0
		c.peerLoss, c.peerDup, c.peerStraggle = 0, 0, 0
	}
	if !f.partitions() || c.replicas == 1 {
		c.partitionPerTick = 0
	}
	if !f.crashes() {
		c.crashPerTick = 0
	}
	if !f.crashes() {
		c.readFail = 0
	}
	if !f.crashes() || c.replicas == 1 {
		// A replica of a cluster of one has no peer to repair its log
		// from: it refuses to start on a damaged log, or history.
		c.damagePerCrash, c.damageHistoryPerCrash = 0, 0
	}

	c.digestEvery = 150
	c.settleMax = 3000
	// The end of the run (see world.phase): faults stop `quiet` ticks
	// before the end; every operation must then finish within `live`
	// ticks; clients start no operation in the last live+tail ticks, and
	// the checker's final reads run in the last `tail` ticks.
	//
	// live: a crashed replica is back within downMax; a client resends
	// within a timeout, or a maximal backoff, and may need a reconnection.
	// A cluster also needs a leader first: an election takes one or two
	// election timeouts, and ten are allowed for split votes and pre-votes
	// that fail; a client's backoff (after 211 from a replica that knew no
	// leader) is covered above.
	c.live = c.requestTimeout + maxBackoffTicks*3/2 + c.downMax + 1000
	c.tail = 600
	if c.replicas > 1 {
		election := int64(c.electionTimeoutNS / tickNS)
		hb := int64(c.heartbeatNS / tickNS)
		c.live += 10 * election
		// The checker reads each entity in turn; a read may be forwarded
		// to the leader and wait for a heartbeat round.
		c.tail += int64(c.entities+4) * (4*c.peerMaxDelay + 2*c.syncMax + 2*hb)
	}
	c.quiet = c.live + c.tail + 500
	return c
}

func (c runConfig) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "replicas=%d faults=%s clients=%d entities=%d net(delay=%d..%d loss=%.2f dup=%.2f drop/tick=%.4f) ",
		c.replicas, c.faults, c.clients, c.entities, c.netMinDelay, c.netMaxDelay, c.netLoss, c.netDup, c.connDropPerTick)
	if c.replicas > 1 {
		fmt.Fprintf(&b, "peers(delay=%d..%d loss=%.2f dup=%.2f straggle=%.3f) partition/tick=%.5f (%d..%d) election=%dms heartbeat=%dms ",
			c.peerMinDelay, c.peerMaxDelay, c.peerLoss, c.peerDup, c.peerStraggle, c.partitionPerTick, c.partMin, c.partMax,
			c.electionTimeoutNS/tickNS, c.heartbeatNS/tickNS)
	}
	fmt.Fprintf(&b, "clocks(drift=%vppm offset=%vns) ", c.driftPPM, c.realOffset)
	fmt.Fprintf(&b, "disk(sync=%d..%d snap<=%d) crash/tick=%.5f down=%d..%d ",
		c.syncMin, c.syncMax, c.snapMax, c.crashPerTick, c.downMin, c.downMax)
	if c.replicas > 1 {
		fmt.Fprintf(&b, "damage/crash=%.2f history-damage/crash=%.2f ", c.damagePerCrash, c.damageHistoryPerCrash)
		fmt.Fprintf(&b, "readfail=%.2f ", c.readFail)
	}
	fmt.Fprintf(&b, "replica(sessions=%d perConn=%d scanWork=%d pending=%d snapEvery=%d snapBytes=%d shed=%d apply=%d cleanupNS=%d) client(timeout=%d reconnect<=%d think<=%d new=%.3f) ttl=%.2f invalid=%.2f",
		c.maxSessions, c.maxSessionsPerConn, c.maxScanWork, c.maxPending, c.snapshotEvery, c.snapshotMinBytes, c.shedBatch, c.maxApply, c.cleanupEveryNS, c.requestTimeout, c.reconnectMax, c.thinkMax, c.newInstance, c.ttlShare, c.invalidShare)
	return b.String()
}
