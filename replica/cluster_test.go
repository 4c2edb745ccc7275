package replica

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/geoevent/geoevent/core"
)

// A small deterministic cluster for Raft's unit tests: replicas on memIO
// disks, a network that delivers peer frames in order unless the test cuts
// links, and one clock. The simulator (package sim) is where faults are
// random; here every step is the test's.

type clusterIO struct {
	*memIO
	c          *cluster
	idx        uint32
	saved      []uint64 // snapshots written, not yet reported
	holdBeside bool     // step leaves the queued encodings and decodings alone
	holdSyncs  bool     // step leaves the Syncs in flight alone
	holdApply  bool     // step leaves a backlog of committed entries unapplied
}

func (io *clusterIO) SendPeer(to uint32, frame ...[]byte) {
	io.c.net = append(io.c.net, packet{from: io.idx, to: to, frame: bytes.Join(frame, nil)})
}

func (io *clusterIO) SaveSnapshot(index, term uint64, data []byte) {
	io.memIO.SaveSnapshot(index, term, data)
	io.saved = append(io.saved, index)
}

type packet struct {
	from, to uint32
	frame    []byte
}

type cluster struct {
	t     *testing.T
	cfg   Config
	clock *fakeClock
	nodes []*cnode
	net   []packet
	cut   map[[2]uint32]bool // from, to: dropped
	trace bool               // print every message delivered
	// prepare: frames go through PreparePeer, as IO's readers do, and
	// prepared counts those it prepared.
	prepare  bool
	prepared int
	// refuse, when set, sees each frame before its replica does, as IO's
	// admission control does, and takes it when it returns true.
	refuse func(to int, h core.Header, payload []byte) bool
}

type cnode struct {
	r    *Replica
	io   *clusterIO
	up   bool
	rand *rand.Rand
}

const testET = 100_000_000 // election timeout, ns

func newCluster(t *testing.T, n int, cfg Config) *cluster {
	t.Helper()
	cfg.Cluster = testCluster
	cfg.ReplicaCount = uint32(n)
	cfg.ElectionTimeoutNS, cfg.HeartbeatNS = testET, testET/10
	c := &cluster{t: t, cfg: cfg, clock: &fakeClock{mono: 1, real: 1_700_000_000_000_000_000}, cut: map[[2]uint32]bool{}}
	for i := range n {
		cn := &cnode{rand: rand.New(rand.NewPCG(uint64(i), 7))}
		cn.io = &clusterIO{memIO: newMemIO(), c: c, idx: uint32(i)}
		c.nodes = append(c.nodes, cn)
		c.start(i, Recovered{HardState: core.HardState{Vote: core.NoVote}})
	}
	return c
}

func (c *cluster) start(i int, rec Recovered) {
	c.t.Helper()
	cfg := c.cfg
	cfg.ReplicaIndex = uint32(i)
	cn := c.nodes[i]
	r, err := New(cfg, cn.io, c.clock, cn.rand, rec)
	if err != nil {
		c.t.Fatal(err)
	}
	cn.r, cn.up = r, true
}

func (c *cluster) crash(i int) {
	cn := c.nodes[i]
	cn.up = false
	cn.io.saved = nil
	cn.io.crash()
}

func (c *cluster) restart(i int) {
	c.t.Helper()
	cn := c.nodes[i]
	rec := cn.io.crash()
	cn.io.saved = nil
	c.start(i, rec)
}

// isolate cuts every link to and from replica i; heal restores all links.
func (c *cluster) isolate(i int) {
	for j := range c.nodes {
		if j != i {
			c.cut[[2]uint32{uint32(i), uint32(j)}] = true
			c.cut[[2]uint32{uint32(j), uint32(i)}] = true
		}
	}
}

func (c *cluster) heal() { clear(c.cut) }

// step delivers what is in flight (network, disks) until nothing is.
func (c *cluster) step() {
	c.t.Helper()
	for round := 0; ; round++ {
		if round > 10_000 {
			c.t.Fatal("the cluster does not settle")
		}
		busy := false
		for _, cn := range c.nodes {
			if !cn.up {
				continue
			}
			for cn.io.syncs > 0 && !cn.io.holdSyncs {
				busy = true
				cn.r.Synced(cn.io.completeSync(), 1)
			}
			if cn.io.completeStreams(cn.r) {
				busy = true
			}
			if !cn.io.holdBeside && cn.io.completeBeside(cn.r) {
				busy = true
			}
			for cn.r.Backlog() && !cn.io.holdApply {
				busy = true
				cn.r.ApplyMore()
			}
			for len(cn.io.saved) > 0 {
				busy = true
				idx := cn.io.saved[0]
				cn.io.saved = cn.io.saved[1:]
				cn.r.SnapshotSaved(idx)
			}
		}
		net := c.net
		c.net = nil
		for _, p := range net {
			busy = true
			cn := c.nodes[p.to]
			if c.cut[[2]uint32{p.from, p.to}] || !cn.up {
				continue
			}
			h, payload, rest, err := core.DecodeFrame(p.frame)
			if err != nil || len(rest) != 0 {
				c.t.Fatalf("bad peer frame: %v", err)
			}
			if c.trace {
				m, _ := decodeMessage(h, payload)
				fmt.Printf("%d->%d type=%d term=%d pre=%v ok=%v index=%d\n", p.from, p.to, m.typ, m.term, m.pre, m.ok, m.index)
			}
			if c.refuse != nil && c.refuse(int(p.to), h, payload) {
				continue
			}
			if pr := PreparePeer(h, payload, nil); c.prepare && pr != nil && pr.Build() {
				c.prepared++
				cn.r.ReceivePeerPrepared(h, payload, pr)
				continue
			}
			cn.r.ReceivePeer(h, payload)
		}
		for i, cn := range c.nodes {
			if cn.up && cn.r.Err() != nil {
				c.t.Fatalf("replica %d failed: %v", i, cn.r.Err())
			}
			if cn.io.snapBeyondLog != "" {
				c.t.Fatalf("replica %d: %s", i, cn.io.snapBeyondLog)
			}
		}
		if !busy {
			return
		}
	}
}

