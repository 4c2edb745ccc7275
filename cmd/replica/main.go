// Command replica is the GeoEvent server: one replica of a cluster.
//
//	replica format --cluster ID --replica I --replica-count N --data DIR
//	replica start  --data DIR --addresses A0,A1,...  [--http HOST:PORT] [--cors-origin ORIGIN]... [--pprof HOST:PORT] [connection flags]
//	replica dev    [--data DIR] [--http HOST:PORT] [--addresses HOST:PORT] [--cors-origin ORIGIN]... [--pprof HOST:PORT] [connection flags]
//	replica backup  --data DIR --to FILE
//	replica restore --from FILE --data NEWDIR [--replica I] [--whole-cluster]
//
// format makes DIR the data directory of replica I of cluster ID (a UUID or
// a decimal id) with N replicas (1, 3 or 5); it refuses a directory that is
// not empty. start serves the replica whose data is in DIR: --addresses
// lists every replica's binary-protocol address in replica order (as many
// as the cluster has replicas), and this replica listens on its own entry,
// for clients and for the other replicas alike. dev is a one-replica cluster for development: it
// formats DIR (default ./geoevent-data) with a random cluster id when it is
// empty, then serves it on 127.0.0.1:3000 and the HTTP JSON API on
// 127.0.0.1:8080. With --http, start and dev serve the HTTP JSON API
// (package http) on HOST:PORT once the binary protocol is listening; it
// submits to the replica of the same process as a client of the binary
// protocol whose connections are in-process (io.Server.DialLocal): the
// same sessions and frames, no sockets. SIGINT and SIGTERM stop the server
// cleanly (exit code 0): the HTTP server first, letting requests in flight
// finish, then the replica.
//
// One process at a time uses a data directory: format, start and dev take
// an exclusive lock on DIR (the file DIR/LOCK, which holds the holder's
// pid; see io.LockDir) before they touch it, and hold it until they exit
// (dev from its format through its serving). Another process on the same
// DIR exits at once with code 1, naming the directory and the holder's
// pid.
//
// --cors-origin ORIGIN (start and dev; repeatable or comma-separated) lets
// browser pages of ORIGIN (scheme://host[:port], e.g.
// http://localhost:3000) call the HTTP API cross-origin; "*" allows any
// origin, for development only. None is allowed by default (see package
// http, CORS).
//
// --pprof HOST:PORT (start and dev) serves Go's profiling endpoints
// (net/http/pprof) there, for example
// go tool pprof http://HOST:PORT/debug/pprof/profile?seconds=10. It is a
// debugging aid: keep it on loopback.
//
// --map-tiles URL (start and dev) gives the map page at GET / of the HTTP
// API base-map tiles, a template such as
// https://tile.openstreetmap.org/{z}/{x}/{y}.png; without it the map has a
// plain background.
//
// Every flag can also come from an environment variable, GEOEVENT_ and
// the flag's name in capitals with '_' for '-' (--replica-count:
// GEOEVENT_REPLICA_COUNT); the command line wins (env.go). "replica
// COMMAND -h" lists each flag with its variable.
//
// With --http the server also serves GET /metrics (Prometheus's text
// format: the replica's and the gateway's metrics, in one set), and the
// probes /healthz and /readyz, which answer from the state the replica's
// event loop publishes (io.Server.Health; see package http).
//
// backup writes a consistent backup of the replica whose data directory is
// DIR to FILE (backup.go, io.Server.Backup): when a replica runs on DIR,
// that replica serves it on the Unix socket DIR/backup.sock (start and
// dev listen there), holding every write acknowledged before the backup
// began; when none runs, backup reads DIR itself, holding its lock.
// restore lays a backup out as a new data directory (io.RestoreBackup),
// checking every part's checksum first: a damaged backup is refused and
// creates nothing. See docs/operations.md, "Backup and restore".
//
// The connection flags (start and dev) bound the binary protocol's
// connections (io.Options): --read-timeout (default 30s) closes a
// connection whose frame is not complete that long after its first byte,
// --idle-timeout (default 5m) a client's connection with nothing read or
// written and no request in flight for that long, and --max-connections
// (default 10000) answers one connection more with CLUSTER_BUSY and closes
// it; 0 turns each off.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/google/uuid"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/geoevent/geoevent/client"
	"github.com/geoevent/geoevent/core"
	ghttp "github.com/geoevent/geoevent/http"
	geoio "github.com/geoevent/geoevent/io"
	"github.com/geoevent/geoevent/io/hugepages"
)

