package io

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/geoevent/geoevent/core"
)

// localSession registers over lc and returns the session id.
func localSession(t *testing.T, lc *LocalConn) uint64 {
	t.Helper()
	h, p, err := lc.Exchange(context.Background(), core.Header{Type: core.MsgRegister}, core.AppendRegister(nil, testCluster))
	if err != nil || h.Type != core.MsgRegisterReply {
		t.Fatalf("register: %v %v", h, err)
	}
	id, err := core.DecodeRegisterReply(p)
	if err != nil || id == 0 || h.ClientID != id {
		t.Fatalf("register reply: %d %v (header %+v)", id, err, h)
	}
	return id
}

func localRequest(t *testing.T, lc *LocalConn, session uint64, req uint32, op core.Operation, body any) any {
	t.Helper()
	payload, err := core.AppendRequestMessage(nil, op, body)
	if err != nil {
		t.Fatal(err)
	}
	h, p, err := lc.Exchange(context.Background(), core.Header{ClientID: session, Request: req, Type: core.MsgRequest}, payload)
	if err != nil {
		t.Fatalf("%s: %v", op, err)
	}
	if h.Type != core.MsgReply || h.ClientID != session || h.Request != req {
		t.Fatalf("%s: answer %+v", op, h)
	}
	gotOp, reply, opErr, err := core.DecodeReplyMessage(p)
	if err != nil || opErr != nil || gotOp != op {
		t.Fatalf("%s: %s %v %v", op, gotOp, opErr, err)
	}
	return reply
}

// An in-process connection is a client connection like a TCP one: it
// registers, sends requests with numbers, gets the cached answer for a
// resent request, and its writes are seen by TCP clients.
func TestLocalConnServesLikeATCPConnection(t *testing.T) {
	r := serve(t, formatDir(t), Options{})
	lc, err := r.DialLocal(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	session := localSession(t, lc)
	id := core.Uint128{Hi: 7, Lo: 7}
	ins := &core.InsertRequest{Events: []core.GeoEvent{{EntityID: id, LatNano: 1, LonNano: 2}}}
	rep := localRequest(t, lc, session, 1, core.OpInsert, ins).(*core.InsertReply)
	if !rep.Committed {
		t.Fatalf("insert: %+v", rep)
	}
	// The same request number again: the session's cached answer, not a
	// second write.
	again := localRequest(t, lc, session, 1, core.OpInsert, ins).(*core.InsertReply)
	if !again.Committed || again.Results[0].TimestampNS != rep.Results[0].TimestampNS {
		t.Fatalf("resend: %+v, first %+v", again, rep)
	}
	st := localRequest(t, lc, session, 2, core.OpStats, nil).(*core.Stats)
	if st.EventCount != 1 {
		t.Fatalf("stats: %+v", st)
	}
	// A TCP client sees the write.
	c := dial(t, r.Addr())
	tcpSession := c.register(testCluster)
	if tcpSession == session {
		t.Fatalf("the TCP client got the local session's id %d", session)
	}
	// Many in-process connections at once, each with its session.
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lc, err := r.DialLocal(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			defer lc.Close()
			s := localSession(t, lc)
			for n := uint32(1); n <= 20; n++ {
				ev := core.GeoEvent{EntityID: core.Uint128{Hi: 9, Lo: uint64(i)}, LatNano: int64(n), LonNano: 2}
				rep := localRequest(t, lc, s, n, core.OpUpsert, &core.InsertRequest{Events: []core.GeoEvent{ev}}).(*core.InsertReply)
				if !rep.Committed {
					t.Errorf("conn %d upsert %d: %+v", i, n, rep)
					return
				}
			}
		}()
	}
	wg.Wait()
	st = localRequest(t, lc, session, 3, core.OpStats, nil).(*core.Stats)
	if st.EntityCount != 17 {
		t.Fatalf("stats after the concurrent upserts: %+v", st)
	}
}

// An exchange that gives up (its context ends) leaves the connection
// unusable, as a TCP connection after a timeout; a closed server fails
// exchanges and dials at once.
func TestLocalConnCancelAndClose(t *testing.T) {
	r := serve(t, formatDir(t), Options{})
	lc, err := r.DialLocal(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	localSession(t, lc)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := lc.Exchange(ctx, core.Header{Type: core.MsgRegister}, core.AppendRegister(nil, testCluster)); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled exchange: %v", err)
	}
	if _, _, err := lc.Exchange(context.Background(), core.Header{Type: core.MsgRegister}, core.AppendRegister(nil, testCluster)); !errors.Is(err, ErrLocalConnClosed) {
		t.Fatalf("exchange after a cancelled one: %v", err)
	}
	if err := lc.Close(); err != nil {
		t.Fatal(err)
	}
	// Replica-to-replica frames are refused.
	lc2, err := r.DialLocal(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := lc2.Exchange(context.Background(), core.Header{Type: MsgPeerHello}, nil); err == nil {
		t.Fatal("a peer hello was taken on a local connection")
	}
	lc3, err := r.DialLocal(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r.stop(t)
	done := make(chan error, 1)
	go func() {
		_, _, err := lc3.Exchange(context.Background(), core.Header{Type: core.MsgRegister}, core.AppendRegister(nil, testCluster))
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrServerClosed) {
			t.Fatalf("exchange after Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an exchange on a closed server hangs")
	}
	if _, err := r.DialLocal(context.Background()); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("DialLocal after Close: %v", err)
	}
	lc3.Close() // does not block on a closed server
}
