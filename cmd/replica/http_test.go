package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/geoevent/geoevent/internal/testproc"
)

// httpAddrFromLog waits for start's JSON log line "HTTP gateway listening"
// and returns its address.
func httpAddrFromLog(t *testing.T, c *testproc.Proc) string {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		for _, line := range strings.Split(c.Stderr(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "HTTP gateway listening" {
				if a, ok := m["http"].(string); ok {
					return a
				}
			}
		}
		select {
		case <-c.Done():
			t.Fatalf("the server exited; stderr:\n%s", c.Stderr())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no HTTP address logged; stderr:\n%s", c.Stderr())
		}
	}
}

func send(t *testing.T, method, url, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s %s: not JSON: %s", method, url, raw)
	}
	return res.StatusCode, m
}

func getJSON(t *testing.T, url string) map[string]any {
	t.Helper()
	code, m := send(t, "GET", url, "")
	if code != 200 {
		t.Fatalf("GET %s: %d %v", url, code, m)
	}
	return m
}

func TestDevServesHTTP(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dev-data")
	srv := testproc.StartDev(t, testproc.DevOptions{Dir: dir, HTTP: true})
	base := srv.URL
	if m := getJSON(t, base+"/ping"); m["pong"] != true {
		t.Fatalf("ping: %v", m)
	}
	const id = "6ba7b810-9dad-11d1-80b4-00c04fd430c8"
	code, m := send(t, "POST", base+"/events", `{"events":[{"entity_id":"`+id+`","lat_nano":38115000000,"lon_nano":13361000000}]}`)
	if code != 200 || m["committed"] != true {
		t.Fatalf("POST /events: %d %v", code, m)
	}
	code, m = send(t, "POST", base+"/query/radius", `{"center_lat":38.115,"center_lon":13.361,"radius_m":10}`)
	if events, _ := m["events"].([]any); code != 200 || len(events) != 1 {
		t.Fatalf("POST /query/radius: %d %v", code, m)
	}
	if m := getJSON(t, base+"/openapi.json"); m["openapi"] != "3.1.0" {
		t.Fatalf("openapi: %v", m["openapi"])
	}
	srv.Stop(syscall.SIGTERM)
	if !strings.Contains(srv.Stderr(), "stopped cleanly") {
		t.Fatalf("no clean stop logged:\n%s", srv.Stderr())
	}

	// Restarted, the data is there over HTTP, and SIGINT stops it cleanly.
	srv = testproc.StartDev(t, testproc.DevOptions{Dir: dir, HTTP: true})
	base = srv.URL
	if m := getJSON(t, base+"/entity/"+id+"?form=a"); m["found"] != true {
		t.Fatalf("after restart: %v", m)
	}
	srv.Stop(syscall.SIGINT)
}

func TestHTTPAddressInUse(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dev-data")
	srv := testproc.StartDev(t, testproc.DevOptions{Dir: dir, HTTP: true})
	taken := strings.TrimPrefix(srv.URL, "http://")
	code, _, errs := runCmd(t, "dev", "--data", filepath.Join(t.TempDir(), "other"), "--addresses", testproc.FreeAddr(t), "--http", taken)
	if code == 0 || !strings.Contains(errs, "--http") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	srv.Stop(syscall.SIGTERM)
}

// TestHTTPOnEveryReplica: every replica of a cluster of three serves the
// HTTP API through its in-process connection to its own replica; on a
// follower the replica forwards to the leader. Writes through each
// gateway are read back through every other.
func TestHTTPOnEveryReplica(t *testing.T) {
	c, leader := startHTTPCluster(t)
	ids := make([]string, 3)
	for i := range 3 {
		ids[i] = fmt.Sprintf("6ba7b810-9dad-11d1-80b4-%012d", i+1)
		url := "http://" + c.HTTP[i] + "/events"
		body := `{"mode":"upsert","events":[{"entity_id":"` + ids[i] + `","lat_nano":38115000000,"lon_nano":13361000000}]}`
		// A follower that has not heard from the leader yet answers 503
		// (retryable) once the client's retries are spent: retry.
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			code, m := send(t, "POST", url, body)
			if code == 200 && m["committed"] == true {
				break
			}
			if code != 503 || time.Now().After(deadline) {
				t.Fatalf("POST /events through replica %d (leader %d): %d %v", i, leader, code, m)
			}
		}
	}
	for i := range 3 {
		for _, id := range ids {
			if m := getJSON(t, "http://"+c.HTTP[i]+"/entity/"+id); m["found"] != true {
				t.Fatalf("GET /entity/%s through replica %d (leader %d): %v", id, i, leader, m)
			}
		}
	}
	if m := getJSON(t, "http://"+c.HTTP[(leader+1)%3]+"/stats"); fmt.Sprint(m["event_count"]) != "3" {
		t.Fatalf("stats through a follower: %v", m)
	}
}

// TestPprofFlag: --pprof serves net/http/pprof on its own address.
func TestPprofFlag(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dev-data")
	pprofAddr := testproc.FreeAddr(t)
	srv := testproc.StartDev(t, testproc.DevOptions{Dir: dir, HTTP: true, Args: []string{"--pprof", pprofAddr}})
	base := srv.URL
	res, err := http.Get("http://" + pprofAddr + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(raw), "dev") {
		t.Fatalf("pprof cmdline: %d %q", res.StatusCode, raw)
	}
	// Not on the API's address.
	if code, _ := send(t, "GET", base+"/debug/pprof/cmdline", ""); code != 404 {
		t.Fatalf("the API serves /debug/pprof: %d", code)
	}
	srv.Stop(syscall.SIGTERM)
}