const usage = `usage:
  replica format --cluster ID --replica I --replica-count N --data DIR
  replica start  --data DIR --addresses A0,A1,...  [--http HOST:PORT] [--cors-origin ORIGIN]... [--pprof HOST:PORT] [connection flags]
  replica dev    [--data DIR] [--http HOST:PORT] [--addresses HOST:PORT] [--cors-origin ORIGIN]... [--pprof HOST:PORT] [connection flags]
  replica backup  --data DIR --to FILE
  replica restore --from FILE --data NEWDIR [--replica I] [--whole-cluster]

format  make DIR the data directory of replica I (0-based) of the cluster ID
        (a UUID or a decimal id) of N replicas (1, 3 or 5); DIR must be new
        or empty. Every replica of a cluster gets the same ID and N.
start   serve the replica in DIR; --addresses lists every replica's
        binary-protocol address in replica order (N of them, the same list
        for every replica), and replica I listens on the I-th, for clients
        and the other replicas; --http also serves the HTTP JSON API on
        HOST:PORT.
dev     a one-replica cluster for development: formats DIR (default
        ./geoevent-data) with a random cluster id when it is empty, and
        serves the binary protocol on --addresses (default 127.0.0.1:3000)
        and the HTTP JSON API on --http (default 127.0.0.1:8080; "" for
        none).
backup  write a consistent backup of the replica in DIR to FILE, while it
        runs (it serves the backup on DIR/backup.sock) or not.
restore make NEWDIR a data directory holding a backup's state, for start
        or dev to serve; a damaged backup is refused and creates nothing.

--cors-origin (start, dev; repeatable or comma-separated) lets browser pages
of ORIGIN (scheme://host[:port], e.g. http://localhost:3000) call the HTTP
API; * allows any origin, for development only. Default: none.

--map-tiles URL (start, dev) gives the map page at GET / base-map tiles,
e.g. https://tile.openstreetmap.org/{z}/{x}/{y}.png; default: none.

--pprof (start, dev) serves Go's profiling endpoints (net/http/pprof) on
HOST:PORT, e.g. go tool pprof http://HOST:PORT/debug/pprof/profile?seconds=10;
a debugging aid: keep it on loopback.

Binary-protocol connections (start, dev; 0 turns each off):
  --read-timeout D     close a connection whose frame is not complete D
                       after its first byte (default 30s)
  --idle-timeout D     close a client's connection after D with nothing
                       read or written and no request in flight (default
                       5m; the Go client reconnects on its next call)
  --max-connections N  at most N connections at once; one more is answered
                       CLUSTER_BUSY (retryable) and closed (default 10000)

Every flag may come from the environment instead: GEOEVENT_ and its name in
capitals, '-' as '_' (--replica-count: GEOEVENT_REPLICA_COUNT); the command
line wins. With --http the server also serves GET /metrics (Prometheus),
/healthz (liveness) and /readyz (readiness).

Run "replica COMMAND -h" for a command's flags and their variables.
`

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the command failed
	exitUsage = 2 // bad command line
)

func main() {
	terminal = isTerminal(os.Stderr)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// terminal: standard error is a terminal, where backup and restore draw
// their progress.
var terminal bool

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "format":
		return format(args[1:], stdout, stderr)
	case "start":
		return start(args[1:], stderr)
	case "dev":
		return dev(args[1:], stdout, stderr)
	case "backup":
		return backup(args[1:], stdout, stderr, terminal)
	case "restore":
		return restore(args[1:], stdout, stderr, terminal)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "replica: unknown command %q\n\n%s", args[0], usage)
	return exitUsage
}

// parse parses a command's flags; every name in required must be given.
// When it returns false the command exits with code.
func parse(fset *flag.FlagSet, args []string, stderr io.Writer, required ...string) (code int, ok bool) {
	fset.SetOutput(stderr)
	fset.Usage = func() { printUsage(fset, stderr) }
	if err := fset.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false // the flag package printed the error and the flags
	}
	if fset.NArg() > 0 {
		fmt.Fprintf(stderr, "replica %s: unexpected argument %q\n", fset.Name(), fset.Arg(0))
		return exitUsage, false
	}
	if err := applyEnv(fset); err != nil {
		fmt.Fprintf(stderr, "replica %s: %v\n", fset.Name(), err)
		return exitUsage, false
	}
	set := map[string]bool{}
	fset.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, name := range required {
		if !set[name] {
			fmt.Fprintf(stderr, "replica %s: --%s is required (or set %s)\n", fset.Name(), name, envName(name))
			return exitUsage, false
		}
	}
	return exitOK, true
}

