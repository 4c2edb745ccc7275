package history

import (
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// openGate is the store's pebble compaction scheduler: it grants no
// compaction until release, which Open calls once pebble.Open has
// returned; from then on it grants what pebble allows (the compaction
// concurrency pebble asks for), as pebble's own default scheduler does.
//
// Why: pebble.Open, before it returns, waits for the compactions under way
// (it scans for obsolete files), and its default scheduler may start one
// the moment the database registers. A store with many tables in L0 (a
// checkpoint taken during a heavy load, or one restarted after a crash
// during it) then waits in Open for a whole L0 compaction: 3.4 s for a
// store of 5 M events, most of a restart. Gated, Open returns at once and
// that compaction runs while the replica replays its log and serves.
type openGate struct {
	db pebble.DBForCompaction // set by Register, before any other call

	mu           sync.Mutex
	released     bool
	unregistered bool
	granting     bool // a grant loop runs (outside mu): one at a time
	grantingDone *sync.Cond
	running      int

	poke chan struct{} // capacity 1: "try to grant"
	stop chan struct{} // closed by Unregister
	done chan struct{} // closed when the granter has returned
}

var _ pebble.CompactionScheduler = (*openGate)(nil)

func newOpenGate() *openGate {
	g := &openGate{poke: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	g.grantingDone = sync.NewCond(&g.mu)
	return g
}

// release lets compactions run, and starts those pebble waits for.
func (g *openGate) release() {
	g.mu.Lock()
	g.released = true
	g.mu.Unlock()
	g.UpdateGetAllowedWithoutPermission()
}

// Register implements pebble.CompactionScheduler.
func (g *openGate) Register(_ int, db pebble.DBForCompaction) {
	g.db = db
	go g.granter()
}

// Unregister implements pebble.CompactionScheduler: no grant happens once
// it returns.
func (g *openGate) Unregister() {
	close(g.stop)
	<-g.done
	g.mu.Lock()
	defer g.mu.Unlock()
	g.unregistered = true
	for g.granting {
		g.grantingDone.Wait()
	}
}

// TrySchedule implements pebble.CompactionScheduler. Pebble calls it
// holding its own mutex: it calls nothing of the DB's but
// GetAllowedWithoutPermission, which takes none.
func (g *openGate) TrySchedule() (bool, pebble.CompactionGrantHandle) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.released || g.unregistered {
		return false, nil
	}
	if g.db.GetAllowedWithoutPermission() > g.running {
		g.running++
		return true, g
	}
	return false, nil
}

// UpdateGetAllowedWithoutPermission implements pebble.CompactionScheduler
// (a flush may allow more compactions): the granter looks.
func (g *openGate) UpdateGetAllowedWithoutPermission() {
	select {
	case g.poke <- struct{}{}:
	default:
	}
}

// Started, MeasureCPU, CumulativeStats and Done implement
// pebble.CompactionGrantHandle.
func (g *openGate) Started()                                          {}
func (g *openGate) MeasureCPU(pebble.CompactionGoroutineKind)         {}
func (g *openGate) CumulativeStats(pebble.CompactionGrantHandleStats) {}

// Done is called by pebble holding no lock, once a granted compaction has
// ended: it may grant the next at once.
func (g *openGate) Done() {
	g.mu.Lock()
	g.running--
	g.mu.Unlock()
	g.grant()
}

// granter grants when poked, and every 100 ms in case pebble's allowance
// grew without a poke (as pebble's default scheduler does).
func (g *openGate) granter() {
	defer close(g.done)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-g.poke:
		case <-t.C:
		}
		g.grant()
	}
}

// grant hands the DB as many grants as it is allowed and has compactions
// waiting for. It calls the DB, which takes pebble's mutex, without
// holding g.mu (pebble orders its mutex before the scheduler's).
func (g *openGate) grant() {
	g.mu.Lock()
	for g.granting {
		g.grantingDone.Wait()
	}
	if !g.released || g.unregistered {
		g.mu.Unlock()
		return
	}
	n := g.db.GetAllowedWithoutPermission() - g.running
	if n <= 0 {
		g.mu.Unlock()
		return
	}
	g.granting = true
	g.mu.Unlock()
	for ; n > 0; n-- {
		if waiting, _ := g.db.GetWaitingCompaction(); !waiting {
			break
		}
		if !g.db.Schedule(g) {
			break
		}
		g.mu.Lock()
		g.running++
		g.mu.Unlock()
	}
	g.mu.Lock()
	g.granting = false
	g.grantingDone.Broadcast()
	g.mu.Unlock()
}