// run lets d nanoseconds pass in ticks of a tenth of the heartbeat.
func (c *cluster) run(d uint64) {
	c.t.Helper()
	for end := c.clock.mono + d; c.clock.mono < end; {
		c.clock.mono += testET / 100
		c.clock.real += testET / 100
		for _, cn := range c.nodes {
			if cn.up {
				cn.r.Tick()
			}
		}
		c.step()
	}
}

// leader waits for a single leader among the replicas up and returns it.
func (c *cluster) leader() int {
	c.t.Helper()
	for range 50 {
		c.run(testET / 2)
		leaders := []int{}
		for i, cn := range c.nodes {
			if cn.up && cn.r.Status().Role == Leader && !c.cutOff(i) {
				leaders = append(leaders, i)
			}
		}
		if len(leaders) == 1 {
			return leaders[0]
		}
	}
	c.t.Fatalf("no leader elected: %v", c)
	return -1
}

func (c *cluster) cutOff(i int) bool {
	for j := range c.nodes {
		if j != i && !c.cut[[2]uint32{uint32(i), uint32(j)}] {
			return false
		}
	}
	return len(c.nodes) > 1
}

// client talks to one replica through conn.
type cclient struct {
	c       *cluster
	node    int
	conn    core.ConnID
	session uint64
	req     uint32
}

func (c *cluster) client(node int, conn core.ConnID) *cclient {
	c.t.Helper()
	cl := &cclient{c: c, node: node, conn: conn}
	cn := c.nodes[node]
	cn.r.Receive(conn, core.Header{Type: core.MsgRegister}, core.AppendRegister(nil, testCluster))
	rs := cl.await()
	if len(rs) != 1 || rs[0].h.Type != core.MsgRegisterReply {
		c.t.Fatalf("register on replica %d: %+v", node, rs)
	}
	cl.session = rs[0].session
	return cl
}

// await runs the cluster for up to two election timeouts until replies
// arrive on the client's connection.
func (cl *cclient) await() []reply {
	cl.c.t.Helper()
	io := cl.c.nodes[cl.node].io
	for range 20 {
		cl.c.run(testET / 10)
		if len(io.sent[cl.conn]) > 0 {
			break
		}
	}
	var out []reply
	for _, f := range io.sent[cl.conn] {
		h, p, _, err := core.DecodeFrame(f)
		if err != nil {
			cl.c.t.Fatal(err)
		}
		out = append(out, decodeReply(cl.c.t, h, p))
	}
	io.sent[cl.conn] = nil
	return out
}

func (cl *cclient) send(op core.Operation, req any) {
	cl.c.t.Helper()
	if op.Mutates() {
		cl.req++
	}
	cl.resend(op, req)
}

// resend sends a request under the client's last request number, as a
// client retries one.
func (cl *cclient) resend(op core.Operation, req any) {
	cl.c.t.Helper()
	p, err := core.AppendRequestMessage(nil, op, req)
	if err != nil {
		cl.c.t.Fatal(err)
	}
	cl.c.nodes[cl.node].r.Receive(cl.conn, core.Header{ClientID: cl.session, Request: cl.req, Type: core.MsgRequest}, p)
}

func (cl *cclient) call(op core.Operation, req any) reply {
	cl.c.t.Helper()
	cl.send(op, req)
	rs := cl.await()
	if len(rs) != 1 {
		cl.c.t.Fatalf("%v on replica %d: %d replies", op, cl.node, len(rs))
	}
	return rs[0]
}

func (cl *cclient) latest(id uint64) (core.GeoEvent, bool) {
	cl.c.t.Helper()
	rp := cl.call(core.OpGetLatest, &core.Uint128{Lo: id})
	if rp.err != nil {
		cl.c.t.Fatalf("get latest on replica %d: %v", cl.node, rp.err)
	}
	lr := rp.value.(*core.LatestResult)
	return lr.Event, lr.Found
}

// converged checks that every replica up has applied the same index and
// holds the same state.
func (c *cluster) converged() {
	c.t.Helper()
	c.run(testET)
	var applied uint64
	var digest [32]byte
	first := true
	for i, cn := range c.nodes {
		if !cn.up {
			continue
		}
		st := cn.r.Status()
		if first {
			applied, digest, first = st.Applied, cn.r.Digest(), false
			continue
		}
		if st.Applied != applied || cn.r.Digest() != digest {
			c.t.Fatalf("replica %d applied %d (digest %x), replica 0.. applied %d (digest %x)", i, st.Applied, cn.r.Digest(), applied, digest)
		}
	}
}

