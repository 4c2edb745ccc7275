// Package testproc runs the project's programs as child processes for
// black-box tests: it builds them once per test binary, starts `replica
// dev` or a cluster of `replica start` processes on free 127.0.0.1 ports
// with data in the test's temporary directory, waits until they answer,
// and stops or kills them.
//
// Every process a test starts is killed by the test's cleanup if it still
// runs, and the tail of its output is logged when the test failed, so a
// failing test shows what the servers said.
//
// A test package builds its programs in TestMain:
//
//	func TestMain(m *testing.M) { testproc.Main(m, "../replica") }
//
// and then runs them by name: testproc.Start(t, "replica", "dev", ...).
package testproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// binDir holds the programs Main built.
var binDir string

// Main builds the main packages pkgs (as `go build` takes them, relative
// to the test's package directory) into a new temporary directory, runs
// the tests, removes the directory and exits with the tests' code. A
// failed build exits 1 with go build's output.
func Main(m *testing.M, pkgs ...string) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "testproc-bin")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		binDir = dir
		args := append([]string{"build", "-o", dir + string(os.PathSeparator)}, pkgs...)
		if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build %s: %v\n%s", strings.Join(pkgs, " "), err, out)
			return 1
		}
		return m.Run()
	}())
}

// Bin is the path of the program name (the last element of its package
// path) that Main built.
func Bin(name string) string {
	if binDir == "" {
		panic("testproc: Bin before Main built the programs") // a test's setup error, not input
	}
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	return filepath.Join(binDir, name)
}

// FreeAddr is a 127.0.0.1 address with a port that was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Run runs the program name to completion with env added to the test's
// environment, and returns its exit code and output. It fails the test
// only when the program cannot be run at all.
func Run(t testing.TB, env []string, name string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(Bin(name), args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), out.String(), errb.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, out.String(), errb.String()
}

// MustRun is Run that fails the test unless the program exits 0, and
// returns its stdout followed by its stderr.
func MustRun(t testing.TB, env []string, name string, args ...string) string {
	t.Helper()
	code, stdout, stderr := Run(t, env, name, args...)
	if code != 0 {
		t.Fatalf("%s %v: exit %d\n%s%s", name, args, code, stdout, stderr)
	}
	return stdout + stderr
}

// buffer collects a child's output while the test reads it.
type buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Proc is a process the test started.
type Proc struct {
	t    testing.TB
	name string
	args []string
	cmd  *exec.Cmd

	stdout, stderr, output buffer // output: both, as they arrive
	done                   chan struct{}
	err                    error // Wait's, once done is closed

	read int // how much of stdout Expect has passed
}

// Start starts the program name. The test's cleanup kills it if it still
// runs and, when the test failed, logs the last 6 KiB of its output.
func Start(t testing.TB, name string, args ...string) *Proc {
	t.Helper()
	p := &Proc{t: t, name: name, args: args, cmd: exec.Command(Bin(name), args...), done: make(chan struct{})}
	p.cmd.Stdout = io.MultiWriter(&p.stdout, &p.output)
	p.cmd.Stderr = io.MultiWriter(&p.stderr, &p.output)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		if !p.exited() {
			p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s %v output (last 6 KiB):\n%s", name, args, Tail(p.Output(), 6<<10))
		}
	})
	return p
}

// Stdout is what the process wrote to its standard output so far.
func (p *Proc) Stdout() string { return p.stdout.String() }

// Stderr is what the process wrote to its standard error so far.
func (p *Proc) Stderr() string { return p.stderr.String() }

// Output is its standard output and error, as they arrived.
func (p *Proc) Output() string { return p.output.String() }

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// exited reports whether the process has exited.
func (p *Proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// ExitCode is the process's exit code; -1 while it runs or when a signal
// ended it.
func (p *Proc) ExitCode() int {
	if !p.exited() {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// PID is the process's id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Signal sends sig to the process, failing the test if it cannot.
func (p *Proc) Signal(sig os.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
}

// Kill kills the process (SIGKILL: no clean stop) and waits until it has
// exited.
func (p *Proc) Kill() {
	p.t.Helper()
	p.Signal(os.Kill)
	<-p.done
}

// Stop sends sig and fails the test unless the process exits with code 0
// within 15 s.
func (p *Proc) Stop(sig os.Signal) {
	p.t.Helper()
	p.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		p.t.Fatalf("%s: no exit after %v; stderr:\n%s", p.name, sig, p.Stderr())
	}
	if code := p.ExitCode(); code != 0 {
		p.t.Fatalf("%s: exit code %d after %v; stderr:\n%s", p.name, code, sig, p.Stderr())
	}
}

// Wait waits up to timeout for the process to exit, fails the test unless
// it exited successfully, and returns its output.
func (p *Proc) Wait(timeout time.Duration) string {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.t.Fatalf("%s still runs after %v", p.name, timeout)
	}
	if p.err != nil {
		p.t.Fatalf("%s: %v", p.name, p.err)
	}
	return p.Output()
}

// Expect waits up to timeout for a whole line of standard output that
// matches re and has not been passed by an earlier Expect, and returns its
// submatches. It fails the test if the process exits or the time runs out
// first.
func (p *Proc) Expect(re *regexp.Regexp, timeout time.Duration) []string {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		out := p.Stdout()
		for {
			nl := strings.IndexByte(out[p.read:], '\n')
			if nl < 0 {
				break
			}
			line := out[p.read : p.read+nl]
			p.read += nl + 1
			if m := re.FindStringSubmatch(line); m != nil {
				return m
			}
		}
		if p.exited() && len(p.Stdout()) == len(out) {
			p.t.Fatalf("%s exited (%v) before printing a line matching %q", p.name, p.err, re)
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s printed no line matching %q within %v; stderr:\n%s", p.name, re, timeout, Tail(p.Stderr(), 6<<10))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitListen waits up to timeout until addr accepts TCP connections, and
// fails the test if the process exits or the time runs out first.
func (p *Proc) waitListen(addr string, timeout time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		nc, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			nc.Close()
			return
		}
		if p.exited() {
			p.t.Fatalf("%s exited before listening on %s; stderr:\n%s", p.name, addr, Tail(p.Stderr(), 6<<10))
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s does not listen on %s: %v", p.name, addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Tail is the last n bytes of s, marked as cut when s is longer.
func Tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// RunContext is a helper for tests that bound a program's run: it runs
// name with a deadline and returns its combined output and error.
func RunContext(ctx context.Context, name string, args ...string) ([]byte, error) {
	return exec.CommandContext(ctx, Bin(name), args...).CombinedOutput()
}
