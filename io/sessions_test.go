package io

import (
	"bufio"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/replica"
)

// A request number reused for another request, over TCP: answered with 16
// REQUEST_MISMATCH naming the number, and nothing is written; the same
// request resent gets its reply again.
func TestReusedRequestNumberOverTCP(t *testing.T) {
	s := serve(t, formatDir(t), Options{})
	c := dial(t, s.Addr())
	c.register(testCluster)
	c.insert(event(1))
	// The same number for another batch.
	p, _ := core.AppendRequestMessage(nil, core.OpInsert, &core.InsertRequest{Events: []core.GeoEvent{event(2)}})
	c.send(core.Header{ClientID: c.session, Request: c.req, Type: core.MsgRequest}, p)
	h, payload := c.recv()
	e, err := core.DecodeErrorMessage(payload)
	if h.Type != core.MsgError || h.Request != c.req || err != nil || e.Code != core.RequestMismatch.Code ||
		!strings.Contains(e.Message, fmt.Sprintf("request number %d ", c.req)) {
		t.Fatalf("a reused number: %v %+v %v", h.Type, e, err)
	}
	if r := c.latest(2); r.Found {
		t.Fatal("the mismatched request was written")
	}
	// The first request again: its reply.
	p, _ = core.AppendRequestMessage(nil, core.OpInsert, &core.InsertRequest{Events: []core.GeoEvent{event(1)}})
	c.send(core.Header{ClientID: c.session, Request: c.req, Type: core.MsgRequest}, p)
	if h, payload := c.recv(); h.Type != core.MsgReply || h.Request != c.req {
		t.Fatalf("a retry: %v %s", h.Type, errText(payload))
	}
	s.stop(t)
}

// The reproduction: 12,000 registrations pipelined on one
// connection. At most MaxSessionsPerConn (1,024 by default) of them
// register; the rest are refused with 205 SESSION_LIMIT, and a session that
// another client registered and used before is not evicted, though the
// table holds 2,000.
func TestRegistrationFloodOverTCP(t *testing.T) {
	s := serve(t, formatDir(t), Options{Replica: replica.Config{MaxSessions: 2000}})
	other := dial(t, s.Addr())
	other.register(testCluster)
	other.insert(event(1))

	flood := dial(t, s.Addr())
	const n = 12_000
	start := time.Now()
	go func() { // write while the replies are read, or both sides' buffers fill
		bw := bufio.NewWriterSize(flood.nc, 64<<10)
		for i := range n {
			bw.Write(core.AppendFrame(nil, core.Header{Request: uint32(i + 1), Type: core.MsgRegister}, core.AppendRegister(nil, testCluster)))
		}
		bw.Flush()
	}()
	var registered, refused int
	for range n {
		h, p := flood.recv()
		switch h.Type {
		case core.MsgRegisterReply:
			registered++
		case core.MsgError:
			e, err := core.DecodeErrorMessage(p)
			if err != nil || e.Code != core.SessionLimit.Code {
				t.Fatalf("a register refused with %+v %v", e, err)
			}
			refused++
		default:
			t.Fatalf("a %v frame", h.Type)
		}
	}
	t.Logf("%d registrations on one connection in %v: %d registered, %d refused", n, time.Since(start), registered, refused)
	if registered != 1024 || refused != n-1024 {
		t.Fatalf("%d registered, %d refused; want 1024 and %d", registered, refused, n-1024)
	}
	other.insert(event(2)) // its session is still there
	s.stop(t)
}
