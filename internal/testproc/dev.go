package testproc

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/geoevent/geoevent/client"
	"github.com/geoevent/geoevent/core"
)

// DevOptions says how StartDev runs `replica dev`.
type DevOptions struct {
	// Dir is the data directory; "" is a new one in the test's temporary
	// directory.
	Dir string
	// Addr is the binary protocol's address; "" is 127.0.0.1:0, the port
	// the system picks.
	Addr string
	// HTTP serves the HTTP JSON API on a port the system picks.
	HTTP bool
	// Args are more flags.
	Args []string
	// StopAtCleanup makes the test's cleanup stop the server with an
	// interrupt, as Ctrl-C does, and fail the test unless it exits within
	// 15 s; otherwise the cleanup kills it.
	StopAtCleanup bool
}

// Dev is a `replica dev` server that has printed its banner.
type Dev struct {
	*Proc
	Dir     string       // its data directory
	Addr    string       // its binary protocol's host:port
	URL     string       // its HTTP JSON API's http://host:port; "" without one
	Cluster core.Uint128 // the cluster id its banner names
}

var (
	bannerAddr = regexp.MustCompile(`(?m)binary protocol on (\S+): register with cluster id ([0-9a-f-]{36})$`)
	bannerHTTP = regexp.MustCompile(`HTTP JSON API on (http://[0-9.]+:[0-9]+)`)
)

// StartDev starts `replica dev` (Main must have built cmd/replica) and
// waits up to 20 s for its banner, which says where it listens.
func StartDev(t testing.TB, opts DevOptions) *Dev {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = filepath.Join(t.TempDir(), "data")
	}
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	httpAddr := ""
	if opts.HTTP {
		httpAddr = "127.0.0.1:0"
	}
	args := append([]string{"dev", "--data", opts.Dir, "--addresses", opts.Addr, "--http", httpAddr}, opts.Args...)
	d := &Dev{Proc: Start(t, "replica", args...), Dir: opts.Dir}
	if opts.StopAtCleanup {
		t.Cleanup(func() {
			d.cmd.Process.Signal(os.Interrupt)
			select {
			case <-d.done:
			case <-time.After(15 * time.Second):
				d.cmd.Process.Kill()
				<-d.done
				t.Errorf("replica dev did not stop; stderr:\n%s", d.Stderr())
			}
		})
	}
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(d.Stdout(), "Ctrl-C"); time.Sleep(10 * time.Millisecond) {
		if d.exited() {
			t.Fatalf("replica dev exited; stderr:\n%s", d.Stderr())
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica dev printed no banner; stdout:\n%s\nstderr:\n%s", d.Stdout(), d.Stderr())
		}
	}
	out := d.Stdout()
	m := bannerAddr.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("replica dev's banner names no address and cluster:\n%s", out)
	}
	d.Addr = m[1]
	id, err := core.ParseUUID(m[2])
	if err != nil {
		t.Fatal(err)
	}
	d.Cluster = id
	if h := bannerHTTP.FindStringSubmatch(out); h != nil {
		d.URL = h[1]
	} else if opts.HTTP {
		t.Fatalf("replica dev's banner names no HTTP address:\n%s", out)
	}
	return d
}

// Client is a client of the server's cluster; the test's cleanup closes
// it.
func (d *Dev) Client(opts client.Options) *client.Client {
	d.t.Helper()
	opts.Cluster = d.Cluster
	cl, err := client.New([]string{d.Addr}, opts)
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(func() { cl.Close() })
	return cl
}
