package io

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/geoevent/geoevent/core"
)

// TestAttackRealReplica replays the memory attacks on the binary protocol
// against a real `replica dev` process and reports its resident memory
// (VmRSS, from /proc) at rest, at its peak during each attack and a few
// times after it: 5,000 idle connections (each registered once), then 150
// connections sending 9 MiB of a 10 MiB frame. It runs only when
// GEOEVENT_ATTACK_REPLICA names a replica binary, on Linux, and takes about
// a minute:
//
//	go build -o /tmp/replica ./cmd/replica
//	GEOEVENT_ATTACK_REPLICA=/tmp/replica go test ./io -run TestAttackRealReplica -v
//
// GEOEVENT_ATTACK_ARGS adds flags to `replica dev` (space-separated). It
// fails when an attack takes the replica more than 512 MB above its resident
// size at rest, at its peak or at the last reading after it.
func TestAttackRealReplica(t *testing.T) {
	bin := os.Getenv("GEOEVENT_ATTACK_REPLICA")
	if bin == "" {
		t.Skip("set GEOEVENT_ATTACK_REPLICA to a replica binary to run the attacks against it")
	}
	addr := freeAddrs(t, 1)[0]
	args := []string{"dev", "--data", filepath.Join(t.TempDir(), "data"), "--http", "", "--addresses", addr}
	if extra := os.Getenv("GEOEVENT_ATTACK_ARGS"); extra != "" {
		args = append(args, strings.Fields(extra)...)
	}
	cmd := exec.Command(bin, args...)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
		if t.Failed() {
			t.Logf("replica's output:\n%s", logs.String())
		}
	}()
	pid := cmd.Process.Pid
	register := core.AppendFrame(nil, core.Header{Request: 1, Type: core.MsgRegister}, core.AppendRegister(nil, core.Uint128{}))
	// The dev replica's cluster id is random: a register with a wrong one
	// is answered (with an error) all the same, which is all it takes.
	deadline := time.Now().Add(30 * time.Second)
	for {
		nc, err := net.Dial("tcp", addr)
		if err == nil {
			nc.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica did not listen on %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	base := rssMB(t, pid)
	t.Logf("%s %s: resident %d MB at rest", filepath.Base(bin), strings.Join(args[5:], " "), base)

	// The resident size is read these intervals apart after an attack
	// (GEOEVENT_ATTACK_AFTER, comma-separated durations): Go gives freed
	// memory back to the system gradually.
	afterWaits := []time.Duration{2 * time.Second, 8 * time.Second, 20 * time.Second}
	if s := os.Getenv("GEOEVENT_ATTACK_AFTER"); s != "" {
		afterWaits = nil
		for _, f := range strings.Split(s, ",") {
			d, err := time.ParseDuration(f)
			if err != nil {
				t.Fatal(err)
			}
			afterWaits = append(afterWaits, d)
		}
	}
	// sample records the largest resident size until stop is closed.
	sample := func(stop <-chan struct{}) <-chan int {
		out := make(chan int, 1)
		go func() {
			peak := 0
			for {
				peak = max(peak, rssMB(t, pid))
				select {
				case <-stop:
					out <- peak
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}()
		return out
	}
	after := func(name string, peak int) {
		t.Helper()
		var at []string
		var last int
		for _, wait := range afterWaits {
			time.Sleep(wait)
			last = rssMB(t, pid)
			at = append(at, fmt.Sprintf("%d MB", last))
		}
		t.Logf("%s: peak %d MB (+%d), after %v: %s", name, peak, peak-base, afterWaits, strings.Join(at, ", "))
		if peak-base > 512 || last-base > 512 {
			t.Errorf("%s: more than 512 MB above the %d MB at rest", name, base)
		}
	}

	// 5,000 idle connections, each registered once.
	{
		stop := make(chan struct{})
		peak := sample(stop)
		conns := make([]net.Conn, 0, 5000)
		failed := 0
		for range 5000 {
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				failed++
				continue
			}
			conns = append(conns, nc)
			nc.Write(register)
		}
		answered := 0
		for _, nc := range conns {
			nc.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, _, err := core.ReadFrame(bufio.NewReaderSize(nc, 64), nil); err == nil {
				answered++
			}
		}
		time.Sleep(3 * time.Second)
		idle := rssMB(t, pid)
		close(stop)
		p := <-peak
		t.Logf("5,000 idle connections: %d open, %d answered, %d failed to connect; resident %d MB (+%d): %.1f KB a connection",
			len(conns), answered, failed, idle, idle-base, float64(idle-base)*1000/float64(max(len(conns), 1)))
		for _, nc := range conns {
			nc.Close()
		}
		after("5,000 idle connections", p)
	}

	// 150 connections holding 9 MiB of a 10 MiB frame.
	{
		stop := make(chan struct{})
		peak := sample(stop)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var conns []net.Conn
		refused := 0
		chunk := make([]byte, 1<<20)
		for range 150 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				nc, err := net.Dial("tcp", addr)
				if err != nil {
					return
				}
				mu.Lock()
				conns = append(conns, nc)
				mu.Unlock()
				nc.SetWriteDeadline(time.Now().Add(60 * time.Second))
				if _, err := nc.Write(binary.LittleEndian.AppendUint32(nil, core.MaxFrameBody)); err != nil {
					return
				}
				for range 9 {
					if _, err := nc.Write(chunk); err != nil {
						mu.Lock()
						refused++
						mu.Unlock()
						return
					}
				}
			}()
		}
		wg.Wait()
		time.Sleep(3 * time.Second)
		close(stop)
		p := <-peak
		t.Logf("150 x 9 MiB of a 10 MiB frame: %d connections cut off before sending all", refused)
		for _, nc := range conns {
			nc.Close()
		}
		after("150 x 9 MiB of a 10 MiB frame", p)
	}
}

// rssMB is the resident memory of process pid, in MB (VmRSS).
func rssMB(t *testing.T, pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				t.Fatal(err)
			}
			return kb / 1000
		}
	}
	t.Fatal("no VmRSS")
	return 0
}