func format(args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("format", flag.ContinueOnError)
	cluster := fset.String("cluster", "", "the cluster `ID`: a UUID or a decimal id, not zero; every replica of the cluster gets the same")
	index := fset.Uint("replica", 0, "this replica's index `I`, 0 .. N-1")
	count := fset.Uint("replica-count", 0, "the number of replicas `N`: 1, 3 or 5 (a cluster of N survives (N-1)/2 failed replicas)")
	data := fset.String("data", "", "the data directory `DIR` (created if absent; must be empty)")
	if code, ok := parse(fset, args, stderr, "cluster", "replica", "replica-count", "data"); !ok {
		return code
	}
	id, err := core.ParseID(*cluster, true)
	if err != nil {
		fmt.Fprintf(stderr, "replica format: --cluster: %v (want a UUID or a decimal id)\n", err)
		return exitUsage
	}
	if *index > math.MaxUint32 || *count > math.MaxUint32 {
		fmt.Fprintf(stderr, "replica format: --replica and --replica-count must fit in 32 bits\n")
		return exitUsage
	}
	info := geoio.ClusterInfo{Cluster: id, ReplicaIndex: uint32(*index), ReplicaCount: uint32(*count)}
	if err := geoio.Format(*data, info); err != nil {
		fmt.Fprintf(stderr, "replica format: %v\n", err)
		return exitError
	}
	fmt.Fprintf(stdout, "formatted %s: cluster %s, replica %d of %d\n", *data, info.Cluster, info.ReplicaIndex, info.ReplicaCount)
	return exitOK
}

func start(args []string, stderr io.Writer) int {
	fset := flag.NewFlagSet("start", flag.ContinueOnError)
	data := fset.String("data", "", "the data directory `DIR`, made by replica format")
	addresses := fset.String("addresses", "", "every replica's binary-protocol address `A0,A1,...` (host:port), in replica order")
	httpAddr := fset.String("http", "", "serve the HTTP JSON API on `HOST:PORT` (default: none)")
	var cors originList
	fset.Var(&cors, "cors-origin", corsUsage)
	pprofAddr := fset.String("pprof", "", pprofUsage)
	mapTiles := fset.String("map-tiles", "", mapTilesUsage)
	lim := connLimitFlags(fset)
	if code, ok := parse(fset, args, stderr, "data", "addresses"); !ok {
		return code
	}
	addrs, err := splitAddresses(*addresses)
	if err != nil {
		fmt.Fprintf(stderr, "replica start: --addresses: %v\n", err)
		return exitUsage
	}
	info, err := geoio.ReadClusterFile(*data)
	if err != nil {
		fmt.Fprintf(stderr, "replica start: %v\n", err)
		return exitError
	}
	if len(addrs) != int(info.ReplicaCount) {
		fmt.Fprintf(stderr, "replica start: --addresses lists %d address(es), but the cluster in %s has %d replica(s): give every replica's binary-protocol address, in replica order (this is replica %d)\n",
			len(addrs), *data, info.ReplicaCount, info.ReplicaIndex)
		return exitUsage
	}
	log, err := newLogger(false)
	if err != nil {
		fmt.Fprintf(stderr, "replica start: %v\n", err)
		return exitError
	}
	defer log.Sync()
	if err := ghttp.CheckMapTiles(*mapTiles); err != nil {
		fmt.Fprintf(stderr, "replica start: --map-tiles: %v\n", err)
		return exitUsage
	}
	return serve(log, serveConfig{dir: *data, addrs: addrs, httpAddr: *httpAddr, cors: cors, pprofAddr: *pprofAddr, mapTiles: *mapTiles, limits: *lim, cmd: "start"}, stderr)
}