func (c *cluster) String() string {
	s := ""
	for i, cn := range c.nodes {
		st := cn.r.Status()
		s += fmt.Sprintf("[%d up=%v %v term=%d leader=%d commit=%d applied=%d last=%d] ", i, cn.up, st.Role, st.Term, int32(st.Leader), st.Commit, st.Applied, st.LastIndex)
	}
	return s
}

func TestElectionAndReplication(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			c := newCluster(t, n, Config{})
			l := c.leader()
			for i, cn := range c.nodes {
				if st := cn.r.Status(); st.Leader != uint32(l) {
					t.Fatalf("replica %d follows %d, not the leader %d: %v", i, int32(st.Leader), l, c)
				}
			}
			cl := c.client(l, 1)
			if rp := cl.call(core.OpInsert, insertReq(ev(7, 1_000, 2_000))); rp.err != nil {
				t.Fatalf("insert: %v", rp.err)
			}
			// Through a follower: forwarded, answered on the follower's connection.
			f := (l + 1) % n
			fc := c.client(f, 9)
			if rp := fc.call(core.OpUpsert, insertReq(ev(8, 3_000, 4_000))); rp.err != nil {
				t.Fatalf("upsert through a follower: %v", rp.err)
			}
			if e, ok := fc.latest(7); !ok || e.LatNano != 1_000 {
				t.Fatalf("read through a follower: %+v %v", e, ok)
			}
			c.converged()
		})
	}
}

func TestNoCommitWithoutMajority(t *testing.T) {
	c := newCluster(t, 3, Config{})
	l := c.leader()
	cl := c.client(l, 1)
	for j := range c.nodes {
		if j != l {
			c.isolate(j)
		}
	}
	cl.send(core.OpInsert, insertReq(ev(7, 1, 1)))
	c.run(testET / 2) // less than check-quorum: still the leader
	if rs := cl.c.nodes[l].io.sent[1]; len(rs) != 0 {
		t.Fatalf("a write was answered without a majority: %d frames", len(rs))
	}
	c.heal()
	rs := cl.await()
	if len(rs) != 1 || rs[0].err != nil {
		// The old leader may have stepped down (check-quorum) before the
		// heal; then the answer is a retryable error and a retry succeeds.
		if len(rs) == 1 && rs[0].err != nil && rs[0].err.Code == core.PrimaryUnreachable.Code {
			return
		}
		t.Fatalf("after healing: %+v (%v)", rs, c)
	}
}

func TestLeaderIsolatedStepsDownAndNewLeaderServes(t *testing.T) {
	c := newCluster(t, 3, Config{})
	old := c.leader()
	cl := c.client(old, 1)
	if rp := cl.call(core.OpInsert, insertReq(ev(1, 1, 1))); rp.err != nil {
		t.Fatal(rp.err)
	}
	c.isolate(old)
	c.run(3 * testET)
	if st := c.nodes[old].r.Status(); st.Role == Leader {
		t.Fatalf("an isolated leader did not step down (check-quorum): %v", c)
	}
	l := c.leader()
	if l == old {
		t.Fatal("the isolated replica leads")
	}
	nc := c.client(l, 2)
	if rp := nc.call(core.OpInsert, insertReq(ev(2, 2, 2))); rp.err != nil {
		t.Fatal(rp.err)
	}
	// A read at the old leader cannot be answered while it is cut off.
	cl.send(core.OpGetLatest, &core.Uint128{Lo: 2})
	if rs := cl.await(); len(rs) != 1 || rs[0].err == nil || !retryable(rs[0].err.Code) {
		t.Fatalf("a cut-off replica answered a read: %+v", rs)
	}
	c.heal()
	c.run(2 * testET)
	if e, ok := cl.latest(2); !ok || e.LatNano != 2 {
		t.Fatalf("after healing, the old leader's client misses the new write: %+v %v", e, ok)
	}
	c.converged()
}

func TestAcknowledgedWritesSurviveLeaderCrash(t *testing.T) {
	c := newCluster(t, 3, Config{})
	l := c.leader()
	cl := c.client(l, 1)
	for i := uint64(1); i <= 10; i++ {
		if rp := cl.call(core.OpUpsert, insertReq(ev(i, int64(i), 1))); rp.err != nil {
			t.Fatal(rp.err)
		}
	}
	c.crash(l)
	nl := c.leader()
	nc := c.client(nl, 2)
	for i := uint64(1); i <= 10; i++ {
		if e, ok := nc.latest(i); !ok || e.LatNano != int64(i) {
			t.Fatalf("acknowledged write %d lost after the leader crashed", i)
		}
	}
	c.restart(l)
	c.converged()
}

