package main

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/geoevent/geoevent/core"

	"github.com/geoevent/geoevent/internal/testproc"
)

func TestMain(m *testing.M) { testproc.Main(m, ".") }

// runCmd runs the binary to completion and returns its exit code and output.
func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return testproc.Run(t, nil, "replica", args...)
}

// rawClient speaks the binary protocol with raw frames.
type rawClient struct {
	t       *testing.T
	nc      net.Conn
	br      *bufio.Reader
	session uint64
	req     uint32
}

// dial connects to addr, retrying while the child starts.
func dial(t *testing.T, c *testproc.Proc, addr string) *rawClient {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		nc, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			t.Cleanup(func() { nc.Close() })
			return &rawClient{t: t, nc: nc, br: bufio.NewReader(nc)}
		}
		select {
		case <-c.Done():
			t.Fatalf("the server exited; stderr:\n%s", c.Stderr())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("cannot connect to %s: %v; stderr:\n%s", addr, err, c.Stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *rawClient) roundTrip(h core.Header, payload []byte) (core.Header, []byte) {
	c.t.Helper()
	c.nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.nc.Write(core.AppendFrame(nil, h, payload)); err != nil {
		c.t.Fatal(err)
	}
	rh, p, err := core.ReadFrame(c.br, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	if rh.Type == core.MsgError {
		e, _ := core.DecodeErrorMessage(p)
		c.t.Fatalf("error reply: %v", e)
	}
	return rh, p
}

func (c *rawClient) register(cluster core.Uint128) {
	c.t.Helper()
	c.req++
	_, p := c.roundTrip(core.Header{Request: c.req, Type: core.MsgRegister}, core.AppendRegister(nil, cluster))
	s, err := core.DecodeRegisterReply(p)
	if err != nil {
		c.t.Fatal(err)
	}
	c.session = s
}

func (c *rawClient) call(op core.Operation, req any) any {
	c.t.Helper()
	c.req++
	payload, err := core.AppendRequestMessage(nil, op, req)
	if err != nil {
		c.t.Fatal(err)
	}
	_, p := c.roundTrip(core.Header{ClientID: c.session, Request: c.req, Type: core.MsgRequest}, payload)
	_, v, opErr, err := core.DecodeReplyMessage(p)
	if err != nil || opErr != nil {
		c.t.Fatalf("%v: %v %v", op, err, opErr)
	}
	return v
}

var testEntity = core.Uint128{Hi: 1, Lo: 2}

func (c *rawClient) insert() {
	c.t.Helper()
	ev := core.GeoEvent{EntityID: testEntity, LatNano: 48_858_000_000, LonNano: 2_294_000_000}
	if r := c.call(core.OpInsert, &core.InsertRequest{Events: []core.GeoEvent{ev}}).(*core.InsertReply); !r.Committed {
		c.t.Fatalf("insert: %+v", r)
	}
}

func (c *rawClient) checkLatest() {
	c.t.Helper()
	id := testEntity
	r := c.call(core.OpGetLatest, &id).(*core.LatestResult)
	if !r.Found || r.Event.LatNano != 48_858_000_000 || r.Event.LonNano != 2_294_000_000 {
		c.t.Fatalf("get latest: %+v", r)
	}
}

func TestFormatStartStopRestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	code, out, errs := runCmd(t, "format", "--cluster", "123456789", "--replica", "0", "--replica-count", "1", "--data", dir)
	if code != 0 {
		t.Fatalf("format: exit %d\n%s", code, errs)
	}
	cluster := core.Uint128{Lo: 123456789}
	if !strings.Contains(out, cluster.String()) {
		t.Fatalf("format output does not name the cluster: %q", out)
	}

	addr := testproc.FreeAddr(t)
	t.Setenv("GOMAXPROCS", "1") // the child's: its log says how many processors it runs on
	srv := testproc.Start(t, "replica", "start", "--data", dir, "--addresses", addr)
	c := dial(t, srv, addr)
	c.register(cluster)
	c.insert()
	c.checkLatest()
	srv.Stop(syscall.SIGTERM)
	// start logs JSON, one object a line.
	var processors any
	for _, line := range strings.Split(strings.TrimSpace(srv.Stderr()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil || m["msg"] == nil {
			t.Fatalf("not a JSON log line: %q", line)
		}
		if m["msg"] == "listening" {
			processors = m["processors"]
		}
	}
	if processors != 1.0 {
		t.Fatalf("the listening line gives processors %v, want 1 (GOMAXPROCS=1):\n%s", processors, srv.Stderr())
	}

	srv = testproc.Start(t, "replica", "start", "--data", dir, "--addresses", addr, "--http", "127.0.0.1:0")
	c = dial(t, srv, addr)
	c.register(cluster)
	c.checkLatest()
	// --http serves the JSON API, which sees the data written before.
	base := "http://" + httpAddrFromLog(t, srv)
	if r := getJSON(t, base+"/entity/"+testEntity.String()); r["found"] != true {
		t.Fatalf("GET /entity over HTTP: %v", r)
	}
	srv.Stop(syscall.SIGINT)
}

func TestFormatRefusesNonEmptyDir(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "precious"), []byte("x"), 0o644)
	code, _, errs := runCmd(t, "format", "--cluster", "6ba7b810-9dad-11d1-80b4-00c04fd430c8", "--replica", "0", "--replica-count", "1", "--data", dir)
	if code == 0 || !strings.Contains(errs, "not empty") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "precious")); err != nil || string(b) != "x" {
		t.Fatal("format touched the directory")
	}
}

