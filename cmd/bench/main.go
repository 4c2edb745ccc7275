// Command bench is GeoEvent's load generator. It drives a running cluster
// over the binary protocol with the Go client, or over the HTTP JSON API
// with --http, and prints throughput and latency percentiles, with a
// progress line every few seconds. For comparison it drives a Redis
// (--redis) or Tile38 (--tile38) server with the same workloads, in the
// nearest commands each has (resp.go lists them); cmd/bench/peers installs
// and starts both and runs the three side by side. A peer's sessions have a
// connection each, and each command costs a write and a read on both sides;
// --peer-pipeline has them share connections, their concurrent commands
// sent as pipelines, as GeoEvent's client shares one connection among its
// sessions.
//
//	go run ./cmd/bench --addresses 127.0.0.1:3000 --cluster <id> --op insert --batch 10000 --concurrency 4 --duration 20s
//	go run ./cmd/bench --http http://127.0.0.1:8080 --op radius --concurrency 16 --duration 20s
//	go run ./cmd/bench --redis 127.0.0.1:6379 --preload --op radius --concurrency 64 --duration 10s
//
// Operations (--op): insert (new entities, --batch events per request),
// upsert (move existing entities), radius (1 km queries), latest (get latest
// of one entity), latest-batch (get latest of --batch random entities, at
// most 10,000: POST /entities/batch over HTTP), ping (the smallest request:
// GET /ping over HTTP), track (a fleet of --entities entities reporting in
// turn: inserts of --batch events that grow each entity's history), history
// (one random entity's history, a page of up to 1,000 events: those of the
// --history-span before its latest, or its first 1,000 with 0; binary
// protocol only), mixed (--mix shares, e.g. upsert=80,radius=10,latest=10).
// Entities are uniform in a 2 x 2 degree box around lat 38.11, lon 13.36;
// run insert first (or --preload) so that reads find data.
// --events N ends the run once N events are written or read (the
// operations under way finish), before --duration if it comes first.
// --fences N puts N fences (20-vertex polygons about 900 m across, at
// random over the box; binary protocol only) before the load, so that
// writes are judged against them (docs/performance.md, Fences).
//
// --rate R paces the sessions to R events a second at most, together.
//
// A write the server refuses with 212 CLUSTER_BUSY (a leader whose
// history store is behind its log, among others) is retried with the
// client's backoff, as any retryable answer, up to 20 times within the
// client's 30 s; the bench counts the refusals and prints them ("busy").
// --probe-latest N runs N more sessions during the measured run, on a
// connection of their own, each reading one random entity's latest every
// 10 ms: their latency (p50, p99, p999, max), apart from the load's, is
// what a reader sees while the load runs (binary protocol or --http). At
// --procs 1 they share the bench's one thread with the load's encoding,
// and their latency includes waits for it (a p50 of 1-7 ms beside a track
// load, where a second bench process, --op latest --batch 1 --rate 100,
// saw 0.06-0.2 ms): for the server's figure alone, run that beside the load.
//
// --subscribers N --feed URL measures readers of the fence feed: N
// Server-Sent Event streams of GET /feed at URL (a replica's gateway) open
// while the load runs, after a run without them (--baseline, on by
// default), with --fences F put first so that moves make notifications.
// It reports both ingest
// rates and their ratio, and the notifications' latency from their op_ns
// (the leader's time for the entry: the latency from commit and a little
// more) at p50, p99 and p999 (subscribers.go). --subscriber-procs sets
// the readers' process's GOMAXPROCS (0, the default: Go's):
//
//	go run ./cmd/bench --cluster <id> --op track --batch 1000 --concurrency 4 --rate 100000 \
//	    --fences 1000 --subscribers 1000 --feed http://127.0.0.1:8080 --duration 20s
//
// --position-streams N --feed URL keeps N streams of GET /feed/positions
// open at URL while the load runs, each over a random 0.05-degree box in
// the bench's box, and reports the events they received a second
// (positions.go).
//
// capacity.sh is a capacity run of history on disk: it starts a dev
// replica on a fresh directory, runs a track load of --events, samples the
// replica's resident memory and the data directory's size, kills it with
// SIGKILL, times its first answer after the restart and measures --op
// history (docs/performance.md, History on disk).
//
// --http-client picks the HTTP mode's client: raw (the default), a minimal
// keep-alive HTTP/1.1 client that spends little CPU per request and counts
// query results without decoding the JSON, so that a bench on the server's
// machine leaves the cores to the server; or std, net/http's client (which
// costs about as much CPU per request as the gateway itself).
//
// --procs is how many threads run the bench's Go code at once (GOMAXPROCS),
// 1 by default. A bench on the server's machine should leave the cores to
// the server: on the project's 2-core VM, with its goroutines on one
// thread, they hand each other replies and requests without waking another
// thread, and the server answered 10-20% more single-event upserts, radius
// queries and get-latest lookups a second than with two (batched inserts
// the same; see the README's performance section). Raise it when the bench
// itself is the bottleneck on a larger machine.
//
// The bench collects its garbage less often than Go's default: GOGC 800
// unless the GOGC environment variable sets it. It keeps little and
// allocates much (a 1 km radius reply decodes to about 9 KB of events),
// and at the default, which collects each time the heap has grown by what
// it keeps, its collector took a tenth of its time in a profile. With the
// server beside it, radius queries from 64 sessions went faster in 12 of
// 16 alternated pairs, by 4% (geometric mean), the bench's processor less
// busy (docs/performance.md, Method).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/geoevent/geoevent/client"
	"github.com/geoevent/geoevent/core"
)

