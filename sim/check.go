package sim

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/statemachine"
)

// The checkers that run on the history after the run. Each returns a
// description of the first problem it finds, or "".

func (w *world) check() string {
	for _, f := range []func() string{w.checkLiveness, w.checkReplies, w.checkObserved, w.checkMustSee, w.checkLinearizable, w.checkConvergence} {
		if msg := f(); msg != "" {
			return msg
		}
	}
	return ""
}

func opName(op *opRec) string {
	return fmt.Sprintf("op %d (client %d, %s %s, called tick %d)", op.id, op.client, op.kind, describeReq(op), op.callTick)
}

// checkLiveness: once faults stop, every operation is answered within the
// liveness bound (counted from its call, or from the start of the quiet
// period for one called before).
func (w *world) checkLiveness() string {
	q := w.quietStart()
	for _, op := range w.hist.ops {
		from := max(op.callTick, q)
		switch {
		case op.status == stPending && w.ticks-from > w.cfg.live:
			return fmt.Sprintf("liveness: %s was never answered; faults stopped at tick %d and the run ended at %d (bound %d ticks)", opName(op), q, w.ticks, w.cfg.live)
		case op.status == stPending:
			return fmt.Sprintf("liveness: %s was still pending when the run ended", opName(op))
		case op.retTick-from > w.cfg.live:
			return fmt.Sprintf("liveness: %s took until tick %d, more than %d ticks after faults stopped at tick %d", opName(op), op.retTick, w.cfg.live, q)
		}
	}
	return ""
}

// allowedCodes are the error codes an operation of the workload may get.
func allowedCode(op *opRec, c core.Code) bool {
	switch {
	case c == 0:
		return op.expectErr == 0
	case op.expectErr != 0:
		return c == op.expectErr
	}
	switch op.kind {
	case core.OpTTLSet, core.OpTTLClear:
		return c == core.EntityNotFound.Code
	case core.OpTTLExtend:
		return c == core.EntityNotFound.Code || c == core.NoTTLSet.Code
	case core.OpGetFence, core.OpDeleteFence:
		return c == core.FenceNotFound.Code
	case core.OpGetHook, core.OpDeleteHook:
		return c == core.HookNotFound.Code
	case core.OpHookDelivered:
		return c == core.HookNotFound.Code || c == core.InvalidArgument.Code
	case core.OpReadFeed:
		return c == core.FeedTrimmed.Code // once retention has dropped what the read asks for
	}
	return false
}

// checkReplies checks each reply on its own: codes, shapes, orders, limits;
// and the feed's pages against each other (checkFeed).
func (w *world) checkReplies() string {
	if msg := w.checkFeed(); msg != "" {
		return msg
	}
	for _, op := range w.hist.ops {
		if op.status != stDone {
			continue
		}
		if !allowedCode(op, op.code) {
			return fmt.Sprintf("reply: %s got code %d", opName(op), op.code)
		}
		if op.code != 0 {
			continue
		}
		if msg := w.checkReply(op); msg != "" {
			return fmt.Sprintf("reply: %s: %s; reply %s", opName(op), msg, describeReply(op.reply))
		}
	}
	return ""
}

