package client

import (
	"bufio"
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/geoevent/geoevent/core"
)

// fakeReplica is the far end of a muxConn in these tests: it reads the
// frames the connection sends (onto got) and writes the frames a test
// gives it.
type fakeReplica struct {
	nc  net.Conn
	got chan core.Header
	wmu sync.Mutex
}

func newMuxPair(t *testing.T) (*muxConn, *fakeReplica) {
	t.Helper()
	a, b := net.Pipe()
	m := newMuxConn("pipe", a)
	f := &fakeReplica{nc: b, got: make(chan core.Header, 64)}
	go func() {
		br := bufio.NewReader(b)
		for {
			h, _, err := core.ReadFrame(br, nil)
			if err != nil {
				close(f.got)
				return
			}
			f.got <- h
		}
	}()
	t.Cleanup(func() { m.fail(ErrClosed); b.Close() })
	return m, f
}

func (f *fakeReplica) answer(t *testing.T, h core.Header, payload []byte) {
	t.Helper()
	f.wmu.Lock()
	defer f.wmu.Unlock()
	if _, err := f.nc.Write(core.AppendFrame(nil, h, payload)); err != nil {
		t.Errorf("fake replica write: %v", err)
	}
}

// raw writes bytes as they are: part of a frame, say.
func (f *fakeReplica) raw(t *testing.T, b []byte) {
	t.Helper()
	f.wmu.Lock()
	defer f.wmu.Unlock()
	if _, err := f.nc.Write(b); err != nil {
		t.Errorf("fake replica write: %v", err)
	}
}

func (f *fakeReplica) next(t *testing.T) core.Header {
	t.Helper()
	select {
	case h, ok := <-f.got:
		if !ok {
			t.Fatal("the connection closed")
		}
		return h
	case <-time.After(5 * time.Second):
		t.Fatal("no frame arrived")
	}
	return core.Header{}
}

func stream(m *muxConn) *muxStream { return &muxStream{m: m, answered: make(chan struct{}, 1)} }

type exchangeResult struct {
	h   core.Header
	p   []byte
	err error
}

func exchangeAsync(ctx context.Context, s *muxStream, h core.Header, payload []byte) chan exchangeResult {
	ch := make(chan exchangeResult, 1)
	go func() {
		rh, p, err := s.Exchange(ctx, h, payload)
		ch <- exchangeResult{rh, append([]byte(nil), p...), err}
	}()
	return ch
}

// Answers arriving in any order reach the exchange they answer, registers
// included (matched by the nonce the connection puts in them).
func TestMuxMatchesAnswersToExchanges(t *testing.T) {
	m, f := newMuxPair(t)
	ctx := context.Background()
	reg1 := exchangeAsync(ctx, stream(m), core.Header{Type: core.MsgRegister}, nil)
	h1 := f.next(t)
	reg2 := exchangeAsync(ctx, stream(m), core.Header{Type: core.MsgRegister}, nil)
	h2 := f.next(t)
	if h1.Request == h2.Request {
		t.Fatalf("two registers with nonce %d", h1.Request)
	}
	f.answer(t, core.Header{Type: core.MsgRegisterReply, ClientID: 22, Request: h2.Request}, core.AppendRegisterReply(nil, 22))
	f.answer(t, core.Header{Type: core.MsgRegisterReply, ClientID: 11, Request: h1.Request}, core.AppendRegisterReply(nil, 11))
	for want, ch := range map[uint64]chan exchangeResult{11: reg1, 22: reg2} {
		r := <-ch
		if r.err != nil || r.h.ClientID != want {
			t.Fatalf("register answered %+v %v, want session %d", r.h, r.err, want)
		}
	}

	a := exchangeAsync(ctx, stream(m), core.Header{Type: core.MsgRequest, ClientID: 11, Request: 1}, []byte("a"))
	b := exchangeAsync(ctx, stream(m), core.Header{Type: core.MsgRequest, ClientID: 22, Request: 1}, []byte("b"))
	f.next(t)
	f.next(t)
	f.answer(t, core.Header{Type: core.MsgReply, ClientID: 22, Request: 1}, []byte("for b"))
	f.answer(t, core.Header{Type: core.MsgError, ClientID: 11, Request: 1}, []byte("for a"))
	if r := <-a; r.err != nil || string(r.p) != "for a" || r.h.Type != core.MsgError {
		t.Fatalf("a got %+v %q %v", r.h, r.p, r.err)
	}
	if r := <-b; r.err != nil || string(r.p) != "for b" {
		t.Fatalf("b got %+v %q %v", r.h, r.p, r.err)
	}
}

