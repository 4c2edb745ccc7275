package io

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/geoevent/geoevent/core"
)

// registerEventually registers a session through the replica at s,
// retrying while the cluster has no leader; false when none came within
// the timeout.
func registerEventually(t *testing.T, s *running, timeout time.Duration) (uint64, bool) {
	t.Helper()
	c := dial(t, s.Addr())
	defer c.nc.Close()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		c.req++
		c.send(core.Header{Request: c.req, Type: core.MsgRegister}, core.AppendRegister(nil, testCluster))
		if h, p := c.recv(); h.Type == core.MsgRegisterReply {
			id, err := core.DecodeRegisterReply(p)
			return id, err == nil
		}
	}
	return 0, false
}

// withReason returns the entries of logs with message msg whose reason
// contains every one of parts.
func withReason(logs *observer.ObservedLogs, msg string, parts ...string) []observer.LoggedEntry {
	var out []observer.LoggedEntry
	for _, e := range logs.FilterMessage(msg).All() {
		reason, _ := e.ContextMap()["reason"].(string)
		if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(reason, p) }) {
			out = append(out, e)
		}
	}
	return out
}

// Three replicas in one process, the third started with its --addresses in
// another order than the first two: each refuses the other's connections,
// and both sides warn, naming both lists, at most once per
// peerRefusedLogEvery; the two that agree form the cluster and serve. The
// third started again with the right list joins it.
func TestMismatchedAddressListsAreRefused(t *testing.T) {
	addrs := freeAddrs(t, 3)
	// Replica 2 listens on the same address either way: only the first
	// two entries are swapped, so it takes replica 1 for replica 0.
	swapped := []string{addrs[1], addrs[0], addrs[2]}
	good, bad := strings.Join(addrs, ","), strings.Join(swapped, ",")
	dirs := []string{formatReplica(t, 0, 3), formatReplica(t, 1, 3), formatReplica(t, 2, 3)}
	var servers []*running
	var logs []*observer.ObservedLogs
	for i, dir := range dirs {
		obs, l := observer.New(zap.InfoLevel)
		list := addrs
		if i == 2 {
			list = swapped
		}
		servers = append(servers, serveWith(t, dir, Options{Addresses: list, Logger: zap.New(obs)}, nil))
		logs = append(logs, l)
	}
	start := time.Now()
	if _, ok := registerEventually(t, servers[1], 15*time.Second); !ok {
		t.Fatal("replicas 0 and 1, whose lists agree, did not form the cluster")
	}
	t.Logf("registered through replica 1 after %v", time.Since(start))

	// Both sides say why, naming both lists.
	accepted := "closing a replica connection"
	dialed := "a replica refused this replica's connection; retrying"
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ok := len(withReason(logs[2], dialed, good, bad)) > 0 && len(withReason(logs[2], accepted, good, bad)) > 0
		for i := range 2 {
			ok = ok && len(withReason(logs[i], accepted, good, bad)) > 0
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			for i, l := range logs {
				t.Logf("replica %d: %v", i, l.FilterLevelExact(zap.WarnLevel).All())
			}
			t.Fatal("the mismatch was not logged on both sides, naming both lists")
		}
	}
	// Redials go on (about one a second) without a warning each.
	time.Sleep(1200 * time.Millisecond)
	for i, l := range logs {
		for _, msg := range []string{accepted, dialed} {
			byReason := map[string]int{}
			for _, e := range withReason(l, msg, good, bad) {
				byReason[fmt.Sprint(e.ContextMap()["reason"], e.ContextMap()["peer"])]++
			}
			for reason, n := range byReason {
				if n > 1 {
					t.Errorf("replica %d warned %d times within %v of %q: %s", i, n, time.Since(start).Round(time.Second), msg, reason)
				}
			}
		}
	}
	if got := withReason(logs[0], accepted, good, bad); len(got) > 0 {
		t.Logf("replica 0: %s", got[0].ContextMap()["reason"])
	}
	if got := withReason(logs[2], dialed, good, bad); len(got) > 0 {
		t.Logf("replica 2: %s", got[0].ContextMap()["reason"])
	}

	// Replica 2 with the right list joins: a register through it (a
	// follower, which forwards it) is answered.
	servers[2].stop(t)
	servers[2] = serveWith(t, dirs[2], Options{Addresses: addrs, Logger: zap.NewNop()}, nil)
	if _, ok := registerEventually(t, servers[2], 15*time.Second); !ok {
		t.Fatal("replica 2, restarted with the right list, did not join")
	}
	for _, s := range servers {
		s.stop(t)
	}
}

// FuzzDecodePeerHello: any payload decodes or is refused without a panic,
// and a hello that decodes encodes back to the same bytes.
func FuzzDecodePeerHello(f *testing.F) {
	payload := func(h peerHello) []byte {
		_, p, _, _ := core.DecodeFrame(appendPeerHello(nil, h))
		return p
	}
	f.Add(payload(peerHello{cluster: testCluster, from: 1, to: 2, addrs: []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}}))
	f.Add(payload(peerHello{cluster: testCluster, addrs: []string{"h:1"}}))
	f.Add(make([]byte, peerHelloV1Size))
	f.Add(make([]byte, peerHelloFixed))
	f.Add(append(payload(peerHello{addrs: []string{"x:1"}}), 0))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, p []byte) {
		h, err := decodePeerHello(p)
		if err != nil {
			if _, ok := err.(*peerRefused); !ok {
				t.Fatalf("an error of type %T", err)
			}
			return
		}
		if len(h.addrs) == 0 {
			t.Fatal("a hello with no address decoded")
		}
		if got := payload(h); string(got) != string(p) {
			t.Fatalf("re-encoded % x, was % x", got, p)
		}
	})
}
