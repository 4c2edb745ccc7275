package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// replicaBin is cmd/replica, built once by TestMain.
var replicaBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "geoevent-cli-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	replicaBin = filepath.Join(dir, "replica")
	out, err := exec.Command("go", "build", "-o", replicaBin, "../replica").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building cmd/replica: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// syncBuffer is a bytes.Buffer a child process writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startDev starts `replica dev` on free loopback ports with a new data
// directory, and returns its HTTP API's URL; the test's cleanup stops it.
func startDev(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bin := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(replicaBin, "dev", "--data", filepath.Join(t.TempDir(), "data"), "--addresses", bin, "--http", "127.0.0.1:0")
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Errorf("replica dev did not stop; stderr:\n%s", stderr.String())
		}
	})
	re := regexp.MustCompile(`HTTP JSON API on (http://[0-9.]+:[0-9]+)`)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if m := re.FindStringSubmatch(stdout.String()); m != nil {
			return m[1]
		}
		select {
		case <-done:
			t.Fatalf("replica dev exited; stderr:\n%s", stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica dev printed no HTTP address; stderr:\n%s", stderr.String())
		}
	}
}

// cli runs the command line against url and returns its exit code and
// output.
type result struct {
	code           int
	stdout, stderr string
}

func cli(t testing.TB, url, stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(append([]string{"--url", url}, args...), strings.NewReader(stdin), &out, &errOut, "", false)
	return result{code, out.String(), errOut.String()}
}

// ok runs the command line and fails the test unless it exits 0.
func ok(t testing.TB, url string, args ...string) string {
	t.Helper()
	r := cli(t, url, "", args...)
	if r.code != 0 {
		t.Fatalf("geoevent %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// spaces are the runs of spaces that align a table's columns.
var spaces = regexp.MustCompile(` +`)

// mustContain fails unless s holds every one of want, runs of spaces
// counting as one.
func mustContain(t testing.TB, what, s string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(spaces.ReplaceAllString(s, " "), spaces.ReplaceAllString(w, " ")) {
			t.Errorf("%s lacks %q:\n%s", what, w, s)
		}
	}
}
