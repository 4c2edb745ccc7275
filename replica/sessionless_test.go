package replica

import (
	"testing"

	"github.com/geoevent/geoevent/core"
)

// A read needs no session: with client id 0 and the cluster id before the
// request (core.AppendSessionlessRead) it is answered, on the leader and
// through a follower, without a registration; a write without a session,
// a wrong cluster id and a payload too short for one are refused.
func TestReadWithoutASession(t *testing.T) {
	n := newNode(t, Config{})
	s := n.register(1)
	if r := n.call(1, s, 1, core.OpInsert, insertReq(ev(7, 38_100_000_000, 13_360_000_000))); r.err != nil {
		t.Fatalf("insert: %v", r.err)
	}
	sessionless := func(cluster core.Uint128, request uint32, op core.Operation, req any) reply {
		t.Helper()
		n.r.Receive(2, core.Header{Request: request, Type: core.MsgRequest}, core.AppendSessionlessRead(nil, cluster, mustRequest(t, op, req)))
		n.settle()
		rs := n.replies(2)
		if len(rs) != 1 {
			t.Fatalf("%v: %d replies", op, len(rs))
		}
		if rs[0].h.ClientID != 0 || rs[0].h.Request != request {
			t.Fatalf("%v: answered as session %d request %d, want 0 and %d", op, rs[0].h.ClientID, rs[0].h.Request, request)
		}
		return rs[0]
	}
	id := core.Uint128{Lo: 7}
	r := sessionless(testCluster, 41, core.OpGetLatest, &id)
	if r.err != nil {
		t.Fatalf("get latest without a session: %v", r.err)
	}
	if got := r.value.(*core.LatestResult); !got.Found || got.Event.EntityID != id {
		t.Fatalf("get latest without a session: %+v", got)
	}
	if r := sessionless(testCluster, 42, core.OpPing, nil); r.err != nil {
		t.Fatalf("ping without a session: %v", r.err)
	}
	if r := sessionless(core.Uint128{Lo: 99}, 43, core.OpStats, nil); r.err == nil || r.err.Code != core.WrongCluster.Code {
		t.Fatalf("a read for another cluster: %+v, want WRONG_CLUSTER", r)
	}
	if r := sessionless(testCluster, 44, core.OpInsert, insertReq(ev(8, 0, 0))); r.err == nil || r.err.Code != core.SessionExpired.Code {
		t.Fatalf("a write without a session: %+v, want SESSION_EXPIRED", r)
	}
	if r := n.call(1, s, 2, core.OpStats, nil); r.err != nil || r.value.(*core.Stats).EntityCount != 1 {
		t.Fatalf("the refused write wrote: %+v", r)
	}
	n.r.Receive(2, core.Header{Request: 45, Type: core.MsgRequest}, []byte{1, 2, 3})
	n.settle()
	if rs := n.replies(2); len(rs) != 1 || rs[0].err == nil || rs[0].err.Code != core.MalformedRequest.Code {
		t.Fatalf("a payload shorter than a cluster id: %+v", rs)
	}
}

// Through a follower: it checks the cluster id and forwards the read.
func TestReadWithoutASessionThroughAFollower(t *testing.T) {
	c := newCluster(t, 3, Config{})
	l := c.leader()
	w := c.client(l, 1)
	w.req++
	c.nodes[l].r.Receive(1, core.Header{ClientID: w.session, Request: w.req, Type: core.MsgRequest}, mustRequest(t, core.OpInsert, insertReq(ev(7, 38_100_000_000, 13_360_000_000))))
	if rs := w.await(); len(rs) != 1 || rs[0].err != nil {
		t.Fatalf("insert: %+v", rs)
	}
	f := (l + 1) % 3
	c.nodes[f].r.Receive(9, core.Header{Request: 5, Type: core.MsgRequest}, core.AppendSessionlessRead(nil, testCluster, mustRequest(t, core.OpStats, nil)))
	rs := (&cclient{c: c, node: f, conn: 9}).await()
	if len(rs) != 1 || rs[0].err != nil || rs[0].h.Request != 5 {
		t.Fatalf("stats through a follower: %+v", rs)
	}
	if st := rs[0].value.(*core.Stats); st.EntityCount != 1 {
		t.Fatalf("stats through a follower: %+v", st)
	}
}

// Ready reads run in steps of bounded work (ApplyMore), so that what
// arrives meanwhile is served between them: here a ping, answered on
// arrival while expensive reads wait, each of which (a whole-globe radius
// over 70,000 entities that matches nothing: over readStepWork) then runs
// in a step of its own, while cheap reads share one step.
func TestReadsRunInStepsOfBoundedWork(t *testing.T) {
	n := newNode(t, Config{})
	s := n.register(1)
	for b := range uint32(7) {
		evs := make([]core.GeoEvent, 10_000)
		for i := range evs {
			k := int64(b)*10_000 + int64(i)
			evs[i] = ev(uint64(k+1), (k*7919)%170_000_000_000-85_000_000_000, (k*104729)%358_000_000_000-179_000_000_000)
		}
		if r := n.call(1, s, b+1, core.OpInsert, insertReq(evs...)); r.err != nil {
			t.Fatal(r.err)
		}
	}
	read := func(req uint32, op core.Operation, v any) {
		n.r.Receive(2, core.Header{Request: req, Type: core.MsgRequest}, core.AppendSessionlessRead(nil, testCluster, mustRequest(t, op, v)))
	}
	globe := &core.RadiusQuery{RadiusMM: 20_000_000_000, Group: core.GroupFilter{Set: true, ID: 999}}
	for i := range uint32(3) {
		read(10+i, core.OpQueryRadius, globe)
	}
	if rs := n.replies(2); len(rs) != 0 || !n.r.Backlog() {
		t.Fatalf("reads answered on arrival (%d), or no backlog", len(rs))
	}
	n.r.Receive(3, core.Header{Request: 1, Type: core.MsgRequest}, core.AppendSessionlessRead(nil, testCluster, mustRequest(t, core.OpPing, nil)))
	if rs := n.replies(3); len(rs) != 1 || rs[0].err != nil {
		t.Fatalf("the ping waited behind the reads: %+v", rs)
	}
	for i := range 3 {
		n.r.ApplyMore()
		if rs := n.replies(2); len(rs) != 1 || rs[0].h.Request != uint32(10+i) || rs[0].err != nil {
			t.Fatalf("step %d answered %+v, want the expensive read %d alone", i, rs, 10+i)
		}
	}
	for i := range uint32(50) {
		read(20+i, core.OpStats, nil)
	}
	n.r.ApplyMore()
	if rs := n.replies(2); len(rs) != 50 {
		t.Fatalf("one step answered %d of 50 cheap reads, want all", len(rs))
	}
	if n.r.Backlog() {
		t.Fatal("a backlog after every read ran")
	}
}
