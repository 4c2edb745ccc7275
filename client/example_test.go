package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/google/uuid"

	"github.com/geoevent/geoevent/client"
	"github.com/geoevent/geoevent/core"
)

// The examples without an "Output:" comment need a running cluster, so go
// test compiles them but does not run them. Runnable programs that do the
// same, and the tests that run them against real replicas, are in
// client/examples (quickstart, failover).

// A first session: connect, insert, query a radius, read one entity's
// latest position. Start a cluster with `go run ./cmd/replica dev` and use
// the cluster id its banner prints.
func Example() {
	cluster, err := core.ParseUUID("b67018e3-8149-4098-8914-1f7e84661259") // from the banner
	if err != nil {
		log.Fatal(err)
	}
	c, err := client.New([]string{"127.0.0.1:3000"}, client.Options{Cluster: cluster})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	truck := uuid.New()
	ev, err := client.NewEvent(truck, 38.115, 13.361) // degrees
	if err != nil {
		log.Fatal(err)
	}
	reply, err := c.Insert(ctx, []core.GeoEvent{ev})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("committed:", reply.Committed)

	center, _ := client.Position(38.11, 13.36)
	near, err := c.QueryRadius(ctx, &core.RadiusQuery{Center: center, RadiusMM: 5_000_000}) // 5 km
	if err != nil {
		log.Fatal(err)
	}
	for i, e := range near.Events {
		lat, lon := client.Degrees(e.LatNano, e.LonNano)
		fmt.Printf("%s at %.6f, %.6f, %d m away\n", e.EntityID, lat, lon, near.DistancesMM[i]/1000)
	}

	latest, err := c.GetLatest(ctx, client.IDOf(truck))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("found:", latest.Found)
}

// New takes every replica's address; the cluster id is the one `replica
// dev` prints, the one `replica format --cluster` was given, or GET
// /status's cluster_id.
func ExampleNew() {
	cluster, err := core.ParseID("00000000-0000-0000-0000-0000c1057e20", true) // a UUID, or a decimal id
	if err != nil {
		log.Fatal(err)
	}
	c, err := client.New([]string{"10.0.0.1:3000", "10.0.0.2:3000", "10.0.0.3:3000"}, client.Options{
		Cluster:        cluster,
		PoolSize:       8,               // up to 8 calls in parallel
		RequestTimeout: 2 * time.Second, // move on from a replica that hangs
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
}

// Errors that the client's own retries did not absorb: a *core.Error with
// a code that is not retryable is final (fix the request); a
// *client.RetryError leaves a write uncertain, and Upsert of the same
// event (with its own timestamp) is the safe resend.
func ExampleRetryError() {
	var c *client.Client // from client.New
	ctx := context.Background()
	ev, _ := client.NewEvent(uuid.New(), 38.115, 13.361)
	ev.TimestampNS = uint64(time.Now().UnixNano()) // a resend is then the same event

	for {
		_, err := c.Upsert(ctx, []core.GeoEvent{ev})
		var re *client.RetryError
		var ce *core.Error
		switch {
		case err == nil:
			return
		case errors.As(err, &re):
			log.Printf("not acknowledged after %d attempts, maybe applied: sending again: %v", re.Attempts, err)
		case errors.As(err, &ce):
			log.Fatalf("final answer %s (%d): %s", ce.Name, ce.Code, ce.Message)
		default:
			log.Fatal(err)
		}
	}
}

func ExampleNewEvent() {
	truck := uuid.MustParse("5f0c3a52-3e1b-4c1a-9d1e-000000000001")
	ev, err := client.NewEvent(truck, 38.115, -13.361)
	if err != nil {
		log.Fatal(err)
	}
	ev.VelocityMMS = 12_500 // set the other fields on the result
	fmt.Println(ev.EntityID, ev.LatNano, ev.LonNano)

	_, err = client.NewEvent(truck, 91, 0)
	fmt.Println(err)
	// Output:
	// 5f0c3a52-3e1b-4c1a-9d1e-000000000001 38115000000 -13361000000
	// INVALID_COORDINATES (100): latitude 91 is not within [-90, 90] degrees
}

func ExamplePosition() {
	p, _ := client.Position(38.1157, 13.3615)
	fmt.Println(p.LatNano, p.LonNano)
	tie, _ := client.Position(1.0/1024, -1.0/1024) // exactly 976,562.5 nanodegrees: away from zero
	fmt.Println(tie.LatNano, tie.LonNano)
	// Output:
	// 38115700000 13361500000
	// 976563 -976563
}

func ExampleDegrees() {
	ev := core.GeoEvent{LatNano: 38_115_700_000, LonNano: -13_361_500_000}
	lat, lon := client.Degrees(ev.LatNano, ev.LonNano)
	fmt.Println(lat, lon)
	// Output:
	// 38.1157 -13.3615
}

func ExampleIDs() {
	a := uuid.MustParse("00000000-0000-0001-0000-000000000002")
	b := uuid.MustParse("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
	ids := client.IDs(a, b) // for GetLatestBatch, DeleteEntities
	fmt.Println(ids[0].Hi, ids[0].Lo, ids[1])
	fmt.Println(client.IDOf(b) == core.FromUUID(b), client.IDOf(b).UUID() == b)
	// Output:
	// 1 2 6ba7b810-9dad-11d1-80b4-00c04fd430c8
	// true true
}
