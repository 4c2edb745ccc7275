package replica

import (
	"slices"
	"strings"
	"testing"

	"github.com/geoevent/geoevent/core"
)

// wantCode fails unless rp is an error of info's code.
func wantCode(t *testing.T, what string, rp reply, info core.CodeInfo) {
	t.Helper()
	if rp.err == nil || rp.err.Code != info.Code {
		t.Fatalf("%s: %+v, want %s", what, rp, info.Name)
	}
}

// A request number used again for another request is refused with 16
// REQUEST_MISMATCH, naming the number, and changes nothing; a retry of the
// same request still gets the cached reply. This holds after the request
// applied, while it is in flight, and after a restart from the log or from
// a snapshot.
func TestReusedRequestNumberIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		restart bool
	}{
		{"live", Config{}, false},
		{"restarted from the log", Config{}, true},
		{"restarted from a snapshot", Config{SnapshotEvery: 2}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, tc.cfg)
			s := n.register(1)
			first := n.call(1, s, 1, core.OpInsert, insertReq(ev(7, 1, 1)))
			if first.err != nil {
				t.Fatal(first.err)
			}
			n.call(1, s, 2, core.OpUpsert, insertReq(ev(8, 1, 1)))
			n.call(1, s, 3, core.OpUpsert, insertReq(ev(11, 1, 1)))
			n.call(1, s, 4, core.OpUpsert, insertReq(ev(9, 1, 1)))
			if tc.restart {
				if tc.cfg.SnapshotEvery != 0 && n.r.sessions.get(s).lastActivity > n.io.snapIndex {
					t.Fatalf("the session's last request (%d) is after the snapshot (%d): the test restores it from the log", n.r.sessions.get(s).lastActivity, n.io.snapIndex)
				}
				n.restart()
			}
			digest := n.r.Digest()
			rp := n.call(2, s, 4, core.OpUpsert, insertReq(ev(10, 1, 1)))
			wantCode(t, "request 4 reused", rp, core.RequestMismatch)
			if rp.err.Retryable || !strings.Contains(rp.err.Message, "request number 4") {
				t.Fatalf("the mismatch: %+v", rp.err)
			}
			if n.r.Digest() != digest {
				t.Fatal("a refused request changed the state")
			}
			if _, ok := latest(t, n, 1, s, 10); ok {
				t.Fatal("the mismatched request's event was written")
			}
			// The same request again: the cached reply.
			if rp := n.call(2, s, 4, core.OpUpsert, insertReq(ev(9, 1, 1))); rp.err != nil || rp.h.Type != core.MsgReply {
				t.Fatalf("a retry: %+v", rp)
			}
			if rp := n.call(2, s, 5, core.OpUpsert, insertReq(ev(10, 1, 1))); rp.err != nil {
				t.Fatalf("the next number: %+v", rp)
			}
		})
	}
}

func TestReusedRequestNumberInFlight(t *testing.T) {
	n := newNode(t, Config{})
	s := n.register(1)
	n.send(1, s, 1, core.OpInsert, insertReq(ev(7, 1, 1)))
	n.send(2, s, 1, core.OpInsert, insertReq(ev(8, 1, 1))) // another request under the number in flight
	rs := n.replies(2)
	if len(rs) != 1 {
		t.Fatalf("%d answers to the reused number", len(rs))
	}
	wantCode(t, "in flight", rs[0], core.RequestMismatch)
	n.settle()
	if rs := n.replies(1); len(rs) != 1 || rs[0].err != nil {
		t.Fatalf("the first request: %+v", rs)
	}
	if _, ok := latest(t, n, 1, s, 8); ok {
		t.Fatal("the mismatched request's event was written")
	}
}

// A batch a connection prepared carries the same checksum as the bare
// frame: a retry of it, prepared or not, is a retry.
func TestPreparedBatchRetryMatches(t *testing.T) {
	n := newNode(t, Config{})
	s := n.register(1)
	p, _ := core.AppendRequestMessage(nil, core.OpInsert, insertReq(ev(7, 1, 1), ev(8, 2, 2)))
	h := core.Header{ClientID: s, Request: 1, Type: core.MsgRequest}
	n.r.ReceivePrepared(1, h, p, PrepareRequest(h, p))
	n.settle()
	n.r.Receive(1, h, p)
	n.r.ReceivePrepared(1, h, p, PrepareRequest(h, p))
	other, _ := core.AppendRequestMessage(nil, core.OpInsert, insertReq(ev(7, 1, 1), ev(8, 2, 3)))
	n.r.ReceivePrepared(1, h, other, PrepareRequest(h, other))
	n.settle()
	rs := n.replies(1)
	if len(rs) != 4 || rs[0].err != nil || rs[1].err != nil || rs[2].err != nil {
		t.Fatalf("replies: %+v", rs)
	}
	wantCode(t, "another batch", rs[3], core.RequestMismatch)
}

