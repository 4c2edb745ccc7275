// Command failover writes and reads through one client over every replica
// of a cluster, for a while, and survives the loss of the leader: kill the
// leading replica while it runs, and it carries on. At the end it reads
// back every write the cluster acknowledged and reports any that is
// missing (it exits 1 then).
//
//	go run ./client/examples/failover --addresses 127.0.0.1:3001,127.0.0.1:3002,127.0.0.1:3003 \
//	    --cluster <the id given to replica format --cluster> --duration 30s
//
// Flags: --addresses (or GEOEVENT_ADDRESSES), --cluster (or
// GEOEVENT_CLUSTER), --duration.
//
// What the client does by itself (package client, "Retries"): a call that
// meets a dead connection, a timeout or a retryable code (no leader yet,
// busy, ...) moves to the next address and resends the same request with
// the same session and request number, so a write applied before the
// leader died is answered from the session's record, not applied twice.
// It backs off between attempts, and gives up after Options.MaxRetries or
// Options.TotalTimeout with a *client.RetryError.
//
// What is left to the program: a write that ends with such an error may or
// may not have been applied. Here every write carries its own timestamp and
// is sent with Upsert, so sending it again is harmless: it writes the same
// event, or replaces it with itself. An error with a code that is not
// retryable (a validation error, WRONG_CLUSTER, ...) is the program's to
// fix, not to retry: it stops.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/geoevent/geoevent/client"
	"github.com/geoevent/geoevent/core"
)

func main() {
	addresses := flag.String("addresses", os.Getenv("GEOEVENT_ADDRESSES"), "every replica's binary-protocol address `A0,A1,...`")
	clusterFlag := flag.String("cluster", os.Getenv("GEOEVENT_CLUSTER"), "the cluster `ID` (UUID)")
	duration := flag.Duration("duration", 30*time.Second, "how long to write")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, strings.Split(*addresses, ","), *clusterFlag, *duration); err != nil {
		fmt.Fprintln(os.Stderr, "failover:", err)
		os.Exit(1)
	}
}

// write is one acknowledged write: an entity and its event's timestamp.
type write struct {
	id core.Uint128
	ts uint64
}