func dev(args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("dev", flag.ContinueOnError)
	data := fset.String("data", "geoevent-data", "the data directory `DIR`; formatted as a new one-replica cluster when empty or absent")
	httpAddr := fset.String("http", "127.0.0.1:8080", "serve the HTTP JSON API on `HOST:PORT` (\"\": none)")
	addresses := fset.String("addresses", "127.0.0.1:3000", "the binary-protocol address `HOST:PORT`")
	var cors originList
	fset.Var(&cors, "cors-origin", corsUsage)
	pprofAddr := fset.String("pprof", "", pprofUsage)
	mapTiles := fset.String("map-tiles", "", mapTilesUsage)
	lim := connLimitFlags(fset)
	if code, ok := parse(fset, args, stderr); !ok {
		return code
	}
	if err := ghttp.CheckMapTiles(*mapTiles); err != nil {
		fmt.Fprintf(stderr, "replica dev: --map-tiles: %v\n", err)
		return exitUsage
	}
	addrs, err := splitAddresses(*addresses)
	if err == nil && len(addrs) != 1 {
		err = fmt.Errorf("dev runs a one-replica cluster: give one HOST:PORT, not %d", len(addrs))
	}
	if err != nil {
		fmt.Fprintf(stderr, "replica dev: --addresses: %v\n", err)
		return exitUsage
	}
	log, err := newLogger(true)
	if err != nil {
		fmt.Fprintf(stderr, "replica dev: %v\n", err)
		return exitError
	}
	defer log.Sync()

	// The data directory's lock is taken before anything else and held
	// from the format through the serving: another process is refused.
	var lock *geoio.DirLock
	info, err := geoio.ReadClusterFile(*data)
	if errors.Is(err, fs.ErrNotExist) {
		info = geoio.ClusterInfo{ReplicaIndex: 0, ReplicaCount: 1}
		if info.Cluster, err = core.ParseUUID(uuid.NewString()); err == nil {
			lock, err = geoio.FormatAndLock(*data, info)
		}
		if errors.Is(err, geoio.ErrNotEmpty) {
			err = fmt.Errorf("%s holds files but no cluster file, so it is not a GeoEvent data directory; pass --data with a new or empty directory", *data)
		}
		if err == nil {
			log.Info("formatted a new one-replica cluster", zap.String("data", *data), zap.String("cluster", info.Cluster.String()))
		}
	} else if err == nil {
		lock, err = geoio.LockDir(*data)
	}
	if err != nil {
		fmt.Fprintf(stderr, "replica dev: %v\n", err)
		return exitError
	}
	defer lock.Close() // serve's server took it over; on its failure, exiting releases it anyway
	banner := func(addr, httpAddr string) {
		fmt.Fprintf(stdout, `GeoEvent dev replica: cluster %[1]s, data in %[2]s
  binary protocol on %[3]s: register with cluster id %[1]s
  Go SDK:  id, _ := core.ParseUUID("%[1]s")
           c, err := client.New([]string{"%[3]s"}, client.Options{Cluster: id})
`, info.Cluster, *data, addr)
		if httpAddr != "" {
			fmt.Fprintf(stdout, "  HTTP JSON API on http://%[1]s: curl http://%[1]s/ping (the API: GET /openapi.json)\n", httpAddr)
			fmt.Fprintf(stdout, "  probes: /healthz (liveness), /readyz (readiness); Prometheus metrics: /metrics\n")
		}
		fmt.Fprintf(stdout, "  Ctrl-C stops the replica cleanly.\n")
	}
	return serve(log, serveConfig{dir: *data, lock: lock, addrs: addrs, httpAddr: *httpAddr, cors: cors, pprofAddr: *pprofAddr, mapTiles: *mapTiles, limits: *lim, banner: banner, cmd: "dev"}, stderr)
}

// mapTilesUsage is the help of --map-tiles (start, dev).
const mapTilesUsage = "base-map tiles of the map page at GET / (HTTP): a `URL` template such as https://tile.openstreetmap.org/{z}/{x}/{y}.png (default: none, a plain background)"

// serveConfig is what start and dev hand to serve.
type serveConfig struct {
	dir       string
	lock      *geoio.DirLock // dir's, held (dev); nil: serve takes it (geoio.Open)
	addrs     []string
	httpAddr  string // "": no HTTP gateway
	cors      []string
	pprofAddr string // "": no profiling endpoint
	mapTiles  string // the map page's tile URL template ("": none)
	banner    func(addr, httpAddr string)
	cmd       string // for messages: "start" or "dev"
	limits    connLimits
}

