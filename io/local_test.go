package io

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/io/store"
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

// A lone replica out of space keeps serving: a registered session reads
// while another's write waits, and the write is acknowledged once there is
// space again.
func TestOutOfSpaceServesReadsAndWaitsForWrites(t *testing.T) {
	r := serve(t, formatDir(t), Options{})
	writer, reader := dialLocal(t, r.Server), dialLocal(t, r.Server)
	writerSession, readerSession := localSession(t, writer), localSession(t, reader)
	id := core.Uint128{Hi: 7, Lo: 7}
	upsert := func(lat int64) *core.InsertRequest {
		return &core.InsertRequest{Events: []core.GeoEvent{{EntityID: id, LatNano: lat, LonNano: 2}}}
	}
	latest := func(req uint32) core.GeoEvent {
		got := localRequest(t, reader, readerSession, req, core.OpGetLatest, &id).(*core.LatestResult)
		if !got.Found {
			t.Fatalf("entity not found")
		}
		return got.Event
	}
	localRequest(t, writer, writerSession, 1, core.OpUpsert, upsert(1))

	var full atomic.Bool
	full.Store(true)
	store.SetWriteFault(func(n int) (int, error) {
		if full.Load() {
			return 0, syscall.ENOSPC
		}
		return n, nil
	})
	t.Cleanup(func() { store.SetWriteFault(nil) })
	acked := make(chan *core.InsertReply, 1)
	go func() {
		acked <- localRequest(t, writer, writerSession, 2, core.OpUpsert, upsert(5)).(*core.InsertReply)
	}()
	time.Sleep(200 * time.Millisecond)
	select {
	case rep := <-acked:
		t.Fatalf("a write acknowledged while the disk is full: %+v", rep)
	default:
	}
	if ev := latest(1); ev.LatNano != 1 {
		t.Fatalf("read while the disk is full: %+v, want the acknowledged position", ev)
	}
	full.Store(false)
	select {
	case rep := <-acked:
		if !rep.Committed {
			t.Fatalf("the write once there is space: %+v", rep)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the write was not acknowledged once there was space")
	}
	if ev := latest(2); ev.LatNano != 5 {
		t.Fatalf("read after: %+v", ev)
	}
}

func dialLocal(t *testing.T, r *Server) *LocalConn {
	t.Helper()
	lc, err := r.DialLocal(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lc.Close() })
	return lc
}