func TestFormatFlagErrors(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cluster", "1", "--replica", "0", "--replica-count", "2", "--data", dir}, "it must be 1 (no fault tolerance), 3 (survives one failed replica) or 5"},
		{[]string{"--cluster", "1", "--replica", "3", "--replica-count", "3", "--data", dir}, "replica index 3 is out of range for a replica count of 3"},
		{[]string{"--cluster", "0", "--replica", "0", "--replica-count", "1", "--data", dir}, "zero"},
		{[]string{"--cluster", "not-an-id", "--replica", "0", "--replica-count", "1", "--data", dir}, "--cluster"},
		{[]string{"--cluster", "1", "--replica-count", "1", "--data", dir}, "--replica is required"},
	} {
		code, _, errs := runCmd(t, append([]string{"format"}, tc.args...)...)
		if code == 0 || !strings.Contains(errs, tc.want) {
			t.Errorf("format %v: exit %d, stderr %q (want %q)", tc.args, code, errs, tc.want)
		}
	}
}

func TestStartChecksAddressCount(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if code, _, errs := runCmd(t, "format", "--cluster", "7", "--replica", "0", "--replica-count", "1", "--data", dir); code != 0 {
		t.Fatal(errs)
	}
	code, _, errs := runCmd(t, "start", "--data", dir, "--addresses", "127.0.0.1:1,127.0.0.1:2")
	if code == 0 || !strings.Contains(errs, "--addresses lists 2 address(es), but the cluster in "+dir+" has 1 replica(s)") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	code, _, errs = runCmd(t, "start", "--data", filepath.Join(t.TempDir(), "none"), "--addresses", "127.0.0.1:1")
	if code == 0 || !strings.Contains(errs, "format it first") {
		t.Fatalf("unformatted: exit %d: %s", code, errs)
	}
}

func TestDevFormatsAndServes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dev-data")
	addr := testproc.FreeAddr(t)
	srv := testproc.Start(t, "replica", "dev", "--data", dir, "--addresses", addr, "--http", "127.0.0.1:0")
	c := dial(t, srv, addr)
	var cluster core.Uint128
	re := regexp.MustCompile(`cluster ([0-9a-f-]{36})`)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if m := re.FindStringSubmatch(srv.Stdout()); m != nil {
			var err error
			if cluster, err = core.ParseUUID(m[1]); err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no cluster id printed; stdout:\n%s\nstderr:\n%s", srv.Stdout(), srv.Stderr())
		}
	}
	if !strings.Contains(srv.Stdout(), addr) {
		t.Fatalf("stdout does not say where to connect:\n%s", srv.Stdout())
	}
	c.register(cluster)
	c.insert()
	srv.Stop(syscall.SIGINT)

	// A second dev run keeps the cluster and the data.
	srv = testproc.Start(t, "replica", "dev", "--data", dir, "--addresses", addr, "--http", "127.0.0.1:0")
	c = dial(t, srv, addr)
	c.register(cluster)
	c.checkLatest()
	srv.Stop(syscall.SIGTERM)
}
