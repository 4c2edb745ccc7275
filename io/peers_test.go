package io

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/geoevent/geoevent/core"
)

// formatReplica makes a formatted data directory for replica index of count.
func formatReplica(t *testing.T, index, count uint32) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), fmt.Sprintf("replica-%d", index))
	if err := Format(dir, ClusterInfo{Cluster: testCluster, ReplicaIndex: index, ReplicaCount: count}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// freeAddrs returns n loopback addresses that were free a moment ago.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	out := make([]string, n)
	for i := range out {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		out[i] = ln.Addr().String()
		ln.Close()
	}
	return out
}

// testMagic starts the payload of every frame a test sends between
// replicas, so that sinks tell them from the replica's own messages.
var testMagic = []byte("io-test:")

const testPeerType = core.MsgReplicaFirst + 60 // unused by package replica

func testPeerFrame(from uint32, tag string) []byte {
	return core.AppendFrame(nil, core.Header{ClientID: uint64(from), Type: testPeerType}, append(append([]byte(nil), testMagic...), tag...))
}

type peerMsg struct {
	h   core.Header
	tag string
}

// peerSink replaces a server's peer-frame handler: test frames go to ch,
// the replica's own messages to the replica.
type peerSink struct{ ch chan peerMsg }

func newPeerSink() *peerSink { return &peerSink{ch: make(chan peerMsg, 4096)} }

func (ps *peerSink) install(s *Server) {
	s.peerFrame = func(h core.Header, p []byte) {
		if !bytes.HasPrefix(p, testMagic) {
			s.r.ReceivePeer(h, p)
			return
		}
		select {
		case ps.ch <- peerMsg{h: h, tag: string(p[len(testMagic):])}: // a copy: p is the reader's buffer
		default:
		}
	}
}

// await returns the next test frame whose tag is tag, skipping others.
func (ps *peerSink) await(t *testing.T, tag string, timeout time.Duration) (peerMsg, bool) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case m := <-ps.ch:
			if m.tag == tag {
				return m, true
			}
		case <-deadline:
			return peerMsg{}, false
		}
	}
}

// sendUntilReceived sends frames tagged tag from s to replica to every 20 ms
// until sink has one.
func sendUntilReceived(t *testing.T, s *Server, to uint32, sink *peerSink, tag string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		replicaIO{s}.SendPeer(to, testPeerFrame(s.info.ReplicaIndex, tag))
		if m, ok := sink.await(t, tag, 20*time.Millisecond); ok {
			if m.h.ClientID != uint64(s.info.ReplicaIndex) || m.h.Type != testPeerType {
				t.Fatalf("received %+v", m.h)
			}
			return
		}
	}
	t.Fatalf("replica %d never received %q from replica %d", to, tag, s.info.ReplicaIndex)
}

