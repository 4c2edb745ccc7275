package http_test

import (
	"testing"

	"github.com/geoevent/geoevent/client"
	ghttp "github.com/geoevent/geoevent/http"

	"github.com/geoevent/geoevent/internal/testproc"
)

// TestClientBackendOverTCP: the gateway also works over the binary
// protocol's TCP (a gateway in another process), next to the in-process
// backend the other tests use; both reach the same replica.
func TestClientBackendOverTCP(t *testing.T) {
	e := newEnv(t)
	backend, err := ghttp.NewClientBackend([]string{e.replica.Addr().String()}, client.Options{Cluster: testCluster})
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	gw := testproc.ServeGateway(t, ghttp.Config{Backend: backend})
	base := "http://" + gw.Addr().String()
	id := newID()
	r := request(t, base, "POST", "/events", map[string]any{"events": []any{ev(id, 1_000, 2_000)}})
	expectOK(t, r, "insert over TCP")
	eq(t, "committed", get(r.body, "committed"), "true")
	// Read through the in-process gateway, and the other way round.
	r = e.req("GET", "/entity/"+id, nil)
	eq(t, "lon_nano", get(r.body, "event", "lon_nano"), "2000")
	id2 := newID()
	e.insert(ev(id2, 3_000, 4_000))
	r = request(t, base, "GET", "/entity/"+id2, nil)
	eq(t, "lat_nano", get(r.body, "event", "lat_nano"), "3000")
}
