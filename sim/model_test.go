package sim

import (
	"strings"
	"testing"

	"github.com/geoevent/geoevent/core"
)

// Handcrafted histories of one entity against the model: each must be
// judged linearizable or not as stated.

type histBuilder struct {
	w     *world
	stamp int64
}

func newHistBuilder() *histBuilder {
	w := newWorld(1, 0, Options{Entities: 4, Clients: 2})
	return &histBuilder{w: w}
}

func (b *histBuilder) id() core.Uint128 { return b.w.wl.ids[len(b.w.wl.ids)-1] } // a mutable entity

// rt is the realtime at a tick.
func (b *histBuilder) rt(tick int64) uint64 { return b.w.cfg.clockRealBase + uint64(tick)*tickNS }

// op adds an operation called at tick from and answered at tick to (to < 0:
// its outcome is unknown and it "returned" at -to).
func (b *histBuilder) op(kind core.Operation, req any, from, to int64, code core.Code, reply any) *opRec {
	op := &opRec{client: 0, kind: kind, req: req}
	b.w.addOp(op)
	b.stamp++ // stamps follow ticks; within a tick, the order of the calls
	op.call, op.callTick, op.tLo = from*1000+b.stamp, from, b.rt(from)
	op.status = stDone
	if to < 0 {
		op.status, to = stUnknown, -to
	}
	op.ret, op.retTick, op.tHi = to*1000+b.stamp, to, b.rt(to)+2*tickNS
	op.code, op.reply = code, reply
	if r, ok := req.(*core.InsertRequest); ok {
		op.static = make([]core.Code, len(r.Events))
		for _, e := range r.Events {
			op.entities = append(op.entities, e.EntityID)
		}
	}
	return op
}

func (b *histBuilder) event(ttl uint32) core.GeoEvent {
	return core.GeoEvent{EntityID: b.id(), UserData: core.Uint128{Hi: uint64(len(b.w.hist.ops) + 1)}, LatNano: b.w.wl.lat0, LonNano: b.w.wl.lon0, TTLSeconds: ttl}
}

// insert adds an acknowledged insert of one fresh event at tick at.
func (b *histBuilder) insert(ttl uint32, from, to int64) core.GeoEvent {
	e := b.event(ttl)
	stored := e
	stored.TimestampNS = b.rt(from) + 5
	b.op(core.OpInsert, &core.InsertRequest{Events: []core.GeoEvent{e}}, from, to, 0,
		&core.InsertReply{Committed: true, Results: []core.EventResult{{TimestampNS: stored.TimestampNS}}})
	return stored
}

func (b *histBuilder) getLatest(from, to int64, found *core.GeoEvent) {
	id := b.id()
	r := &core.LatestResult{}
	if found != nil {
		r = &core.LatestResult{Event: *found, Found: true}
	}
	b.op(core.OpGetLatest, &id, from, to, 0, r)
}

func (b *histBuilder) history(from, to int64, evs ...core.GeoEvent) {
	b.op(core.OpEntityHistory, &core.HistoryQuery{EntityID: b.id()}, from, to, 0, &core.QueryResult{Events: evs})
}

func (b *histBuilder) linearizable() bool {
	msg := b.w.checkLinearizable()
	if msg != "" && !strings.HasPrefix(msg, "linearizability:") {
		panic(msg)
	}
	return msg == ""
}

func TestModelReadsSeeAcknowledgedWrites(t *testing.T) {
	b := newHistBuilder()
	e := b.insert(0, 10, 12)
	b.getLatest(20, 21, &e)
	b.history(22, 23, e)
	if !b.linearizable() {
		t.Fatal("a read that sees the acknowledged write is refused")
	}
	b.getLatest(30, 31, nil)
	if b.linearizable() {
		t.Fatal("a read that misses an acknowledged write is accepted")
	}
}

func TestModelConcurrentReadMaySeeEither(t *testing.T) {
	b := newHistBuilder()
	e := b.insert(0, 10, 20)
	b.getLatest(11, 12, nil)
	b.getLatest(13, 14, &e)
	if !b.linearizable() {
		t.Fatal("reads concurrent with a write are refused")
	}
	b.getLatest(15, 16, nil) // after a read saw the write
	if b.linearizable() {
		t.Fatal("a read that misses a write an earlier read saw is accepted")
	}
}

func TestModelExpiry(t *testing.T) {
	b := newHistBuilder()
	e := b.insert(1, 10, 12) // expires 1 s after its timestamp
	b.getLatest(500, 501, &e)
	b.getLatest(1500, 1501, nil)
	if !b.linearizable() {
		t.Fatal("expiry is refused")
	}
	b.getLatest(1600, 1601, &e)
	if b.linearizable() {
		t.Fatal("an expired entity is still found")
	}
}

func TestModelTTLExtendWithoutTTL(t *testing.T) {
	b := newHistBuilder()
	b.insert(0, 10, 12)
	b.op(core.OpTTLExtend, &core.TTLExtendRequest{EntityID: b.id(), ExtendBySeconds: 1}, 20, 22, core.NoTTLSet.Code, nil)
	if !b.linearizable() {
		t.Fatal("106 NO_TTL_SET on an entity without TTL is refused")
	}
	b.op(core.OpTTLExtend, &core.TTLExtendRequest{EntityID: b.id(), ExtendBySeconds: 1}, 30, 32, 0, &core.TTLExtendReply{PreviousExpiresAtNS: 5, NewExpiresAtNS: 1_000_000_005})
	if b.linearizable() {
		t.Fatal("extending a TTL the entity does not have is accepted")
	}
}

func TestModelUnknownWrite(t *testing.T) {
	for _, seen := range []bool{false, true} {
		b := newHistBuilder()
		e := b.event(0)
		b.op(core.OpInsert, &core.InsertRequest{Events: []core.GeoEvent{e}}, 10, -30, 0, nil)
		if seen {
			e.TimestampNS = b.rt(11)
			b.history(40, 41, e)
			b.history(42, 43, e)
		} else {
			b.history(40, 41)
		}
		if !b.linearizable() {
			t.Fatalf("a write of unknown outcome that was (seen: %v) is refused", seen)
		}
		if seen {
			b.history(50, 51)
			if b.linearizable() {
				t.Fatal("a write of unknown outcome seen, then gone, is accepted")
			}
		}
	}
}

func TestModelDelete(t *testing.T) {
	b := newHistBuilder()
	b.insert(0, 10, 12)
	b.op(core.OpDeleteEntities, &core.DeleteRequest{EntityIDs: []core.Uint128{b.id()}}, 20, 22, 0, &core.DeleteReply{Deleted: 1})
	b.getLatest(30, 31, nil)
	b.history(32, 33)
	if !b.linearizable() {
		t.Fatal("a delete is refused")
	}
	b.op(core.OpDeleteEntities, &core.DeleteRequest{EntityIDs: []core.Uint128{b.id()}}, 40, 42, 0, &core.DeleteReply{Deleted: 1})
	if b.linearizable() {
		t.Fatal("deleting a deleted entity counts it as deleted")
	}
}
