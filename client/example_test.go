package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/geoevent/geoevent/client"
	"github.com/geoevent/geoevent/client/internal/testserver"
	"github.com/geoevent/geoevent/core"
)

func Example() {
	// An in-process one-replica cluster on 127.0.0.1.
	srv, err := testserver.Start(testserver.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Stop()

	c, err := client.New([]string{srv.Addr()}, client.Options{Cluster: srv.Cluster()})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	truck := core.Uint128{Lo: 42}
	reply, err := c.Insert(ctx, []core.GeoEvent{{
		EntityID: truck,
		LatNano:  38_115_000_000, // 38.115° N
		LonNano:  13_361_000_000, // 13.361° E
	}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("committed:", reply.Committed)

	latest, err := c.GetLatest(ctx, truck)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("found:", latest.Found, "lat_nano:", latest.Event.LatNano)

	near, err := c.QueryRadius(ctx, &core.RadiusQuery{
		Center:   core.Coordinate{LatNano: 38_110_000_000, LonNano: 13_360_000_000},
		RadiusMM: 5_000_000, // 5 km
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("within 5 km:", len(near.Events))

	// Operation errors are *core.Error values.
	_, err = c.TTLExtend(ctx, &core.TTLExtendRequest{EntityID: core.Uint128{Lo: 7}, ExtendBySeconds: 60})
	var ce *core.Error
	if errors.As(err, &ce) {
		fmt.Println("error:", ce.Code, ce.Name)
	}
	// Output:
	// committed: true
	// found: true lat_nano: 38115000000
	// within 5 km: 1
	// error: 3 ENTITY_NOT_FOUND
}
