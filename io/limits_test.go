package io

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	stdio "io"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/geoevent/geoevent/client"
	"github.com/geoevent/geoevent/core"
)

// lengthPrefix is the start of a frame that announces n bytes after its
// length field, followed by k bytes of it.
func lengthPrefix(n, k int) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(n))
	return append(b, make([]byte, k)...)
}

// expectError reads a MsgError and returns it, with the frame's header.
func (c *rawClient) expectError() (core.Header, *core.Error) {
	c.t.Helper()
	h, p := c.recv()
	if h.Type != core.MsgError {
		c.t.Fatalf("got a %v frame, want an error", h.Type)
	}
	e, err := core.DecodeErrorMessage(p)
	if err != nil {
		c.t.Fatal(err)
	}
	return h, e
}

// closedWithin reads until the server closes c's connection and returns how
// long that took; it fails the test after limit.
func (c *rawClient) closedWithin(limit time.Duration) time.Duration {
	c.t.Helper()
	start := time.Now()
	c.nc.SetReadDeadline(start.Add(limit))
	_, err := stdio.Copy(stdio.Discard, c.br)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.t.Fatalf("the connection was still open after %v", limit)
	}
	return time.Since(start)
}

func heapInuse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// A 10 MiB length prefix and then silence costs the server a chunk, not 10
// MiB: the buffer grows only as the frame's bytes arrive.
func TestAnnouncedLengthIsNotAllocated(t *testing.T) {
	s := serve(t, formatDir(t), Options{})
	good := dial(t, s.Addr())
	good.register(testCluster)
	const conns = 20
	before := heapInuse()
	for range conns {
		c := dial(t, s.Addr())
		if _, err := c.nc.Write(lengthPrefix(core.MaxFrameBody, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	// Every connection has read its bytes once each holds a chunk.
	deadline := time.Now().Add(10 * time.Second)
	for s.budget.inUse() < conns*readChunk && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	grew := int64(heapInuse()) - int64(before)
	t.Logf("%d connections holding the start of a 10 MiB frame: heap in use grew by %d KiB, read budget in use %d KiB",
		conns, grew>>10, s.budget.inUse()>>10)
	if grew > conns*(512<<10) {
		t.Fatalf("the heap grew by %d MiB for %d connections that announced 10 MiB frames", grew>>20, conns)
	}
	good.ping()
	s.stop(t)
}

// A frame cut short is closed ReadTimeout after its first byte; one that
// arrives slowly but within it is served.
func TestHalfFrameIsClosedAfterTheReadTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	s := serve(t, formatDir(t), Options{ReadTimeout: timeout})
	frame := core.AppendFrame(nil, core.Header{Request: 1, Type: core.MsgRegister}, core.AppendRegister(nil, testCluster))

	// Five pieces over about a third of the timeout: few sleeps, so that a
	// loaded machine's oversleeping does not carry the frame past it.
	slow := dial(t, s.Addr())
	const pieces = 5
	for i := range pieces {
		slow.nc.Write(frame[i*len(frame)/pieces : (i+1)*len(frame)/pieces])
		if i < pieces-1 {
			time.Sleep(timeout / (3 * pieces))
		}
	}
	if h, _ := slow.recv(); h.Type != core.MsgRegisterReply {
		t.Fatalf("a frame sent slowly within the read timeout: got %v", h.Type)
	}

	half := dial(t, s.Addr())
	half.nc.Write(frame[:len(frame)/2])
	took := half.closedWithin(10 * time.Second)
	t.Logf("half a frame: closed after %v (read timeout %v)", took, timeout)
	if took < timeout*8/10 {
		t.Fatalf("closed after %v, before the read timeout of %v", took, timeout)
	}
	s.stop(t)
}

// A client connection with nothing read, written or in flight is closed
// after IdleTimeout; one that keeps sending requests is not.
func TestIdleConnectionIsClosedAfterTheIdleTimeout(t *testing.T) {
	const idle = 400 * time.Millisecond
	s := serve(t, formatDir(t), Options{IdleTimeout: idle})
	quiet := dial(t, s.Addr())
	quiet.register(testCluster)
	busy := dial(t, s.Addr())
	busy.register(testCluster)
	done := make(chan time.Duration, 1)
	go func() {
		start := time.Now()
		quiet.nc.SetReadDeadline(start.Add(10 * time.Second))
		stdio.Copy(stdio.Discard, quiet.nc)
		done <- time.Since(start)
	}()
	for range 2 * idle / (idle / 8) {
		busy.ping()
		time.Sleep(idle / 8)
	}
	took := <-done
	t.Logf("idle connection closed after %v (idle timeout %v)", took, idle)
	if took < idle*8/10 || took > 5*time.Second {
		t.Fatalf("idle connection closed after %v, idle timeout %v", took, idle)
	}
	busy.ping() // still open after twice the idle timeout
	s.stop(t)
}

// The Go client reconnects on its own after the server closed its idle
// connection: the next call succeeds (retrying once on the closed
// connection).
func TestClientCallsAgainAfterAnIdleClose(t *testing.T) {
	const idle = 200 * time.Millisecond
	s := serve(t, formatDir(t), Options{IdleTimeout: idle})
	c, err := client.New([]string{s.Addr().String()}, client.Options{Cluster: testCluster})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * idle)
	start := time.Now()
	if _, err := c.Ping(ctx); err != nil {
		t.Fatalf("a call after the server closed the idle connection: %v", err)
	}
	t.Logf("the first call after the idle close took %v", time.Since(start))
	s.stop(t)
}

// One connection over MaxConnections gets a MsgError CLUSTER_BUSY and is
// closed; once a connection has gone, a new one is served.
func TestConnectionOverTheLimitIsRefusedWithClusterBusy(t *testing.T) {
	const max = 3
	s := serve(t, formatDir(t), Options{MaxConnections: max})
	var cs []*rawClient
	for range max {
		c := dial(t, s.Addr())
		c.register(testCluster)
		cs = append(cs, c)
	}
	over := dial(t, s.Addr())
	h, e := over.expectError()
	if e.Code != core.ClusterBusy.Code || !e.Retryable || h.ClientID != 0 || h.Request != 0 {
		t.Fatalf("over the limit: %+v %v", h, e)
	}
	over.expectClosed()
	cs[0].ping()

	cs[0].nc.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := dial(t, s.Addr())
		c.send(core.Header{Request: 7, Type: core.MsgRegister}, core.AppendRegister(nil, testCluster))
		if h, _ := c.recv(); h.Type == core.MsgRegisterReply {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no connection was served after one of the others closed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.stop(t)
}

// A frame that fails its checks is answered with a MsgError of its code,
// echoing its header where it has one, before the connection closes.
func TestBadFrameIsAnsweredBeforeTheClose(t *testing.T) {
	s := serve(t, formatDir(t), Options{})
	good := dial(t, s.Addr())
	good.register(testCluster)

	frame := core.AppendFrame(nil, core.Header{ClientID: 5, Request: 77, Type: core.MsgRegister}, core.AppendRegister(nil, testCluster))
	badSum := append([]byte(nil), frame...)
	badSum[len(badSum)-1] ^= 1
	badVersion := append([]byte(nil), frame...)
	badVersion[17] = 9
	binary.LittleEndian.PutUint32(badVersion[len(frame)-4:], crc32.Checksum(badVersion[4:len(frame)-4], crc32.MakeTable(crc32.Castagnoli)))
	for _, tc := range []struct {
		name   string
		bytes  []byte
		code   core.CodeInfo
		echoed bool
	}{
		{"checksum", badSum, core.ChecksumMismatch, true},
		{"version", badVersion, core.MalformedRequest, true},
		{"length", []byte{0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0}, core.MalformedRequest, false},
		{"short length", []byte{3, 0, 0, 0}, core.MalformedRequest, false},
	} {
		bad := dial(t, s.Addr())
		// A good frame before it is served first.
		bad.send(core.Header{Request: 1, Type: core.MsgRegister}, core.AppendRegister(nil, testCluster))
		if h, _ := bad.recv(); h.Type != core.MsgRegisterReply {
			t.Fatalf("%s: %v", tc.name, h.Type)
		}
		if _, err := bad.nc.Write(tc.bytes); err != nil {
			t.Fatal(err)
		}
		h, e := bad.expectError()
		if e.Code != tc.code.Code || (tc.echoed && (h.ClientID != 5 || h.Request != 77)) {
			t.Fatalf("%s: %+v %v, want code %d", tc.name, h, e, tc.code.Code)
		}
		t.Logf("%s: %v", tc.name, e)
		bad.expectClosed()
		good.ping()
	}
	s.stop(t)
}

// Above the read budget a connection that starts a frame waits (it reads
// nothing more), and goes on once bytes are given back; a frame that needs
// its buffer grown beyond the budget gets CLUSTER_BUSY and a close.
func TestReadBudgetMakesReadersWait(t *testing.T) {
	s := serve(t, formatDir(t), Options{ReadBudgetBytes: 5 * readChunk})
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: budget in use %d, waiting %d", what, s.budget.inUse(), s.budget.waiting.Load())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	g := dial(t, s.Addr())
	g.register(testCluster)
	waitFor("the registered client gives its chunk back", func() bool { return s.budget.inUse() == 0 })

	x := dial(t, s.Addr()) // 100 KiB of a 1 MiB frame: a buffer grown to four chunks
	x.nc.Write(lengthPrefix(1<<20, 100<<10))
	waitFor("x holds four chunks", func() bool { return s.budget.inUse() == 4*readChunk })
	z := dial(t, s.Addr()) // 1,000 bytes of another: one chunk; the budget is spent
	z.nc.Write(lengthPrefix(1<<20, 1000))
	waitFor("z holds a chunk", func() bool { return s.budget.inUse() == 5*readChunk })

	g.sendRequest(core.OpPing, nil)
	waitFor("g waits for the budget", func() bool { return s.budget.waiting.Load() == 1 })
	g.nc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, _, err := core.ReadFrame(g.br, nil); err == nil {
		t.Fatal("answered while the read budget was spent")
	}
	g.br.Reset(g.nc)

	// z's frame needs its chunk grown: refused, and its chunk given back.
	z.nc.Write(make([]byte, 70<<10))
	if _, e := z.expectError(); e.Code != core.ClusterBusy.Code {
		t.Fatalf("a frame the budget cannot grow: %v", e)
	}
	z.expectClosed()
	h, p := g.recv()
	if h.Type != core.MsgReply || h.Request != g.req {
		t.Fatalf("after the wait: %v %s", h.Type, errText(p))
	}
	x.nc.Close()
	waitFor("all given back", func() bool { return s.budget.inUse() == 0 })
	g.ping()
	s.stop(t)
}

// Bad frames are logged at most once a second, the next line counting
// those held back.
func TestBadFrameLogIsRateLimited(t *testing.T) {
	obs, logs := observer.New(zap.WarnLevel)
	s := serve(t, formatDir(t), Options{Logger: zap.New(obs)})
	bad := func() {
		c := dial(t, s.Addr())
		c.nc.Write([]byte{3, 0, 0, 0})
		c.expectError()
		c.expectClosed()
	}
	const n = 20
	start := time.Now()
	for range n {
		bad()
	}
	lines := logs.FilterMessage("bad frame; closing the connection").All()
	if elapsed := time.Since(start); elapsed < time.Second && len(lines) != 1 {
		t.Fatalf("%d bad frames in %v: %d log lines, want 1", n, elapsed, len(lines))
	}
	time.Sleep(1100 * time.Millisecond)
	bad()
	lines = logs.FilterMessage("bad frame; closing the connection").All()
	held := 0
	for _, l := range lines {
		held += int(l.ContextMap()["suppressed"].(int64))
	}
	if len(lines)+held != n+1 {
		t.Fatalf("%d lines, %d held back, for %d bad frames", len(lines), held, n+1)
	}
	t.Logf("%d bad frames: %d lines, the last counting %v held back", n+1, len(lines), lines[len(lines)-1].ContextMap()["suppressed"])
	s.stop(t)
}

// A connection with a request the replica has not answered is not idle,
// however long the answer takes.
func TestConnectionWaitingForAnAnswerIsNotIdle(t *testing.T) {
	const idle = 200 * time.Millisecond
	s := serve(t, formatDir(t), Options{IdleTimeout: idle})
	c := dial(t, s.Addr())
	c.register(testCluster)
	s.mu.Lock()
	var conn *conn
	for lc := range s.live {
		conn = lc
	}
	s.mu.Unlock()
	conn.inFlight.Add(1) // as if a request were being answered
	c.nc.SetReadDeadline(time.Now().Add(3 * idle))
	var b [1]byte
	if _, err := c.nc.Read(b[:]); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("closed with a request in flight: %v", err)
	}
	conn.inFlight.Add(-1)
	took := c.closedWithin(10 * time.Second)
	t.Logf("closed %v after its last request was answered (idle timeout %v)", took, idle)
	s.stop(t)
}
