package replica

import (
	"testing"

	"github.com/geoevent/geoevent/core"
)

// electedWithin runs the cluster in steps of a hundredth of the election
// timeout until a replica other than old leads in a later term than term,
// and returns how long that took (ns), or 0 when it did not within limit.
func (c *cluster) electedWithin(old int, term, limit uint64) uint64 {
	c.t.Helper()
	for waited := uint64(0); waited <= limit; waited += testET / 100 {
		for i, cn := range c.nodes {
			if i != old && cn.up {
				if s := cn.r.Status(); s.Role == Leader && s.Term > term {
					return max(waited, 1)
				}
			}
		}
		c.run(testET / 100)
	}
	return 0
}

// A killed leader whose followers are told that their connections to it
// broke (PeerLost) is replaced within a quarter of the election timeout
// and a little; without the input it takes at least the timeout.
func TestPeerLostElectsAtOnce(t *testing.T) {
	for _, told := range []bool{true, false} {
		c := newCluster(t, 3, Config{})
		l := c.leader()
		term := c.nodes[l].r.Status().Term
		c.crash(l)
		if told {
			for i, cn := range c.nodes {
				if i != l {
					cn.r.PeerLost(uint32(l))
				}
			}
		}
		took := c.electedWithin(l, term, 4*testET)
		switch {
		case took == 0:
			t.Fatalf("told %v: no new leader within 4 election timeouts", told)
		case told && took > testET/4+testET/10:
			t.Fatalf("told: a new leader after %d ms, want under %d ms", took/1_000_000, (testET/4+testET/10)/1_000_000)
		case !told && took < testET:
			t.Fatalf("not told: a new leader after %d ms, before the election timeout", took/1_000_000)
		}
		t.Logf("told %v: a new leader %d ms after the kill", told, took/1_000_000)
	}
}

// A broken connection between a follower and a leader that the other
// follower still hears costs no election: the pre-vote is refused.
func TestPeerLostToALiveLeaderChangesNothing(t *testing.T) {
	c := newCluster(t, 3, Config{})
	l := c.leader()
	term := c.nodes[l].r.Status().Term
	f := (l + 1) % 3
	c.nodes[f].r.PeerLost(uint32(l))
	c.run(3 * testET)
	for i, cn := range c.nodes {
		if s := cn.r.Status(); s.Term != term || (i == l) != (s.Role == Leader) {
			t.Fatalf("replica %d: %+v after a follower lost its connection to leader %d of term %d", i, s, l, term)
		}
	}
	// Nor does it on a candidate, the leader itself, or about a follower.
	c.nodes[l].r.PeerLost(uint32(f))
	c.nodes[(l+2)%3].r.PeerLost(uint32(f))
	c.run(3 * testET)
	if s := c.nodes[l].r.Status(); s.Term != term || s.Role != Leader {
		t.Fatalf("leader after PeerLost of a follower: %+v", s)
	}
}

// A replica still applying committed entries (as after a restart, which
// replays its log) votes but does not campaign: when the leader dies, the
// replica that is ready leads, and clients do not wait for the replay.
// Once applied, it campaigns again.
func TestReplayingReplicaDoesNotCampaign(t *testing.T) {
	c := newCluster(t, 3, Config{MaxApplyEntries: 1})
	l := c.leader()
	w := c.client(l, 1)
	for i := range uint32(20) {
		c.nodes[l].r.Receive(1, core.Header{ClientID: w.session, Request: i + 1, Type: core.MsgRequest}, mustRequest(t, core.OpInsert, insertReq(ev(uint64(i+1), 1, 1))))
		w.await()
	}
	slow, ready := (l+1)%3, (l+2)%3
	c.restart(slow)
	c.nodes[slow].io.holdApply = true
	c.run(testET / 2)
	if s := c.nodes[slow].r.Status(); s.Applied >= s.Commit {
		t.Fatalf("setup: the restarted replica applied its log: %+v", s)
	}
	c.crash(l)
	// Told at once that the leader is gone, the slow one would campaign
	// within a quarter of the election timeout; it must not, however long.
	c.nodes[slow].r.PeerLost(uint32(l))
	for range 300 {
		c.run(testET / 100)
		if s := c.nodes[slow].r.Status(); s.Role != Follower {
			t.Fatalf("the replica replaying its log campaigns: %+v", s)
		}
	}
	if s := c.nodes[ready].r.Status(); s.Role != Leader {
		t.Fatalf("the ready replica does not lead: %+v", s)
	}
	// Applied, the slow one campaigns when the leader dies.
	c.nodes[slow].io.holdApply = false
	c.run(testET)
	c.crash(ready)
	c.restart(l)
	if got := c.leader(); got != slow && got != l {
		t.Fatalf("leader %d", got)
	}
}