// lagBehindSnapshots makes a cluster of three whose follower lag missed 40
// writes that the leader l has compacted into snapshots; the follower is
// still cut off. cl is a client of the leader.
func lagBehindSnapshots(t *testing.T) (c *cluster, l, lag int, cl *cclient) {
	c = newCluster(t, 3, Config{SnapshotEvery: 5})
	l = c.leader()
	lag = (l + 1) % 3
	c.isolate(lag)
	cl = c.client(l, 1)
	for i := uint64(1); i <= 40; i++ {
		if rp := cl.call(core.OpUpsert, insertReq(ev(i, int64(i), 1))); rp.err != nil {
			t.Fatal(rp.err)
		}
	}
	if c.nodes[l].r.base == 0 {
		t.Fatal("the leader's log was not compacted")
	}
	return c, l, lag, cl
}

// A follower whose Syncs do not complete still hands every entry to
// storage as it arrives, so it applies what the leader committed with the
// other follower and takes its periodic snapshot meanwhile, which never
// goes beyond the log storage was handed (core.IO.WriteSnapshot; every
// step checks that).
func TestFollowerSnapshotsWhileItsSyncsAreInFlight(t *testing.T) {
	c := newCluster(t, 3, Config{SnapshotEvery: 3})
	l := c.leader()
	f := (l + 1) % 3
	cl := c.client(l, 1)
	fn := c.nodes[f]
	fn.io.holdSyncs = true
	before := fn.io.writes
	for i := uint64(1); i <= 10; i++ {
		if rp := cl.call(core.OpUpsert, insertReq(ev(i, int64(i), 1))); rp.err != nil {
			t.Fatal(rp.err)
		}
	}
	if fn.io.syncs == 0 || fn.r.applied != c.nodes[l].r.applied || fn.io.lastAppended() < fn.r.applied {
		t.Fatalf("the follower: %d syncs held, applied %d (the leader %d), appended up to %d",
			fn.io.syncs, fn.r.applied, c.nodes[l].r.applied, fn.io.lastAppended())
	}
	if fn.io.writes == before {
		t.Fatal("no snapshot while the follower's Syncs were in flight")
	}
	fn.io.holdSyncs = false
	c.step()
	c.converged()
}

func TestLaggingFollowerCatchesUpBySnapshot(t *testing.T) {
	c, l, lag, _ := lagBehindSnapshots(t)
	c.heal()
	c.converged()
	if c.nodes[lag].io.snapIndex == 0 {
		t.Fatal("the lagging follower did not install a snapshot")
	}
	if c.nodes[l].io.encodes == 0 {
		// The leader's periodic snapshots went to storage; the follower
		// was sent one encoded into memory for it.
		t.Fatal("the leader sent a snapshot without encoding one into memory")
	}
	c.leadsWith(l, lag, 40)
}

// leadsWith crashes the leader l and checks that the replica that caught
// up, once a leader is elected, serves the write of entity id (at latitude
// id), the last one.
func (c *cluster) leadsWith(l, caughtUp int, id uint64) {
	c.t.Helper()
	c.crash(l)
	c.leader()
	fc := c.client(caughtUp, 5)
	if e, ok := fc.latest(id); !ok || e.LatNano != int64(id) {
		c.t.Fatalf("write %d missing after catch-up: %+v %v", id, e, ok)
	}
}

// A follower decodes the leader's snapshot beside its loop. Until the
// decoding completes it keeps its old state and log, takes no entries and
// acknowledges nothing but still answers heartbeats, while the others go
// on committing; then it installs the snapshot and catches up.
func TestFollowerDecodesSnapshotBesideTheLoop(t *testing.T) {
	c, l, lag, cl := lagBehindSnapshots(t)
	f := c.nodes[lag]
	f.io.holdBeside = true
	c.heal()
	c.run(testET)
	if f.r.decoding == nil || f.r.installing == 0 {
		t.Fatalf("the lagging follower is not decoding a snapshot (installing %d)", f.r.installing)
	}
	applied := f.r.Status().Applied
	decodingSince := c.clock.mono
	c.run(testET)
	if heard := c.nodes[l].r.peers[lag].lastReplyNS; heard <= decodingSince {
		t.Fatalf("the decoding follower has not answered its leader since %d (last at %d)", decodingSince, heard)
	}
	for i := uint64(41); i <= 45; i++ {
		if rp := cl.call(core.OpUpsert, insertReq(ev(i, int64(i), 1))); rp.err != nil {
			t.Fatalf("write %d while a follower decodes: %v", i, rp.err)
		}
	}
	if got := f.r.Status().Applied; got != applied || f.io.snapIndex != 0 {
		t.Fatalf("the decoding follower applied %d (was %d), saved snapshot %d", got, applied, f.io.snapIndex)
	}
	if m := c.nodes[l].r.peers[lag].match; m >= f.r.installing {
		t.Fatalf("the leader counts the decoding follower to %d", m)
	}
	f.io.holdBeside = false
	c.converged()
	if f.io.snapIndex == 0 || f.r.installing != 0 || f.r.decoding != nil {
		t.Fatalf("snapshot %d, installing %d after the decoding", f.io.snapIndex, f.r.installing)
	}
}