// connLimits are the binary protocol's connection flags (start, dev).
type connLimits struct {
	readTimeout, idleTimeout time.Duration
	maxConnections           int
}

// connLimitFlags defines the connection flags on fset; their defaults are
// io.Options'.
func connLimitFlags(fset *flag.FlagSet) *connLimits {
	l := &connLimits{}
	fset.DurationVar(&l.readTimeout, "read-timeout", 30*time.Second, "close a binary-protocol connection that has not completed a frame `D` after its first byte (0: never)")
	fset.DurationVar(&l.idleTimeout, "idle-timeout", 5*time.Minute, "close a client's binary-protocol connection after `D` with nothing read or written and no request waiting for its answer (0: never)")
	fset.IntVar(&l.maxConnections, "max-connections", 10000, "at most `N` binary-protocol connections open at once, clients' and other replicas'; one more gets CLUSTER_BUSY (0: no limit)")
	return l
}

// options sets the connection limits in opts (0 means none: io.Options
// takes a negative value for that).
func (l connLimits) options(opts geoio.Options) geoio.Options {
	none := func(d time.Duration) time.Duration {
		if d <= 0 {
			return -1
		}
		return d
	}
	opts.ReadTimeout, opts.IdleTimeout = none(l.readTimeout), none(l.idleTimeout)
	opts.MaxConnections = l.maxConnections
	if opts.MaxConnections <= 0 {
		opts.MaxConnections = -1
	}
	return opts
}

// serve opens the replica in cfg.dir, serves HTTP on cfg.httpAddr when it
// is not empty, and runs both until SIGINT or SIGTERM.
func serve(log *zap.Logger, cfg serveConfig, stderr io.Writer) int {
	dir, addrs, httpAddr, banner, cmd := cfg.dir, cfg.addrs, cfg.httpAddr, cfg.banner, cfg.cmd
	hugepages.Advise() // before recovery grows the heap
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.pprofAddr != "" {
		stopPprof, err := servePprof(cfg.pprofAddr, log)
		if err != nil {
			fmt.Fprintf(stderr, "replica %s: --pprof: %v\n", cmd, err)
			return exitError
		}
		defer stopPprof()
	}
	set := metrics.NewSet() // the replica's and the gateway's metrics: GET /metrics
	opts := cfg.limits.options(geoio.Options{Addresses: addrs, Logger: log, Metrics: set})
	var srv *geoio.Server
	var err error
	if cfg.lock != nil {
		srv, err = geoio.OpenLocked(cfg.lock, opts)
	} else {
		srv, err = geoio.Open(dir, opts) // takes the data directory's lock
	}
	if err != nil {
		log.Error("cannot start", zap.Error(err))
		fmt.Fprintf(stderr, "replica %s: %v\n", cmd, err)
		return exitError
	}
	stopBackups := serveBackups(srv, dir, log)
	defer stopBackups()
	// The gateway and the webhooks' deliverer are clients of the replica
	// in this process: their sessions submit to the event loop over
	// in-process connections (the replica holds requests until it has
	// applied what it recovered, and a follower forwards them to the
	// leader).
	dial := func(ctx context.Context) (client.Conn, error) {
		lc, err := srv.DialLocal(ctx)
		if err != nil {
			return nil, err
		}
		return lc, nil
	}
	hooks, stopHooks, err := startWebhooks(srv, dial, log, set)
	if err != nil {
		srv.Close()
		log.Error("cannot start the webhooks", zap.Error(err))
		fmt.Fprintf(stderr, "replica %s: webhooks: %v\n", cmd, err)
		return exitError
	}
	defer stopHooks()
	var gw *ghttp.Server
	var backend *ghttp.ClientBackend
	if httpAddr != "" {
		backend, err = ghttp.NewLocalBackend(dial, client.Options{Cluster: srv.Cluster().Cluster})
		if err == nil {
			gw, err = ghttp.Listen(httpAddr, ghttp.Config{Backend: backend, Logger: log, CORSOrigins: cfg.cors, MapTiles: cfg.mapTiles,
				Metrics: set, Health: probeHealth(srv), Feed: srv})
			if err != nil {
				backend.Close()
			}
		}
		if err != nil {
			srv.Close()
			log.Error("cannot serve HTTP", zap.Error(err))
			fmt.Fprintf(stderr, "replica %s: --http: %v\n", cmd, err)
			return exitError
		}
		log.Info("HTTP gateway listening", zap.String("http", gw.Addr().String()))
	}
	runCtx, stopRun := context.WithCancel(context.Background())
	defer stopRun()
	runDone := make(chan error, 1)
	go func() { runDone <- srv.Run(runCtx) }()
	// The banner says the replica answers: print it once the loop runs.
	select {
	case <-srv.Started():
	case err := <-runDone:
		runDone <- err // reported below
	}
	if banner != nil {
		h := ""
		if gw != nil {
			h = gw.Addr().String()
		}
		banner(srv.Addr().String(), h)
	}
	var gwDone <-chan struct{}
	if gw != nil {
		gwDone = gw.Done()
	}
	ran := false
	select {
	case <-ctx.Done():
		log.Info("signal received: stopping")
	case err = <-runDone:
		ran = true
	case <-gwDone:
		err = fmt.Errorf("the HTTP server stopped: %w", gw.Err())
	}
	// HTTP first: requests in flight finish against the running replica.
	if gw != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if serr := gw.Shutdown(sctx); serr != nil {
			log.Warn("HTTP requests still in flight were cut off", zap.Error(serr))
		}
		cancel()
	}
	hooks.Close() // no more posts: the replica is about to stop
	stopRun()
	if !ran {
		if rerr := <-runDone; err == nil {
			err = rerr
		}
	}
	if cerr := srv.Close(); err == nil {
		err = cerr
	}
	// The backend's connections go last, once no request can use them.
	if backend != nil {
		backend.Close()
	}
	if err != nil {
		log.Error("stopped on an error", zap.Error(err))
		return exitError
	}
	if ctx.Err() != nil {
		log.Info("signal received: stopped cleanly")
	}
	return exitOK
}

