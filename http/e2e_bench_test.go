package http_test

import (
	"context"
	"io"
	stdhttp "net/http"
	"testing"

	"github.com/geoevent/geoevent/client"
	"github.com/geoevent/geoevent/core"
)

// BenchmarkE2EClientGetLatest: the Go client over TCP to one replica,
// get_latest of an entity that exists.
func BenchmarkE2EClientGetLatest(b *testing.B) {
	e := newEnv(b)
	id := newID()
	e.insert(ev(id, 38_110_000_000, 13_360_000_000))
	c, err := client.New([]string{e.replica.Addr().String()}, client.Options{Cluster: testCluster})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	uid, err := core.ParseUUID(id)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		r, err := c.GetLatest(ctx, uid)
		if err != nil || !r.Found {
			b.Fatal(r, err)
		}
	}
}

// BenchmarkE2EGatewayGetLatest: GET /entity/{id} through the gateway and
// its in-process backend to one replica.
func BenchmarkE2EGatewayGetLatest(b *testing.B) {
	e := newEnv(b)
	id := newID()
	e.insert(ev(id, 38_110_000_000, 13_360_000_000))
	url := e.base + "/entity/" + id
	hc := &stdhttp.Client{}
	for b.Loop() {
		resp, err := hc.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatal(resp.StatusCode)
		}
	}
}
