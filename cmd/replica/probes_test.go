package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/geoevent/geoevent/internal/testproc"
)

// probe is one answer of a probe endpoint: its status, body and time.
type probe struct {
	status int
	body   map[string]any
	took   time.Duration
}

// startHTTPCluster starts a cluster of three replicas, each serving HTTP
// (c.HTTP), and returns it with its leader.
func startHTTPCluster(t *testing.T) (c *testproc.Cluster, leader int) {
	t.Helper()
	c = newCluster(t, 3)
	c.HTTP = []string{testproc.FreeAddr(t), testproc.FreeAddr(t), testproc.FreeAddr(t)}
	return c, c.StartAll()
}

func getProbe(t *testing.T, hc *http.Client, url string) probe {
	t.Helper()
	start := time.Now()
	res, err := hc.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	p := probe{status: res.StatusCode, took: time.Since(start)}
	if err := json.Unmarshal(raw, &p.body); err != nil {
		t.Fatalf("GET %s: not JSON: %s", url, raw)
	}
	return p
}

// medianProbe asks url n times and returns the answer of median time; every
// answer must have the same status.
func medianProbe(t *testing.T, hc *http.Client, url string, n int) probe {
	t.Helper()
	var ps []probe
	for range n {
		ps = append(ps, getProbe(t, hc, url))
		if ps[len(ps)-1].status != ps[0].status {
			t.Fatalf("GET %s: %d then %d", url, ps[0].status, ps[len(ps)-1].status)
		}
	}
	slices.SortFunc(ps, func(a, b probe) int { return int(a.took - b.took) })
	return ps[n/2]
}

// TestProbesWithoutALeader: on a replica of a 3-replica cluster whose two
// others were killed, the probes answer at once, also while every session
// of its gateway waits on a request that needs a leader (100 /stats
// requests, each waiting up to 6.5 s before 503): /healthz 200 in under
// 10 ms, /ping and /readyz 503 with a reason and /status 200 with
// cluster_state no_leader in under 100 ms (medians of 5, on a loaded
// machine). Before, the leader and with all three running, /readyz and
// /ping answer 200 on every replica.
func TestProbesWithoutALeader(t *testing.T) {
	c, leader := startHTTPCluster(t)
	hc := &http.Client{Timeout: 10 * time.Second}
	for i := range 3 {
		base := "http://" + c.HTTP[i]
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if getProbe(t, hc, base+"/readyz").status == 200 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("replica %d not ready with all three running: %v", i, getProbe(t, hc, base+"/readyz").body)
			}
		}
		if p := getProbe(t, hc, base+"/ping"); p.status != 200 {
			t.Fatalf("replica %d: /ping %d %v", i, p.status, p.body)
		}
	}
	survivor := (leader + 1) % 3
	for i := range 3 {
		if i != survivor {
			c.Kill(i)
		}
	}
	base := "http://" + c.HTTP[survivor]
	// Wait until the survivor has lost its leader.
	for deadline := time.Now().Add(10 * time.Second); getProbe(t, hc, base+"/ping").status != 503; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the survivor still pongs 10 s after the others were killed")
		}
	}

	checkProbesWithoutLeader(t, hc, base, "no leader")
	floodAndCheck(t, hc, base)
}

// TestProbesOfALoneReplica: a replica of a 3-replica cluster started alone
// (the two others stopped) has never known a leader; its probes answer
// as TestProbesWithoutALeader's, also while its gateway's sessions wait.
func TestProbesOfALoneReplica(t *testing.T) {
	c := newCluster(t, 3)
	c.HTTP = []string{testproc.FreeAddr(t), testproc.FreeAddr(t), testproc.FreeAddr(t)}
	c.Start(0)
	hc := &http.Client{Timeout: 10 * time.Second}
	base := "http://" + c.HTTP[0]
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := hc.Get(base + "/healthz"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no HTTP after 10 s")
		}
	}
	// The flood comes first: the gateway has no session yet, and every
	// call waits to register one, which needs a leader.
	floodAndCheck(t, hc, base)
	checkProbesWithoutLeader(t, hc, base, "alone")
}

// checkProbesWithoutLeader checks the probes of a replica at base that
// knows no leader.
func checkProbesWithoutLeader(t *testing.T, hc *http.Client, base, when string) {
	t.Helper()
	if p := medianProbe(t, hc, base+"/healthz", 5); p.status != 200 || p.body["alive"] != true || p.took > 10*time.Millisecond {
		t.Errorf("%s: /healthz %d %v in %v, want 200 alive in under 10 ms", when, p.status, p.body, p.took)
	}
	for _, probe := range []struct{ path, key string }{{"/ping", "pong"}, {"/readyz", "ready"}} {
		p := medianProbe(t, hc, base+probe.path, 5)
		if p.status != 503 || p.body[probe.key] != false || !strings.Contains(fmt.Sprint(p.body["reason"]), "knows no leader") || p.took > 100*time.Millisecond {
			t.Errorf("%s: %s %d %v in %v, want 503 with a reason in under 100 ms", when, probe.path, p.status, p.body, p.took)
		}
	}
	if p := medianProbe(t, hc, base+"/status", 5); p.status != 200 || p.body["cluster_state"] != "no_leader" || p.took > 100*time.Millisecond {
		t.Errorf("%s: /status %d %v in %v, want 200 no_leader in under 100 ms", when, p.status, p.body, p.took)
	}
	t.Logf("%s: medians /healthz %v, /ping %v, /readyz %v, /status %v", when,
		medianProbe(t, hc, base+"/healthz", 5).took, medianProbe(t, hc, base+"/ping", 5).took,
		medianProbe(t, hc, base+"/readyz", 5).took, medianProbe(t, hc, base+"/status", 5).took)
}

// floodAndCheck sends 100 /stats to base, which wait for a leader and
// take every session of its gateway, and checks the probes meanwhile.
func floodAndCheck(t *testing.T, hc *http.Client, base string) {
	t.Helper()
	var answered atomic.Int32
	for range 100 {
		go func() {
			// Answered 503 after seconds, or cut off when the test
			// kills the process: either way nothing is checked.
			if res, err := hc.Get(base + "/stats"); err == nil {
				res.Body.Close()
			}
			answered.Add(1)
		}()
	}
	time.Sleep(200 * time.Millisecond)
	checkProbesWithoutLeader(t, hc, base, "sessions busy")
	if n := answered.Load(); n > 0 {
		t.Errorf("%d of the 100 /stats were answered before the probes were checked: the sessions were not all busy", n)
	}
}