// A connection that opens with a good hello carries replica messages to
// the handler; bad hellos and bad frames after a good one close only their
// connection.
func TestPeerHello(t *testing.T) {
	obs, logs := observer.New(zap.WarnLevel)
	addrs := freeAddrs(t, 3) // replicas 0 and 2 are the test's raw connections (nobody listens)
	sink := newPeerSink()
	b := serveWith(t, formatReplica(t, 1, 3), Options{Addresses: addrs, Logger: zap.New(obs)}, sink.install)
	// A client connection, served all along (this replica is alone: it
	// answers that no leader is known, which proves it served the frame).
	client := dial(t, b.Addr())
	clientServed := func() {
		t.Helper()
		client.req++
		client.send(core.Header{Request: client.req, Type: core.MsgRegister}, core.AppendRegister(nil, testCluster))
		if h, _ := client.recv(); h.Request != client.req {
			t.Fatalf("client got %+v", h)
		}
	}
	clientServed()

	// A good hello, then messages: they arrive in order with the sender's
	// index.
	peer := dial(t, b.Addr())
	peer.nc.Write(appendPeerHello(nil, peerHello{cluster: testCluster, from: 2, to: 1, addrs: addrs}))
	for i := range 3 {
		peer.nc.Write(testPeerFrame(2, fmt.Sprint("hello-", i)))
	}
	for i := range 3 {
		m, ok := sink.await(t, fmt.Sprint("hello-", i), 10*time.Second)
		if !ok || m.h.ClientID != 2 || m.h.Type != testPeerType {
			t.Fatalf("frame %d: %+v %v", i, m, ok)
		}
	}
	clientServed()

	hello := func(cluster core.Uint128, index uint32, clientID uint64) []byte {
		h, p, _, err := core.DecodeFrame(appendPeerHello(nil, peerHello{cluster: cluster, from: index, to: 1, addrs: addrs}))
		if err != nil {
			t.Fatal(err)
		}
		h.ClientID = clientID
		return core.AppendFrame(nil, h, p)
	}
	otherList := []string{addrs[1], addrs[0], addrs[2]}
	helloV1 := func(cluster core.Uint128, index uint32) []byte {
		var p [peerHelloV1Size]byte
		cluster.PutLE(p[:16])
		binary.LittleEndian.PutUint32(p[16:], index)
		return core.AppendFrame(nil, core.Header{ClientID: uint64(index), Type: MsgPeerHello}, p[:])
	}
	register := core.AppendFrame(nil, core.Header{Type: core.MsgRegister}, core.AppendRegister(nil, testCluster))
	for _, tc := range []struct {
		name    string
		frames  [][]byte
		reason  string // in the warning
		refusal bool   // the hello is answered with an error naming the reason
	}{
		{"wrong cluster", [][]byte{hello(core.Uint128{Lo: 9}, 0, 0)}, "of cluster", true},
		{"another address list", [][]byte{appendPeerHello(nil, peerHello{cluster: testCluster, from: 0, to: 1, addrs: otherList})},
			"replica 0 lists the replicas' addresses as " + strings.Join(otherList, ",") + ", but replica 1 lists them as " + strings.Join(addrs, ","), true},
		{"another cluster and list", [][]byte{appendPeerHello(nil, peerHello{cluster: core.Uint128{Lo: 9}, from: 0, to: 1, addrs: otherList})},
			"of cluster 00000000-0000-0000-0000-000000000009 with addresses " + strings.Join(otherList, ","), true},
		{"meant for another replica", [][]byte{appendPeerHello(nil, peerHello{cluster: testCluster, from: 0, to: 2, addrs: addrs})},
			"as replica 2's address, but it reached replica 1", true},
		{"version 1", [][]byte{helloV1(testCluster, 0)}, "version 1", true},
		{"unknown version", [][]byte{core.AppendFrame(nil, core.Header{Type: MsgPeerHello}, make([]byte, peerHelloFixed+3))}, "version 0", true},
		{"index out of range", [][]byte{hello(testCluster, 3, 3)}, "has 3 replica(s)", true},
		{"own index", [][]byte{hello(testCluster, 1, 1)}, "own index", true},
		{"client id is not the index", [][]byte{hello(testCluster, 0, 2)}, "client id 2", true},
		{"short hello", [][]byte{core.AppendFrame(nil, core.Header{Type: MsgPeerHello}, []byte{1, 2, 3})}, "payload of 3 bytes", true},
		{"client frame after hello", [][]byte{hello(testCluster, 0, 0), register}, "type register after the peer hello", false},
		{"second hello", [][]byte{hello(testCluster, 0, 0), hello(testCluster, 0, 0)}, "type replica(127) after the peer hello", false},
		{"frame from another replica", [][]byte{hello(testCluster, 0, 0), testPeerFrame(2, "x")}, "from replica 2 on replica 0's connection", false},
		{"hello after a client frame", [][]byte{register, hello(testCluster, 0, 0)}, "did not open with a peer hello", false},
	} {
		before := logs.FilterMessage("closing a replica connection").Len()
		c := dial(t, b.Addr())
		for _, f := range tc.frames {
			c.nc.Write(f)
		}
		if tc.refusal {
			if err := readRefusal(c.nc); !strings.Contains(fmt.Sprint(err), tc.reason) {
				t.Fatalf("%s: the dialer read %v, want a refusal naming %q", tc.name, err, tc.reason)
			}
		}
		c.expectClosed()
		got := logs.FilterMessage("closing a replica connection").All()
		if len(got) != before+1 || !strings.Contains(got[len(got)-1].ContextMap()["reason"].(string), tc.reason) {
			t.Fatalf("%s: warnings %v, want one with %q", tc.name, got[before:], tc.reason)
		}
		clientServed()
	}
	// The same refusal again at once: answered, but not warned of again.
	before := logs.Len()
	for range 3 {
		c := dial(t, b.Addr())
		c.nc.Write(appendPeerHello(nil, peerHello{cluster: testCluster, from: 0, to: 1, addrs: otherList}))
		if err := readRefusal(c.nc); !strings.Contains(fmt.Sprint(err), "lists them as") {
			t.Fatalf("a repeated refusal: %v", err)
		}
		c.expectClosed()
	}
	if n := logs.Len() - before; n != 0 {
		t.Fatalf("%d warnings for a refusal repeated within %v: %v", n, peerRefusedLogEvery, logs.All()[before:])
	}
	// The good peer connection is still open.
	peer.nc.Write(testPeerFrame(2, "still"))
	if _, ok := sink.await(t, "still", 10*time.Second); !ok {
		t.Fatal("the good peer connection stopped working")
	}
	b.stop(t)
}

