package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/geoevent/geoevent/core"
)

// respTarget drives a peer that speaks RESP, Redis or Tile38, with the same
// workloads as GeoEvent's targets, so that the bench can measure them side
// by side. Both are driven through go-redis, a maintained RESP client with a
// connection pool (one connection per session) and pipelining; Tile38's
// commands go through Do.
//
// Every entity is one member of one key (--peer-key): its member name is
// the entity id's 16 bytes, big-endian, as GeoEvent stores it, so that the
// servers' memory is compared on ids of the same size.
//
//   - write: Redis, one GEOADD with every event of the batch (lon lat
//     member ...), which Redis applies and logs as one command; Tile38,
//     SET key id POINT lat lon per event, pipelined per batch (one command
//     alone for a batch of one).
//   - radius 1 km: Redis, GEOSEARCH key FROMLONLAT lon lat BYRADIUS
//     1000 m WITHCOORD (unsorted, every match); Tile38, WITHIN key LIMIT
//     1000000 POINTS CIRCLE lat lon 1000, its unordered "what is within this
//     circle" search (NEARBY sorts by distance, which neither GeoEvent nor
//     the GEOSEARCH above do), with a LIMIT above any answer here because
//     Tile38 returns at most 100 results by default.
//   - latest: Redis, GEOPOS key member; Tile38, GET key id POINT.
//   - latest-batch: Redis, one GEOPOS with every member; Tile38, GETs
//     pipelined.
type respTarget struct {
	c      *redis.Client
	do     func(ctx context.Context, args ...any) *redis.Cmd // one command: c.Do, or through ap
	ap     *redis.AutoPipeliner
	tile38 bool
	key    string
}

// newRESPTarget connects to a Redis or Tile38 server with a pool of conns
// connections, one per session. With autoPipeline, single commands go
// through go-redis's autopipeliner instead, which sends the commands that
// concurrent sessions issue together down one connection as one pipeline,
// as GeoEvent's client shares one connection among its sessions: the
// syscalls per command, on both sides, fall accordingly.
func newRESPTarget(addr string, tile38 bool, key string, conns int, autoPipeline bool) (*respTarget, error) {
	c := redis.NewClient(&redis.Options{
		Addr: addr,
		// RESP2, which both peers speak; go-redis still opens with HELLO
		// and goes on in RESP2 when the server refuses it (Tile38 does).
		Protocol:        2,
		DisableIdentity: true, // no CLIENT SETINFO: Tile38 has no such command
		PoolSize:        conns,
		// Pipelines on the main pool: go-redis's own pipeline pool (10
		// connections by default) would cap 64 sessions' batches at 10.
		PipelinePoolSize: -1,
		DialTimeout:      5 * time.Second,
		ReadTimeout:      30 * time.Second,
		WriteTimeout:     30 * time.Second,
	})
	t := &respTarget{c: c, do: c.Do, tile38: tile38, key: key}
	if autoPipeline {
		ap, err := c.AutoPipeline()
		if err != nil {
			c.Close()
			return nil, err
		}
		// Process, not ap.Do: the autopipeliner runs Do's commands outside
		// its pipelines (an arbitrary command may hold connection state).
		t.ap = ap
		t.do = func(ctx context.Context, args ...any) *redis.Cmd {
			cmd := redis.NewCmd(ctx, args...)
			_ = ap.Process(ctx, cmd) // the error is cmd's
			return cmd
		}
	}
	return t, nil
}

// member is an entity's name in the peer: its id's 16 bytes, big-endian.
func member(id core.Uint128) string {
	var b [16]byte
	for i := range 8 {
		b[i] = byte(id.Hi >> (56 - 8*i))
		b[8+i] = byte(id.Lo >> (56 - 8*i))
	}
	return string(b[:])
}

// degrees turns nanodegrees into the float degrees both peers take.
func degrees(nano int64) float64 { return float64(nano) / 1e9 }