func (w *world) checkReply(op *opRec) string {
	switch r := op.reply.(type) {
	case *core.InsertReply:
		evs := op.req.(*core.InsertRequest).Events
		if len(r.Results) != len(evs) {
			return fmt.Sprintf("%d results for %d events", len(r.Results), len(evs))
		}
		all := true
		for i, res := range r.Results {
			if res.Index != uint32(i) {
				return fmt.Sprintf("result %d has index %d", i, res.Index)
			}
			if op.static[i] != 0 && res.Code != op.static[i] {
				return fmt.Sprintf("event %d: code %d, want %d", i, res.Code, op.static[i])
			}
			all = all && res.Code == 0
			if !r.Committed && (res.TimestampNS != 0 || res.Updated) {
				return fmt.Sprintf("event %d of an uncommitted batch has a timestamp or is updated", i)
			}
		}
		if r.Committed != all {
			return fmt.Sprintf("committed=%v but the codes say %v", r.Committed, all)
		}
	case *core.DeleteReply:
		if n := len(op.req.(*core.DeleteRequest).EntityIDs); int(r.Deleted)+int(r.NotFound) != n {
			return fmt.Sprintf("deleted+not found = %d for %d ids", r.Deleted+r.NotFound, n)
		}
	case *core.LatestResults:
		ids := *op.req.(*core.IDList)
		if len(*r) != len(ids) {
			return fmt.Sprintf("%d results for %d ids", len(*r), len(ids))
		}
		for i, x := range *r {
			if x.Found && x.Event.EntityID != ids[i] {
				return fmt.Sprintf("result %d is of entity %v", i, x.Event.EntityID)
			}
		}
	case *core.LatestResult:
		if r.Found && r.Event.EntityID != *op.req.(*core.Uint128) {
			return "the event is of another entity"
		}
	case *core.QueryResult:
		return w.checkQueryResult(op, r)
	case *core.FeedPage:
		return checkFeedPage(op.req.(*core.FeedRequest), r)
	case *core.TopologyReply:
		if r.ReplicaCount != uint32(len(w.nodes)) || len(r.Nodes) != len(w.nodes) {
			return "the topology does not list the cluster"
		}
	case *core.PingReply:
		// Unhealthy (a replica that knows no leader): pong false, and a reason.
		if r.Pong == (r.Reason != "") {
			return "ping is pong with a reason, or neither"
		}
	}
	return ""
}

func (w *world) checkQueryResult(op *opRec, r *core.QueryResult) string {
	limit := core.DefaultQueryLimit
	var group core.GroupFilter
	switch q := op.req.(type) {
	case *core.RadiusQuery:
		limit, group = int(q.Limit), q.Group
	case *core.PolygonQuery:
		limit, group = int(q.Limit), q.Group
	case *core.LatestQuery:
		limit, group = int(q.Limit), q.Group
	case *core.BBoxQuery:
		limit, group = int(q.Limit), q.Group
	case *core.NearestQuery:
		limit, group = int(q.Limit), q.Group
	case *core.HistoryQuery:
		limit = int(q.Limit)
	}
	if limit == 0 {
		limit = core.DefaultQueryLimit
	}
	switch {
	case len(r.Events) > limit:
		return fmt.Sprintf("%d events for a limit of %d", len(r.Events), limit)
	case r.HasMore && r.Cursor == "":
		return "has more without a cursor"
	case r.HasMore && len(r.Events) != limit && (w.cfg.maxScanWork == 0 || op.kind == core.OpEntityHistory):
		// A page may end early at the state machine's budget of work
		// (some 200,000 keys of a radius or a simulated polygon), far
		// more than a simulated state holds unless the run sets a small
		// budget (maxScanWork): otherwise a page with more to come is
		// full. A history page is always full.
		return "has more without a full page"
	case (op.kind == core.OpQueryRadius || op.kind == core.OpQueryNearest) && len(r.DistancesMM) != len(r.Events):
		return "distances do not match the events"
	}
	seen := map[core.Uint128]bool{}
	for i := range r.Events {
		e := &r.Events[i]
		if group.Set && e.GroupID != group.ID {
			return fmt.Sprintf("event %d is of group %d", i, e.GroupID)
		}
		if op.kind != core.OpEntityHistory {
			if seen[e.EntityID] {
				return fmt.Sprintf("entity %v appears twice", e.EntityID)
			}
			seen[e.EntityID] = true
		}
		if i == 0 {
			continue
		}
		p := &r.Events[i-1]
		switch op.kind {
		case core.OpQueryRadius, core.OpQueryPolygon, core.OpQueryBBox:
			if c := cmp.Compare(p.CellID, e.CellID); c > 0 || (c == 0 && !p.EntityID.Less(e.EntityID)) {
				return fmt.Sprintf("events %d and %d are out of (cell, entity) order", i-1, i)
			}
		case core.OpQueryNearest:
			if c := cmp.Compare(r.DistancesMM[i-1], r.DistancesMM[i]); c > 0 || (c == 0 && !p.EntityID.Less(e.EntityID)) {
				return fmt.Sprintf("events %d and %d are out of (distance, entity) order", i-1, i)
			}
		case core.OpQueryLatest:
			if c := cmp.Compare(p.TimestampNS, e.TimestampNS); c < 0 || (c == 0 && !e.EntityID.Less(p.EntityID)) {
				return fmt.Sprintf("events %d and %d are not newest first", i-1, i)
			}
		}
	}
	switch q := op.req.(type) {
	case *core.RadiusQuery:
		for i, d := range r.DistancesMM {
			if d > q.RadiusMM {
				return fmt.Sprintf("event %d is %d mm away, beyond the radius", i, d)
			}
		}
	case *core.NearestQuery:
		for i, d := range r.DistancesMM {
			if q.MaxDistanceMM != 0 && d > q.MaxDistanceMM {
				return fmt.Sprintf("event %d is %d mm away, beyond max_distance", i, d)
			}
		}
	case *core.HistoryQuery:
		for i := range r.Events {
			if r.Events[i].EntityID != q.EntityID {
				return fmt.Sprintf("event %d is of another entity", i)
			}
		}
	case *core.LatestQuery:
		for i := range r.Events {
			if r.Events[i].TimestampNS <= q.SinceNS {
				return fmt.Sprintf("event %d is not after since_ns", i)
			}
		}
	}
	return ""
}

