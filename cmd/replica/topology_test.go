package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/geoevent/geoevent/internal/testproc"
)

// TestFollowerTopologyOfAKilledFollower: on a real cluster of three, a
// follower's /topology shows the other follower healthy, and unreachable
// soon after it is killed: within the election timeout (500 ms) and two
// heartbeat intervals (50 ms each) of its last answer, plus the polling;
// the test allows 1.5 s for a loaded machine.
func TestFollowerTopologyOfAKilledFollower(t *testing.T) {
	c := newCluster(t, 3)
	c.HTTP = make([]string, 3)
	for i := range c.HTTP {
		c.HTTP[i] = testproc.FreeAddr(t)
	}
	for i := range 3 {
		c.Start(i)
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	l := settledLeader(t, hc, c, -1) // every replica finds every other healthy
	f, other := (l+1)%3, (l+2)%3
	top, err := getTopology(hc, c.HTTP[f])
	if err != nil {
		t.Fatal(err)
	}
	if top.status(other) != "healthy" || top.status(l) != "healthy" || top.primary() != l {
		t.Fatalf("follower %d's topology: %+v", f, top)
	}

	killed := time.Now()
	c.Kill(other)
	var took time.Duration
	for {
		top, err := getTopology(hc, c.HTTP[f])
		if err != nil {
			t.Fatal(err)
		}
		if s := top.status(other); s == "unreachable" {
			took = time.Since(killed)
			break
		} else if s != "healthy" && s != "recovering" {
			// recovering: the leader saw it fall behind (an append it never
			// answered) before its connection was found lost.
			t.Fatalf("the killed follower is %q on follower %d before it is unreachable", s, f)
		}
		if time.Since(killed) > 5*time.Second {
			t.Fatalf("the killed follower is still %q on follower %d after 5 s", top.status(other), f)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("follower %d reports the killed follower %d unreachable %v after the kill", f, other, took.Round(time.Millisecond))
	if took > 1500*time.Millisecond {
		t.Fatalf("unreachable only %v after the kill", took)
	}
}
