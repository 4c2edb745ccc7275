package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/geoevent/geoevent/internal/testproc"
)

// TestReadsGoOnWhenTheDiskIsFull fills a small tmpfs with a dev replica's
// log until writes wait, and checks that reads (ping, stats, an entity, a
// radius query) still answer at once: with the gateway's sessions as they
// were, and after a kill -9 and a restart on the full disk, when the
// gateway has no registered session and can register none (registering is
// a write). It needs to mount a tmpfs (root); elsewhere it is skipped.
func TestReadsGoOnWhenTheDiskIsFull(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	mnt := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", mnt).CombinedOutput(); err != nil {
			t.Logf("umount %s: %v %s", mnt, err, out)
		}
	})
	data := filepath.Join(mnt, "data")
	srv := testproc.StartDev(t, testproc.DevOptions{Dir: data, HTTP: true})
	base := srv.URL

	const entity = "6ba7b810-9dad-11d1-80b4-00c04fd430c8"
	if code, m := send(t, "POST", base+"/events", `{"events":[{"entity_id":"`+entity+`","lat_nano":38115000000,"lon_nano":13361000000}]}`); code != 200 {
		t.Fatalf("first write: %d %v", code, m)
	}
	// Batches of 10,000 events (1.28 MB of log each) until one waits.
	var batch strings.Builder
	batch.WriteString(`{"mode":"upsert","events":[`)
	for i := range 10_000 {
		if i > 0 {
			batch.WriteByte(',')
		}
		fmt.Fprintf(&batch, `{"entity_id":"%d","lat_nano":%d,"lon_nano":13361000000}`, i+1, 38_000_000_000+i)
	}
	batch.WriteString(`]}`)
	writer := &http.Client{Timeout: 3 * time.Second}
	full := false
	for i := 0; i < 200 && !full; i++ {
		req, _ := http.NewRequest("POST", base+"/events", strings.NewReader(batch.String()))
		req.Header.Set("Content-Type", "application/json")
		res, err := writer.Do(req)
		if err != nil {
			full = true // the write waits for space
			break
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("batch %d: HTTP %d", i, res.StatusCode)
		}
	}
	if !full {
		t.Fatal("200 batches did not fill a 48 MB tmpfs")
	}

	readsAnswer := func(when string) {
		t.Helper()
		reader := &http.Client{Timeout: 2 * time.Second}
		for _, path := range []string{"/ping", "/stats", "/status", "/entity/" + entity} {
			start := time.Now()
			res, err := reader.Get(base + path)
			if err != nil {
				t.Fatalf("%s: GET %s: %v", when, path, err)
			}
			res.Body.Close()
			if res.StatusCode != 200 {
				t.Fatalf("%s: GET %s: HTTP %d", when, path, res.StatusCode)
			}
			t.Logf("%s: GET %s answered in %v", when, path, time.Since(start).Round(time.Millisecond))
		}
		req, _ := http.NewRequest("POST", base+"/query/radius", strings.NewReader(`{"center_lat":38.115,"center_lon":13.361,"radius_m":100}`))
		req.Header.Set("Content-Type", "application/json")
		res, err := reader.Do(req)
		if err != nil {
			t.Fatalf("%s: radius: %v", when, err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("%s: radius: HTTP %d", when, res.StatusCode)
		}
	}
	readsAnswer("disk full")

	// kill -9 and a restart on the full disk: the new gateway has no
	// session, and reads must not wait for one.
	srv.Kill()
	srv = testproc.StartDev(t, testproc.DevOptions{Dir: data, HTTP: true})
	base = srv.URL
	deadline := time.Now().Add(30 * time.Second)
	for { // recovery first: /ping says pong once the replica serves
		res, err := (&http.Client{Timeout: 2 * time.Second}).Get(base + "/ping")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pong 30 s after the restart on a full disk: %v\n%s", err, testproc.Tail(srv.Stderr(), 2000))
		}
		time.Sleep(100 * time.Millisecond)
	}
	readsAnswer("restarted on a full disk")
}