// observedEvents lists every event a successful read returned.
func observedEvents(op *opRec) []*core.GeoEvent {
	if op.status != stDone || op.code != 0 {
		return nil
	}
	var out []*core.GeoEvent
	switch r := op.reply.(type) {
	case *core.QueryResult:
		for i := range r.Events {
			out = append(out, &r.Events[i])
		}
	case *core.LatestResult:
		if r.Found {
			out = append(out, &r.Event)
		}
	case *core.LatestResults:
		for i := range *r {
			if (*r)[i].Found {
				out = append(out, &(*r)[i].Event)
			}
		}
	}
	return out
}

// writeOf returns the write and the event index an observed event's tag
// names, or an explanation.
func (w *world) writeOf(e *core.GeoEvent) (*opRec, int, string) {
	id, idx := e.UserData.Hi, e.UserData.Lo
	if id == 0 || id > uint64(len(w.hist.ops)) {
		return nil, 0, "its tag names no operation"
	}
	wr := w.hist.ops[id-1]
	req, ok := wr.req.(*core.InsertRequest)
	if !ok || idx >= uint64(len(req.Events)) {
		return nil, 0, "its tag names no event of a write"
	}
	return wr, int(idx), ""
}

// checkObserved: every event a read returns was written by a write of the
// workload exactly as sent (but for the timestamp and cell the leader
// sets), with the right cell, and never by a batch that did not commit.
func (w *world) checkObserved() string {
	for _, op := range w.hist.ops {
		for _, e := range observedEvents(op) {
			wr, i, why := w.writeOf(e)
			if why != "" {
				return fmt.Sprintf("observed: %s returned event %s: %s", opName(op), describeEvent(e), why)
			}
			sent := wr.req.(*core.InsertRequest).Events[i]
			want := sent
			want.TimestampNS, want.CellID = e.TimestampNS, e.CellID
			cells := []core.GeoEvent{sent}
			statemachine.AssignCells(cells)
			switch {
			case want != *e:
				return fmt.Sprintf("observed: %s returned event %s, which differs from what %s wrote", opName(op), describeEvent(e), opName(wr))
			case e.CellID != cells[0].CellID:
				return fmt.Sprintf("observed: %s returned event %s with cell %#x, want %#x", opName(op), describeEvent(e), e.CellID, cells[0].CellID)
			case sent.TimestampNS != 0 && e.TimestampNS != sent.TimestampNS:
				return fmt.Sprintf("observed: %s returned event %s with another timestamp than the client's %d", opName(op), describeEvent(e), sent.TimestampNS)
			case wr.status == stDone && wr.code != 0:
				return fmt.Sprintf("observed: %s returned event %s of %s, which failed with code %d", opName(op), describeEvent(e), opName(wr), wr.code)
			case wr.status == stDone && !wr.reply.(*core.InsertReply).Committed:
				return fmt.Sprintf("observed: %s returned event %s of %s, a batch that did not commit", opName(op), describeEvent(e), opName(wr))
			case wr.status == stDone && wr.reply.(*core.InsertReply).Results[i].TimestampNS != e.TimestampNS:
				return fmt.Sprintf("observed: %s returned event %s of %s, which reported timestamp %d", opName(op), describeEvent(e), opName(wr), wr.reply.(*core.InsertReply).Results[i].TimestampNS)
			case op.ret < wr.call:
				return fmt.Sprintf("observed: %s returned event %s before %s was called", opName(op), describeEvent(e), opName(wr))
			}
		}
	}
	return ""
}