func (t *respTarget) close() {
	if t.ap != nil {
		t.ap.Close()
	}
	t.c.Close()
}

func (t *respTarget) write(ctx context.Context, evs []core.GeoEvent, upsert bool) error {
	if len(evs) == 0 {
		return nil
	}
	if !t.tile38 {
		args := make([]any, 0, 2+3*len(evs))
		args = append(args, "GEOADD", t.key)
		for i := range evs {
			args = append(args, degrees(evs[i].LonNano), degrees(evs[i].LatNano), member(evs[i].EntityID))
		}
		return t.do(ctx, args...).Err()
	}
	set := func(e *core.GeoEvent) []any {
		return []any{"SET", t.key, member(e.EntityID), "POINT", degrees(e.LatNano), degrees(e.LonNano)}
	}
	if len(evs) == 1 {
		return t.do(ctx, set(&evs[0])...).Err()
	}
	p := t.c.Pipeline()
	for i := range evs {
		p.Do(ctx, set(&evs[i])...)
	}
	cmds, err := p.Exec(ctx)
	if err != nil {
		return err
	}
	if len(cmds) != len(evs) {
		return fmt.Errorf("tile38: %d replies to %d SETs", len(cmds), len(evs))
	}
	return nil
}

func (t *respTarget) radius(ctx context.Context, q *core.RadiusQuery) (int, error) {
	lat, lon := degrees(q.Center.LatNano), degrees(q.Center.LonNano)
	meters := float64(q.RadiusMM) / 1000
	if !t.tile38 {
		v, err := t.do(ctx, "GEOSEARCH", t.key, "FROMLONLAT", lon, lat, "BYRADIUS", meters, "m", "WITHCOORD").Slice()
		return len(v), err
	}
	v, err := t.do(ctx, "WITHIN", t.key, "LIMIT", 1_000_000, "POINTS", "CIRCLE", lat, lon, meters).Slice()
	if err != nil {
		return 0, err
	}
	// [cursor, [[id, [lat, lon]], ...]]
	if len(v) != 2 {
		return 0, fmt.Errorf("tile38 WITHIN: unexpected reply %.200v", v)
	}
	items, ok := v[1].([]any)
	if !ok {
		return 0, fmt.Errorf("tile38 WITHIN: unexpected reply %.200v", v)
	}
	return len(items), nil
}

// isNotFound reports Tile38's answer to a GET of an absent id or key,
// which the bench counts as a lookup that found nothing, not an error.
func isNotFound(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasSuffix(re.Error(), "not found")
}

func (t *respTarget) latest(ctx context.Context, id core.Uint128) error {
	if !t.tile38 {
		return t.do(ctx, "GEOPOS", t.key, member(id)).Err()
	}
	err := t.do(ctx, "GET", t.key, member(id), "POINT").Err()
	if err == redis.Nil || isNotFound(err) {
		return nil
	}
	return err
}

func (t *respTarget) ping(ctx context.Context) error {
	return t.do(ctx, "PING").Err()
}

func (t *respTarget) latestBatch(ctx context.Context, ids []core.Uint128) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	if !t.tile38 {
		args := make([]any, 0, 2+len(ids))
		args = append(args, "GEOPOS", t.key)
		for _, id := range ids {
			args = append(args, member(id))
		}
		v, err := t.do(ctx, args...).Slice()
		found := 0
		for _, p := range v {
			if p != nil {
				found++
			}
		}
		return found, err
	}
	p := t.c.Pipeline()
	for _, id := range ids {
		p.Do(ctx, "GET", t.key, member(id), "POINT")
	}
	cmds, err := p.Exec(ctx)
	found := 0
	for _, c := range cmds {
		switch err := c.Err(); {
		case err == nil:
			found++
		case err == redis.Nil || isNotFound(err):
		default:
			return found, err
		}
	}
	if err != nil && err != redis.Nil && !isNotFound(err) {
		return found, err
	}
	return found, nil
}
