package http

import (
	"context"
	"fmt"

	"github.com/geoevent/geoevent/client"
	"github.com/geoevent/geoevent/core"
)

// Backend runs operations for the gateway. req and the reply are the values
// of core/codec.go's table for op (for example *core.RadiusQuery and
// *core.QueryResult; nil for stats, status, topology and ping); an
// operation's failure is a *core.Error. Do must be safe for concurrent use.
// ctx ends at the request's timeout; Do must not use it after it returns
// (the server reuses a connection's context for its next request).
//
// ClientBackend is the one the server uses: the Go client's sessions,
// over an in-process connection to the local replica (NewLocalBackend) or
// over TCP (NewClientBackend).
type Backend interface {
	Do(ctx context.Context, op core.Operation, req any) (any, error)
}

// DefaultPoolSize is the number of sessions a ClientBackend keeps by
// default: concurrent HTTP requests beyond it wait for a free session.
const DefaultPoolSize = 64

// ClientBackend is a Backend over the Go client: a pool of sessions, with
// the client's session protocol (register once per session, request
// numbers, deduplicated retries) and its retry policy.
type ClientBackend struct {
	c *client.Client
}

// LocalAddress names the replica of a NewLocalBackend in the client's
// error messages.
const LocalAddress = "in-process replica"

// NewLocalBackend makes a backend whose sessions reach the replica of this
// process through dial, which opens an in-process connection
// (io.Server.DialLocal) instead of a TCP one: each session registers over
// its connection and keeps it, and each request is a function call into the
// replica's event loop rather than a round trip through the loopback
// interface. A follower's replica forwards the requests to the leader as it
// does a TCP client's. opts.Dial is ignored; the rest as NewClientBackend.
func NewLocalBackend(dial func(ctx context.Context) (client.Conn, error), opts client.Options) (*ClientBackend, error) {
	opts.Dial = func(ctx context.Context, _ string) (client.Conn, error) { return dial(ctx) }
	return NewClientBackend([]string{LocalAddress}, opts)
}

// NewClientBackend makes a backend that talks to the replicas at addresses
// of the cluster opts.Cluster (over TCP, unless opts.Dial says otherwise).
// opts.PoolSize 0 means DefaultPoolSize.
// Batches are never split: the gateway refuses more than 10,000 events.
func NewClientBackend(addresses []string, opts client.Options) (*ClientBackend, error) {
	if opts.PoolSize == 0 {
		opts.PoolSize = DefaultPoolSize
	}
	opts.MaxBatchEvents = core.MaxEnvelopeEvents
	c, err := client.New(addresses, opts)
	if err != nil {
		return nil, err
	}
	return &ClientBackend{c: c}, nil
}

// Close closes the client's connections; calls in flight fail.
func (b *ClientBackend) Close() error { return b.c.Close() }

// Do runs op with the client.
func (b *ClientBackend) Do(ctx context.Context, op core.Operation, req any) (any, error) {
	c := b.c
	bad := func() (any, error) {
		return nil, core.Errorf(core.InternalError, "gateway: %s request of type %T", op, req)
	}
	switch op {
	case core.OpInsert, core.OpUpsert:
		r, ok := req.(*core.InsertRequest)
		if !ok {
			return bad()
		}
		if op == core.OpInsert {
			return c.Insert(ctx, r.Events)
		}
		return c.Upsert(ctx, r.Events)
	case core.OpDeleteEntities:
		r, ok := req.(*core.DeleteRequest)
		if !ok {
			return bad()
		}
		return c.DeleteEntities(ctx, r.EntityIDs)
	case core.OpTTLSet:
		r, ok := req.(*core.TTLSetRequest)
		if !ok {
			return bad()
		}
		return c.TTLSet(ctx, r)
	case core.OpTTLExtend:
		r, ok := req.(*core.TTLExtendRequest)
		if !ok {
			return bad()
		}
		return c.TTLExtend(ctx, r)
	case core.OpTTLClear:
		r, ok := req.(*core.TTLClearRequest)
		if !ok {
			return bad()
		}
		return c.TTLClear(ctx, r)
	case core.OpCleanupExpired:
		r, ok := req.(*core.CleanupRequest)
		if !ok {
			return bad()
		}
		return c.CleanupExpired(ctx, r)
	case core.OpQueryRadius:
		r, ok := req.(*core.RadiusQuery)
		if !ok {
			return bad()
		}
		return c.QueryRadius(ctx, r)
	case core.OpQueryPolygon:
		r, ok := req.(*core.PolygonQuery)
		if !ok {
			return bad()
		}
		return c.QueryPolygon(ctx, r)
	case core.OpQueryLatest:
		r, ok := req.(*core.LatestQuery)
		if !ok {
			return bad()
		}
		return c.QueryLatest(ctx, r)
	case core.OpEntityHistory:
		r, ok := req.(*core.HistoryQuery)
		if !ok {
			return bad()
		}
		return c.History(ctx, r)
	case core.OpGetLatest:
		r, ok := req.(*core.Uint128)
		if !ok {
			return bad()
		}
		return c.GetLatest(ctx, *r)
	case core.OpGetLatestBatch:
		r, ok := req.(*core.IDList)
		if !ok {
			return bad()
		}
		rs, err := c.GetLatestBatch(ctx, *r)
		if err != nil {
			return nil, err
		}
		return &rs, nil
	case core.OpStats:
		return c.Stats(ctx)
	case core.OpStatus:
		return c.Status(ctx)
	case core.OpTopology:
		return c.Topology(ctx)
	case core.OpPing:
		return c.Ping(ctx)
	}
	return nil, core.Errorf(core.UnknownOperation, "gateway: unknown operation %s", fmt.Sprint(op))
}