// checkFeedPage checks one page of the feed: growing sequences after the
// request's, within its limit and filter, below the page's next.
func checkFeedPage(q *core.FeedRequest, r *core.FeedPage) string {
	if q.After == core.FeedEnd {
		if len(r.Notifications) != 0 || r.HasMore || r.Next != r.Last {
			return fmt.Sprintf("a read from the end: %d notifications, has_more %v, next %d, last %d", len(r.Notifications), r.HasMore, r.Next, r.Last)
		}
		return ""
	}
	limit := int(q.Limit)
	if limit == 0 {
		limit = core.DefaultFeedLimit
	}
	if len(r.Notifications) > limit {
		return fmt.Sprintf("%d notifications for a limit of %d", len(r.Notifications), limit)
	}
	last := q.After
	for i, n := range r.Notifications {
		switch {
		case n.Seq <= last:
			return fmt.Sprintf("notification %d has sequence %d after %d", i, n.Seq, last)
		case len(q.Fences) > 0 && !slices.Contains(q.Fences, n.Fence):
			return fmt.Sprintf("notification %d is of fence %s, outside the filter", i, n.Fence)
		case n.Type < core.NotifyEnter || n.Type > core.NotifyInside:
			return fmt.Sprintf("notification %d has type %d", i, n.Type)
		}
		last = n.Seq
	}
	if r.Next < last {
		return fmt.Sprintf("next %d is below the last sequence %d", r.Next, last)
	}
	if r.Last < last {
		return fmt.Sprintf("last %d is below the sequence %d of the page", r.Last, last)
	}
	return ""
}

// checkFeed checks the feed as a consumer following it across crashes and
// failovers sees it: every page, from whichever replica answered, agrees
// with every other on what each sequence holds (no replica's feed differs
// or loses a committed notification), and of two pages of the whole feed
// (after 0, no filter), one that began after the other ended agrees with
// it as far as both reach: nothing committed appears twice or moves. The
// later page may be shorter: any replica answers a feed read from what it
// has applied, and a follower may lag.
func (w *world) checkFeed() string {
	bySeq := map[uint64]core.Notification{}
	var whole []*opRec // unfiltered pages from the start, in call order
	for _, op := range w.hist.ops {
		r, ok := op.reply.(*core.FeedPage)
		if op.status != stDone || op.code != 0 || !ok {
			continue
		}
		for _, n := range r.Notifications {
			if prev, seen := bySeq[n.Seq]; seen && prev != n {
				return fmt.Sprintf("feed: %s: sequence %d holds %+v, another page had %+v", opName(op), n.Seq, n, prev)
			}
			bySeq[n.Seq] = n
		}
		if q := op.req.(*core.FeedRequest); q.After == 0 && len(q.Fences) == 0 && q.Types == 0 {
			whole = append(whole, op)
		}
	}
	for _, a := range whole {
		ra := a.reply.(*core.FeedPage).Notifications
		for _, b := range whole {
			if b.call < a.ret {
				continue
			}
			rb := b.reply.(*core.FeedPage).Notifications
			for i := range min(len(ra), len(rb)) {
				if ra[i].Seq != rb[i].Seq {
					return fmt.Sprintf("feed: %s, after %s, has sequence %d at %d where that had %d", opName(b), opName(a), rb[i].Seq, i, ra[i].Seq)
				}
			}
		}
	}
	return ""
}
