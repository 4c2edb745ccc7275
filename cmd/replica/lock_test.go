package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/geoevent/geoevent/internal/testproc"
)

// TestOneProcessPerDataDirectory: while one process serves a data
// directory, a second dev, start or format on it exits at once with code
// 1, naming the directory and the first one's pid; once the first has
// stopped, the directory starts again.
func TestOneProcessPerDataDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dev-data")
	first := testproc.StartDev(t, testproc.DevOptions{Dir: dir, HTTP: true})
	base := first.URL
	pid := strconv.Itoa(first.PID())

	for _, args := range [][]string{
		{"dev", "--data", dir, "--addresses", testproc.FreeAddr(t), "--http", "127.0.0.1:0"},
		{"start", "--data", dir, "--addresses", testproc.FreeAddr(t), "--http", "127.0.0.1:0"},
		{"format", "--cluster", "1", "--replica", "0", "--replica-count", "1", "--data", dir},
	} {
		// Started as a child, so that a second server that does not
		// refuse fails the test rather than hanging it.
		began := time.Now()
		second := testproc.Start(t, "replica", args...)
		select {
		case <-second.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("replica %s on a directory in use is still running after 10 s; stderr:\n%s", args[0], second.Stderr())
		}
		took := time.Since(began)
		code, errs := second.ExitCode(), second.Stderr()
		if code != exitError {
			t.Fatalf("replica %s on a directory in use: exit code %d, want %d; stderr:\n%s", args[0], code, exitError, errs)
		}
		want := "data directory " + dir + " is in use by another process (pid " + pid + "; lock file " + filepath.Join(dir, "LOCK") + ")"
		if !strings.Contains(errs, "replica "+args[0]+": "+want) {
			t.Fatalf("replica %s: stderr does not say %q:\n%s", args[0], want, errs)
		}
		if took > 5*time.Second {
			t.Fatalf("replica %s took %v to refuse", args[0], took)
		}
	}
	// The first is unharmed.
	if m := getJSON(t, base+"/ping"); m["pong"] != true {
		t.Fatalf("ping of the first process: %v", m)
	}
	first.Stop(syscall.SIGTERM)

	again := testproc.StartDev(t, testproc.DevOptions{Dir: dir, HTTP: true})
	if m := getJSON(t, again.URL+"/ping"); m["pong"] != true {
		t.Fatalf("ping after the restart: %v", m)
	}
	again.Stop(syscall.SIGTERM)
}
