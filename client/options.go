package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/geoevent/geoevent/core"
)

// Options configures a Client. Zero values take the defaults of SPEC.md
// "Client-side retry defaults".
type Options struct {
	Cluster        core.Uint128  // required: the cluster id sent in Register (where to find it: New)
	PoolSize       int           // parallel sessions (sharing one connection per replica); default 1
	MaxRetries     int           // retries after the first attempt; default 5
	BaseBackoff    time.Duration // default 100 ms
	MaxBackoff     time.Duration // default 1600 ms
	TotalTimeout   time.Duration // default 30 s: one call, across its retries
	ConnectTimeout time.Duration // default 5 s: one dial
	RequestTimeout time.Duration // default 30 s: one attempt
	DisableRetries bool          // send each request once
	MaxBatchEvents int           // default 10,000: larger Insert/Upsert batches are split
	// OnRetry, when set, is called on the calling goroutine each time a
	// call sends its request again, just before it does, with the error
	// of the attempt before: a *core.Error of a retryable code (212
	// CLUSTER_BUSY, ...), 201 SESSION_EXPIRED, or a connection error. It
	// counts or logs retries; it must not block.
	OnRetry func(err error)
	// Dial opens a session's connection to the replica at addr (an entry
	// of the client's addresses) within ctx (nil: TCP, under
	// ConnectTimeout). A transport other than TCP plugs in here, for
	// example the in-process connection of a gateway that runs in the
	// replica's process.
	Dial func(ctx context.Context, addr string) (Conn, error)
}

// Defaults.
const (
	DefaultPoolSize       = 1
	DefaultMaxRetries     = 5
	DefaultBaseBackoff    = 100 * time.Millisecond
	DefaultMaxBackoff     = 1600 * time.Millisecond
	DefaultTotalTimeout   = 30 * time.Second
	DefaultConnectTimeout = 5 * time.Second
	DefaultRequestTimeout = 30 * time.Second
	DefaultMaxBatchEvents = core.MaxBatchEvents
)

func (o *Options) setDefaults() error {
	if o.Cluster.IsZero() {
		return errors.New("geoevent client: Options.Cluster is required")
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"PoolSize", int64(o.PoolSize)}, {"MaxRetries", int64(o.MaxRetries)},
		{"BaseBackoff", int64(o.BaseBackoff)}, {"MaxBackoff", int64(o.MaxBackoff)},
		{"TotalTimeout", int64(o.TotalTimeout)}, {"ConnectTimeout", int64(o.ConnectTimeout)},
		{"RequestTimeout", int64(o.RequestTimeout)}, {"MaxBatchEvents", int64(o.MaxBatchEvents)},
	} {
		if f.v < 0 {
			return fmt.Errorf("geoevent client: Options.%s is negative", f.name)
		}
	}
	def := func(p *time.Duration, d time.Duration) {
		if *p == 0 {
			*p = d
		}
	}
	if o.PoolSize == 0 {
		o.PoolSize = DefaultPoolSize
	}
	if o.MaxRetries == 0 {
		o.MaxRetries = DefaultMaxRetries
	}
	if o.MaxBatchEvents == 0 {
		o.MaxBatchEvents = DefaultMaxBatchEvents
	}
	def(&o.BaseBackoff, DefaultBaseBackoff)
	def(&o.MaxBackoff, DefaultMaxBackoff)
	def(&o.TotalTimeout, DefaultTotalTimeout)
	def(&o.ConnectTimeout, DefaultConnectTimeout)
	def(&o.RequestTimeout, DefaultRequestTimeout)
	if o.MaxBackoff < o.BaseBackoff {
		o.MaxBackoff = o.BaseBackoff
	}
	return nil
}
