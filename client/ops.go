package client

import (
	"context"

	"github.com/geoevent/geoevent/core"
)

// Insert adds events (mode insert). A batch of at most
// Options.MaxBatchEvents events is one atomic request: the reply's Committed
// says whether it was written, and Results carries every event's code. A
// larger batch is split; see the package documentation ("Large batches").
func (c *Client) Insert(ctx context.Context, events []core.GeoEvent) (*core.InsertReply, error) {
	return c.writeBatch(ctx, core.Insert, events)
}

// Upsert adds or replaces events (mode upsert); otherwise like Insert.
func (c *Client) Upsert(ctx context.Context, events []core.GeoEvent) (*core.InsertReply, error) {
	return c.writeBatch(ctx, core.Upsert, events)
}

func (c *Client) writeBatch(ctx context.Context, op *core.Op[core.InsertRequest, core.InsertReply], events []core.GeoEvent) (*core.InsertReply, error) {
	n := c.opts.MaxBatchEvents
	if len(events) <= n {
		return Call(ctx, c, op, &core.InsertRequest{Events: events})
	}
	merged := &core.InsertReply{Committed: true, Results: make([]core.EventResult, 0, len(events))}
	for chunk, start := 0, 0; start < len(events); chunk, start = chunk+1, start+n {
		end := min(start+n, len(events))
		r, err := Call(ctx, c, op, &core.InsertRequest{Events: events[start:end]})
		if err != nil {
			merged.Committed = false
			return merged, &BatchError{Chunk: chunk, Start: start, End: end, Committed: start, Err: err}
		}
		for _, res := range r.Results {
			res.Index += uint32(start)
			merged.Results = append(merged.Results, res)
		}
		if !r.Committed {
			merged.Committed = false
			return merged, &BatchError{Chunk: chunk, Start: start, End: end, Committed: start, Err: notCommitted(r, start)}
		}
	}
	return merged, nil
}

// notCommitted describes a chunk that came back with Committed false.
func notCommitted(r *core.InsertReply, start int) error {
	for _, res := range r.Results {
		if res.Code != 0 {
			info, ok := res.Code.Info()
			if !ok {
				info = core.CodeInfo{Code: res.Code, Name: "UNKNOWN", HTTPStatus: 500}
			}
			return core.Errorf(core.BatchCode(res.Code), "event %d failed with %s (%d); the chunk was not committed",
				int(res.Index)+start, info.Name, info.Code)
		}
	}
	return core.Errorf(core.InvalidEvent, "the chunk was not committed")
}

// DeleteEntities erases the entities with their whole history.
func (c *Client) DeleteEntities(ctx context.Context, ids []core.Uint128) (*core.DeleteReply, error) {
	return Call(ctx, c, core.DeleteEntities, &core.DeleteRequest{EntityIDs: ids})
}

// QueryRadius returns one page of the latest positions within a radius.
func (c *Client) QueryRadius(ctx context.Context, q *core.RadiusQuery) (*core.QueryResult, error) {
	return Call(ctx, c, core.QueryRadius, q)
}

// QueryPolygon returns one page of the latest positions inside a polygon.
func (c *Client) QueryPolygon(ctx context.Context, q *core.PolygonQuery) (*core.QueryResult, error) {
	return Call(ctx, c, core.QueryPolygon, q)
}

// QueryBBox returns one page of the latest positions in a box bounded by
// parallels and meridians (across the antimeridian when MinLonNano >
// MaxLonNano).
func (c *Client) QueryBBox(ctx context.Context, q *core.BBoxQuery) (*core.QueryResult, error) {
	return Call(ctx, c, core.QueryBBox, q)
}

// QueryNearest returns the q.Limit (k) latest positions nearest a point,
// nearest first, with their distances; the page's cursor continues with
// the next-nearest.
func (c *Client) QueryNearest(ctx context.Context, q *core.NearestQuery) (*core.QueryResult, error) {
	return Call(ctx, c, core.QueryNearest, q)
}

// QueryLatest returns one page of entities' latest positions, newest first.
func (c *Client) QueryLatest(ctx context.Context, q *core.LatestQuery) (*core.QueryResult, error) {
	return Call(ctx, c, core.QueryLatest, q)
}

// History returns one page of one entity's events, oldest first.
func (c *Client) History(ctx context.Context, q *core.HistoryQuery) (*core.QueryResult, error) {
	return Call(ctx, c, core.EntityHistory, q)
}

// GetLatest returns an entity's latest event, or Found false.
func (c *Client) GetLatest(ctx context.Context, id core.Uint128) (*core.LatestResult, error) {
	return Call(ctx, c, core.GetLatest, &id)
}

// GetLatestBatch returns the latest event of each entity, in request order.
func (c *Client) GetLatestBatch(ctx context.Context, ids []core.Uint128) (core.LatestResults, error) {
	l := core.IDList(ids)
	r, err := Call(ctx, c, core.GetLatestBatch, &l)
	if err != nil {
		return nil, err
	}
	return *r, nil
}

// TTLSet sets an entity's expiry.
func (c *Client) TTLSet(ctx context.Context, req *core.TTLSetRequest) (*core.TTLSetReply, error) {
	return Call(ctx, c, core.TTLSet, req)
}

// TTLExtend moves an entity's expiry later.
func (c *Client) TTLExtend(ctx context.Context, req *core.TTLExtendRequest) (*core.TTLExtendReply, error) {
	return Call(ctx, c, core.TTLExtend, req)
}

// TTLClear makes an entity never expire.
func (c *Client) TTLClear(ctx context.Context, req *core.TTLClearRequest) (*core.TTLClearReply, error) {
	return Call(ctx, c, core.TTLClear, req)
}

// CleanupExpired removes expired entities and older events. A nil req
// means the defaults.
func (c *Client) CleanupExpired(ctx context.Context, req *core.CleanupRequest) (*core.CleanupReply, error) {
	if req == nil {
		req = &core.CleanupRequest{}
	}
	return Call(ctx, c, core.CleanupExpired, req)
}

// Stats returns the cluster's counts.
func (c *Client) Stats(ctx context.Context) (*core.Stats, error) {
	return Call(ctx, c, core.StatsOp, nil)
}

// Status returns the contacted replica's status.
func (c *Client) Status(ctx context.Context) (*core.StatusReply, error) {
	return Call(ctx, c, core.Status, nil)
}

// Topology returns the cluster's replicas and its primary.
func (c *Client) Topology(ctx context.Context) (*core.TopologyReply, error) {
	return Call(ctx, c, core.Topology, nil)
}

// Ping checks that the cluster answers.
func (c *Client) Ping(ctx context.Context) (*core.PingReply, error) {
	return Call(ctx, c, core.Ping, nil)
}