// startWebhooks starts the deliverer of the webhooks (io/webhooks.go) over
// a client of the local replica; stop closes that client once the
// deliverer is closed.
func startWebhooks(srv *geoio.Server, dial func(context.Context) (client.Conn, error), log *zap.Logger, set *metrics.Set) (*geoio.Webhooks, func(), error) {
	hc, err := client.New([]string{ghttp.LocalAddress}, client.Options{Cluster: srv.Cluster().Cluster, PoolSize: 8,
		Dial: func(ctx context.Context, _ string) (client.Conn, error) { return dial(ctx) }})
	if err != nil {
		return nil, nil, err
	}
	w, err := srv.StartWebhooks(geoio.WebhookOptions{Client: hc, Body: ghttp.WebhookBody, Logger: log, Metrics: set})
	if err != nil {
		hc.Close()
		return nil, nil, err
	}
	return w, func() { w.Close(); hc.Close() }, nil
}

const corsUsage = "let browser pages of `ORIGIN` (scheme://host[:port], e.g. http://localhost:3000) call the HTTP API cross-origin; repeatable or comma-separated; * allows any origin: for development only (default: none)"

// originList is the value of --cors-origin: origins, from repeated flags
// or comma-separated lists.
type originList []string

func (l *originList) String() string { return strings.Join(*l, ",") }

func (l *originList) Set(s string) error {
	for _, o := range strings.Split(s, ",") {
		o = strings.TrimSpace(o)
		if err := ghttp.CheckCORSOrigin(o); err != nil {
			return err
		}
		*l = append(*l, o)
	}
	return nil
}

// splitAddresses splits a comma-separated list of host:port addresses.
func splitAddresses(s string) ([]string, error) {
	var out []string
	for _, a := range strings.Split(s, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			return nil, fmt.Errorf("empty address in %q", s)
		}
		out = append(out, a)
	}
	return out, nil
}

// newLogger builds the zap logger: console encoding for dev, JSON for
// start, both to standard error.
func newLogger(console bool) (*zap.Logger, error) {
	var cfg zap.Config
	if console {
		cfg = zap.NewDevelopmentConfig()
		cfg.Level = zap.NewAtomicLevelAt(zap.InfoLevel)
		cfg.DisableStacktrace = true
	} else {
		cfg = zap.NewProductionConfig()
		cfg.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	}
	cfg.OutputPaths = []string{"stderr"}
	cfg.ErrorOutputPaths = []string{"stderr"}
	return cfg.Build()
}