// An exchange that times out while others get answers leaves the
// connection open; its late answer is dropped, and a second answer to a
// retried request too.
func TestMuxLateAnswerIsDropped(t *testing.T) {
	m, f := newMuxPair(t)
	slow := stream(m)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	late := exchangeAsync(ctx, slow, core.Header{Type: core.MsgRequest, ClientID: 1, Request: 1}, nil)
	f.next(t)
	other := exchangeAsync(context.Background(), stream(m), core.Header{Type: core.MsgRequest, ClientID: 2, Request: 1}, nil)
	f.next(t)
	f.answer(t, core.Header{Type: core.MsgReply, ClientID: 2, Request: 1}, nil)
	if r := <-other; r.err != nil {
		t.Fatal(r.err)
	}
	if r := <-late; !errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("slow exchange: %v, want its deadline", r.err)
	}
	if m.failed() {
		t.Fatal("a timeout on a connection that delivers frames failed it")
	}

	// The retry waits under the same key and takes the first answer; the
	// second is dropped.
	retry := exchangeAsync(context.Background(), slow, core.Header{Type: core.MsgRequest, ClientID: 1, Request: 1}, nil)
	f.next(t)
	f.answer(t, core.Header{Type: core.MsgReply, ClientID: 1, Request: 1}, []byte("first"))
	f.answer(t, core.Header{Type: core.MsgReply, ClientID: 1, Request: 1}, []byte("second"))
	if r := <-retry; r.err != nil || string(r.p) != "first" {
		t.Fatalf("retry got %q %v", r.p, r.err)
	}
	again := exchangeAsync(context.Background(), slow, core.Header{Type: core.MsgRequest, ClientID: 1, Request: 2}, nil)
	f.next(t)
	f.answer(t, core.Header{Type: core.MsgReply, ClientID: 1, Request: 2}, []byte("next"))
	if r := <-again; r.err != nil || string(r.p) != "next" {
		t.Fatalf("next request got %q %v", r.p, r.err)
	}
}

// A frame that nothing waits for, and never did, fails the connection and
// every exchange on it.
func TestMuxUnsolicitedFrameFailsTheConnection(t *testing.T) {
	m, f := newMuxPair(t)
	waiting := exchangeAsync(context.Background(), stream(m), core.Header{Type: core.MsgRequest, ClientID: 1, Request: 1}, nil)
	f.next(t)
	f.answer(t, core.Header{Type: core.MsgReply, ClientID: 9, Request: 9}, nil)
	r := <-waiting
	var pe *protocolError
	if !errors.As(r.err, &pe) {
		t.Fatalf("waiting exchange: %v, want a protocol violation", r.err)
	}
	if _, _, err := stream(m).Exchange(context.Background(), core.Header{Type: core.MsgRequest, ClientID: 2, Request: 1}, nil); err == nil {
		t.Fatal("an exchange on a failed connection succeeded")
	}
}

// The client's own timeout, reached while nothing arrives, takes the
// connection for dead.
func TestMuxSilentTimeoutFailsTheConnection(t *testing.T) {
	m, f := newMuxPair(t)
	ctx, cancel := context.WithTimeoutCause(context.Background(), 50*time.Millisecond, errAttemptTimeout)
	defer cancel()
	r := <-exchangeAsync(ctx, stream(m), core.Header{Type: core.MsgRequest, ClientID: 1, Request: 1}, nil)
	f.next(t)
	if !errors.Is(r.err, context.DeadlineExceeded) || !m.failed() {
		t.Fatalf("error %v, failed %v; want the deadline and a failed connection", r.err, m.failed())
	}
}

// A large answer that is still arriving when the client's timeout comes
// keeps the connection: bytes, not whole frames, show that it is alive.
func TestMuxSlowAnswerKeepsTheConnection(t *testing.T) {
	m, f := newMuxPair(t)
	ctx, cancel := context.WithTimeoutCause(context.Background(), 300*time.Millisecond, errAttemptTimeout)
	defer cancel()
	ch := exchangeAsync(ctx, stream(m), core.Header{Type: core.MsgRequest, ClientID: 1, Request: 1}, nil)
	f.next(t)
	frame := core.AppendFrame(nil, core.Header{Type: core.MsgReply, ClientID: 1, Request: 1}, make([]byte, 1000))
	half := len(frame) / 2
	for i := 0; i < half; i += 20 { // the first half trickles in over about 400 ms
		f.raw(t, frame[i:min(i+20, half)])
		time.Sleep(15 * time.Millisecond)
	}
	if r := <-ch; !errors.Is(r.err, context.DeadlineExceeded) || m.failed() {
		t.Fatalf("error %v, failed %v; want the deadline and the connection open", r.err, m.failed())
	}
	f.raw(t, frame[half:]) // the late answer, dropped
	next := exchangeAsync(context.Background(), stream(m), core.Header{Type: core.MsgRequest, ClientID: 1, Request: 2}, nil)
	f.next(t)
	f.answer(t, core.Header{Type: core.MsgReply, ClientID: 1, Request: 2}, []byte("ok"))
	if r := <-next; r.err != nil || string(r.p) != "ok" {
		t.Fatalf("the next exchange on the connection: %q %v", r.p, r.err)
	}
}

