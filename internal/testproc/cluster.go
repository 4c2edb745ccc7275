package testproc

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/geoevent/geoevent/client"
	"github.com/geoevent/geoevent/core"
)

// Cluster is n `replica start` processes of one cluster on 127.0.0.1,
// each with its data directory in the test's temporary directory. Main
// must have built cmd/replica.
type Cluster struct {
	t     testing.TB
	ID    core.Uint128
	Addrs []string // each replica's binary protocol address
	Dirs  []string // each replica's data directory
	Procs []*Proc  // each replica's process; nil while it does not run
	// HTTP, when set before Start, is each replica's --http address.
	HTTP []string
}

// NewCluster formats n replicas of the cluster id (a UUID) on free ports;
// none runs yet.
func NewCluster(t testing.TB, id string, n int) *Cluster {
	t.Helper()
	cid, err := core.ParseUUID(id)
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{t: t, ID: cid, Procs: make([]*Proc, n)}
	for i := range n {
		c.Addrs = append(c.Addrs, FreeAddr(t))
		c.Dirs = append(c.Dirs, filepath.Join(t.TempDir(), fmt.Sprint("replica-", i)))
		MustRun(t, nil, "replica", "format", "--cluster", id, "--replica", fmt.Sprint(i), "--replica-count", fmt.Sprint(n), "--data", c.Dirs[i])
	}
	return c
}

// StartCluster formats and starts n replicas of the cluster id, and waits
// up to 20 s for a leader, which it returns.
func StartCluster(t testing.TB, id string, n int) (*Cluster, int) {
	t.Helper()
	c := NewCluster(t, id, n)
	return c, c.StartAll()
}

// StartAll starts every replica and waits up to 20 s for a leader, which
// it returns.
func (c *Cluster) StartAll() int {
	c.t.Helper()
	for i := range c.Procs {
		c.Start(i)
	}
	leader := c.Leader(-1, 20*time.Second)
	if leader < 0 {
		c.t.Fatal("no leader elected within 20 s")
	}
	return leader
}

// addresses is the --addresses flag's value: every replica's address.
func (c *Cluster) addresses() string { return strings.Join(c.Addrs, ",") }

// Start starts replica i and waits up to 20 s until it listens.
func (c *Cluster) Start(i int) {
	c.t.Helper()
	args := []string{"start", "--data", c.Dirs[i], "--addresses", c.addresses()}
	if c.HTTP != nil {
		args = append(args, "--http", c.HTTP[i])
	}
	c.Procs[i] = Start(c.t, "replica", args...)
	c.Procs[i].waitListen(c.Addrs[i], 20*time.Second)
}

// Kill kills replica i with SIGKILL and waits until it has exited.
func (c *Cluster) Kill(i int) {
	c.t.Helper()
	c.Procs[i].Kill()
	c.Procs[i] = nil
}

// Client is a client of the cluster that connects to addrs; the test's
// cleanup closes it.
func (c *Cluster) Client(addrs []string, opts client.Options) *client.Client {
	c.t.Helper()
	opts.Cluster = c.ID
	cl, err := client.New(addrs, opts)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cl.Close() })
	return cl
}

// Leader asks the running replicas for the topology until one says it is
// the primary itself and is not replica not (-1: any); it returns -1
// after timeout.
func (c *Cluster) Leader(not int, timeout time.Duration) int {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for i, p := range c.Procs {
			if p == nil || i == not {
				continue
			}
			if top, err := c.topology(i); err == nil && int(top.Primary) == i {
				return i
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return -1
}

// AgreedLeader is the replica that a majority of the running replicas
// name as the primary, once they do (-1 after timeout). A replica that
// has just restarted may name itself before it hears of the leader.
func (c *Cluster) AgreedLeader(timeout time.Duration) int {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		votes := make([]int, len(c.Procs))
		for i, p := range c.Procs {
			if p == nil {
				continue
			}
			if top, err := c.topology(i); err == nil && int(top.Primary) < len(votes) {
				votes[top.Primary]++
			}
		}
		for p, n := range votes {
			if n > len(c.Procs)/2 && c.Procs[p] != nil {
				return p
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return -1
}

// topology asks replica i alone for the topology, with short timeouts
// and no retries.
func (c *Cluster) topology(i int) (*core.TopologyReply, error) {
	c.t.Helper()
	cl, err := client.New([]string{c.Addrs[i]}, client.Options{Cluster: c.ID, DisableRetries: true,
		ConnectTimeout: 300 * time.Millisecond, RequestTimeout: 300 * time.Millisecond, TotalTimeout: 500 * time.Millisecond})
	if err != nil {
		c.t.Fatal(err)
	}
	defer cl.Close()
	return cl.Topology(context.Background())
}
