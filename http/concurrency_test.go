package http_test

import (
	"fmt"
	"sync"
	"testing"
)

// TestConcurrentRequests: 64 clients at once, each writing and reading its
// own entity; every request gets its own answer.
func TestConcurrentRequests(t *testing.T) {
	e := newEnv(t)
	const clients, rounds = 64, 10
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := newID()
			for i := range rounds {
				r, err := tryRequest(e.base, "POST", "/events", map[string]any{"events": []any{ev(id, int64(c)*1_000_000, int64(i))}})
				if err != nil || r.status != 200 || str(get(r.body, "committed")) != "true" {
					errs <- fmt.Errorf("client %d insert %d: %v %d %s", c, i, err, r.status, r.raw)
					return
				}
				r, err = tryRequest(e.base, "GET", "/entity/"+id, nil)
				if err != nil || str(get(r.body, "event", "lon_nano")) != fmt.Sprint(i) {
					errs <- fmt.Errorf("client %d read %d: %v %s", c, i, err, r.raw)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	r := e.req("GET", "/stats", nil)
	eq(t, "events", get(r.body, "event_count"), fmt.Sprint(clients*rounds))
}