type config struct {
	addresses   []string
	cluster     core.Uint128
	httpURL     string
	httpClient  string
	redisAddr   string // --redis: drive a Redis server instead
	tile38Addr  string // --tile38: drive a Tile38 server instead
	peerKey     string
	peerPipe    bool // --peer-pipeline
	op          string
	mix         map[string]int
	entities    int
	batch       int
	concurrency int
	duration    time.Duration
	preload     bool
	progress    time.Duration
	cpuProfile  string
	procs       int // GOMAXPROCS; 0 leaves Go's default
	span        time.Duration
	events      int64 // --events: stop once this many events are done (0: at --duration only)
	rate        int   // --rate: events a second at most, over all sessions (0: as fast as they go)
	subscribers int   // --subscribers: feed streams open during the run (subscribers.go)
	fences      int   // --fences: put this many fences before the load (binary protocol)
	feedURL     string
	baseline    bool // --baseline: with --subscribers, a run without them first
	probes      int  // --probe-latest: get-latest sessions beside the load
	subscribe   bool // --subscribe-only: be the subscriber process of a run (subscribers.go)
	subProcs    int  // --subscriber-procs: the subscriber process's --procs
	posStreams  int  // --position-streams: GET /feed/positions streams open during the run (positions.go)
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if cfg.subscribe {
		err = runSubscribeOnly(cfg)
	} else {
		err = run(cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	addrs := fs.String("addresses", "127.0.0.1:3000", "replica addresses, comma-separated")
	cluster := fs.String("cluster", "", "cluster id (UUID or decimal), as printed by `replica dev` (binary protocol)")
	httpURL := fs.String("http", "", "drive the HTTP JSON API at this base URL (e.g. http://127.0.0.1:8080) instead of the binary protocol")
	redisAddr := fs.String("redis", "", "drive a Redis server at `HOST:PORT` instead (GEOADD, GEOSEARCH, GEOPOS), for comparison")
	tile38Addr := fs.String("tile38", "", "drive a Tile38 server at `HOST:PORT` instead (SET, WITHIN, GET), for comparison")
	peerKey := fs.String("peer-key", "fleet", "the key (Redis) or collection (Tile38) holding the entities of --redis or --tile38")
	peerPipe := fs.Bool("peer-pipeline", false, "with --redis or --tile38, send the sessions' concurrent commands down shared connections as pipelines (go-redis's autopipeliner), as GeoEvent's client shares one connection among its sessions")
	httpClient := fs.String("http-client", "raw", "the HTTP client of --http: raw (a minimal keep-alive HTTP/1.1 client that leaves the CPU to the server) or std (net/http's)")
	op := fs.String("op", "insert", "insert, upsert, radius, latest, latest-batch, ping, track, history or mixed")
	span := fs.Duration("history-span", 0, "--op history reads the events of this span before the entity's latest (0: its first 1,000)")
	mix := fs.String("mix", "upsert=80,radius=10,latest=10", "shares for --op mixed")
	entities := fs.Int("entities", 1_000_000, "entity ids in use")
	batch := fs.Int("batch", 10_000, "events per insert/upsert request, entities per latest-batch request")
	conc := fs.Int("concurrency", 4, "parallel sessions")
	dur := fs.Duration("duration", 20*time.Second, "how long to run")
	maxEvents := fs.Int64("events", 0, "stop once this many events are written or read (the operations under way finish), or at --duration; 0: at --duration only")
	fences := fs.Int("fences", 0, "put this many fences (20-vertex polygons about 900 m across, at random over the box, named bench-fence-0 on) before the load, through the binary protocol")
	preload := fs.Bool("preload", false, "insert every entity once before measuring (in 10,000-event batches)")
	progress := fs.Duration("progress", 5*time.Second, "progress line interval (0 = none)")
	procs := fs.Int("procs", 1, "threads running the bench's Go code at once (GOMAXPROCS; 0 = one per core): 1 leaves the other cores to a server on the same machine")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the measured run (not the preload) to this `file`, for go tool pprof: the load generator's own cost")
	rate := fs.Int("rate", 0, "events a second at most, over all sessions (0: as fast as they go)")
	subs := fs.Int("subscribers", 0, "Server-Sent Event streams of GET /feed to keep open at --feed during the run, timing each notification from its op_ns (see subscribers.go)")
	feedURL := fs.String("feed", "", "the HTTP base URL of the replica gateway whose feed --subscribers read")
	subscribeOnly := fs.Bool("subscribe-only", false, "be the subscriber process of a --subscribers run (the bench starts it itself)")
	subProcs := fs.Int("subscriber-procs", 0, "with --subscribers, threads running the subscriber process's Go code at once (GOMAXPROCS; 0 = one per core)")
	probes := fs.Int("probe-latest", 0, "sessions reading one random entity's latest every 10 ms during the measured run, on a connection of their own; their latency is printed apart from the load's (binary protocol or --http)")
	posStreams := fs.Int("position-streams", 0, "Server-Sent Event streams of GET /feed/positions to keep open at --feed during the run, each over a random 0.05-degree box (see positions.go)")
	baseline := fs.Bool("baseline", true, "with --subscribers, run the load once without them first and report the ratio of the ingest rates")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	cfg := config{addresses: strings.Split(*addrs, ","), op: *op, entities: *entities, batch: *batch,
		concurrency: *conc, duration: *dur, preload: *preload, progress: *progress, httpURL: *httpURL, httpClient: *httpClient,
		cpuProfile: *cpuProfile, procs: *procs, span: *span, redisAddr: *redisAddr, tile38Addr: *tile38Addr, peerKey: *peerKey, peerPipe: *peerPipe, events: *maxEvents,
		rate: *rate, subscribers: *subs, fences: *fences, feedURL: strings.TrimRight(*feedURL, "/"), baseline: *baseline, subscribe: *subscribeOnly,
		subProcs: *subProcs, probes: *probes, posStreams: *posStreams}
	if cfg.subscribe {
		if cfg.subscribers < 1 || cfg.feedURL == "" {
			return cfg, errors.New("--subscribe-only needs --subscribers and --feed")
		}
		return cfg, nil
	}
	targets := 0
	for _, s := range []string{cfg.httpURL, cfg.redisAddr, cfg.tile38Addr} {
		if s != "" {
			targets++
		}
	}
	if targets > 1 {
		return cfg, errors.New("--http, --redis and --tile38 each name the one server to drive: give at most one")
	}
	if targets == 0 {
		id, err := core.ParseID(*cluster, true)
		if err != nil || id.IsZero() {
			return cfg, fmt.Errorf("--cluster: give the cluster id that `replica dev` printed (or use --http, --redis or --tile38)")
		}
		cfg.cluster = id
	}
	if cfg.httpClient != "raw" && cfg.httpClient != "std" {
		return cfg, fmt.Errorf("--http-client: %q is neither raw nor std", cfg.httpClient)
	}
	switch {
	case cfg.entities < 1, cfg.batch < 1, cfg.concurrency < 1, cfg.duration <= 0:
		return cfg, errors.New("--entities, --batch, --concurrency and --duration must be positive")
	case cfg.procs < 0:
		return cfg, errors.New("--procs must be 0 (one per core) or more")
	case cfg.events < 0:
		return cfg, errors.New("--events must be 0 (no limit) or more")
	case cfg.rate < 0, cfg.subscribers < 0, cfg.subProcs < 0, cfg.probes < 0, cfg.posStreams < 0:
		return cfg, errors.New("--rate, --subscribers, --subscriber-procs, --probe-latest and --position-streams must be 0 or more")
	case cfg.probes > 0 && (cfg.redisAddr != "" || cfg.tile38Addr != ""):
		return cfg, errors.New("--probe-latest reads over the binary protocol or --http only")
	case (cfg.subscribers > 0 || cfg.posStreams > 0) && cfg.feedURL == "":
		return cfg, errNoFeed
	case cfg.fences < 0 || cfg.fences > core.MaxFences:
		return cfg, fmt.Errorf("--fences must be 0 to %d", core.MaxFences)
	case cfg.fences > 0 && targets > 0:
		return cfg, errors.New("--fences puts fences over the binary protocol only")
	}
	cfg.mix = map[string]int{cfg.op: 1}
	if cfg.op == "mixed" {
		cfg.mix = map[string]int{}
		for _, part := range strings.Split(*mix, ",") {
			name, share, ok := strings.Cut(part, "=")
			n, err := strconv.Atoi(share)
			if !ok || err != nil || n < 0 {
				return cfg, fmt.Errorf("--mix: bad part %q", part)
			}
			cfg.mix[name] = n
		}
	}
	for name := range cfg.mix {
		if !slices.Contains([]string{"insert", "upsert", "radius", "latest", "latest-batch", "ping", "track", "history"}, name) {
			return cfg, fmt.Errorf("unknown operation %q", name)
		}
		if name == "history" && targets > 0 {
			return cfg, errors.New("--op history reads over the binary protocol only")
		}
	}
	if cfg.mix["latest-batch"] > 0 && cfg.batch > core.MaxBatchIDs {
		return cfg, fmt.Errorf("--batch: a latest-batch request names at most %d entities, not %d", core.MaxBatchIDs, cfg.batch)
	}
	return cfg, nil
}

// recorder collects latencies of completed operations.
type recorder struct {
	mu        sync.Mutex
	latencies []time.Duration
	ops       atomic.Int64
	events    atomic.Int64
	errors    atomic.Int64
	busy      int64     // 212 CLUSTER_BUSY answers retried during the run
	probe     *recorder // --probe-latest's reads, nil without
}

func (r *recorder) add(d time.Duration, events int) {
	r.ops.Add(1)
	r.events.Add(int64(events))
	r.mu.Lock()
	r.latencies = append(r.latencies, d)
	r.mu.Unlock()
}

// quantiles formats the p50, p99, p999 and max of sorted.
func quantiles(sorted []time.Duration) string {
	return fmt.Sprintf("p50 %s  p99 %s  p999 %s  max %s",
		percentile(sorted, 0.50), percentile(sorted, 0.99), percentile(sorted, 0.999), percentile(sorted, 1))
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

// benchGOGC is the bench's GOGC when the environment does not set one.
const benchGOGC = 800

// busy counts the binary protocol's 212 CLUSTER_BUSY answers, each
// retried by the client (client.Options.OnRetry).
var busy atomic.Int64

// benchRetries is the bench client's retries of a call (the client's
// default 5 are spent in about 3 s): a load that a busy server refuses
// for longer is slowed, not failed.
const benchRetries = 20

// newBinaryClient is a client of sessions sessions that counts the
// refusals it retries in busy.
func newBinaryClient(cfg config, sessions int) (*client.Client, error) {
	return client.New(cfg.addresses, client.Options{Cluster: cfg.cluster, PoolSize: sessions, MaxRetries: benchRetries,
		OnRetry: func(err error) {
			if ce := (*core.Error)(nil); errors.As(err, &ce) && ce.Code == core.ClusterBusy.Code {
				busy.Add(1)
			}
		}})
}

func run(cfg config) error {
	if cfg.procs > 0 {
		runtime.GOMAXPROCS(cfg.procs)
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(benchGOGC)
	}
	c, err := dialTarget(cfg, cfg.concurrency)
	if err != nil {
		return err
	}
	var acks *ackLog // the binary protocol's acknowledgements, with --subscribers
	if bt, ok := c.(binaryTarget); ok && cfg.subscribers > 0 {
		bt.acks = &ackLog{}
		acks, c = bt.acks, bt
	}
	defer c.close()
	var probe target // --probe-latest's, on connections of its own
	if cfg.probes > 0 {
		if probe, err = dialTarget(cfg, cfg.probes); err != nil {
			return err
		}
		defer probe.close()
	}
	ctx := context.Background()
	if cfg.fences > 0 {
		if err := putFences(ctx, c.(binaryTarget).c, cfg, cfg.fences); err != nil {
			return err
		}
	}
	if cfg.preload {
		if err := preload(ctx, c, cfg); err != nil {
			return err
		}
	}
	var names []string
	total := 0
	for name, share := range cfg.mix {
		names = append(names, name)
		total += share
	}
	slices.Sort(names)
	if total == 0 {
		return errors.New("--mix shares are all zero")
	}

	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	proto := "binary"
	switch {
	case cfg.httpURL != "":
		proto = "http"
	case cfg.redisAddr != "":
		proto = "redis"
	case cfg.tile38Addr != "":
		proto = "tile38"
	}
	var alone float64 // events/s of the run without subscribers
	if cfg.subscribers > 0 && cfg.baseline {
		rec, el := measure(ctx, c, nil, cfg, names, total)
		alone = float64(rec.events.Load()) / el.Seconds()
		fmt.Printf("without subscribers: events/s %.0f  errors %d\n", alone, rec.errors.Load())
	}
	var subs *subscriberProc
	if cfg.subscribers > 0 {
		var err error
		acks.reset() // the baseline's are of no use
		if subs, err = spawnSubscribers(cfg); err != nil {
			return err
		}
		fmt.Printf("%d feed streams open\n", cfg.subscribers)
	}
	var reportPositions func(int) // with --position-streams: prints what they received
	if cfg.posStreams > 0 {
		positions := openPositionStreams(cfg.feedURL, cfg.posStreams)
		fmt.Printf("%d position streams open\n", cfg.posStreams)
		defer positions.stop()
		reportPositions = positions.measureFrom()
	}
	rec, el := measure(ctx, c, probe, cfg, names, total)
	var got subscriberResult
	if subs != nil {
		var err error
		if got, err = subs.finish(); err != nil {
			return fmt.Errorf("the subscriber process: %w", err)
		}
	}
	slices.Sort(rec.latencies)
	fmt.Printf("%s op=%s concurrency=%d batch=%d duration=%s procs=%d\n", proto, cfg.op, cfg.concurrency, cfg.batch, el.Round(time.Millisecond), runtime.GOMAXPROCS(0))
	rate := float64(rec.events.Load()) / el.Seconds()
	fmt.Printf("ops/s %.0f  events/s %.0f  errors %d  busy %d\n", float64(rec.ops.Load())/el.Seconds(), rate, rec.errors.Load(), rec.busy)
	fmt.Printf("latency %s\n", quantiles(rec.latencies))
	if p := rec.probe; p != nil {
		slices.Sort(p.latencies)
		fmt.Printf("probe latest: sessions %d  reads %d  errors %d  %s\n", cfg.probes, p.ops.Load(), p.errors.Load(), quantiles(p.latencies))
	}
	if reportPositions != nil {
		reportPositions(cfg.posStreams)
	}
	if subs != nil {
		got.report(cfg.subscribers, el, acks)
		if alone > 0 {
			fmt.Printf("ingest with subscribers / without: %.3f\n", rate/alone)
		}
	}
	return nil
}

// probeEvery is how often a --probe-latest session reads (a read that
// takes longer delays the next): a probe, not a load of its own that
// would take the server's processor from the load it measures.
const probeEvery = 10 * time.Millisecond

// dialTarget connects to the server the flags name, with sessions
// sessions (connections, for a peer or the HTTP API).
func dialTarget(cfg config, sessions int) (target, error) {
	switch {
	case cfg.redisAddr != "" || cfg.tile38Addr != "":
		return newRESPTarget(cfg.redisAddr+cfg.tile38Addr, cfg.tile38Addr != "", cfg.peerKey, sessions, cfg.peerPipe)
	case cfg.httpURL != "":
		return newHTTPTarget(cfg.httpURL, sessions, cfg.httpClient)
	default:
		cl, err := newBinaryClient(cfg, sessions)
		if err != nil {
			return nil, err
		}
		return binaryTarget{c: cl}, nil
	}
}

// measure runs the load for --duration (or --events), and probe's
// get-latest sessions beside it unless probe is nil, and returns what it
// recorded and how long it took.
func measure(ctx context.Context, c target, probe target, cfg config, names []string, total int) (*recorder, time.Duration) {
	rec := &recorder{}
	busy0 := busy.Load()
	var nextNew atomic.Uint64
	nextNew.Store(uint64(cfg.entities) + 1)
	deadline := time.Now().Add(cfg.duration)
	start := time.Now()
	stop := make(chan struct{})
	if cfg.progress > 0 {
		go onTicks(stop, cfg.progress, func() {
			el := time.Since(start).Seconds()
			fmt.Printf("  %5.0fs  %9.0f ops/s  %11.0f events/s  errors %d  busy %d\n", el, float64(rec.ops.Load())/el, float64(rec.events.Load())/el, rec.errors.Load(), busy.Load()-busy0)
		})
	}
	// With --rate, each session paces itself to its share of the rate.
	var every time.Duration
	if cfg.rate > 0 {
		every = time.Duration(float64(time.Second) * float64(cfg.batch) * float64(cfg.concurrency) / float64(cfg.rate))
	}
	var wg sync.WaitGroup
	for w := 0; w < cfg.concurrency; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 42))
			for k := 0; time.Now().Before(deadline) && (cfg.events == 0 || rec.events.Load() < cfg.events); k++ {
				if every > 0 {
					time.Sleep(time.Until(start.Add(time.Duration(k) * every)))
				}
				pick := r.IntN(total)
				op := names[0]
				for _, n := range names {
					if pick < cfg.mix[n] {
						op = n
						break
					}
					pick -= cfg.mix[n]
				}
				t0 := time.Now()
				events, err := one(ctx, c, cfg, op, r, &nextNew)
				if err != nil {
					if rec.errors.Add(1) == 1 {
						fmt.Fprintln(os.Stderr, "bench: first error:", err)
					}
					continue
				}
				rec.add(time.Since(t0), events)
			}
		}(w)
	}
	var probes sync.WaitGroup
	if probe != nil {
		rec.probe = &recorder{}
		for w := range cfg.probes {
			probes.Add(1)
			go func() {
				defer probes.Done()
				r := rand.New(rand.NewPCG(uint64(w), 43))
				onTicks(stop, probeEvery, func() {
					t0 := time.Now()
					if err := probe.latest(ctx, anyID(r, cfg)); err != nil {
						rec.probe.errors.Add(1)
						return
					}
					rec.probe.add(time.Since(t0), 1)
				})
			}()
		}
	}
	wg.Wait()
	el := time.Since(start)
	close(stop)
	probes.Wait()
	rec.busy = busy.Load() - busy0
	return rec, el
}

