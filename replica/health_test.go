package replica

import (
	"testing"

	"github.com/geoevent/geoevent/core"
)

// topologyOf asks replica i for the topology, as a client would.
func (c *cluster) topologyOf(i int) *core.TopologyReply {
	c.t.Helper()
	c.nodes[i].r.Receive(8, core.Header{Type: core.MsgRequest}, core.AppendSessionlessRead(nil, testCluster, mustRequest(c.t, core.OpTopology, nil)))
	rs := (&cclient{c: c, node: i, conn: 8}).await()
	if len(rs) != 1 || rs[0].err != nil {
		c.t.Fatalf("topology of replica %d: %+v", i, rs)
	}
	return rs[0].value.(*core.TopologyReply)
}

func statuses(t *core.TopologyReply) []string {
	var s []string
	for _, n := range t.Nodes {
		s = append(s, n.Status)
	}
	return s
}

// TestFollowerTopologyIsTruthful: a follower reports the other follower
// from the leader's health reports: healthy while it answers the leader,
// unreachable within an election timeout and two heartbeat intervals of
// its crash (as the leader does), healthy again once it is back; with no
// leader heard, the follower knows only itself.
func TestFollowerTopologyIsTruthful(t *testing.T) {
	c := newCluster(t, 3, Config{})
	l := c.leader()
	f, other := (l+1)%3, (l+2)%3
	c.run(testET / 2)

	top := c.topologyOf(f)
	if top.ClusterID != testCluster || top.Primary != uint32(l) || len(top.Nodes) != 3 {
		t.Fatalf("follower's topology: %+v", top)
	}
	for i, n := range top.Nodes {
		if n.Status != StatusHealthy || n.LastContactMS >= testET/1e6 || n.LagMS != 0 {
			t.Fatalf("replica %d on the follower: %+v, want healthy, heard within the election timeout, no lag (all %v)", i, n, statuses(top))
		}
	}
	if n := top.Nodes[f]; n.LastContactMS != 0 {
		t.Fatalf("the follower's own last contact: %+v", n)
	}

	// The other follower crashes: the follower's view of it ages with
	// the leader's reports, to unreachable, at most a little after the
	// leader's own.
	c.crash(other)
	step := uint64(testET / 100) // a tick
	var leaderSaw, followerSaw uint64
	for elapsed := uint64(0); elapsed < 3*testET && (leaderSaw == 0 || followerSaw == 0); elapsed += step {
		c.run(step)
		if leaderSaw == 0 && c.nodes[l].r.topology().Nodes[other].Status == StatusUnreachable {
			leaderSaw = elapsed + step
		}
		if followerSaw == 0 && c.nodes[f].r.topology().Nodes[other].Status == StatusUnreachable {
			followerSaw = elapsed + step
		}
	}
	t.Logf("unreachable after %d ns on the leader, %d ns on the other follower (election timeout %d, heartbeat %d)", leaderSaw, followerSaw, testET, c.cfg.HeartbeatNS)
	bound := uint64(testET + 2*c.cfg.HeartbeatNS)
	if followerSaw == 0 || followerSaw > bound || leaderSaw == 0 || leaderSaw > bound {
		t.Fatalf("a crashed follower is unreachable on the leader after %d ns and on the other follower after %d ns (0: never); want both within %d",
			leaderSaw, followerSaw, bound)
	}
	if followerSaw < testET-uint64(c.cfg.HeartbeatNS) {
		t.Fatalf("reported unreachable after %d ns, before an election timeout (%d) could pass", followerSaw, testET)
	}
	top = c.topologyOf(f)
	if n := top.Nodes[other]; n.Status != StatusUnreachable || n.LastContactMS < testET/1e6 {
		t.Fatalf("the crashed follower on the other: %+v", n)
	}
	if top.Nodes[l].Status != StatusHealthy || top.Nodes[f].Status != StatusHealthy {
		t.Fatalf("the follower's topology after the crash: %v", statuses(top))
	}

	// Back, it is healthy again everywhere.
	c.restart(other)
	c.run(testET)
	for _, i := range []int{l, f, other} {
		if s := statuses(c.topologyOf(i)); s[0] != StatusHealthy || s[1] != StatusHealthy || s[2] != StatusHealthy {
			t.Fatalf("after the restart, replica %d reports %v", i, s)
		}
	}

	// Cut off from everyone, a follower knows only itself: its leader is
	// unreachable, the other follower unknown.
	c.isolate(f)
	c.run(3 * testET)
	top = c.nodes[f].r.topology()
	want := map[int]string{f: StatusHealthy, l: StatusUnreachable, other: StatusUnknown}
	if c.nodes[f].r.leader == NoLeader {
		want[l] = StatusUnknown // it campaigned: it knows no leader
	}
	for i, s := range want {
		if n := top.Nodes[i]; n.Status != s {
			t.Fatalf("cut off, the follower reports replica %d as %+v, want %s (all %v)", i, n, s, statuses(top))
		}
	}
	if n := top.Nodes[other]; n.LastContactMS != core.Unknown || n.LagMS != core.Unknown {
		t.Fatalf("an unknown node's contact and lag: %+v", n)
	}
}

