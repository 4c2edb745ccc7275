package io

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	stdio "io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/io/store"
)

var testCluster = core.Uint128{Hi: 0x0123456789abcdef, Lo: 0xfedcba9876543210}

// formatDir makes a formatted data directory for replica 0 of 1.
func formatDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	if err := Format(dir, ClusterInfo{Cluster: testCluster, ReplicaIndex: 0, ReplicaCount: 1}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// running is a Server being run by the test.
type running struct {
	*Server
	runErr chan error
}

// serve opens dir on 127.0.0.1:0 and runs it until the test ends or stop.
func serve(t *testing.T, dir string, opts Options) *running {
	t.Helper()
	opts.Addresses = []string{"127.0.0.1:0"}
	return serveWith(t, dir, opts, nil)
}

// serveWith opens dir with opts (opts.Addresses set), lets prepare adjust
// the server before it runs, and runs it until the test ends or stop.
func serveWith(t *testing.T, dir string, opts Options, prepare func(*Server)) *running {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if prepare != nil {
		prepare(s)
	}
	r := &running{Server: s, runErr: make(chan error, 1)}
	go func() { r.runErr <- s.Run(context.Background()) }()
	t.Cleanup(func() { s.Close() })
	return r
}

// stop closes the server and checks that Run ended cleanly.
func (r *running) stop(t *testing.T) {
	t.Helper()
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-r.runErr:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after Close")
	}
}

// rawClient speaks the binary protocol with raw frames.
type rawClient struct {
	t       *testing.T
	nc      net.Conn
	br      *bufio.Reader
	session uint64
	req     uint32
}

