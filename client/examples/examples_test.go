package examples_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/geoevent/geoevent/client"
	"github.com/geoevent/geoevent/core"
)

// bin holds the programs TestMain builds: replica, quickstart, failover.
var bin string

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "geoevent-examples")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		bin = dir
		cmd := exec.Command("go", "build", "-o", dir+string(os.PathSeparator), "../../cmd/replica", "./quickstart", "./failover")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
			return 1
		}
		return m.Run()
	}())
}

func program(name string) string { return filepath.Join(bin, name) }

// proc is a process the test started; the test's cleanup kills it.
type proc struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    strings.Builder // stdout and stderr, as they arrive
	lines  chan string     // stdout's lines, as they arrive
	done   chan struct{}
	waited error
}

func start(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(program(name), args...), lines: make(chan string, 1<<16), done: make(chan struct{})}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = writerFunc(func(b []byte) (int, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.out.Write(b)
	})
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default: // nobody reads them: out keeps them
			}
		}
		io.Copy(io.Discard, stdout)
		p.waited = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("%s %v output:\n%s", name, args, tail(p.output(), 6<<10))
		}
	})
	return p
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// wait waits for the process to exit and returns its output.
func (p *proc) wait(t *testing.T, timeout time.Duration) string {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("%s still runs after %v", p.cmd.Path, timeout)
	}
	if p.waited != nil {
		t.Fatalf("%s: %v", filepath.Base(p.cmd.Path), p.waited)
	}
	return p.output()
}

// expect waits for a stdout line matching re and returns its submatches.
func (p *proc) expect(t *testing.T, re *regexp.Regexp, timeout time.Duration) []string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case line := <-p.lines:
			if m := re.FindStringSubmatch(line); m != nil {
				return m
			}
		case <-p.done:
			t.Fatalf("%s exited (%v) before printing a line matching %q", filepath.Base(p.cmd.Path), p.waited, re)
		case <-deadline:
			t.Fatalf("%s printed no line matching %q within %v", filepath.Base(p.cmd.Path), re, timeout)
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

