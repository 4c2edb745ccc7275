package http_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	stdhttp "net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	ghttp "github.com/geoevent/geoevent/http"

	"github.com/geoevent/geoevent/internal/testproc"
)

// TestMemoryUnderBodyAttack measures the gateway's resident memory while
// 100 connections each hold 15 MiB of a declared 16 MiB body, and after
// they go away. It takes tens of seconds and 2 GB of memory at worst, so
// it runs only with GEOEVENT_MEMATTACK=1:
//
//	GEOEVENT_MEMATTACK=1 go test ./http -run TestMemoryUnderBodyAttack -v
//
// The attacking clients run in the same process; they send from one shared
// buffer, so the resident memory they add is that buffer (15 MiB).
func TestMemoryUnderBodyAttack(t *testing.T) {
	if os.Getenv("GEOEVENT_MEMATTACK") == "" {
		t.Skip("set GEOEVENT_MEMATTACK=1 to run the memory measurement")
	}
	const conns, declared, sent = 100, 16 << 20, 15 << 20
	addr := testproc.ServeGateway(t, ghttp.Config{Backend: cannedBackend()}).Addr().String()
	chunk := []byte(`{"entity_ids":[` + strings.Repeat(" ", sent-len(`{"entity_ids":[`)))
	base := residentMiB(t, "VmRSS")
	t.Logf("before: VmRSS %d MiB", base)

	var wg sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	answered := 0
	start := time.Now()
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			open = append(open, nc)
			mu.Unlock()
			nc.SetWriteDeadline(time.Now().Add(60 * time.Second))
			fmt.Fprintf(nc, "POST /entities/batch HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", declared)
			if _, err := nc.Write(chunk); err != nil {
				// Refused early (503 and closed): read what was said.
				nc.SetReadDeadline(time.Now().Add(time.Second))
				if line, _ := bufio.NewReader(nc).ReadString('\n'); line != "" {
					mu.Lock()
					answered++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	// Let the server read what was sent.
	time.Sleep(3 * time.Second)
	held := residentMiB(t, "VmRSS")
	t.Logf("100 connections holding 15 of 16 MiB (sent in %v, %d refused while sending): VmRSS %d MiB (+%d), peak VmHWM %d MiB",
		time.Since(start).Round(time.Millisecond), answered, held, held-base, residentMiB(t, "VmHWM"))
	for _, nc := range open {
		nc.Close()
	}
	for _, d := range []time.Duration{time.Second, 10 * time.Second} {
		time.Sleep(d)
		runtime.GC()
		t.Logf("%v after the connections closed: VmRSS %d MiB", d, residentMiB(t, "VmRSS"))
	}
}

// residentMiB reads a field of /proc/self/status, in MiB.
func residentMiB(t *testing.T, field string) int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status")
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			var kb int
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			return kb >> 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// TestMemoryOfIdleConnections measures the heap 2,000 connections hold
// while idle after one 200 KB insert each, at once and after the
// connections' buffers are dropped (a second of idleness). It runs only
// with GEOEVENT_MEMATTACK=1.
func TestMemoryOfIdleConnections(t *testing.T) {
	if os.Getenv("GEOEVENT_MEMATTACK") == "" {
		t.Skip("set GEOEVENT_MEMATTACK=1 to run the memory measurement")
	}
	const conns = 2000
	addr := testproc.ServeGateway(t, ghttp.Config{Backend: cannedBackend()}).Addr().String()
	event := `{"entity_id":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","lat_nano":1,"lon_nano":2}`
	body := `{"events":[` + strings.Repeat(event+",", 2499) + event + `]}`
	req := fmt.Sprintf("POST /events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	heap := func() int {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int(m.HeapInuse >> 20)
	}
	base := heap()
	var open []net.Conn
	defer func() {
		for _, nc := range open {
			nc.Close()
		}
	}()
	start := time.Now()
	sem := make(chan struct{}, 50)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			open = append(open, nc)
			mu.Unlock()
			nc.SetDeadline(time.Now().Add(60 * time.Second))
			if _, err := nc.Write([]byte(req)); err != nil {
				t.Error(err)
				return
			}
			res, err := stdhttp.ReadResponse(bufio.NewReader(nc), nil)
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, res.Body)
		}()
	}
	wg.Wait()
	t.Logf("%d idle connections after a %d KB insert each (%v): heap in use %d MiB above the start", conns, len(body)>>10, time.Since(start).Round(time.Millisecond), heap()-base)
	time.Sleep(1500 * time.Millisecond)
	t.Logf("1.5 s later: heap in use %d MiB above the start", heap()-base)
}