func dial(t *testing.T, addr net.Addr) *rawClient {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr.String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawClient{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (c *rawClient) send(h core.Header, payload []byte) {
	c.t.Helper()
	c.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.nc.Write(core.AppendFrame(nil, h, payload)); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func (c *rawClient) recv() (core.Header, []byte) {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	h, p, err := core.ReadFrame(c.br, nil)
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	return h, p
}

func (c *rawClient) register(cluster core.Uint128) uint64 {
	c.t.Helper()
	c.req++
	c.send(core.Header{Request: c.req, Type: core.MsgRegister}, core.AppendRegister(nil, cluster))
	h, p := c.recv()
	if h.Type != core.MsgRegisterReply {
		c.t.Fatalf("register: got %v: %s", h.Type, errText(p))
	}
	s, err := core.DecodeRegisterReply(p)
	if err != nil {
		c.t.Fatal(err)
	}
	c.session = s
	return s
}

func errText(p []byte) string {
	if e, err := core.DecodeErrorMessage(p); err == nil {
		return e.Error()
	}
	return ""
}

func (c *rawClient) sendRequest(op core.Operation, req any) {
	c.t.Helper()
	p, err := core.AppendRequestMessage(nil, op, req)
	if err != nil {
		c.t.Fatal(err)
	}
	c.req++
	c.send(core.Header{ClientID: c.session, Request: c.req, Type: core.MsgRequest}, p)
}

// call sends one request and returns the reply value; an error reply fails
// the test.
func (c *rawClient) call(op core.Operation, req any) any {
	c.t.Helper()
	c.sendRequest(op, req)
	h, p := c.recv()
	if h.Type != core.MsgReply || h.Request != c.req {
		c.t.Fatalf("%v: got %v for request %d: %s", op, h.Type, h.Request, errText(p))
	}
	_, v, opErr, err := core.DecodeReplyMessage(p)
	if err != nil || opErr != nil {
		c.t.Fatalf("%v: %v %v", op, err, opErr)
	}
	return v
}

func entity(i int) core.Uint128 { return core.Uint128{Hi: 0xe, Lo: uint64(i) + 1} }

func event(i int) core.GeoEvent {
	return core.GeoEvent{EntityID: entity(i), LatNano: 52_000_000_000 + int64(i)*1000, LonNano: 13_000_000_000 + int64(i)*1000}
}

func (c *rawClient) insert(evs ...core.GeoEvent) {
	c.t.Helper()
	r := c.call(core.OpInsert, &core.InsertRequest{Events: evs}).(*core.InsertReply)
	if !r.Committed {
		c.t.Fatalf("insert not committed: %+v", r.Results)
	}
}

func (c *rawClient) latest(i int) core.LatestResult {
	c.t.Helper()
	id := entity(i)
	return *c.call(core.OpGetLatest, &id).(*core.LatestResult)
}

func (c *rawClient) checkLatest(i int) {
	c.t.Helper()
	got, want := c.latest(i), event(i)
	if !got.Found || got.Event.LatNano != want.LatNano || got.Event.LonNano != want.LonNano {
		c.t.Fatalf("entity %d: got %+v, want the position of %+v", i, got, want)
	}
}

func (c *rawClient) ping() {
	c.t.Helper()
	if r := c.call(core.OpPing, nil).(*core.PingReply); !r.Pong {
		c.t.Fatal("no pong")
	}
}

// expectClosed reads until the server closes the connection.
func (c *rawClient) expectClosed() {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := stdio.Copy(stdio.Discard, c.br)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.t.Fatal("the server did not close the connection")
	}
}

func TestDataSurvivesRestart(t *testing.T) {
	dir := formatDir(t)
	s := serve(t, dir, Options{})
	c := dial(t, s.Addr())
	session := c.register(testCluster)
	c.insert(event(1), event(2))
	c.checkLatest(1)
	if got := c.latest(99); got.Found {
		t.Fatalf("unknown entity found: %+v", got)
	}
	s.stop(t)

	s = serve(t, dir, Options{})
	c = dial(t, s.Addr())
	c.session = session // the session is in the log: it survives too
	c.checkLatest(1)
	c.checkLatest(2)
	c.register(testCluster)
	c.insert(event(3))
	c.checkLatest(3)
	s.stop(t)
}

func TestWrongClusterIsRefused(t *testing.T) {
	s := serve(t, formatDir(t), Options{})
	c := dial(t, s.Addr())
	c.send(core.Header{Request: 1, Type: core.MsgRegister}, core.AppendRegister(nil, core.Uint128{Lo: 7}))
	h, p := c.recv()
	e, err := core.DecodeErrorMessage(p)
	if h.Type != core.MsgError || err != nil || e.Code != core.WrongCluster.Code {
		t.Fatalf("got %v %v %v", h.Type, e, err)
	}
	s.stop(t)
}

// Snapshots and log compaction on small segments, then recovery from the
// snapshot plus the log after it.
func TestRecoveryFromSnapshotAndLog(t *testing.T) {
	dir := formatDir(t)
	opts := Options{SegmentBytes: 512}
	opts.Replica.SnapshotEvery = 5
	const n = 40
	writeAndStop(t, dir, opts, n)

	snaps, _ := filepath.Glob(filepath.Join(dir, "snapshot-*.snap"))
	if len(snaps) == 0 || len(snaps) > 2 {
		t.Fatalf("snapshots: %v", snaps)
	}
	if _, err := os.Stat(filepath.Join(dir, "log-00000000000000000001.seg")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the first segment was not compacted away: %v", err)
	}
	checkAndStop(t, dir, opts, n)
}

// writeAndStop serves dir with opts, inserts events 0..n-1 (one request
// each) and stops the server.
func writeAndStop(t *testing.T, dir string, opts Options, n int) {
	t.Helper()
	withClient(t, dir, opts, func(c *rawClient) {
		for i := range n {
			c.insert(event(i))
		}
	})
}

// checkAndStop serves dir with opts, checks that events 0..n-1 are the
// latest positions, and stops the server.
func checkAndStop(t *testing.T, dir string, opts Options, n int) {
	t.Helper()
	withClient(t, dir, opts, func(c *rawClient) {
		for i := range n {
			c.checkLatest(i)
		}
	})
}

// withClient serves dir with opts, runs f with a registered client and
// stops the server.
func withClient(t *testing.T, dir string, opts Options, f func(c *rawClient)) {
	t.Helper()
	s := serve(t, dir, opts)
	c := dial(t, s.Addr())
	c.register(testCluster)
	f(c)
	s.stop(t)
}

// TestRecoveredLogIsAppliedInParts: a restart's recovered log (here the
// whole of it: no snapshot) is applied a few entries per loop input
// (MaxApplyEntries), every write is there afterwards, and the log says
// when the replay starts and when it is done.
func TestRecoveredLogIsAppliedInParts(t *testing.T) {
	dir := formatDir(t)
	const n = 40
	writeAndStop(t, dir, Options{}, n)
	obs, logs := observer.New(zap.InfoLevel)
	opts := Options{Logger: zap.New(obs)}
	opts.Replica.MaxApplyEntries = 3
	checkAndStop(t, dir, opts, n)
	before := logs.FilterMessage("applying the log recovered after the snapshot").All()
	if len(before) != 1 || before[0].ContextMap()["entries"].(int64) < n {
		t.Fatalf("replay announced: %v, want one line for at least %d entries", before, n)
	}
	if after := logs.FilterMessage("applied the recovered log").All(); len(after) != 1 || after[0].ContextMap()["entries"] != before[0].ContextMap()["entries"] {
		t.Fatalf("replay: announced %v, done %v", before, after)
	}
}

func TestTornTailIsTruncatedAndLogged(t *testing.T) {
	dir := formatDir(t)
	s := serve(t, dir, Options{})
	c := dial(t, s.Addr())
	c.register(testCluster)
	c.insert(event(1))
	s.stop(t)

	seg := filepath.Join(dir, "log-00000000000000000001.seg")
	f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{200, 0, 0, 0, 1, 2, 3}) // half a record header: a crash mid-write
	f.Close()

	obs, logs := observer.New(zap.InfoLevel)
	s = serve(t, dir, Options{Logger: zap.New(obs)})
	if logs.FilterMessageSnippet("torn write").Len() != 1 {
		t.Fatalf("no torn-tail warning in %v", logs.All())
	}
	c = dial(t, s.Addr())
	c.register(testCluster)
	c.checkLatest(1)
	s.stop(t)
}

func TestCorruptLogStopsStartupNamingFileAndOffset(t *testing.T) {
	dir := formatDir(t)
	s := serve(t, dir, Options{})
	c := dial(t, s.Addr())
	c.register(testCluster)
	c.insert(event(1))
	c.insert(event(2))
	s.stop(t)

	seg := filepath.Join(dir, "log-00000000000000000001.seg")
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	b[store.SegmentHeaderSize+30] ^= 0xff // inside the first record's data, with valid records after it
	if err := os.WriteFile(seg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir, Options{Addresses: []string{"127.0.0.1:0"}})
	if err == nil || !strings.Contains(err.Error(), seg) || !strings.Contains(err.Error(), "at byte "+strconv.Itoa(store.SegmentHeaderSize)) {
		t.Fatalf("Open: %v", err)
	}
	t.Log(err)
}

func TestOpenChecksAddressCount(t *testing.T) {
	_, err := Open(formatDir(t), Options{Addresses: []string{"127.0.0.1:0", "127.0.0.1:0"}})
	if err == nil || !strings.Contains(err.Error(), "1 replica") {
		t.Fatalf("Open: %v", err)
	}
	_, err = Open(t.TempDir(), Options{Addresses: []string{"127.0.0.1:0"}})
	if err == nil || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "format") {
		t.Fatalf("Open of an unformatted directory: %v", err)
	}
}