// A frame handed to SendPeer on one server reaches the other's replica, in
// both directions, and a server dials again when its peer restarts.
func TestSendPeerReachesThePeerAndReconnects(t *testing.T) {
	obs, logs := observer.New(zap.InfoLevel)
	addrs := freeAddrs(t, 3) // replica 2 is never started
	dirA, dirB := formatReplica(t, 0, 3), formatReplica(t, 1, 3)
	sinkA, sinkB := newPeerSink(), newPeerSink()
	a := serveWith(t, dirA, Options{Addresses: addrs, Logger: zap.New(obs)}, sinkA.install)
	b := serveWith(t, dirB, Options{Addresses: addrs}, sinkB.install)
	sendUntilReceived(t, a.Server, 1, sinkB, "a-to-b")
	sendUntilReceived(t, b.Server, 0, sinkA, "b-to-a")
	// Many frames in a burst arrive in order (one connection, one writer).
	for i := range 500 {
		replicaIO{a.Server}.SendPeer(1, testPeerFrame(0, fmt.Sprint("burst-", i)))
	}
	for i := range 500 {
		if _, ok := sinkB.await(t, fmt.Sprint("burst-", i), 10*time.Second); !ok {
			t.Fatalf("burst frame %d did not arrive", i)
		}
	}
	// Sending to this replica itself or to no replica is harmless.
	replicaIO{a.Server}.SendPeer(0, testPeerFrame(0, "self"))
	replicaIO{a.Server}.SendPeer(7, testPeerFrame(0, "nobody"))

	b.stop(t)
	// While B is down, SendPeer goes on without blocking.
	for i := range 100 {
		replicaIO{a.Server}.SendPeer(1, testPeerFrame(0, fmt.Sprint("lost-", i)))
	}
	time.Sleep(300 * time.Millisecond) // let A notice and retry a few times
	sinkB = newPeerSink()
	b = serveWith(t, dirB, Options{Addresses: addrs}, sinkB.install)
	start := time.Now()
	sendUntilReceived(t, a.Server, 1, sinkB, "after-restart")
	t.Logf("reconnected %v after the restart", time.Since(start))
	sendUntilReceived(t, b.Server, 0, sinkA, "b-to-a-again")
	if logs.FilterMessage("lost the connection to a replica; reconnecting").Len() == 0 {
		t.Errorf("no log of the lost connection: %v", logs.All())
	}
	a.stop(t)
	b.stop(t)
}

