package http

import (
	"context"

	"github.com/geoevent/geoevent/client"
	"github.com/geoevent/geoevent/core"
)

// Backend runs operations for the gateway: Do runs call, an operation of
// core's table with its request, and gives call its reply. An operation's
// failure is a *core.Error. Do must be safe for concurrent use. ctx ends at
// the request's timeout; Do must not use ctx or call after it returns (the
// server reuses a connection's context for its next request).
//
// ClientBackend is the one the server uses: the Go client's sessions,
// over an in-process connection to the local replica (NewLocalBackend) or
// over TCP (NewClientBackend).
type Backend interface {
	Do(ctx context.Context, call Call) error
}

// Call is one operation the gateway asks its Backend to run. A backend
// over the Go client runs it typed (Run); one that answers from values (a
// test's fake) reads Request and answers with SetReply.
type Call interface {
	// Operation is the call's operation.
	Operation() core.Operation
	// Request is the request, of the Go type core's table gives the
	// operation (a *core.RadiusQuery for query_radius; nil when it
	// carries none).
	Request() any
	// SetReply sets the reply, which must be of the table's reply type
	// (a *core.QueryResult for query_radius); another type is the
	// backend's bug, INTERNAL_ERROR.
	SetReply(reply any) error
	// Run runs the call with c (client.Call) and keeps its reply.
	Run(ctx context.Context, c *client.Client) error
}

// opCall is the gateway's Call of one table entry.
type opCall[Req, Rep any] struct {
	op    *core.Op[Req, Rep]
	req   *Req
	reply *Rep
	bad   any // a reply of the wrong type, for the gateway's message
	badOK bool
}

func (c *opCall[Req, Rep]) Operation() core.Operation { return c.op.Code }

func (c *opCall[Req, Rep]) Request() any {
	if c.req == nil {
		return nil
	}
	return c.req
}

func (c *opCall[Req, Rep]) SetReply(reply any) error {
	r, ok := reply.(*Rep)
	if !ok || r == nil {
		c.bad, c.badOK = reply, true
		return core.Errorf(core.InternalError, "the backend answered %s with %T", c.op.Code, reply)
	}
	c.reply = r
	return nil
}

func (c *opCall[Req, Rep]) Run(ctx context.Context, cl *client.Client) error {
	r, err := client.Call(ctx, cl, c.op, c.req)
	if err != nil {
		return err
	}
	c.reply = r
	return nil
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

// Do runs call with the client.
func (b *ClientBackend) Do(ctx context.Context, call Call) error { return call.Run(ctx, b.c) }
