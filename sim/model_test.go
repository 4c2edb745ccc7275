package sim

import (
	"slices"
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
			if !slices.Contains(op.entities, e.EntityID) {
				op.entities = append(op.entities, e.EntityID)
			}
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

// An older event (not the latest) expires by its own TTL, whatever the
// entity's expiry: history reads omit it once its expiry has passed, and
// must show it before.
func TestModelOlderEventExpires(t *testing.T) {
	for _, c := range []struct {
		name     string
		at       int64 // the read's tick
		showOld  bool
		accepted bool
	}{
		{"before its expiry, shown", 500, true, true},
		{"before its expiry, omitted", 500, false, false},
		{"after its expiry, omitted", 2000, false, true},
		{"after its expiry, shown", 2000, true, false},
	} {
		b := newHistBuilder()
		old := b.insert(1, 10, 12)    // expires 1 s after its timestamp
		latest := b.insert(0, 20, 22) // the entity never expires
		if c.showOld {
			b.history(c.at, c.at+1, old, latest)
		} else {
			b.history(c.at, c.at+1, latest)
		}
		b.getLatest(c.at+2, c.at+3, &latest)
		if got := b.linearizable(); got != c.accepted {
			t.Errorf("%s: accepted %v, want %v", c.name, got, c.accepted)
		}
	}
}

// write adds a write of evs (their UserData set to this operation and
// their index) at ticks from..to with these results and commit flag.
func (b *histBuilder) write(kind core.Operation, evs []core.GeoEvent, from, to int64, committed bool, res ...core.EventResult) []core.GeoEvent {
	id := uint64(len(b.w.hist.ops) + 1)
	for i := range evs {
		evs[i].UserData = core.Uint128{Hi: id, Lo: uint64(i)}
	}
	b.op(kind, &core.InsertRequest{Events: evs}, from, to, 0, &core.InsertReply{Committed: committed, Results: res})
	stored := append([]core.GeoEvent(nil), evs...)
	for i := range stored {
		stored[i].TimestampNS = res[i].TimestampNS
	}
	return stored
}

// olderAt adds an acknowledged insert, at ticks 10..12, of one batch: a
// fresh event without TTL (the latest) and an older one at client
// timestamp key with a TTL of ttl seconds. It returns both as stored.
func (b *histBuilder) olderAt(key uint64, ttl uint32) (latest, older core.GeoEvent) {
	evs := []core.GeoEvent{b.event(0), b.event(ttl)}
	evs[1].TimestampNS = key
	stored := b.write(core.OpInsert, evs, 10, 12, true,
		core.EventResult{TimestampNS: b.rt(10) + 5}, core.EventResult{Index: 1, TimestampNS: key})
	return stored[0], stored[1]
}

// rewrite adds a write (kind) of one event without TTL at client timestamp
// key, at ticks from..to, answered with res (committed when its code is
// 0). It returns the event as stored.
func (b *histBuilder) rewrite(kind core.Operation, key uint64, res core.EventResult, from, to int64) core.GeoEvent {
	e := b.event(0)
	e.TimestampNS = key
	res.TimestampNS = key
	return b.write(kind, []core.GeoEvent{e}, from, to, res.Code == 0, res)[0]
}

// A write on the key of an older event whose own TTL has passed finds it
// absent: an insert succeeds (EVENT_EXISTS is refused) and reports updated
// false, as does an upsert; the new event takes the expired one's place.
// The older event expires either before the write that makes it older
// (which then prunes it from the model's state), or between that write
// and the rewrite (which then meets it in the state, expired).
func TestModelWriteOnExpiredOlderKey(t *testing.T) {
	for _, when := range []struct {
		name string
		ttl  uint32
		key  func(b *histBuilder) uint64 // the older event's client timestamp
	}{
		{"expired long ago", 1, func(b *histBuilder) uint64 { return b.rt(0) - 3600_000_000_000 }},
		{"expired at tick 20", 3600, func(b *histBuilder) uint64 { return b.rt(20) - 3600_000_000_000 }},
	} {
		for _, c := range []struct {
			name     string
			kind     core.Operation
			res      core.EventResult
			accepted bool
		}{
			{"insert, updated false", core.OpInsert, core.EventResult{}, true},
			{"insert, EVENT_EXISTS", core.OpInsert, core.EventResult{Code: core.EventExists.Code}, false},
			{"insert, updated true", core.OpInsert, core.EventResult{Updated: true}, false},
			{"upsert, updated false", core.OpUpsert, core.EventResult{}, true},
			{"upsert, updated true", core.OpUpsert, core.EventResult{Updated: true}, false},
		} {
			b := newHistBuilder()
			key := when.key(b)
			latest, _ := b.olderAt(key, when.ttl)
			b.history(20, 21, latest)
			if !b.linearizable() {
				t.Fatalf("%s, %s: a history read without the expired older event is refused", when.name, c.name)
			}
			again := b.rewrite(c.kind, key, c.res, 30, 32)
			if c.res.Code == 0 {
				b.history(40, 41, again, latest) // the new event, visible
			} else {
				b.history(40, 41, latest)
			}
			if got := b.linearizable(); got != c.accepted {
				t.Errorf("%s, %s: accepted %v, want %v", when.name, c.name, got, c.accepted)
			}
		}
	}
}

// The same writes on the key of an older event without TTL, which stays
// visible: an insert fails with EVENT_EXISTS, an upsert replaces it.
func TestModelWriteOnVisibleOlderKey(t *testing.T) {
	for _, c := range []struct {
		name     string
		kind     core.Operation
		res      core.EventResult
		accepted bool
	}{
		{"insert, EVENT_EXISTS", core.OpInsert, core.EventResult{Code: core.EventExists.Code}, true},
		{"insert, updated false", core.OpInsert, core.EventResult{}, false},
		{"upsert, updated true", core.OpUpsert, core.EventResult{Updated: true}, true},
		{"upsert, updated false", core.OpUpsert, core.EventResult{}, false},
	} {
		b := newHistBuilder()
		past := b.rt(0) - 3600_000_000_000
		latest, older := b.olderAt(past, 0)
		b.history(20, 21, older, latest)
		b.rewrite(c.kind, past, c.res, 30, 32)
		if got := b.linearizable(); got != c.accepted {
			t.Errorf("%s: accepted %v, want %v", c.name, got, c.accepted)
		}
	}
}

// Where the bounds of a write's timestamp leave open whether an older
// event at its key has expired, the model follows both: EVENT_EXISTS and
// success (updated false) for an insert, updated true and false for an
// upsert.
func TestModelWriteOnOlderKeyExpiringDuringTheWrite(t *testing.T) {
	for _, c := range []struct {
		name string
		kind core.Operation
		res  core.EventResult
	}{
		{"insert, EVENT_EXISTS", core.OpInsert, core.EventResult{Code: core.EventExists.Code}},
		{"insert, updated false", core.OpInsert, core.EventResult{}},
		{"upsert, updated true", core.OpUpsert, core.EventResult{Updated: true}},
		{"upsert, updated false", core.OpUpsert, core.EventResult{}},
	} {
		b := newHistBuilder()
		key := b.rt(5)    // a client timestamp before the fresh one of olderAt
		b.olderAt(key, 1) // expires at tick 1005
		b.rewrite(c.kind, key, c.res, 1000, 1010)
		if !b.linearizable() {
			t.Errorf("%s: refused", c.name)
		}
	}
}