// A peer that does not read fills its queue: SendPeer then drops (and says
// so once, not per frame) instead of blocking the loop; Close still
// returns. The dialer opens with a correct hello.
func TestFullPeerQueueDrops(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addrs := freeAddrs(t, 3)
	addrs[1] = ln.Addr().String()
	obs, logs := observer.New(zap.WarnLevel)
	a := serveWith(t, formatReplica(t, 0, 3), Options{Addresses: addrs, Logger: zap.New(obs), PeerQueueFrames: 16, PeerQueueBytes: 1 << 20}, nil)

	accepted := make(chan net.Conn, 1)
	go func() {
		nc, err := ln.Accept()
		if err == nil {
			accepted <- nc
		}
	}()
	var nc net.Conn
	select {
	case nc = <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not dial its peer")
	}
	defer nc.Close()
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetReadBuffer(4096)
	}
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	h, p, err := core.ReadFrame(bufio.NewReader(nc), nil)
	if err != nil {
		t.Fatal(err)
	}
	if hello, err := decodePeerHello(p); err != nil || h.Type != MsgPeerHello || h.ClientID != 0 ||
		hello.cluster != testCluster || hello.from != 0 || hello.to != 1 || !slices.Equal(hello.addrs, addrs) {
		t.Fatalf("hello: %+v %x: %+v, %v", h, p, hello, err)
	}
	// Now read nothing more.
	frame := core.AppendFrame(nil, core.Header{ClientID: 0, Type: testPeerType}, make([]byte, 256<<10))
	const n = 2000 // 500 MiB: far beyond any socket buffer
	start := time.Now()
	for range n {
		replicaIO{a.Server}.SendPeer(1, frame)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("%d SendPeer calls took %v", n, d)
	}
	dropped := a.peers[1].dropped.Load()
	if dropped < n/2 {
		t.Fatalf("only %d of %d frames dropped", dropped, n)
	}
	if got := logs.FilterMessageSnippet("dropping messages").Len(); got != 1 {
		t.Fatalf("%d drop warnings, want 1 (rate-limited)", got)
	}
	t.Logf("%d of %d frames dropped", dropped, n)
	a.stop(t)
}

// A peer that refuses the connection at once (here: closes it) is dialed
// again with a backoff, not in a busy loop.
func TestPeerRedialBacksOff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepts atomic.Int64
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			accepts.Add(1)
			nc.Close()
		}
	}()
	addrs := freeAddrs(t, 3)
	addrs[2] = ln.Addr().String()
	a := serveWith(t, formatReplica(t, 0, 3), Options{Addresses: addrs, Logger: zap.NewNop()}, nil)
	stop := time.After(1500 * time.Millisecond)
	for done := false; !done; {
		select {
		case <-stop:
			done = true
		case <-time.After(10 * time.Millisecond):
			replicaIO{a.Server}.SendPeer(2, testPeerFrame(0, "x")) // traffic as Raft would make
		}
	}
	a.stop(t)
	// 50+100+200+400+800 ms: about 6 attempts in 1.5 s.
	if n := accepts.Load(); n < 2 || n > 20 {
		t.Fatalf("%d connections in 1.5 s", n)
	}
	t.Logf("%d connections in 1.5 s", accepts.Load())
}

// Status changes are logged; a one-replica cluster logs its leadership at
// start.
func TestLeaderIsLogged(t *testing.T) {
	obs, logs := observer.New(zap.InfoLevel)
	s := serve(t, formatDir(t), Options{Logger: zap.New(obs)})
	c := dial(t, s.Addr())
	c.register(testCluster)
	c.ping()
	s.stop(t)
	var found bool
	for _, e := range logs.FilterMessage("leader changed").All() {
		m := e.ContextMap()
		if m["role"] == "leader" && m["leader"] == int64(0) && m["term"].(uint64) >= 1 {
			found = true
		}
	}
	if !found {
		t.Fatalf("no leader log: %v", logs.All())
	}
}