func TestBadFrameClosesOnlyThatConnection(t *testing.T) {
	s := serve(t, formatDir(t), Options{})
	good := dial(t, s.Addr())
	good.register(testCluster)

	frame := core.AppendFrame(nil, core.Header{Type: core.MsgRegister}, core.AppendRegister(nil, testCluster))
	badSum := append([]byte(nil), frame...)
	badSum[len(badSum)-1] ^= 1
	badVersion := append([]byte(nil), frame...)
	badVersion[17] = 9 // with a checksum that matches
	binary.LittleEndian.PutUint32(badVersion[len(frame)-4:], crc32.Checksum(badVersion[4:len(frame)-4], castagnoli))
	badLength := []byte{0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0}
	for name, bytes := range map[string][]byte{"checksum": badSum, "version": badVersion, "length": badLength} {
		bad := dial(t, s.Addr())
		if _, err := bad.nc.Write(bytes); err != nil {
			t.Fatal(err)
		}
		bad.expectClosed()
		t.Logf("%s: closed", name)
		good.ping()
	}
	s.stop(t)
}

// A replica-to-replica frame on a connection that did not open with a peer
// hello closes that connection only.
func TestReplicaMessageWithoutHelloClosesTheConnection(t *testing.T) {
	s := serve(t, formatDir(t), Options{})
	good := dial(t, s.Addr())
	good.register(testCluster)
	for _, first := range []bool{true, false} {
		c := dial(t, s.Addr())
		if !first {
			c.register(testCluster)
		}
		c.send(core.Header{ClientID: 0, Type: core.MsgReplicaFirst}, []byte("vote for me"))
		c.expectClosed()
		good.ping()
	}
	s.stop(t)
}

