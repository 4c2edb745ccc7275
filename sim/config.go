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

	// Clients is the number of workload clients (0 = 2..8 from the seed).
	Clients int
	// Entities is the size of the entity pool (0 = 4..12 from the seed).
	Entities int
	// NoFaults turns off every fault (network loss, duplication, connection
	// drops, crashes); delays and latencies remain.
	NoFaults bool

	// BugForgetSyncedOnCrash is for tests only: the simulated disk breaks
	// its own fault model and loses up to the last three synced log entries
	// on every crash, so that acknowledged writes disappear. The checkers
	// must report it.
	BugForgetSyncedOnCrash bool

	// VisualizeDir, when set, receives a porcupine visualization (HTML) of
	// a partition that is not linearizable.
	VisualizeDir string
}

// tickNS is the simulated time one tick stands for: a millisecond.
const tickNS = 1_000_000

// runConfig is every parameter of one run, drawn from the seed.
type runConfig struct {
	clients  int
	entities int

	// Network (per message): delay in ticks, loss and duplication.
	netMinDelay, netMaxDelay int64
	netLoss, netDup          float64
	connDropPerTick          float64 // chance per tick that one connection drops

	// Disk.
	syncMin, syncMax int64 // ticks until a Sync completes
	snapMax          int64 // ticks until a SaveSnapshot completes

	// Crashes.
	crashPerTick     float64
	downMin, downMax int64

	// Replica configuration.
	maxSessions       int
	maxPending        int
	snapshotEvery     uint64
	snapshotMinBytes  uint64
	cleanupEveryNS    uint64
	clockMonoBase     uint64
	clockRealBase     uint64
	requestTimeout    int64   // ticks before a client resends
	reconnectMax      int64   // ticks a client waits, at most, to connect again after a refusal
	newInstance       float64 // chance, after an operation, that a client restarts with a new session
	newConnOnTimeout  float64
	thinkMax          int64 // ticks a client waits between operations
	ttlShare          float64
	invalidShare      float64
	quiet, live, tail int64 // end-of-run phases, see world.phase
}

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

func newRunConfig(r *rand.Rand, opts Options) runConfig {
	c := runConfig{
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
		cleanupEveryNS:   pick(r, uint64(0), 1_000_000_000, 300_000_000),
		clockMonoBase:    r.Uint64N(1 << 40),
		clockRealBase:    1_700_000_000_000_000_000 + r.Uint64N(365*24*3600)*1_000_000_000,

		requestTimeout:   pick(r, int64(200), 400, 800),
		newConnOnTimeout: pick(r, 0, 0.3),
		reconnectMax:     pick(r, int64(3), 100),
		thinkMax:         pick(r, int64(5), 30, 80),
		ttlShare:         pick(r, 0.0, 0.1, 0.3),
		invalidShare:     pick(r, 0.0, 0.03),
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
	}
	c.newInstance = pick(r, 0, 0.002, 0.01)
	if opts.NoFaults {
		c.netLoss, c.netDup, c.connDropPerTick, c.crashPerTick = 0, 0, 0, 0
	}
	// The end of the run (see world.phase): faults stop `quiet` ticks
	// before the end; every operation must then finish within `live`
	// ticks; clients start no operation in the last live+tail ticks, and
	// the checker's final reads run in the last `tail` ticks.
	c.live = c.requestTimeout + maxBackoffTicks*3/2 + c.downMax + 1000
	c.tail = 600
	c.quiet = c.live + c.tail + 500
	return c
}

func (c runConfig) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "clients=%d entities=%d net(delay=%d..%d loss=%.2f dup=%.2f drop/tick=%.4f) ",
		c.clients, c.entities, c.netMinDelay, c.netMaxDelay, c.netLoss, c.netDup, c.connDropPerTick)
	fmt.Fprintf(&b, "disk(sync=%d..%d snap<=%d) crash/tick=%.5f down=%d..%d ",
		c.syncMin, c.syncMax, c.snapMax, c.crashPerTick, c.downMin, c.downMax)
	fmt.Fprintf(&b, "replica(sessions=%d pending=%d snapEvery=%d snapBytes=%d cleanupNS=%d) client(timeout=%d reconnect<=%d think<=%d new=%.3f) ttl=%.2f invalid=%.2f",
		c.maxSessions, c.maxPending, c.snapshotEvery, c.snapshotMinBytes, c.cleanupEveryNS, c.requestTimeout, c.reconnectMax, c.thinkMax, c.newInstance, c.ttlShare, c.invalidShare)
	return b.String()
}
