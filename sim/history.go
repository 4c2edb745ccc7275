package sim

import (
	"fmt"
	"math"

	"github.com/geoevent/geoevent/core"
)

// The history: every operation a client invoked, with when it was called
// and answered and what the answer was. Call and return are stamps of one
// counter that orders every event of the run, so "A returned before B was
// called" is exact.

type opStatus uint8

const (
	stPending   opStatus = iota // never answered (a liveness failure at the end)
	stDone                      // answered: code and reply are known
	stUnknown                   // a write whose session expired: it may or may not have happened
	stAbandoned                 // a read whose session expired: dropped from the checks
)

type opRec struct {
	id     int // also the tag in the UserData of the operation's events
	client int
	kind   core.Operation
	req    any
	reqNo  uint32

	// What the workload meant.
	expectErr core.Code      // a deliberately invalid request: the code it must get
	entities  []core.Uint128 // the entities the operation names (nil: a query over all)
	region    *region        // radius and polygon queries
	hasAfter  bool           // a history page after the first: events after afterTS
	afterTS   uint64         //
	paged     bool           // a radius, polygon or latest page after the first
	static    []core.Code    // insert/upsert: each event's code that does not depend on state

	call, ret         int64 // stamps; ret = MaxInt64 while pending
	callTick, retTick int64
	tLo, tHi          uint64 // bounds of the operation's timestamp (realtime ns)

	status opStatus
	code   core.Code // 0, or the operation's error code
	reply  any
}

type history struct {
	ops []*opRec
}

// addOp enters an operation into the history (and gives it its id).
func (w *world) addOp(op *opRec) {
	op.id = len(w.hist.ops) + 1
	op.ret, op.status = math.MaxInt64, stPending
	w.hist.ops = append(w.hist.ops, op)
}

func (w *world) invoke(op *opRec) {
	op.call = w.nextStamp()
	op.callTick = w.now
	op.tLo, _ = w.realtimeBounds(w.now, w.now)
	op.tHi = math.MaxUint64
	w.tracef("client %d invokes op %d: %s %s", op.client, op.id, op.kind.String(), lazy(func() string { return describeReq(op) }))
}

func (w *world) finishOp(op *opRec, st opStatus, code core.Code, reply any) {
	if w.mutate != nil && st == stDone {
		reply = w.mutate(op, code, reply)
	}
	op.status, op.code, op.reply = st, code, reply
	op.ret = w.nextStamp()
	op.retTick = w.now
	_, hi := w.realtimeBounds(w.now, w.now)
	// Slack: a replica's timestamps run ahead of its clock by one per entry
	// (and per event) assigned within one clock reading: far below a tick.
	op.tHi = hi + 2*tickNS
	switch st {
	case stDone:
		w.tracef("client %d op %d returns code %d: %s", op.client, op.id, uint64(code), lazy(func() string { return describeReply(reply) }))
	case stUnknown:
		w.tracef("client %d op %d: session expired, outcome unknown", op.client, op.id)
	case stAbandoned:
		w.tracef("client %d op %d: session expired, read abandoned", op.client, op.id)
	}
}

func describeReq(op *opRec) string {
	switch r := op.req.(type) {
	case *core.InsertRequest:
		s := ""
		for i, e := range r.Events {
			if i > 0 {
				s += ", "
			}
			s += fmt.Sprintf("%d@%d(%d,%d ttl=%d)", e.EntityID.Lo, e.TimestampNS, e.LatNano, e.LonNano, e.TTLSeconds)
		}
		return "[" + s + "]"
	case nil:
		return ""
	case *core.Uint128:
		return fmt.Sprint(r.Lo)
	case *core.IDList:
		return fmt.Sprint(idsLo(*r))
	case *core.DeleteRequest:
		return fmt.Sprint(idsLo(r.EntityIDs))
	case *core.HistoryQuery:
		return fmt.Sprintf("{entity %d since %d until %d limit %d after %v:%d}", r.EntityID.Lo, r.SinceNS, r.UntilNS, r.Limit, op.hasAfter, op.afterTS)
	default:
		return fmt.Sprintf("%+v", r)
	}
}

func idsLo(ids []core.Uint128) []uint64 {
	out := make([]uint64, len(ids))
	for i, id := range ids {
		out[i] = id.Lo
	}
	return out
}

func describeEvent(e *core.GeoEvent) string {
	return fmt.Sprintf("%d@%d tag=%d.%d (%d,%d) ttl=%d g=%d", e.EntityID.Lo, e.TimestampNS, e.UserData.Hi, e.UserData.Lo, e.LatNano, e.LonNano, e.TTLSeconds, e.GroupID)
}

func describeReply(reply any) string {
	switch r := reply.(type) {
	case nil:
		return "-"
	case *core.QueryResult:
		s := fmt.Sprintf("%d events more=%v [", len(r.Events), r.HasMore)
		for i := range r.Events {
			if i > 0 {
				s += ", "
			}
			s += describeEvent(&r.Events[i])
		}
		return s + "]"
	case *core.LatestResult:
		if !r.Found {
			return "not found"
		}
		return describeEvent(&r.Event)
	case *core.LatestResults:
		s := "["
		for i := range *r {
			if i > 0 {
				s += ", "
			}
			if (*r)[i].Found {
				s += describeEvent(&(*r)[i].Event)
			} else {
				s += "not found"
			}
		}
		return s + "]"
	default:
		return fmt.Sprintf("%+v", r)
	}
}