// onTicks calls f every d until stop is closed.
func onTicks(stop <-chan struct{}, d time.Duration, f func()) {
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			f()
		}
	}
}

func point(r *rand.Rand) (int64, int64) {
	return 37_110_000_000 + r.Int64N(2_000_000_000), 12_360_000_000 + r.Int64N(2_000_000_000)
}

func events(r *rand.Rand, n int, id func(i int) uint64) []core.GeoEvent {
	evs := make([]core.GeoEvent, n)
	for i := range evs {
		lat, lon := point(r)
		evs[i] = core.GeoEvent{EntityID: core.Uint128{Hi: 1, Lo: id(i)}, LatNano: lat, LonNano: lon}
	}
	return evs
}

// anyID draws one of the entity ids in use (1..--entities, as preload
// and insert number them).
func anyID(r *rand.Rand, cfg config) core.Uint128 {
	return core.Uint128{Hi: 1, Lo: 1 + uint64(r.IntN(cfg.entities))}
}

// one runs one operation and returns how many events it wrote or read.
func one(ctx context.Context, c target, cfg config, op string, r *rand.Rand, nextNew *atomic.Uint64) (int, error) {
	switch op {
	case "insert":
		first := nextNew.Add(uint64(cfg.batch)) - uint64(cfg.batch)
		return cfg.batch, c.write(ctx, events(r, cfg.batch, func(i int) uint64 { return first + uint64(i) }), false)
	case "upsert":
		return cfg.batch, c.write(ctx, events(r, cfg.batch, func(int) uint64 { return 1 + uint64(r.IntN(cfg.entities)) }), true)
	case "track":
		// The fleet reports in turn: the next --batch reports of the
		// round robin over its entities, each a new event at a fresh
		// timestamp (the server's), which its entity's history keeps.
		first := nextNew.Add(uint64(cfg.batch)) - uint64(cfg.batch)
		return cfg.batch, c.write(ctx, events(r, cfg.batch, func(i int) uint64 { return 1 + (first+uint64(i))%uint64(cfg.entities) }), false)
	case "history":
		return c.(historyTarget).history(ctx, anyID(r, cfg), cfg.span)
	case "radius":
		lat, lon := point(r)
		return c.radius(ctx, &core.RadiusQuery{Center: core.Coordinate{LatNano: lat, LonNano: lon}, RadiusMM: 1_000_000})
	case "ping":
		return 0, c.ping(ctx)
	case "latest-batch":
		ids := make([]core.Uint128, cfg.batch)
		for i := range ids {
			ids[i] = anyID(r, cfg)
		}
		return c.latestBatch(ctx, ids)
	default: // latest
		return 1, c.latest(ctx, anyID(r, cfg))
	}
}

// preloadBatch is the batch size of preload, whatever --batch says: a
// measurement of single-event writes need not preload a million entities
// one request at a time.
const preloadBatch = 10_000

// preload inserts entities 1..cfg.entities with upserts of preloadBatch.
func preload(ctx context.Context, c target, cfg config) error {
	r := rand.New(rand.NewPCG(7, 7))
	t0 := time.Now()
	for first := 1; first <= cfg.entities; first += preloadBatch {
		n := min(preloadBatch, cfg.entities-first+1)
		if err := c.write(ctx, events(r, n, func(i int) uint64 { return uint64(first + i) }), true); err != nil {
			return fmt.Errorf("preload: %w", err)
		}
		if cfg.progress > 0 && (first-1)/preloadBatch%100 == 0 {
			fmt.Printf("  preload %d/%d entities\n", first-1, cfg.entities)
		}
	}
	fmt.Printf("preloaded %d entities in %s\n", cfg.entities, time.Since(t0).Round(time.Millisecond))
	return nil
}
