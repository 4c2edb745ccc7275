package sim

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/geoevent/geoevent/core"
)

// entityIndex is an entity's place in the pool, or -1.
func (w *world) entityIndex(id core.Uint128) int {
	ids := w.wl.ids
	if id.Hi != ids[0].Hi || id.Lo == 0 || id.Lo > uint64(len(ids)) {
		return -1
	}
	return int(id.Lo - 1)
}

// A candidate of the must-see checker: an event that, once written, stays
// in its entity's history (and stays its latest) until an operation that
// could remove or replace it: a server-timestamped event without TTL, the
// only event of its entity in its batch. Without a TTL it has no expiry of
// its own, so it stays visible in the history once a newer event makes it
// an older one (older events expire by their own TTL only); only the
// entity's expiry can hide it, and only the disqualifying operations
// below can give the entity one.
type candidate struct {
	w   *opRec
	idx int
}

// disq is an operation that could remove or hide a candidate.
type disq struct {
	call, ret int64
	id        int
}

// disqList is disqualifying operations sorted by call, with the two largest
// returns of every prefix.
type disqList struct {
	ops        []disq
	top1, top2 []int64
	top1ID     []int
}

func (d *disqList) build() {
	slices.SortFunc(d.ops, func(a, b disq) int { return cmpInt64(a.call, b.call) })
	t1, t2, id := int64(math.MinInt64), int64(math.MinInt64), 0
	for _, o := range d.ops {
		switch {
		case o.ret >= t1:
			t2, t1, id = t1, o.ret, o.id
		case o.ret > t2:
			t2 = o.ret
		}
		d.top1, d.top2, d.top1ID = append(d.top1, t1), append(d.top2, t2), append(d.top1ID, id)
	}
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// lastReturn is the largest return of the operations other than exclude
// that were called before stamp.
func (d *disqList) lastReturn(before int64, exclude int) int64 {
	k, _ := slices.BinarySearchFunc(d.ops, before, func(o disq, t int64) int { return cmpInt64(o.call, t) })
	if k == 0 {
		return math.MinInt64
	}
	if d.top1ID[k-1] == exclude {
		return d.top2[k-1]
	}
	return d.top1[k-1]
}

// checkMustSee is the durability and atomicity checker, independent of the
// model. A candidate event X of write W must be in every whole-history read
// R of its entity, and be the latest event of every latest read R, when
//
//   - W has certainly happened before R: W was acknowledged as committed,
//     or a read observed one of W's events, before R was called, or R
//     itself shows one of W's events (a batch is all or nothing); and
//   - no operation that could remove or replace X was called before R
//     returned, other than ones that returned before W was called.
//
// Removing or replacing X (for history): delete, upsert, TTL set or
// extend on the entity, or a server-timestamped event with a TTL (it
// becomes the latest and sets the entity's expiry; a client-timestamped
// one sorts before X and leaves it); for the latest position also any
// server-timestamped event. Losing an
// acknowledged write in a crash, or showing part of a batch, breaks it.
func (w *world) checkMustSee() string {
	ops := w.hist.ops
	n := len(w.wl.ids)
	hb := make([]int64, len(ops)+1)
	for i := range hb {
		hb[i] = math.MaxInt64
	}
	seenBy := make([][]int, len(ops)+1) // read id -> write ids it observed
	for _, op := range ops {
		if r, ok := op.reply.(*core.InsertReply); ok && op.status == stDone && op.code == 0 && r.Committed {
			hb[op.id] = min(hb[op.id], op.ret)
		}
		for _, e := range observedEvents(op) {
			if wr, _, why := w.writeOf(e); why == "" {
				hb[wr.id] = min(hb[wr.id], op.ret)
				if !slices.Contains(seenBy[op.id], wr.id) {
					seenBy[op.id] = append(seenBy[op.id], wr.id)
				}
			}
		}
	}
	histD, latD := make([]disqList, n), make([]disqList, n)
	cands := make([][]candidate, n)
	for _, op := range ops {
		if op.status == stAbandoned || (op.expectErr != 0 && op.status == stDone) {
			continue
		}
		d := disq{call: op.call, ret: op.ret, id: op.id}
		switch r := op.req.(type) {
		case *core.InsertRequest:
			failed := op.status == stDone && (op.code != 0 || !op.reply.(*core.InsertReply).Committed)
			count := map[core.Uint128]int{}
			for _, e := range r.Events {
				count[e.EntityID]++
			}
			for i, e := range r.Events {
				x := w.entityIndex(e.EntityID)
				if x < 0 {
					continue
				}
				if op.kind == core.OpUpsert || (e.TimestampNS == 0 && e.TTLSeconds > 0) {
					histD[x].ops = append(histD[x].ops, d)
				}
				if op.kind == core.OpUpsert || e.TimestampNS == 0 {
					latD[x].ops = append(latD[x].ops, d)
				}
				if !failed && op.static[i] == 0 && e.TimestampNS == 0 && e.TTLSeconds == 0 && count[e.EntityID] == 1 {
					cands[x] = append(cands[x], candidate{op, i})
				}
			}
		case *core.DeleteRequest, *core.TTLSetRequest, *core.TTLExtendRequest:
			for _, id := range op.entities {
				if x := w.entityIndex(id); x >= 0 {
					histD[x].ops = append(histD[x].ops, d)
					latD[x].ops = append(latD[x].ops, d)
				}
			}
		}
	}
	for x := 0; x < n; x++ {
		histD[x].build()
		latD[x].build()
	}
	for _, r := range ops {
		if r.status != stDone || r.code != 0 {
			continue
		}
		check := func(x int, dl *disqList, shows func(wid, idx int) bool, what string) string {
			for _, c := range cands[x] {
				wr := c.w
				if wr.call > r.ret || !(hb[wr.id] < r.call || slices.Contains(seenBy[r.id], wr.id)) {
					continue
				}
				if dl.lastReturn(r.ret, wr.id) >= wr.call {
					continue
				}
				if !shows(wr.id, c.idx) {
					e := wr.req.(*core.InsertRequest).Events[c.idx]
					how := fmt.Sprintf("acknowledged as committed at tick %d", wr.retTick)
					if !(wr.status == stDone && hb[wr.id] == wr.ret) {
						how = "seen by an earlier or the same read"
					}
					return fmt.Sprintf("lost write: %s (returned tick %d) does not show event %d.%d of entity %d as %s; it was written by %s, %s, and nothing that could remove or replace it ran since: reply %s",
						opName(r), r.retTick, wr.id, c.idx, e.EntityID.Lo, what, opName(wr), how, describeReply(r.reply))
				}
			}
			return ""
		}
		switch res := r.reply.(type) {
		case *core.QueryResult:
			q, ok := r.req.(*core.HistoryQuery)
			if !ok || q.SinceNS != 0 || q.UntilNS != 0 || r.hasAfter || res.HasMore {
				continue
			}
			x := w.entityIndex(q.EntityID)
			if x < 0 {
				continue
			}
			if msg := check(x, &histD[x], func(wid, idx int) bool {
				for i := range res.Events {
					if res.Events[i].UserData == (core.Uint128{Hi: uint64(wid), Lo: uint64(idx)}) {
						return true
					}
				}
				return false
			}, "part of its history"); msg != "" {
				return msg
			}
		case *core.LatestResult, *core.LatestResults:
			var results []core.LatestResult
			var ids []core.Uint128
			if one, ok := res.(*core.LatestResult); ok {
				results, ids = []core.LatestResult{*one}, []core.Uint128{*r.req.(*core.Uint128)}
			} else {
				results, ids = *res.(*core.LatestResults), *r.req.(*core.IDList)
			}
			for i, id := range ids {
				x := w.entityIndex(id)
				if x < 0 {
					continue
				}
				lr := results[i]
				if msg := check(x, &latD[x], func(wid, idx int) bool {
					return lr.Found && lr.Event.UserData == (core.Uint128{Hi: uint64(wid), Lo: uint64(idx)})
				}, "its latest position"); msg != "" {
					return msg
				}
			}
		}
	}
	return ""
}

// partitions projects the history onto each entity of the pool.
func (w *world) partitions() [][]porcupine.Operation {
	parts := make([][]porcupine.Operation, len(w.wl.ids))
	for _, op := range w.hist.ops {
		known := op.status == stDone
		switch {
		case op.status == stAbandoned, op.expectErr != 0:
			continue
		case !known && !op.kind.Mutates():
			continue
		case known && !allowedCode(op, op.code):
			continue
		}
		add := func(x int, in *pin, out *pout) {
			if x < 0 {
				return
			}
			in.op, in.tLo, in.tHi = op, op.tLo, op.tHi
			out.known, out.code = known, op.code
			parts[x] = append(parts[x], porcupine.Operation{ClientId: op.client, Input: in, Call: op.call, Output: out, Return: op.ret})
		}
		switch req := op.req.(type) {
		case *core.InsertRequest:
			var rep *core.InsertReply
			if known {
				rep = op.reply.(*core.InsertReply)
			}
			for _, id := range op.entities {
				x := w.entityIndex(id)
				if x < 0 {
					continue
				}
				in, out := &pin{kind: pkWrite, upsert: op.kind == core.OpUpsert}, &pout{}
				for i := range req.Events {
					if req.Events[i].EntityID == id {
						in.evs = append(in.evs, pev{idx: i, ev: &req.Events[i], static: op.static[i]})
						if rep != nil {
							out.res = append(out.res, rep.Results[i])
						}
					}
				}
				if rep != nil {
					out.committed = rep.Committed
				}
				add(x, in, out)
			}
		case *core.DeleteRequest:
			var distinct []core.Uint128
			for _, id := range req.EntityIDs {
				if !slices.Contains(distinct, id) {
					distinct = append(distinct, id)
				}
			}
			for _, id := range distinct {
				if x := w.entityIndex(id); x >= 0 {
					in, out := &pin{kind: pkDelete, exact: len(distinct) == 1, count: len(req.EntityIDs)}, &pout{}
					if r, ok := op.reply.(*core.DeleteReply); ok {
						out.deleted, out.notFound = r.Deleted, r.NotFound
					}
					add(x, in, out)
				}
			}
		case *core.TTLSetRequest:
			out := &pout{}
			if r, ok := op.reply.(*core.TTLSetReply); ok {
				out.exp = r.ExpiresAtNS
			}
			add(w.entityIndex(req.EntityID), &pin{kind: pkTTLSet, secs: req.TTLSeconds}, out)
		case *core.TTLExtendRequest:
			out := &pout{}
			if r, ok := op.reply.(*core.TTLExtendReply); ok {
				out.prev, out.exp = r.PreviousExpiresAtNS, r.NewExpiresAtNS
			}
			add(w.entityIndex(req.EntityID), &pin{kind: pkTTLExtend, secs: req.ExtendBySeconds}, out)
		case *core.TTLClearRequest:
			out := &pout{}
			if r, ok := op.reply.(*core.TTLClearReply); ok {
				out.prev, out.hadTTL = r.PreviousExpiresAtNS, r.HadTTL
			}
			add(w.entityIndex(req.EntityID), &pin{kind: pkTTLClear}, out)
		case *core.Uint128:
			add(w.entityIndex(*req), &pin{kind: pkLatest}, &pout{latest: []core.LatestResult{*op.reply.(*core.LatestResult)}})
		case *core.IDList:
			res := *op.reply.(*core.LatestResults)
			for x := range w.wl.ids {
				out := &pout{}
				for i, id := range *req {
					if w.entityIndex(id) == x {
						out.latest = append(out.latest, res[i])
					}
				}
				if len(out.latest) > 0 {
					add(x, &pin{kind: pkLatest}, out)
				}
			}
		case *core.HistoryQuery:
			res := op.reply.(*core.QueryResult)
			in := &pin{kind: pkHistory, from: req.SinceNS, until: req.UntilNS, limit: int(req.Limit)}
			if in.until == 0 {
				in.until = math.MaxUint64
			}
			if in.limit == 0 {
				in.limit = core.DefaultQueryLimit
			}
			if op.hasAfter {
				in.from = max(in.from, op.afterTS+1)
			}
			add(w.entityIndex(req.EntityID), in, &pout{events: res.Events, hasMore: res.HasMore})
		case *core.RadiusQuery, *core.PolygonQuery, *core.LatestQuery, *core.BBoxQuery, *core.NearestQuery:
			res := op.reply.(*core.QueryResult)
			kind, group, since := pkSpatial, core.GroupFilter{}, uint64(0)
			partial := op.paged
			switch q := req.(type) {
			case *core.RadiusQuery:
				group = q.Group
			case *core.PolygonQuery:
				group = q.Group
			case *core.BBoxQuery:
				group = q.Group
			case *core.NearestQuery:
				// Only the k nearest are returned: an entity's absence
				// proves nothing on its own (the checks of the page's
				// order and distances are checkReply's).
				group, partial = q.Group, true
			case *core.LatestQuery:
				kind, group, since = pkLatestAll, q.Group, q.SinceNS
			}
			for x := range w.wl.ids {
				out := &pout{hasMore: res.HasMore}
				for i := range res.Events {
					if w.entityIndex(res.Events[i].EntityID) == x {
						out.events = append(out.events, res.Events[i])
						if op.kind == core.OpQueryRadius || op.kind == core.OpQueryNearest {
							out.dists = append(out.dists, res.DistancesMM[i])
						}
					}
				}
				add(x, &pin{kind: kind, group: group, since: since, partial: partial}, out)
			}
		}
	}
	return parts
}

// checkLinearizable runs porcupine on each entity's projection.
func (w *world) checkLinearizable() string {
	for x, ops := range w.partitions() {
		budget, over := int64(stepBudget), false
		if len(ops) == 0 || porcupine.CheckOperations(newEntityModel(&budget, &over), ops) {
			continue
		}
		if over {
			w.unchecked = append(w.unchecked, x+1)
			w.tracef("linearizability of entity %d not decided within the step budget", x+1)
			continue
		}
		return w.describeNonLinearizable(newEntityModel(nil, nil), x, ops)
	}
	return ""
}

func (w *world) describeNonLinearizable(model porcupine.Model, x int, ops []porcupine.Operation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "linearizability: the history of entity %d (%d operations) is not linearizable", x+1, len(ops))
	_, info := porcupine.CheckOperationsVerbose(model, ops, 0)
	if w.opts.VisualizeDir != "" {
		path := filepath.Join(w.opts.VisualizeDir, fmt.Sprintf("seed-%d-entity-%d.html", w.seed, x+1))
		if err := porcupine.VisualizePath(model, info, path); err == nil {
			fmt.Fprintf(&b, " (visualization: %s)", path)
		} else {
			fmt.Fprintf(os.Stderr, "sim: visualization: %v\n", err)
		}
	}
	var best []int
	for _, p := range info.PartialLinearizations() {
		for _, l := range p {
			if len(l) > len(best) || (len(l) == len(best) && slices.Compare(l, best) < 0) {
				best = l
			}
		}
	}
	in := make([]bool, len(ops))
	state := model.Init()
	for _, i := range best {
		in[i] = true
		_, state = model.Step(state, ops[i].Input, ops[i].Output)
	}
	fmt.Fprintf(&b, "; the longest linearizable prefix has %d operations", len(best))
	for k := max(0, len(best)-4); k < len(best); k++ {
		fmt.Fprintf(&b, "\n    ... %s", model.DescribeOperation(ops[best[k]].Input, ops[best[k]].Output))
	}
	fmt.Fprintf(&b, "\n  model state(s) then: %s", model.DescribeState(state))
	culprit := -1
	for i := range ops {
		if !in[i] && (culprit < 0 || ops[i].Return < ops[culprit].Return) {
			culprit = i
		}
	}
	if culprit >= 0 {
		fmt.Fprintf(&b, "\n  and no order continues with the earliest-returning remaining one: %s", model.DescribeOperation(ops[culprit].Input, ops[culprit].Output))
	}
	return b.String()
}