func run(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, program(name), args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

var bannerRE = regexp.MustCompile(`binary protocol on (\S+): register with cluster id ([0-9a-f-]{36})$`)

// TestQuickstart runs the quick start against a `replica dev` on an
// ephemeral port, whose address and cluster id it reads from the banner.
func TestQuickstart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	dev := start(t, "replica", "dev", "--data", filepath.Join(t.TempDir(), "data"), "--addresses", "127.0.0.1:0", "--http", "")
	m := dev.expect(t, bannerRE, 20*time.Second)
	addr, cluster := m[1], m[2]

	out := run(t, nil, "quickstart", "--addresses", addr, "--cluster", cluster)
	for _, want := range []string{
		"inserted 3 events\n",
		"within 1 km of (38.1157, 13.3615): 2 entities\n",
		"  5f0c3a52-3e1b-4c1a-9d1e-000000000001 at (38.115700, 13.361500), 0 m away\n",
		"  5f0c3a52-3e1b-4c1a-9d1e-000000000002 at (38.121000, 13.357900), 668 m away\n",
		"ferry 5f0c3a52-3e1b-4c1a-9d1e-000000000003: latest at (38.131800, 13.372700), 20",
		"extending an unknown entity's TTL: ENTITY_NOT_FOUND (3)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("quickstart's output lacks %q:\n%s", want, out)
		}
	}

	// The environment instead of flags; a second run updates the same
	// three entities, so the radius query still finds two.
	out = run(t, []string{"GEOEVENT_ADDRESSES=" + addr, "GEOEVENT_CLUSTER=" + cluster}, "quickstart")
	if !strings.Contains(out, "within 1 km of (38.1157, 13.3615): 2 entities\n") {
		t.Errorf("quickstart from the environment:\n%s", out)
	}

	// Another cluster's id is refused: the program fails and says so.
	cmd := exec.Command(program("quickstart"), "--addresses", addr, "--cluster", "00000000-0000-0000-0000-000000000bad")
	if b, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(b), "WRONG_CLUSTER") {
		t.Errorf("quickstart with a wrong cluster id: %v\n%s", err, b)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

var (
	progressRE = regexp.MustCompile(`^ *[0-9.]+s: (\d+) writes acknowledged`)
	doneRE     = regexp.MustCompile(`(?m)^done: (\d+) writes acknowledged and read back, (\d+) resent, slowest (\S+)$`)
	verifiedRE = regexp.MustCompile(`(?m)^verified: (\d+) of (\d+) acknowledged writes present, (\d+) missing$`)
)

// TestFailover runs the failover example against three `replica start`
// processes, kills the leader with SIGKILL while it writes, and checks that
// it wrote on after the kill and lost no acknowledged write: by its own
// check of every entity, and by the cluster's event count, which the test
// reads itself.
func TestFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	const clusterText = "9a3f2c1e-0000-4000-8000-00000000fa11"
	cluster, addrs, replicas := startThree(t, clusterText)

	f := start(t, "failover", "--addresses", strings.Join(addrs, ","), "--cluster", clusterText, "--duration", "6s")
	m := f.expect(t, progressRE, 15*time.Second) // it writes
	m = f.expect(t, progressRE, 5*time.Second)   // for two seconds
	beforeKill, _ := strconv.Atoi(m[1])
	leader := findLeader(t, cluster, addrs, 5*time.Second) // the leader now, not the first one
	if err := replicas[leader].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	t.Logf("killed the leader, replica %d, after %d acknowledged writes", leader, beforeKill)

	out := f.wait(t, 40*time.Second)
	d := doneRE.FindStringSubmatch(out)
	v := verifiedRE.FindStringSubmatch(out)
	if d == nil || v == nil {
		t.Fatalf("the failover example's output lacks its summary:\n%s", tail(out, 4<<10))
	}
	acked, _ := strconv.Atoi(d[1])
	t.Logf("%d writes acknowledged (%d after the kill), %s resent; slowest write %s; %v from the kill to the end",
		acked, acked-beforeKill, d[2], d[3], time.Since(killed).Round(time.Millisecond))
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "acknowledged after") || strings.Contains(line, "again") {
			t.Logf("failover example: %s", line)
		}
	}
	if acked <= beforeKill {
		t.Errorf("no write acknowledged after the kill: %d before, %d in all", beforeKill, acked)
	}
	if v[1] != d[1] || v[2] != d[1] || v[3] != "0" {
		t.Errorf("acknowledged writes lost: %s", v[0])
	}

	// The test's own count: every write is a new entity's one event, and a
	// resend replaces the event with itself, so the cluster holds exactly
	// the acknowledged writes.
	c, err := client.New(addrs, client.Options{Cluster: cluster, RequestTimeout: 2 * time.Second, BaseBackoff: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.EventCount != uint64(acked) || st.EntityCount != uint64(acked) {
		t.Errorf("the cluster holds %d events of %d entities; the example had %d writes acknowledged", st.EventCount, st.EntityCount, acked)
	}

	// A final answer is not retried: with another cluster's id the program
	// stops at once and says why.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel2()
	b, err := exec.CommandContext(ctx2, program("failover"), "--addresses", strings.Join(addrs, ","),
		"--cluster", "00000000-0000-0000-0000-000000000bad", "--duration", "1s").CombinedOutput()
	if err == nil || !strings.Contains(string(b), "WRONG_CLUSTER") || ctx2.Err() != nil {
		t.Errorf("failover with a wrong cluster id: %v\n%s", err, b)
	}
}

// findLeader asks each replica for the topology until one says it leads.
func findLeader(t *testing.T, cluster core.Uint128, addrs []string, timeout time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for i, a := range addrs {
			c, err := client.New([]string{a}, client.Options{Cluster: cluster, DisableRetries: true,
				ConnectTimeout: 300 * time.Millisecond, RequestTimeout: 300 * time.Millisecond, TotalTimeout: 500 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			top, err := c.Topology(context.Background())
			c.Close()
			if err == nil && int(top.Primary) == i {
				return i
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no leader within %v", timeout)
	return -1
}