// A client that sends requests but never reads the replies is disconnected
// once its queue fills; another client is served all along.
func TestSlowClientIsDisconnectedOthersAreServed(t *testing.T) {
	s := serve(t, formatDir(t), Options{SendQueueBytes: 256 << 10, SendQueueFrames: 64})
	fast := dial(t, s.Addr())
	fast.register(testCluster)
	evs := make([]core.GeoEvent, 1000)
	for i := range evs {
		evs[i] = event(i)
	}
	fast.insert(evs...)

	slow := dial(t, s.Addr())
	if tc, ok := slow.nc.(*net.TCPConn); ok {
		tc.SetReadBuffer(4096)
	}
	slow.register(testCluster)
	const requests = 2000
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		p, _ := core.AppendRequestMessage(nil, core.OpQueryLatest, &core.LatestQuery{Page: core.Page{Limit: 1000}})
		for i := range requests {
			f := core.AppendFrame(nil, core.Header{ClientID: slow.session, Request: uint32(100 + i), Type: core.MsgRequest}, p)
			slow.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if _, err := slow.nc.Write(f); err != nil {
				return // the server closed it
			}
		}
	}()

	// The fast client keeps getting answers while the slow one piles up.
	for range 20 {
		start := time.Now()
		fast.ping()
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("a ping took %v", d)
		}
		time.Sleep(5 * time.Millisecond)
	}
	wg.Wait()

	// Now read the slow connection: it ends before all replies arrived.
	n := 0
	slow.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var err error
	for {
		if _, _, err = core.ReadFrame(slow.br, nil); err != nil {
			break
		}
		n++
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the slow connection was not closed (%d replies read)", n)
	}
	if n >= requests {
		t.Fatalf("all %d replies arrived", n)
	}
	if !errors.Is(err, stdio.EOF) && !errors.Is(err, stdio.ErrUnexpectedEOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Logf("slow connection ended with %v", err)
	}
	t.Logf("slow connection closed after %d of %d replies", n, requests)
	fast.ping()
	s.stop(t)
}