func run(ctx context.Context, addresses []string, clusterText string, duration time.Duration) error {
	cluster, err := core.ParseID(clusterText, true)
	if err != nil {
		return fmt.Errorf("--cluster: %w", err)
	}
	c, err := client.New(addresses, client.Options{
		Cluster: cluster,
		// An attempt that gets no answer in 2 s is abandoned and resent to
		// the next replica (default 30 s: a leader that hangs rather than
		// dies would stall the loop that long).
		RequestTimeout: 2 * time.Second,
		// Short backoffs find the new leader soon after an election.
		BaseBackoff: 50 * time.Millisecond,
		MaxBackoff:  500 * time.Millisecond,
		// One call gives up after 10 s; write and read below decide what
		// happens then.
		TotalTimeout: 10 * time.Second,
		MaxRetries:   30,
	})
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Printf("writing through %s for %v\n", strings.Join(addresses, ","), duration)

	var acked []write
	var resent int
	var slowest time.Duration
	start := time.Now()
	nextReport := start.Add(time.Second)
	lon := 13.3615
	for i := 1; time.Since(start) < duration && ctx.Err() == nil; i++ {
		ev, err := client.NewEvent(uuid.New(), 38.1157, lon)
		if err != nil {
			return err
		}
		ev.TimestampNS = uint64(time.Now().UnixNano()) // its own timestamp: a resend is the same event
		lon += 1e-6

		t0 := time.Now()
		n, err := writeAcked(ctx, c, ev)
		resent += n
		if errors.Is(err, context.Canceled) {
			break // interrupted: verify what was acknowledged
		}
		if err != nil {
			return fmt.Errorf("write %d: %w", i, err)
		}
		took := time.Since(t0)
		slowest = max(slowest, took)
		acked = append(acked, write{ev.EntityID, ev.TimestampNS})
		if took > 200*time.Millisecond {
			fmt.Printf("write %d: acknowledged after %v (the client's retries carried it to a replica that could take it)\n",
				i, took.Round(time.Millisecond))
		}

		// Read it back: the entity's latest event is the one just written.
		latest, err := readLatest(ctx, c, ev.EntityID)
		if errors.Is(err, context.Canceled) {
			break
		}
		if err != nil {
			return fmt.Errorf("read %d: %w", i, err)
		}
		if !latest.Found || latest.Event.TimestampNS != ev.TimestampNS {
			return fmt.Errorf("read %d: entity %s has %+v, want its event at %d", i, ev.EntityID, latest, ev.TimestampNS)
		}

		if now := time.Now(); now.After(nextReport) {
			fmt.Printf("%4.1fs: %d writes acknowledged and read back, %d resent, slowest %v\n",
				now.Sub(start).Seconds(), len(acked), resent, slowest.Round(time.Millisecond))
			nextReport = nextReport.Add(time.Second)
		}
	}
	fmt.Printf("done: %d writes acknowledged and read back, %d resent, slowest %v\n",
		len(acked), resent, slowest.Round(time.Millisecond))

	// Every acknowledged write must be there, whichever replica leads now.
	missing := 0
	for first := 0; first < len(acked); first += 1000 {
		chunk := acked[first:min(first+1000, len(acked))]
		ids := make([]core.Uint128, len(chunk))
		for i, w := range chunk {
			ids[i] = w.id
		}
		vctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		got, err := c.GetLatestBatch(vctx, ids)
		cancel()
		if err != nil {
			return fmt.Errorf("verify: %w", err)
		}
		for i, w := range chunk {
			if !got[i].Found || got[i].Event.TimestampNS != w.ts {
				missing++
				fmt.Printf("missing: entity %s, event at %d\n", w.id, w.ts)
			}
		}
	}
	fmt.Printf("verified: %d of %d acknowledged writes present, %d missing\n", len(acked)-missing, len(acked), missing)
	if missing > 0 {
		return fmt.Errorf("%d acknowledged writes are missing", missing)
	}
	return nil
}

// writeAcked upserts ev until the cluster acknowledges it, and returns how
// many times it had to send it again. An error that the client's own
// retries did not absorb leaves the write uncertain: it may have been
// applied. The event carries its own timestamp, so an upsert of it again
// is harmless (it writes the event, or replaces it with itself).
func writeAcked(ctx context.Context, c *client.Client, ev core.GeoEvent) (resent int, err error) {
	for {
		reply, err := c.Upsert(ctx, []core.GeoEvent{ev})
		switch {
		case err == nil && reply.Committed:
			return resent, nil
		case err == nil: // the event failed validation: nothing was written
			return resent, fmt.Errorf("rejected with code %d", reply.Results[0].Code)
		case ctx.Err() != nil:
			return resent, context.Canceled
		case final(err):
			return resent, err
		}
		resent++
		fmt.Printf("entity %s: %v; sending it again\n", ev.EntityID, err)
	}
}

// readLatest reads an entity's latest event, again after an error that is
// not final: a read is always safe to repeat.
func readLatest(ctx context.Context, c *client.Client, id core.Uint128) (*core.LatestResult, error) {
	for {
		latest, err := c.GetLatest(ctx, id)
		switch {
		case err == nil:
			return latest, nil
		case ctx.Err() != nil:
			return nil, context.Canceled
		case final(err):
			return nil, err
		}
		fmt.Printf("entity %s: %v; reading again\n", id, err)
	}
}

// final reports whether err is an answer to act on rather than to retry: a
// *core.Error whose code is not retryable, such as a validation error or
// WRONG_CLUSTER. A *client.RetryError (the client's retries ran out, or its
// TotalTimeout passed) wraps a retryable code or a connection error, so it
// is not final; nor is a second SESSION_EXPIRED in one call (the next call
// registers a new session).
func final(err error) bool {
	var re *client.RetryError
	if errors.As(err, &re) {
		return false
	}
	var ce *core.Error
	return errors.As(err, &ce) && !ce.Retryable && ce.Code != core.SessionExpired.Code
}
