package examples_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/geoevent/geoevent/client"

	"github.com/geoevent/geoevent/internal/testproc"
)

func TestMain(m *testing.M) { testproc.Main(m, "../../cmd/replica", "./quickstart", "./failover") }

// TestQuickstart runs the quick start against a `replica dev` on an
// ephemeral port, whose address and cluster id it reads from the banner.
func TestQuickstart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	dev := testproc.StartDev(t, testproc.DevOptions{})
	addr, cluster := dev.Addr, dev.Cluster.String()

	out := testproc.MustRun(t, nil, "quickstart", "--addresses", addr, "--cluster", cluster)
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
	out = testproc.MustRun(t, []string{"GEOEVENT_ADDRESSES=" + addr, "GEOEVENT_CLUSTER=" + cluster}, "quickstart")
	if !strings.Contains(out, "within 1 km of (38.1157, 13.3615): 2 entities\n") {
		t.Errorf("quickstart from the environment:\n%s", out)
	}

	// Another cluster's id is refused: the program fails and says so.
	code, stdout, stderr := testproc.Run(t, nil, "quickstart", "--addresses", addr, "--cluster", "00000000-0000-0000-0000-000000000bad")
	if code == 0 || !strings.Contains(stdout+stderr, "WRONG_CLUSTER") {
		t.Errorf("quickstart with a wrong cluster id: exit %d\n%s%s", code, stdout, stderr)
	}
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
	c3, _ := testproc.StartCluster(t, clusterText, 3)
	cluster, addrs := c3.ID, c3.Addrs

	f := testproc.Start(t, "failover", "--addresses", strings.Join(addrs, ","), "--cluster", clusterText, "--duration", "6s")
	m := f.Expect(progressRE, 15*time.Second) // it writes
	m = f.Expect(progressRE, 5*time.Second)   // for two seconds
	beforeKill, _ := strconv.Atoi(m[1])
	leader := findLeader(t, c3, 5*time.Second) // the leader now, not the first one
	c3.Kill(leader)
	killed := time.Now()
	t.Logf("killed the leader, replica %d, after %d acknowledged writes", leader, beforeKill)

	out := f.Wait(40 * time.Second)
	d := doneRE.FindStringSubmatch(out)
	v := verifiedRE.FindStringSubmatch(out)
	if d == nil || v == nil {
		t.Fatalf("the failover example's output lacks its summary:\n%s", testproc.Tail(out, 4<<10))
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
	b, err := testproc.RunContext(ctx2, "failover", "--addresses", strings.Join(addrs, ","),
		"--cluster", "00000000-0000-0000-0000-000000000bad", "--duration", "1s")
	if err == nil || !strings.Contains(string(b), "WRONG_CLUSTER") || ctx2.Err() != nil {
		t.Errorf("failover with a wrong cluster id: %v\n%s", err, b)
	}
}

// findLeader waits up to timeout for a replica of c to say it leads.
func findLeader(t *testing.T, c *testproc.Cluster, timeout time.Duration) int {
	t.Helper()
	leader := c.Leader(-1, timeout)
	if leader < 0 {
		t.Fatalf("no leader within %v", timeout)
	}
	return leader
}