// Entries logged before request checksums existed (no flag, a 22-byte
// header) still decode and apply; their sessions check nothing.
func TestUnsummedEntryDecodes(t *testing.T) {
	e := entry{kind: kindOperation, timestamp: 5, session: 3, request: 9, op: core.OpUpsert, payload: []byte{1, 2, 3}}
	b := e.appendTo(nil)
	if len(b) != entryBaseSize+3 || b[0] != byte(kindOperation) {
		t.Fatalf("an unsummed entry: % x", b)
	}
	d, err := decodeEntry(b)
	if err != nil || d.summed || string(d.payload) != "\x01\x02\x03" || d.request != 9 {
		t.Fatalf("decoded %+v, %v", d, err)
	}
	e.summed, e.sum = true, 0xdeadbeef
	b = e.appendTo(nil)
	if d, err = decodeEntry(b); err != nil || !d.summed || d.sum != 0xdeadbeef || string(d.payload) != "\x01\x02\x03" {
		t.Fatalf("decoded %+v, %v", d, err)
	}
	if _, err := decodeEntry(b[:entryBaseSize+2]); err == nil {
		t.Fatal("a summed entry cut in its checksum decoded")
	}
	reg := entry{kind: kindRegister}
	b = reg.appendTo(nil)
	b[0] |= entrySummed
	if _, err := decodeEntry(b); err == nil {
		t.Fatal("a register entry with a checksum decoded")
	}
}

// When the table is full a register evicts the session whose last applied
// request (or register) is oldest in the log, and the table keeps that
// order across a snapshot.
func TestEvictionIsLongestIdleFirst(t *testing.T) {
	n := newNode(t, Config{MaxSessions: 4, SnapshotEvery: 3})
	var ss []uint64
	for c := core.ConnID(1); c <= 4; c++ {
		ss = append(ss, n.register(c))
	}
	a, b, c, d := ss[0], ss[1], ss[2], ss[3]
	n.call(2, b, 1, core.OpUpsert, insertReq(ev(1, 1, 1)))
	n.call(1, a, 1, core.OpUpsert, insertReq(ev(2, 1, 1)))
	n.call(4, d, 1, core.OpUpsert, insertReq(ev(3, 1, 1)))
	// Idle longest first: c (its register), then b, a, d.
	if got, want := n.r.sessions.idleOrder(), []uint64{c, b, a, d}; !slices.Equal(got, want) {
		t.Fatalf("idle order %v, want %v", got, want)
	}
	n.restart() // from the snapshot and the log after it
	if got, want := n.r.sessions.idleOrder(), []uint64{c, b, a, d}; !slices.Equal(got, want) {
		t.Fatalf("idle order after a restart %v, want %v", got, want)
	}
	for i, victim := range []uint64{c, b} {
		e := n.register(core.ConnID(10 + i))
		if n.r.sessions.get(victim) != nil || n.r.sessions.get(e) == nil || n.r.sessions.len() != 4 {
			t.Fatalf("register %d: the table is %v, want %d evicted", i, n.r.sessions.idleOrder(), victim)
		}
	}
	wantCode(t, "evicted", n.call(3, c, 1, core.OpUpsert, insertReq(ev(4, 1, 1))), core.SessionExpired)
	if rp := n.call(1, a, 2, core.OpUpsert, insertReq(ev(5, 1, 1))); rp.err != nil {
		t.Fatalf("a session used more recently than the evicted ones: %+v", rp)
	}
}

// The session table's encoding keeps each session's request checksum and
// the idle order; a version 1 table (no checksums) decodes too.
func TestSessionTableEncoding(t *testing.T) {
	tb := newSessionTable(10)
	for _, id := range []uint64{5, 2, 9} {
		tb.register(id)
	}
	tb.touch(tb.get(5), 11)
	s := tb.get(2)
	s.lastRequest, s.summed, s.sum, s.reply, s.replyType = 4, true, 0xabcdef01, []byte("reply"), core.MsgReply
	tb.touch(s, 12)
	b := tb.appendTo(nil)
	got, rest, err := decodeSessions(append(b, 'x'), 10, 2)
	if err != nil || string(rest) != "x" {
		t.Fatalf("decode: %v, rest %q", err, rest)
	}
	if !slices.Equal(got.idleOrder(), []uint64{9, 5, 2}) {
		t.Fatalf("idle order %v", got.idleOrder())
	}
	if g := got.get(2); !g.summed || g.sum != 0xabcdef01 || string(g.reply) != "reply" || g.lastRequest != 4 || g.lastActivity != 12 {
		t.Fatalf("the session of id 2: %+v", g)
	}
	for cut := range b {
		if _, _, err := decodeSessions(b[:cut], 10, 2); err == nil {
			t.Fatalf("a table cut at %d decoded", cut)
		}
	}
	// Version 1: id, lastRequest, lastActivity, replyType, reply length, reply.
	v1 := []byte{1, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, byte(core.MsgReply), 2, 0, 0, 0, 'o', 'k'}
	got, rest, err = decodeSessions(v1, 10, 1)
	if err != nil || len(rest) != 0 {
		t.Fatalf("version 1: %v", err)
	}
	if g := got.get(7); g == nil || g.summed || g.lastRequest != 3 || g.lastActivity != 8 || string(g.reply) != "ok" {
		t.Fatalf("version 1 session: %+v", g)
	}
}

