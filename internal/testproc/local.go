package testproc

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/geoevent/geoevent/client"
	"github.com/geoevent/geoevent/core"
	ghttp "github.com/geoevent/geoevent/http"
	geoio "github.com/geoevent/geoevent/io"
	"github.com/geoevent/geoevent/replica"
)

// LocalOptions says how StartLocal runs its replica and gateway.
type LocalOptions struct {
	Cluster core.Uint128
	Logger  *zap.Logger // the replica's and the gateway's; nil: none
	// Feed serves GET /feed and the position streams from the replica, as
	// `replica start --http` does.
	Feed bool
}

// Local is a one-replica cluster running in the test's process (an
// io.Server on a data directory in the test's temporary directory,
// listening on 127.0.0.1) with the HTTP gateway in front of it on
// 127.0.0.1, over in-process connections as `replica start --http` has.
type Local struct {
	Replica *geoio.Server
	Backend *ghttp.ClientBackend
	Gateway *ghttp.Server
	URL     string // the gateway's http://127.0.0.1:port
}

// StartLocal formats and starts the replica and the gateway; the test's
// cleanup shuts them down and fails the test if either fails to stop
// cleanly.
func StartLocal(t testing.TB, opts LocalOptions) *Local {
	t.Helper()
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	dir := filepath.Join(t.TempDir(), "data")
	if err := geoio.Format(dir, geoio.ClusterInfo{Cluster: opts.Cluster, ReplicaIndex: 0, ReplicaCount: 1}); err != nil {
		t.Fatal(err)
	}
	srv, err := geoio.Open(dir, geoio.Options{
		Addresses: []string{"127.0.0.1:0"},
		Logger:    log,
		// No background cleanup: /stats changes only by requests.
		Replica: replica.Config{CleanupEveryNS: 1 << 62},
	})
	if err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- srv.Run(context.Background()) }()
	// Serve once the loop runs: a test that ends at once would otherwise
	// close the server before Run starts, and Run then reports it closed.
	select {
	case <-srv.Started():
	case err := <-runErr:
		t.Fatalf("replica Run: %v", err)
	}
	backend, err := ghttp.NewLocalBackend(func(ctx context.Context) (client.Conn, error) {
		lc, err := srv.DialLocal(ctx)
		if err != nil {
			return nil, err
		}
		return lc, nil
	}, client.Options{Cluster: opts.Cluster})
	if err != nil {
		srv.Close()
		<-runErr
		t.Fatal(err)
	}
	cfg := ghttp.Config{Backend: backend, Logger: log}
	if opts.Feed {
		cfg.Feed = srv
	}
	gw := ServeGateway(t, cfg)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := gw.Shutdown(ctx); err != nil {
			t.Errorf("gateway shutdown: %v", err)
		}
		srv.Close()
		if err := <-runErr; err != nil {
			t.Errorf("replica Run: %v", err)
		}
		backend.Close()
	})
	return &Local{Replica: srv, Backend: backend, Gateway: gw, URL: "http://" + gw.Addr().String()}
}

// ServeGateway runs a gateway on 127.0.0.1:0 until the test ends.
func ServeGateway(t testing.TB, cfg ghttp.Config) *ghttp.Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gw, err := ghttp.Serve(ln, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		gw.Shutdown(ctx)
	})
	return gw
}