// TestReplicationLagOfADownFollower: replication_lag_ms is 0 while every
// follower holds the leader's whole log, stays 0 while a follower is down
// and nothing is written, then counts from the follower's last answer
// before it went down; the leader's health report carries the same lag
// for that follower; back and caught up, the lag is 0 again.
func TestReplicationLagOfADownFollower(t *testing.T) {
	c := newCluster(t, 3, Config{})
	l := c.leader()
	f, other := (l+1)%3, (l+2)%3
	cl := c.client(l, 1)
	lag := func() uint64 {
		t.Helper()
		rp := cl.call(core.OpStats, nil)
		if rp.err != nil {
			t.Fatalf("stats: %v", rp.err)
		}
		return rp.value.(*core.Stats).ReplicationLagMS
	}
	write := func(id uint64) {
		t.Helper()
		if rp := cl.call(core.OpInsert, insertReq(ev(id, 1_000, 2_000))); rp.err != nil {
			t.Fatalf("insert: %v", rp.err)
		}
	}
	write(1)
	if g := lag(); g != 0 {
		t.Fatalf("lag with every follower caught up: %d ms", g)
	}
	c.crash(f)
	down := c.clock.mono
	c.run(2 * testET)
	if g := lag(); g != 0 {
		t.Fatalf("lag of a down follower before any write: %d ms", g)
	}
	write(2)
	c.run(testET)
	g, since := lag(), (c.clock.mono-down)/1e6
	t.Logf("lag %d ms, %d ms after the follower went down (heartbeat %d ms)", g, since, c.cfg.HeartbeatNS/1e6)
	if g < since-c.cfg.HeartbeatNS/1e6-1 || g > since+c.cfg.HeartbeatNS/1e6+1 {
		t.Fatalf("lag %d ms, want about the %d ms since the follower went down (to a heartbeat interval)", g, since)
	}
	if n := c.topologyOf(other).Nodes[f]; n.Status != StatusUnreachable || n.LagMS < since-c.cfg.HeartbeatNS/1e6-1 {
		t.Fatalf("the down follower on the other follower: %+v (down for %d ms)", n, since)
	}
	c.restart(f)
	c.run(testET)
	if g := lag(); g != 0 {
		t.Fatalf("lag once the follower is back: %d ms", g)
	}
}

// TestSlowFollowerIsRecovering: a follower that answers heartbeats but
// does not make entries durable (its syncs held) lacks committed entries;
// once that has lasted an election timeout it is "recovering" on the
// leader and on the other follower, and healthy again once it catches up.
func TestSlowFollowerIsRecovering(t *testing.T) {
	c := newCluster(t, 3, Config{})
	l := c.leader()
	slow, other := (l+1)%3, (l+2)%3
	cl := c.client(l, 1)
	c.nodes[slow].io.holdSyncs = true
	if rp := cl.call(core.OpInsert, insertReq(ev(1, 1_000, 2_000))); rp.err != nil {
		t.Fatalf("insert: %v", rp.err)
	}
	c.run(testET / 2)
	if s := c.nodes[l].r.topology().Nodes[slow].Status; s != StatusHealthy {
		t.Fatalf("behind for less than an election timeout: %s", s)
	}
	c.run(testET)
	for _, i := range []int{l, other} {
		n := c.topologyOf(i).Nodes[slow]
		if n.Status != StatusRecovering || n.LagMS < testET/1e6 || n.LastContactMS >= testET/1e6 {
			t.Fatalf("the slow follower on replica %d: %+v, want recovering, lagging at least the election timeout, heard recently", i, n)
		}
	}
	c.nodes[slow].io.holdSyncs = false
	c.run(testET / 2)
	if n := c.topologyOf(other).Nodes[slow]; n.Status != StatusHealthy || n.LagMS != 0 {
		t.Fatalf("caught up, the follower on the other: %+v", n)
	}
}
