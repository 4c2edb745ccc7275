// Command quickstart is a first GeoEvent client program: it connects to a
// cluster, inserts three events, asks what lies within 1 km of a point,
// and reads one entity's latest position.
//
//	go run ./cmd/replica dev --data /tmp/geoevent-dev   # prints the cluster id
//	go run ./client/examples/quickstart --cluster <that id>
//
// Flags: --addresses (default 127.0.0.1:3000, or GEOEVENT_ADDRESSES) and
// --cluster (or GEOEVENT_CLUSTER).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/geoevent/geoevent/client"
	"github.com/geoevent/geoevent/core"
)

func main() {
	addresses := flag.String("addresses", envOr("GEOEVENT_ADDRESSES", "127.0.0.1:3000"), "the replicas' binary-protocol addresses `A0,A1,...`")
	clusterFlag := flag.String("cluster", os.Getenv("GEOEVENT_CLUSTER"), "the cluster `ID` (UUID) that `replica dev` prints")
	flag.Parse()
	if err := run(strings.Split(*addresses, ","), *clusterFlag); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(addresses []string, clusterText string) error {
	// The cluster id: the client registers with it, and a replica of
	// another cluster refuses the client (WRONG_CLUSTER).
	cluster, err := core.ParseID(clusterText, true)
	if err != nil {
		return fmt.Errorf("--cluster: %w (pass the cluster id that `replica dev` prints)", err)
	}
	c, err := client.New(addresses, client.Options{Cluster: cluster})
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Three vehicles in Palermo. Ids are 128-bit: a uuid.UUID or a
	// core.Uint128. Fixed ids make a second run update the same vehicles.
	truck := uuid.MustParse("5f0c3a52-3e1b-4c1a-9d1e-000000000001")
	van := uuid.MustParse("5f0c3a52-3e1b-4c1a-9d1e-000000000002")
	ferry := uuid.MustParse("5f0c3a52-3e1b-4c1a-9d1e-000000000003")
	var events []core.GeoEvent
	for _, p := range []struct {
		id       uuid.UUID
		lat, lon float64
	}{
		{truck, 38.115700, 13.361500}, // Quattro Canti
		{van, 38.121000, 13.357900},   // by the Teatro Massimo
		{ferry, 38.131800, 13.372700}, // the harbour, beyond 1 km
	} {
		ev, err := client.NewEvent(p.id, p.lat, p.lon) // degrees, rounded to nanodegrees
		if err != nil {
			return err
		}
		ev.VelocityMMS = 8_000 // 8 m/s; the timestamp is left 0: the server assigns it
		events = append(events, ev)
	}
	reply, err := c.Insert(ctx, events)
	if err != nil {
		return fmt.Errorf("insert: %w", err)
	}
	if !reply.Committed { // a batch is atomic: one invalid event, and nothing is written
		for _, r := range reply.Results {
			if r.Code != 0 {
				return fmt.Errorf("insert: event %d failed with code %d", r.Index, r.Code)
			}
		}
	}
	fmt.Printf("inserted %d events\n", len(reply.Results))

	// Radius query: the latest position of each entity within 1 km.
	center, err := client.Position(38.1157, 13.3615)
	if err != nil {
		return err
	}
	near, err := c.QueryRadius(ctx, &core.RadiusQuery{Center: center, RadiusMM: 1_000_000})
	if err != nil {
		return fmt.Errorf("radius query: %w", err)
	}
	fmt.Printf("within 1 km of (38.1157, 13.3615): %d entities\n", len(near.Events))
	for i, ev := range near.Events {
		lat, lon := client.Degrees(ev.LatNano, ev.LonNano)
		fmt.Printf("  %s at (%.6f, %.6f), %d m away\n", ev.EntityID, lat, lon, near.DistancesMM[i]/1000)
	}
	// A page holds at most 1,000 events by default; near.HasMore and
	// near.Cursor (in the next query's Page) walk the rest.

	// The latest position of one entity.
	latest, err := c.GetLatest(ctx, client.IDOf(ferry))
	if err != nil {
		return fmt.Errorf("get latest: %w", err)
	}
	if !latest.Found {
		return errors.New("the ferry has no position")
	}
	lat, lon := client.Degrees(latest.Event.LatNano, latest.Event.LonNano)
	fmt.Printf("ferry %s: latest at (%.6f, %.6f), %s\n", latest.Event.EntityID, lat, lon,
		time.Unix(0, int64(latest.Event.TimestampNS)).UTC().Format(time.RFC3339Nano))

	// Errors of an operation are *core.Error values with the spec's codes.
	_, err = c.TTLExtend(ctx, &core.TTLExtendRequest{EntityID: client.IDOf(uuid.New()), ExtendBySeconds: 60})
	var ce *core.Error
	if errors.As(err, &ce) {
		fmt.Printf("extending an unknown entity's TTL: %s (%d)\n", ce.Name, ce.Code)
	}
	return nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