// A connection may have at most MaxSessionsPerConn sessions live or being
// registered: a flood of registrations from it is refused with 205
// SESSION_LIMIT beyond that, and does not evict a session another client
// used recently. The connection's place comes back when its sessions are
// evicted or it closes.
func TestRegistrationFloodIsCapped(t *testing.T) {
	n := newNode(t, Config{MaxSessions: 8, MaxSessionsPerConn: 3})
	other := n.register(100) // another client, which keeps writing
	n.call(100, other, 1, core.OpUpsert, insertReq(ev(1, 1, 1)))
	idle := n.register(101) // a client that registered and went quiet
	for i := range 5 {
		n.register(core.ConnID(102 + i))
	}
	n.call(100, other, 2, core.OpUpsert, insertReq(ev(1, 2, 2)))

	const flood = 1000
	for i := range flood { // pipelined, as fast as the connection writes
		n.r.Receive(1, core.Header{Request: uint32(i + 1), Type: core.MsgRegister}, core.AppendRegister(nil, testCluster))
	}
	n.settle()
	var registered, refused int
	for _, rp := range n.replies(1) {
		switch {
		case rp.h.Type == core.MsgRegisterReply:
			registered++
		case rp.err != nil && rp.err.Code == core.SessionLimit.Code:
			refused++
			if rp.err.Retryable || !strings.Contains(rp.err.Message, "(3)") {
				t.Fatalf("the refusal: %+v", rp.err)
			}
		default:
			t.Fatalf("answer %+v", rp)
		}
	}
	if registered != 3 || refused != flood-3 {
		t.Fatalf("%d registered, %d refused; want 3 and %d", registered, refused, flood-3)
	}
	if n.r.sessions.get(other) == nil {
		t.Fatal("the flood evicted a session used recently")
	}
	if n.r.sessions.get(idle) != nil {
		t.Fatal("the table is full, yet the longest idle session was kept")
	}
	if rp := n.call(100, other, 3, core.OpUpsert, insertReq(ev(1, 3, 3))); rp.err != nil {
		t.Fatalf("the other client: %+v", rp)
	}
	// The same again, resent with nonces already answered: refused.
	n.r.Receive(1, core.Header{Request: 5000, Type: core.MsgRegister}, core.AppendRegister(nil, testCluster))
	wantCode(t, "a fourth", n.replies(1)[0], core.SessionLimit)

	// Other clients' registers evict the idle sessions, the flood's first
	// among them: the connection may register again.
	for i := range 5 {
		n.register(core.ConnID(200 + i))
	}
	n.register(1)
	// Closing the connection frees its places at once: 3 more registers
	// (pipelined) go on, a fourth is refused.
	n.r.Closed(1)
	for i := range 4 {
		n.r.Receive(1, core.Header{Request: uint32(6000 + i), Type: core.MsgRegister}, core.AppendRegister(nil, testCluster))
	}
	rs := n.replies(1)
	if len(rs) != 1 {
		t.Fatalf("after the close: %+v", rs)
	}
	wantCode(t, "after the close, a fourth", rs[0], core.SessionLimit)
	n.settle()
	if rs := n.replies(1); len(rs) != 3 || rs[0].h.Type != core.MsgRegisterReply {
		t.Fatalf("after the close: %+v", rs)
	}
}

// In a cluster the replica that holds the connection counts its
// registrations, a follower forwarding them as well as the leader; and a
// request number reused for another request is refused by a new leader,
// from the checksum every replica applied from the log.
func TestSessionRulesInACluster(t *testing.T) {
	c := newCluster(t, 3, Config{MaxSessionsPerConn: 4})
	l := c.leader()
	f := (l + 1) % 3
	const conn = 7
	for i := range 50 {
		c.nodes[f].r.Receive(conn, core.Header{Request: uint32(i + 1), Type: core.MsgRegister}, core.AppendRegister(nil, testCluster))
	}
	c.run(testET)
	var registered, refused int
	for _, fr := range c.nodes[f].io.sent[conn] {
		h, p, _, _ := core.DecodeFrame(fr)
		switch rp := decodeReply(t, h, p); {
		case h.Type == core.MsgRegisterReply:
			registered++
		case rp.err != nil && rp.err.Code == core.SessionLimit.Code:
			refused++
		default:
			t.Fatalf("answer %+v", rp)
		}
	}
	c.nodes[f].io.sent[conn] = nil
	if registered != 4 || refused != 46 {
		t.Fatalf("through the follower: %d registered, %d refused; want 4 and 46", registered, refused)
	}

	cl := c.client(f, 8)
	if rp := cl.call(core.OpUpsert, insertReq(ev(1, 1, 1))); rp.err != nil {
		t.Fatal(rp.err)
	}
	c.crash(l)
	c.leader()
	cl.req-- // the same number again, for another request
	wantCode(t, "after a leader change", cl.call(core.OpUpsert, insertReq(ev(2, 1, 1))), core.RequestMismatch)
	cl.req--
	if rp := cl.call(core.OpUpsert, insertReq(ev(1, 1, 1))); rp.err != nil || rp.h.Type != core.MsgReply {
		t.Fatalf("the same request again: %+v", rp)
	}
}