// A snapshot that fails to decode changes nothing; the follower takes the
// next one.
func TestDamagedSnapshotIsNotInstalled(t *testing.T) {
	c := newCluster(t, 3, Config{SnapshotEvery: 5})
	l := c.leader()
	f := c.nodes[(l+1)%3]
	digest, applied := f.r.Digest(), f.r.Status().Applied
	f.io.holdBeside = true
	f.r.installSnapshot(applied+100, f.r.term, []byte("GEOREPL1 but not a state"))
	if f.r.installing == 0 {
		t.Fatal("not installing")
	}
	f.io.holdBeside = false
	c.step()
	if f.r.installing != 0 || f.r.decoding != nil || f.r.Digest() != digest || f.r.Status().Applied != applied {
		t.Fatalf("a damaged snapshot changed the follower: installing %d, applied %d", f.r.installing, f.r.Status().Applied)
	}
	cl := c.client(l, 1)
	if rp := cl.call(core.OpUpsert, insertReq(ev(1, 1, 1))); rp.err != nil {
		t.Fatal(rp.err)
	}
	c.converged()
}

func TestRetryAfterLeaderChangeRunsOnce(t *testing.T) {
	c := newCluster(t, 3, Config{})
	l := c.leader()
	f := (l + 1) % 3
	cl := c.client(f, 1)
	if rp := cl.call(core.OpInsert, insertReq(ev(1, 1, 1))); rp.err != nil {
		t.Fatal(rp.err)
	}
	// A second insert commits, but its answer is lost with the leader.
	cl.send(core.OpInsert, insertReq(ev(1, 2, 2)))
	c.step()
	c.crash(l)
	c.nodes[f].io.sent[1] = nil
	c.leader()
	// The retry (same session and request number) is answered from the
	// session table if it committed, and runs now if it did not: once.
	cl.c.nodes[f].r.Receive(cl.conn, core.Header{ClientID: cl.session, Request: cl.req, Type: core.MsgRequest},
		mustRequest(t, core.OpInsert, insertReq(ev(1, 2, 2))))
	rs := cl.await()
	for len(rs) == 1 && rs[0].err != nil && retryable(rs[0].err.Code) {
		cl.c.nodes[f].r.Receive(cl.conn, core.Header{ClientID: cl.session, Request: cl.req, Type: core.MsgRequest},
			mustRequest(t, core.OpInsert, insertReq(ev(1, 2, 2))))
		rs = cl.await()
	}
	if len(rs) != 1 || rs[0].err != nil {
		t.Fatalf("retry: %+v", rs)
	}
	rp := cl.call(core.OpEntityHistory, &core.HistoryQuery{EntityID: core.Uint128{Lo: 1}, Page: core.Page{Limit: 10}})
	if rp.err != nil {
		t.Fatal(rp.err)
	}
	if n := len(rp.value.(*core.QueryResult).Events); n != 2 {
		t.Fatalf("entity 1 has %d events after a retried insert, want 2", n)
	}
}

