package replica

import (
	"fmt"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/statemachine"
)

// executors holds, at each operation's code, how the replica runs it: the
// state machine's method for the entry of core's table, or the replica's
// own answer for status, topology and ping. An operation of the table
// without an executor fails TestEveryOperationExecutes.
var executors = [...]executor{
	core.OpInsert:         sm(core.Insert, (*statemachine.StateMachine).Insert),
	core.OpUpsert:         sm(core.Upsert, (*statemachine.StateMachine).Upsert),
	core.OpDeleteEntities: sm(core.DeleteEntities, (*statemachine.StateMachine).DeleteEntities),
	core.OpTTLSet:         sm(core.TTLSet, (*statemachine.StateMachine).TTLSet),
	core.OpTTLExtend:      sm(core.TTLExtend, (*statemachine.StateMachine).TTLExtend),
	core.OpTTLClear:       sm(core.TTLClear, (*statemachine.StateMachine).TTLClear),
	core.OpCleanupExpired: sm(core.CleanupExpired, (*statemachine.StateMachine).CleanupExpired),
	core.OpQueryRadius:    sm(core.QueryRadius, (*statemachine.StateMachine).QueryRadius),
	core.OpQueryPolygon:   sm(core.QueryPolygon, (*statemachine.StateMachine).QueryPolygon),
	core.OpGetLatest: sm(core.GetLatest, func(sm *statemachine.StateMachine, ts uint64, id *core.Uint128) (core.LatestResult, error) {
		return sm.GetLatest(ts, *id)
	}),
	core.OpGetLatestBatch: sm(core.GetLatestBatch, func(sm *statemachine.StateMachine, ts uint64, ids *core.IDList) (core.LatestResults, error) {
		return sm.GetLatestBatch(ts, *ids)
	}),
	core.OpQueryLatest: sm(core.QueryLatest, (*statemachine.StateMachine).QueryLatest),
	core.OpEntityHistory: run(core.EntityHistory, func(*Replica, uint64, *core.HistoryQuery) (*core.QueryResult, error) {
		// A read, run by startHistory (history.go), never from the log.
		return nil, core.Errorf(core.InternalError, "a history query is not applied from the log")
	}),
	core.OpQueryBBox:    sm(core.QueryBBox, (*statemachine.StateMachine).QueryBBox),
	core.OpQueryNearest: sm(core.QueryNearest, (*statemachine.StateMachine).QueryNearest),
	core.OpStats: run(core.StatsOp, func(r *Replica, ts uint64, _ *core.None) (*core.Stats, error) {
		st := r.sm.Stats(ts)
		st.ReplicationLagMS = r.replicationLagMS()
		return &st, nil
	}),
	core.OpStatus: run(core.Status, func(r *Replica, ts uint64, _ *core.None) (*core.StatusReply, error) {
		st := r.StatusReply(r.sm.Stats(ts))
		return &st, nil
	}),
	core.OpTopology: run(core.Topology, func(r *Replica, _ uint64, _ *core.None) (*core.TopologyReply, error) {
		return r.topology(), nil
	}),
	core.OpPing: run(core.Ping, func(r *Replica, _ uint64, _ *core.None) (*core.PingReply, error) {
		if !r.leaderHeard(r.raftNow()) {
			return &core.PingReply{Reason: fmt.Sprintf("replica %d knows no leader (an election is under way, or it is cut off from the majority)", r.self)}, nil
		}
		return &core.PingReply{Pong: true}, nil
	}),
	core.OpPutFence:         sm(core.PutFence, (*statemachine.StateMachine).PutFence),
	core.OpGetFence:         sm(core.GetFence, (*statemachine.StateMachine).GetFence),
	core.OpListFences:       sm(core.ListFences, (*statemachine.StateMachine).ListFences),
	core.OpDeleteFence:      sm(core.DeleteFence, (*statemachine.StateMachine).DeleteFence),
	core.OpReadFeed:         sm(core.ReadFeed, (*statemachine.StateMachine).ReadFeed),
	core.OpPutHook:          sm(core.PutHook, (*statemachine.StateMachine).PutHook),
	core.OpGetHook:          sm(core.GetHook, (*statemachine.StateMachine).GetHook),
	core.OpListHooks:        sm(core.ListHooks, (*statemachine.StateMachine).ListHooks),
	core.OpDeleteHook:       sm(core.DeleteHook, (*statemachine.StateMachine).DeleteHook),
	core.OpHookDelivered:    sm(core.HookDeliveredOp, (*statemachine.StateMachine).HookDelivered),
	core.OpSetFeedRetention: sm(core.SetFeedRetention, (*statemachine.StateMachine).SetFeedRetention),
	core.OpGetFeedRetention: sm(core.GetFeedRetention, (*statemachine.StateMachine).GetFeedRetention),
}

// executor runs one operation with a request as core.DecodeRequest gives
// it, and returns the reply as core.AppendReply takes it.
type executor interface {
	execute(r *Replica, ts uint64, req any) (any, error)
}

// opExecutor is the executor of one table entry: f runs the typed request.
type opExecutor[Req, Rep any] struct {
	op *core.Op[Req, Rep]
	f  func(r *Replica, ts uint64, req *Req) (*Rep, error)
}

func (x opExecutor[Req, Rep]) execute(r *Replica, ts uint64, req any) (any, error) {
	q, ok := req.(*Req)
	if !ok && req != nil || q == nil && !isNone[Req]() {
		return nil, core.Errorf(core.InternalError, "%s request of type %T", x.op.Code, req)
	}
	reply, err := x.f(r, ts, q)
	if reply == nil {
		return nil, err
	}
	return reply, err // as the state machine gave them: the reply is ignored when err is a failure
}

func isNone[T any]() bool {
	_, ok := any((*T)(nil)).(*core.None)
	return ok
}

// run makes the executor of op from the replica's own function.
func run[Req, Rep any](op *core.Op[Req, Rep], f func(r *Replica, ts uint64, req *Req) (*Rep, error)) executor {
	return opExecutor[Req, Rep]{op, f}
}

// sm makes the executor of op from a state machine method.
func sm[Req, Rep any](op *core.Op[Req, Rep], method func(sm *statemachine.StateMachine, ts uint64, req *Req) (Rep, error)) executor {
	return opExecutor[Req, Rep]{op, func(r *Replica, ts uint64, req *Req) (*Rep, error) {
		reply, err := method(r.sm, ts, req)
		return &reply, err
	}}
}

// execute runs one operation against the state machine at time ts.
func (r *Replica) execute(op core.Operation, ts uint64, req any) (any, error) {
	if !op.Valid() || int(op) >= len(executors) || executors[op] == nil {
		return nil, core.Errorf(core.UnknownOperation, "unknown operation %d", op)
	}
	return executors[op].execute(r, ts, req)
}