// A caller's own short deadline ends only that caller's exchange: the
// connection, and another session's exchange on it, go on.
func TestMuxCallerDeadlineKeepsTheConnection(t *testing.T) {
	m, f := newMuxPair(t)
	other := exchangeAsync(context.Background(), stream(m), core.Header{Type: core.MsgRequest, ClientID: 2, Request: 1}, []byte("b"))
	f.next(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	short := exchangeAsync(ctx, stream(m), core.Header{Type: core.MsgRequest, ClientID: 1, Request: 1}, []byte("a"))
	f.next(t)
	if r := <-short; !errors.Is(r.err, context.DeadlineExceeded) || m.failed() {
		t.Fatalf("error %v, failed %v; want the caller's deadline and the connection open", r.err, m.failed())
	}
	f.answer(t, core.Header{Type: core.MsgReply, ClientID: 2, Request: 1}, []byte("for b"))
	if r := <-other; r.err != nil || string(r.p) != "for b" {
		t.Fatalf("the other session's exchange: %q %v", r.p, r.err)
	}
}

// Cancelling (not a timeout) never fails the connection.
func TestMuxCancelKeepsTheConnection(t *testing.T) {
	m, f := newMuxPair(t)
	ctx, cancel := context.WithCancel(context.Background())
	ch := exchangeAsync(ctx, stream(m), core.Header{Type: core.MsgRequest, ClientID: 1, Request: 1}, nil)
	f.next(t)
	cancel()
	if r := <-ch; !errors.Is(r.err, context.Canceled) || m.failed() {
		t.Fatalf("error %v, failed %v; want cancelled and the connection open", r.err, m.failed())
	}
}

// Many sessions exchange at once over one connection: every answer comes
// back to its own exchange intact (a frame corrupted by the coalescing
// writer would fail its checksum at the far end).
func TestMuxManySessionsAtOnce(t *testing.T) {
	a, b := net.Pipe()
	m := newMuxConn("pipe", a)
	defer m.fail(ErrClosed)
	go func() { // echo every request's payload back as its reply
		br := bufio.NewReader(b)
		bw := bufio.NewWriter(b)
		for {
			h, p, err := core.ReadFrame(br, nil)
			if err != nil {
				b.Close()
				return
			}
			h.Type = core.MsgReply
			bw.Write(core.AppendFrame(nil, h, p))
			if br.Buffered() == 0 {
				bw.Flush()
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			s := stream(m)
			for i := range 300 {
				want := []byte{byte(w), byte(i), byte(i >> 8), 7, 7, 7}
				h, p, err := s.Exchange(context.Background(), core.Header{Type: core.MsgRequest, ClientID: uint64(w + 1), Request: uint32(i + 1)}, want)
				if err != nil || h.ClientID != uint64(w+1) || h.Request != uint32(i+1) || string(p) != string(want) {
					t.Errorf("session %d request %d: %+v %x %v", w, i, h, p, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// A server that refuses the connection itself (a MsgError of client id 0
// and request 0, then a close: 212 over its connection limit) fails the
// exchange with that code, which a caller finds with errors.As, rather than
// with a protocol violation.
func TestRefusedConnectionCarriesTheCode(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			nc.Write(core.AppendFrame(nil, core.Header{Type: core.MsgError}, core.AppendErrorMessage(nil, core.ClusterBusy.Code, "over the connection limit")))
			nc.Close()
		}
	}()
	c, err := New([]string{ln.Addr().String()}, Options{Cluster: core.Uint128{Lo: 1}, DisableRetries: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Ping(context.Background())
	var ce *core.Error
	if !errors.As(err, &ce) || ce.Code != core.ClusterBusy.Code {
		t.Fatalf("error %v, want one carrying 212 CLUSTER_BUSY", err)
	}
	var pe *protocolError
	if errors.As(err, &pe) {
		t.Fatalf("error %v is a protocol violation", err)
	}
}