func mustRequest(t *testing.T, op core.Operation, req any) []byte {
	p, err := core.AppendRequestMessage(nil, op, req)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func retryable(c core.Code) bool {
	info, ok := c.Info()
	return ok && info.Retryable
}

// TestDamagedLogDoesNotVoteAwayAcknowledgedWrites: a follower whose log was
// cut before a damaged record (storage sets Repairing) must not help elect
// a leader that lacks the writes it acknowledged.
func TestDamagedLogDoesNotVoteAwayAcknowledgedWrites(t *testing.T) {
	c := newCluster(t, 3, Config{})
	l := c.leader()
	f, other := (l+1)%3, (l+2)%3
	cl := c.client(l, 1)
	c.isolate(other)
	for i := uint64(1); i <= 5; i++ {
		if rp := cl.call(core.OpUpsert, insertReq(ev(i, int64(i), 1))); rp.err != nil {
			t.Fatal(rp.err)
		}
	}
	// The leader and the follower that acknowledged the writes crash; the
	// follower's log is found damaged and cut before the writes.
	c.crash(l)
	rec := c.nodes[f].io.crash()
	cut := 0
	for cut < len(rec.Entries) {
		if d, _ := decodeEntry(rec.Entries[cut].Data); d.kind == kindOperation && d.session != 0 {
			break
		}
		cut++
	}
	rec.Entries = rec.Entries[:cut]
	rec.HardState.Repairing = true
	rec.HardState.Commit = min(rec.HardState.Commit, uint64(cut))
	c.start(f, rec)
	c.heal()
	c.isolate(l)
	c.run(10 * testET)
	for i, cn := range c.nodes {
		if cn.up && cn.r.Status().Role == Leader {
			t.Fatalf("replica %d was elected while the only replicas up were one that lacks acknowledged writes and one with a damaged log: %v", i, c)
		}
	}
	// The old leader comes back: the writes are all there, and the damaged
	// replica is repaired.
	c.restart(l)
	c.heal()
	nl := c.leader()
	nc := c.client(nl, 2)
	for i := uint64(1); i <= 5; i++ {
		if e, ok := nc.latest(i); !ok || e.LatNano != int64(i) {
			t.Fatalf("acknowledged write %d lost", i)
		}
	}
	c.converged()
	if c.nodes[f].r.repairing {
		t.Fatalf("replica %d is still repairing: %v", f, c)
	}
}

func TestClusterOfOneRefusesDamagedLog(t *testing.T) {
	n := newNode(t, Config{})
	rec := n.io.crash()
	rec.HardState.Repairing = true
	if _, err := New(n.cfg, n.io, n.clock, testRand(), rec); err == nil {
		t.Fatal("a cluster of one started on a damaged log it cannot repair")
	}
}

func TestPingTellsWhetherALeaderIsKnown(t *testing.T) {
	c := newCluster(t, 3, Config{})
	l := c.leader()
	f := (l + 1) % 3
	ping := func() *core.PingReply {
		t.Helper()
		c.nodes[f].r.Receive(7, core.Header{Type: core.MsgRequest}, core.AppendSessionlessRead(nil, testCluster, mustRequest(t, core.OpPing, nil)))
		rs := (&cclient{c: c, node: f, conn: 7}).await()
		if len(rs) != 1 || rs[0].err != nil {
			t.Fatalf("ping: %+v", rs)
		}
		return rs[0].value.(*core.PingReply)
	}
	if p := ping(); !p.Pong {
		t.Fatalf("a follower of a working leader is unhealthy: %+v", p)
	}
	c.isolate(f)
	c.run(3 * testET)
	if p := ping(); p.Pong || p.Reason == "" {
		t.Fatalf("a cut-off replica says pong: %+v", p)
	}
}

// TestStallDoesNotStartElections: when every replica stops running for a
// while (here: the clock jumps by five election timeouts between two
// ticks), nobody had a chance to hear anybody; the leader stays.
func TestStallDoesNotStartElections(t *testing.T) {
	c := newCluster(t, 3, Config{})
	l := c.leader()
	term := c.nodes[l].r.Status().Term
	c.clock.mono += 5 * testET
	for i, cn := range c.nodes { // the followers' first tick after the stall
		if i != l {
			cn.r.Tick()
			if st := cn.r.Status(); st.Role != Follower {
				t.Fatalf("replica %d became a %v at its first tick after a stall", i, st.Role)
			}
		}
	}
	c.run(testET / 2)
	for i, cn := range c.nodes {
		if st := cn.r.Status(); st.Term != term || st.Leader != uint32(l) {
			t.Fatalf("replica %d after a stall: %+v (leader was %d in term %d)", i, st, l, term)
		}
	}
	// A leader that really is gone is still replaced.
	c.crash(l)
	if nl := c.leader(); nl == l {
		t.Fatal("the crashed leader still leads")
	}
}

// TestSnapshotKeepsLaterEntries: a follower sent a snapshot whose last
// entry it holds keeps the entries after it, which it may have
// acknowledged already (found by the simulator: dropping them lost
// acknowledged entries and left the leader probing forever).
func TestSnapshotKeepsLaterEntries(t *testing.T) {
	c := newCluster(t, 3, Config{})
	l := c.leader()
	fi := (l + 1) % 3
	f, lr := c.nodes[fi].r, c.nodes[l].r
	c.isolate(fi)
	cl := c.client(l, 1)
	for i := uint64(1); i <= 3; i++ {
		if rp := cl.call(core.OpUpsert, insertReq(ev(i, int64(i), 1))); rp.err != nil {
			t.Fatal(rp.err)
		}
	}
	deliver := func(m message) {
		t.Helper()
		h, payload, _, err := core.DecodeFrame(frameOf(&m, uint32(l)))
		if err != nil {
			t.Fatal(err)
		}
		f.ReceivePeer(h, payload)
	}
	// The follower gets the leader's entries but not the news that they
	// committed, and makes them durable.
	commit := f.Status().Commit
	m := message{typ: msgAppend, term: lr.term, prevIndex: f.lastIndex, prevTerm: lr.termAt(f.lastIndex), commit: commit}
	for i := f.lastIndex + 1; i <= lr.lastIndex; i++ {
		m.entries = append(m.entries, lr.entryAt(i))
	}
	deliver(m)
	for c.nodes[fi].io.syncs > 0 {
		f.Synced(c.nodes[fi].io.completeSync(), 1)
	}
	last := f.Status().LastIndex
	if last != lr.lastIndex || f.Status().Commit+2 > last {
		t.Fatalf("setup: follower %+v, leader last %d", f.Status(), lr.lastIndex)
	}
	// A snapshot whose last entry it holds, below the end of its log.
	s := message{typ: msgSnapshot, term: lr.term, index: last - 1, snapTerm: lr.termAt(last - 1)}
	s.data = lr.encodeState()
	s.total = uint64(len(s.data))
	deliver(s)
	if got := f.Status().LastIndex; got != last {
		t.Fatalf("the follower's log ends at %d after a snapshot at %d, was %d", got, last-1, last)
	}
	c.heal()
	c.converged()
}

// A follower that forwarded a request to a leader that died before
// answering answers it 215 PRIMARY_UNREACHABLE itself once it stops
// following that leader: the client retries then, not at its request
// timeout (30 s by default). It relays no later answer to that request,
// and the retry, with the same request number, is served by the new
// leader.
func TestForwardedToADeadLeaderIsAnswered(t *testing.T) {
	c := newCluster(t, 3, Config{})
	l := c.leader()
	f := (l + 1) % 3
	fc := c.client(f, 9)
	c.crash(l) // f still follows it
	fc.send(core.OpInsert, insertReq(ev(7, 1, 1)))
	var rs []reply
	for range 3 {
		if rs = fc.await(); len(rs) > 0 {
			break
		}
	}
	if len(rs) != 1 || rs[0].err == nil || rs[0].err.Code != core.PrimaryUnreachable.Code {
		t.Fatalf("the request forwarded to the dead leader: %+v (%v), want 215", rs, c)
	}
	// Were the old leader's answer to come now, late, it would be a second
	// answer to one request: the follower drops it.
	answer, err := core.AppendReplyMessage(nil, core.OpInsert, &core.InsertReply{Committed: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	late := frameOf(&message{typ: msgForwardReply, conn: fc.conn,
		frame: core.AppendFrame(nil, core.Header{ClientID: fc.session, Request: fc.req, Type: core.MsgReply}, answer)}, uint32(l))
	h, p, _, err := core.DecodeFrame(late)
	if err != nil {
		t.Fatal(err)
	}
	c.nodes[f].r.ReceivePeer(h, p)
	if sent := c.nodes[f].io.sent[fc.conn]; len(sent) != 0 {
		t.Fatalf("the follower relayed a late answer after its own 215: %d frames", len(sent))
	}
	c.leader()
	fc.resend(core.OpInsert, insertReq(ev(7, 1, 1)))
	if rs = fc.await(); len(rs) != 1 || rs[0].err != nil {
		t.Fatalf("the retry: %+v (%v)", rs, c)
	}
	if e, ok := fc.latest(7); !ok || e.LatNano != 1 {
		t.Fatalf("after the retry: %+v %v", e, ok)
	}
}

// A leader's IO may refuse a write that a follower forwards before the
// replica takes it (admission control, io/admission.go): RefuseForwarded
// answers the client through the follower with the error, nothing is
// proposed, the follower forgets the request, and the retry under the
// same request number is served once the leader admits writes again.
func TestRefusedForwardIsAnsweredAndRetried(t *testing.T) {
	c := newCluster(t, 3, Config{})
	l := c.leader()
	f := (l + 1) % 3
	fc := c.client(f, 9)
	refusing, refused := true, 0
	c.refuse = func(to int, h core.Header, p []byte) bool {
		client, payload, ok := ForwardedFrame(h, p)
		if !ok || !refusing || to != l || client.Type != core.MsgRequest || core.Operation(payload[0]) != core.OpInsert {
			return false
		}
		refused++
		c.nodes[l].r.RefuseForwarded(h, p, core.ClusterBusy, "the history store is behind: retry")
		return true
	}
	last := c.nodes[l].r.Status().LastIndex
	fc.send(core.OpInsert, insertReq(ev(7, 1, 1)))
	rs := fc.await()
	if len(rs) != 1 || rs[0].err == nil || rs[0].err.Code != core.ClusterBusy.Code || !strings.Contains(rs[0].err.Message, "retry") || refused != 1 {
		t.Fatalf("the refused forward: %+v, %d refused (%v)", rs, refused, c)
	}
	if got := c.nodes[l].r.Status().LastIndex; got != last {
		t.Fatalf("the leader's log grew from %d to %d for a refused request", last, got)
	}
	if n := len(c.nodes[f].r.forwarded); n != 0 {
		t.Fatalf("the follower still remembers %d forwarded requests", n)
	}
	if _, ok := fc.latest(7); ok {
		t.Fatal("the refused insert was applied")
	}
	refusing = false
	fc.resend(core.OpInsert, insertReq(ev(7, 1, 1)))
	if rs = fc.await(); len(rs) != 1 || rs[0].err != nil {
		t.Fatalf("the retry: %+v (%v)", rs, c)
	}
	if e, ok := fc.latest(7); !ok || e.LatNano != 1 {
		t.Fatalf("after the retry: %+v %v", e, ok)
	}
	// A frame that is not a forward is not one to refuse.
	if _, _, ok := ForwardedFrame(core.Header{Type: msgHeartbeat}, nil); ok {
		t.Fatal("a heartbeat taken for a forward")
	}
}

// TestRestartedFollowerAppliesWithoutNewWrites: a follower that restarts
// holds entries it acknowledged but has not verified as the leader's. With
// no new write to append, the leader's heartbeats (appends of no entries
// at its match) verify them, and it applies everything committed.
func TestRestartedFollowerAppliesWithoutNewWrites(t *testing.T) {
	c := newCluster(t, 3, Config{})
	l := c.leader()
	cl := c.client(l, 1)
	for i := uint64(1); i <= 5; i++ {
		if rp := cl.call(core.OpInsert, insertReq(ev(i, 1_000, 2_000))); rp.err != nil {
			t.Fatalf("insert: %v", rp.err)
		}
	}
	c.converged()
	f := (l + 1) % 3
	c.restart(f)
	c.converged()
	if st := c.nodes[f].r.Status(); st.Applied != c.nodes[l].r.Status().Applied {
		t.Fatalf("the restarted follower applied %d, the leader %d", st.Applied, c.nodes[l].r.Status().Applied)
	}
}

// laggingWithoutData makes a cluster of three whose follower lag missed
// writes while cut off for longer than an election timeout: the leader l
// then gave up the entries' Data (no follower that answers lacks them).
func laggingWithoutData(t *testing.T) (c *cluster, l, lag int) {
	c = newCluster(t, 3, Config{})
	l = c.leader()
	lag = (l + 1) % 3
	cl := c.client(l, 1)
	c.isolate(lag)
	c.run(2 * testET)
	for i := uint64(1); i <= 20; i++ {
		if rp := cl.call(core.OpUpsert, insertReq(ev(i, int64(i), 1))); rp.err != nil {
			t.Fatal(rp.err)
		}
	}
	lr := c.nodes[l].r
	if lr.dropped != lr.applied || lr.dropped <= lr.peers[lag].match+10 {
		t.Fatalf("the leader dropped Data up to %d (applied %d, the lagging follower holds %d)", lr.dropped, lr.applied, lr.peers[lag].match)
	}
	for i := lr.base + 1; i <= lr.lastIndex; i++ {
		if got := lr.entryAt(i).Data == nil; got != (i <= lr.dropped) {
			t.Fatalf("entry %d: Data nil %v, dropped through %d", i, got, lr.dropped)
		}
	}
	return c, l, lag
}

// Every replica gives up an applied entry's Data once no follower that
// answers lacks it: all of it, in a healthy cluster.
func TestAppliedEntriesGiveUpData(t *testing.T) {
	c := newCluster(t, 3, Config{})
	cl := c.client(c.leader(), 1)
	for i := uint64(1); i <= 5; i++ {
		if rp := cl.call(core.OpUpsert, insertReq(ev(i, int64(i), 1))); rp.err != nil {
			t.Fatal(rp.err)
		}
	}
	c.converged()
	for i, cn := range c.nodes {
		if r := cn.r; r.dropped != r.applied || r.applied != r.lastIndex {
			t.Fatalf("replica %d: dropped %d, applied %d, last %d", i, r.dropped, r.applied, r.lastIndex)
		}
	}
}

// A follower that lags behind what the leader holds in memory gets the
// entries read back from the leader's storage, not a snapshot.
func TestLaggingFollowerCatchesUpFromStorage(t *testing.T) {
	c, l, lag := laggingWithoutData(t)
	c.heal()
	c.converged()
	if c.nodes[l].io.reads == 0 {
		t.Fatal("the leader read nothing back")
	}
	if c.nodes[lag].io.snapIndex != 0 {
		t.Fatal("the lagging follower installed a snapshot")
	}
	if lr := c.nodes[l].r; lr.rb.entries != nil || lr.dropped != lr.applied {
		t.Fatalf("the leader keeps %d entries read back, dropped %d of %d applied", len(lr.rb.entries), lr.dropped, lr.applied)
	}
	c.leadsWith(l, lag, 20) // with the entries it got
}

// When storage cannot give the entries back (a damaged record, or a
// snapshot let it discard them) the follower gets a snapshot.
func TestUnreadableEntriesAreSentAsSnapshot(t *testing.T) {
	c, l, lag := laggingWithoutData(t)
	c.nodes[l].io.failReads = true
	c.heal()
	c.converged()
	if c.nodes[l].io.reads == 0 || c.nodes[lag].io.snapIndex == 0 {
		t.Fatalf("reads %d; the lagging follower's snapshot is at %d", c.nodes[l].io.reads, c.nodes[lag].io.snapIndex)
	}
}

// A lagging follower's snapshot carries the leader's history store as a
// stream: the leader reads it from IO a chunk (at most snapshotChunk
// bytes) at a time, never whole, and the follower writes each chunk
// through IO before it asks for the next. A stream that IO refuses (a
// damaged chunk) is never installed: the follower asks for it from the
// start, and installs it once a copy is taken.
func TestSnapshotHistoryIsStreamedInChunks(t *testing.T) {
	c, l, lag, cl := lagBehindSnapshots(t)
	for round := range 5 { // 40,000 older events: a history stream of 5 MB, two chunks
		evs := make([]core.GeoEvent, 10_000)
		for i := range evs {
			id := uint64(1001 + i)
			evs[i] = ev(id, int64(id), int64(round))
		}
		if rp := cl.call(core.OpInsert, insertReq(evs...)); rp.err != nil {
			t.Fatal(rp.err)
		}
	}
	leader, f := c.nodes[l], c.nodes[lag]
	f.io.stagingRefused = true
	c.heal()
	c.run(4 * testET)
	if f.io.snapIndex != 0 || f.r.installing != 0 || f.r.decoding != nil {
		t.Fatalf("a refused stream was installed: snapshot %d, installing %d", f.io.snapIndex, f.r.installing)
	}
	if leader.io.streamReads == 0 {
		t.Fatal("the leader read no history stream")
	}
	f.io.stagingRefused = false
	reads := leader.io.streamReads
	c.converged()
	if f.io.snapIndex == 0 {
		t.Fatal("the lagging follower did not install a snapshot")
	}
	size := len(leader.io.history().AppendSection(nil))
	if size <= snapshotChunk || leader.io.streamReads-reads < size/snapshotChunk+1 {
		t.Fatalf("a stream of %d bytes in %d reads", size, leader.io.streamReads-reads)
	}
	if f.io.history().Digest() != leader.io.history().Digest() || len(f.io.history().Events(core.Uint128{Lo: 1001})) != 4 {
		t.Fatal("the follower's history store differs from the leader's")
	}
	if leader.io.stream != nil {
		t.Fatal("the leader holds the stream after the transfer")
	}
}