func TestCloseWithoutRun(t *testing.T) {
	s, err := Open(formatDir(t), Options{Addresses: []string{"127.0.0.1:0"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Run(context.Background()); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Run after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestRunStopsWithContext(t *testing.T) {
	s, err := Open(formatDir(t), Options{Addresses: []string{"127.0.0.1:0"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	c := dial(t, s.Addr())
	c.register(testCluster)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop")
	}
	c.expectClosed()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestClusterFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	want := ClusterInfo{Cluster: testCluster, ReplicaIndex: 0, ReplicaCount: 1}
	if err := Format(dir, want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadClusterFile(dir)
	if err != nil || got != want {
		t.Fatalf("got %+v, %v", got, err)
	}
	if err := Format(dir, want); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("Format of a non-empty directory: %v", err)
	}
	for _, good := range []ClusterInfo{
		{Cluster: testCluster, ReplicaIndex: 2, ReplicaCount: 3},
		{Cluster: testCluster, ReplicaIndex: 4, ReplicaCount: 5},
	} {
		d := t.TempDir()
		if err := Format(d, good); err != nil {
			t.Fatalf("Format(%+v): %v", good, err)
		}
		if got, err := ReadClusterFile(d); err != nil || got != good {
			t.Fatalf("got %+v, %v", got, err)
		}
	}
	for _, bad := range []ClusterInfo{
		{Cluster: testCluster, ReplicaCount: 2},
		{Cluster: testCluster, ReplicaCount: 4},
		{Cluster: testCluster, ReplicaCount: 7},
		{Cluster: testCluster, ReplicaCount: 0},
		{Cluster: testCluster, ReplicaIndex: 1, ReplicaCount: 1},
		{Cluster: testCluster, ReplicaIndex: 3, ReplicaCount: 3},
		{ReplicaCount: 1},
	} {
		err := Format(t.TempDir(), bad)
		if err == nil {
			t.Fatalf("Format(%+v) succeeded", bad)
		}
		if bad.ReplicaCount%2 == 0 && !strings.Contains(err.Error(), "1 (no fault tolerance), 3 (survives one failed replica) or 5") {
			t.Fatalf("Format(%+v): %v", bad, err)
		}
	}
	path := filepath.Join(dir, ClusterFileName)
	b, _ := os.ReadFile(path)
	b[strings.Index(string(b), "replica 0")+8] = '1'
	os.WriteFile(path, b, 0o644)
	if _, err := ReadClusterFile(dir); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("edited cluster file: %v", err)
	}
}

func TestSendQueue(t *testing.T) {
	q := sendQueue{wake: make(chan struct{}, 1), maxBytes: 10, maxFrames: 3}
	big := make([]byte, 100)
	if q.push(big) != pushed {
		t.Fatal("an empty queue takes any frame")
	}
	if q.push([]byte{1}) != queueFull {
		t.Fatal("over the byte bound")
	}
	fs, ok := q.take(nil)
	if !ok || len(fs) != 1 {
		t.Fatal(fs, ok)
	}
	for range 3 {
		if q.push([]byte{1}) != pushed {
			t.Fatal("refused")
		}
	}
	if q.push([]byte{1}) != queueFull {
		t.Fatal("over the frame bound")
	}
	q.take(nil)
	// A frame in pieces counts once against maxFrames and by all its bytes
	// against maxBytes; it is queued whole or not at all.
	if q.push([]byte{1, 2}, []byte{3}, []byte{4, 5, 6}) != pushed || q.push([]byte{7}, []byte{8}) != pushed {
		t.Fatal("frames in pieces refused")
	}
	if q.push(make([]byte, 3), make([]byte, 2)) != queueFull {
		t.Fatal("a frame whose pieces pass the byte bound")
	}
	if q.push([]byte{9}) != pushed || q.push([]byte{10}) != queueFull {
		t.Fatal("three frames in six pieces")
	}
	if fs, _ := q.take(nil); !bytes.Equal(bytes.Join(fs, nil), []byte{1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Fatalf("took %v", fs)
	}
	q.close()
	if q.push([]byte{1}) != queueClosed {
		t.Fatal("closed")
	}
	if _, ok := q.take(nil); ok {
		t.Fatal("take after close")
	}

	// A client connection's queue may grow past maxBytes, up to hardBytes,
	// while its writer keeps taking frames; not when the writer stalls.
	q = sendQueue{wake: make(chan struct{}, 1), maxBytes: 10, maxFrames: 100, hardBytes: 30}
	q.push([]byte{1})
	q.take(nil) // the writer drains: lastTake is now
	for i := range 6 {
		if q.push(make([]byte, 5)) != pushed {
			t.Fatalf("frame %d refused while the writer drains", i)
		}
	}
	if q.push([]byte{1}) != queueFull {
		t.Fatal("over hardBytes")
	}
	q.take(nil)
	q.lastTake = time.Now().Add(-2 * drainGrace) // the writer stalled
	for range 2 {
		if q.push(make([]byte, 5)) != pushed {
			t.Fatal("within maxBytes")
		}
	}
	if q.push([]byte{1}) != queueFull {
		t.Fatal("over maxBytes with a stalled writer")
	}
}

// TestCloseRightAfterAClientLeaves: a client that disconnects just as the
// server shuts down must not leave Close waiting for that connection's
// writer (its close event can arrive after the loop has stopped).
func TestCloseRightAfterAClientLeaves(t *testing.T) {
	for i := 0; i < 20; i++ {
		r := serve(t, formatDir(t), Options{})
		c := dial(t, r.Addr())
		c.register(testCluster)
		c.nc.Close()
		done := make(chan error, 1)
		go func() { done <- r.Close() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("iteration %d: Close hangs after a client left", i)
		}
	}
}

// Frames that arrive together (one write of many sessions' requests, as a
// client that shares its connection sends them) reach the loop together
// (netEvent.more) and are each answered: small ones batched behind the
// first, large ones read on their own. A bad frame among them closes the
// connection after the good ones before it are answered.
func TestFramesArrivingTogetherAreEachAnswered(t *testing.T) {
	s := serve(t, formatDir(t), Options{})
	c := dial(t, s.Addr())
	const n = 40
	var burst []byte
	for k := 1; k <= n; k++ {
		burst = core.AppendFrame(burst, core.Header{Request: uint32(k), Type: core.MsgRegister}, core.AppendRegister(nil, testCluster))
	}
	if _, err := c.nc.Write(burst); err != nil {
		t.Fatal(err)
	}
	sessions := map[uint32]uint64{} // by register nonce
	for range n {
		h, p := c.recv()
		id, err := core.DecodeRegisterReply(p)
		if h.Type != core.MsgRegisterReply || err != nil {
			t.Fatalf("register: got %v: %s", h.Type, errText(p))
		}
		sessions[h.Request] = id
	}
	if len(sessions) != n {
		t.Fatalf("%d sessions for %d registers", len(sessions), n)
	}

	// Session k inserts k events; the first of them 1,000 (a 128 KB
	// frame, more than the batch's room).
	burst = burst[:0]
	next := 0
	for k := 1; k <= n; k++ {
		count := k
		if k == 1 {
			count = 1000
		}
		var evs []core.GeoEvent
		for range count {
			evs = append(evs, event(next))
			next++
		}
		p, err := core.AppendRequestMessage(nil, core.OpInsert, &core.InsertRequest{Events: evs})
		if err != nil {
			t.Fatal(err)
		}
		burst = core.AppendFrame(burst, core.Header{ClientID: sessions[uint32(k)], Request: 1, Type: core.MsgRequest}, p)
	}
	if _, err := c.nc.Write(burst); err != nil {
		t.Fatal(err)
	}
	answered := map[uint64]bool{}
	for range n {
		h, p := c.recv()
		_, v, opErr, err := core.DecodeReplyMessage(p)
		if h.Type != core.MsgReply || err != nil || opErr != nil || !v.(*core.InsertReply).Committed {
			t.Fatalf("insert of session %d: %v %v %v %s", h.ClientID, h.Type, err, opErr, errText(p))
		}
		answered[h.ClientID] = true
	}
	if len(answered) != n {
		t.Fatalf("%d sessions answered, want %d", len(answered), n)
	}
	c.session = sessions[1]
	c.req = 1
	for _, i := range []int{0, 999, 1000, next - 1} {
		c.checkLatest(i)
	}

	// Two inserts, then a frame whose checksum fails: the connection
	// closes (its replies may be lost), but the inserts were handed over.
	burst = burst[:0]
	for k := 2; k <= 3; k++ {
		p, err := core.AppendRequestMessage(nil, core.OpInsert, &core.InsertRequest{Events: []core.GeoEvent{event(next + k)}})
		if err != nil {
			t.Fatal(err)
		}
		burst = core.AppendFrame(burst, core.Header{ClientID: sessions[uint32(k)], Request: 2, Type: core.MsgRequest}, p)
	}
	burst = core.AppendFrame(burst, core.Header{ClientID: sessions[5], Request: 2, Type: core.MsgRequest}, []byte{1, 2, 3})
	burst[len(burst)-1] ^= 1
	if _, err := c.nc.Write(burst); err != nil {
		t.Fatal(err)
	}
	c.expectClosed()
	other := dial(t, s.Addr())
	other.register(testCluster)
	for k := 2; k <= 3; k++ {
		deadline := time.Now().Add(10 * time.Second)
		for !other.latest(next + k).Found {
			if time.Now().After(deadline) {
				t.Fatalf("the insert of session %d, before the bad frame, was not applied", k)
			}
			time.Sleep(time.Millisecond)
		}
	}
	s.stop(t)
}

// TestRepliesLendTheirMemoryOnlyOnceWritten: the memory of a read's reply
// (core.IO.SendReply) comes back to the loop once the connection's writer
// has written it, and later replies are encoded into it; a write's reply,
// which its session keeps for a retry, never does. A retry of the write
// after many reads then still gets its reply intact.
func TestRepliesLendTheirMemoryOnlyOnceWritten(t *testing.T) {
	s := serve(t, formatDir(t), Options{})
	c := dial(t, s.Addr())
	c.register(testCluster)
	const n = 50
	var evs []core.GeoEvent
	for i := range n {
		evs = append(evs, event(i))
	}
	insertPayload, err := core.AppendRequestMessage(nil, core.OpInsert, &core.InsertRequest{Events: evs})
	if err != nil {
		t.Fatal(err)
	}
	c.req++
	insertReq := c.req
	c.send(core.Header{ClientID: c.session, Request: insertReq, Type: core.MsgRequest}, insertPayload)
	h, first := c.recv()
	if h.Type != core.MsgReply {
		t.Fatalf("insert: %v: %s", h.Type, errText(first))
	}
	first = bytes.Clone(first)
	for round := range 3 {
		for i := range n {
			c.checkLatest(i)
		}
		if round == 0 {
			// The writer hands a reply's memory back just after writing it,
			// which may be after the client has read it.
			deadline := time.Now().Add(5 * time.Second)
			for len(s.replyBufs) == 0 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if len(s.replyBufs) == 0 {
				t.Fatal("no written reply's memory came back")
			}
		}
	}
	// The retry is answered from the session's cache.
	c.send(core.Header{ClientID: c.session, Request: insertReq, Type: core.MsgRequest}, insertPayload)
	h, again := c.recv()
	if h.Type != core.MsgReply || h.Request != insertReq || !bytes.Equal(again, first) {
		t.Fatalf("retried insert: %v request %d, %d bytes, want the first reply's %d", h.Type, h.Request, len(again), len(first))
	}
}
