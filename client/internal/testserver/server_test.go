package testserver

import (
	"bufio"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/geoevent/geoevent/core"
)

// rawCall registers over a raw connection and sends one ping.
func rawCall(t *testing.T, s *Server) (uint64, core.Header) {
	t.Helper()
	nc, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(nc)
	if _, err := nc.Write(core.AppendFrame(nil, core.Header{Type: core.MsgRegister}, core.AppendRegister(nil, s.Cluster()))); err != nil {
		t.Fatal(err)
	}
	h, p, err := core.ReadFrame(br, nil)
	if err != nil || h.Type != core.MsgRegisterReply {
		t.Fatalf("register: %v %v", h, err)
	}
	session, err := core.DecodeRegisterReply(p)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := core.AppendRequestMessage(nil, core.OpPing, nil)
	if _, err := nc.Write(core.AppendFrame(nil, core.Header{ClientID: session, Request: 1, Type: core.MsgRequest}, req)); err != nil {
		t.Fatal(err)
	}
	h, _, err = core.ReadFrame(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	return session, h
}

func TestStartServeStop(t *testing.T) {
	base := runtime.NumGoroutine()
	s, err := Start(Config{})
	if err != nil {
		t.Fatal(err)
	}
	session, h := rawCall(t, s)
	if session == 0 || h.Type != core.MsgReply || h.Request != 1 {
		t.Fatalf("session %d, reply %+v", session, h)
	}
	s.FailNext(1, core.ClusterBusy)
	if _, h := rawCall(t, s); h.Type != core.MsgError {
		t.Fatalf("FailNext: reply %+v", h)
	}
	if s.Registers() != 2 || s.Requests() != 2 || s.RequestsFor(core.OpPing) != 2 || s.Accepted() != 2 {
		t.Fatalf("counters: %d %d %d %d", s.Registers(), s.Requests(), s.RequestsFor(core.OpPing), s.Accepted())
	}
	addr := s.Addr()
	// An open connection must not keep Stop waiting.
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	s.SetReplyDelay(time.Hour)
	s.Stop()
	s.Stop()
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatal("the listener is still open after Stop")
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base {
		t.Fatalf("%d goroutines after Stop, %d before Start", n, base)
	}
}
