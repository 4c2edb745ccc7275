package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/geoevent/geoevent/internal/testproc"
)

// TestREADMEClusterExamples replays "A 3-replica cluster" of
// docs/operations.md (whose commands the README gives too):
// it formats and starts the three replicas its commands describe (the
// cluster id, the replica count and which replica serves HTTP on which
// port are read from them; the ports themselves are free ones), then runs
// the transcript under "From a run of the commands above", curl lines and
// the kill -9 of the leader, and checks every answer against the one
// printed.
//
// Which replica leads is up to the election, so the test names the
// replicas after the roles the README gives them: the README's replica 0
// is whichever leads first, its replica 1 whichever leads after the kill,
// and its replica 2 the other. Until the kill the two followers are alike,
// and a request the README sends to one of them goes to one of them; which
// one gets the README's name is settled when the next leader is known.
// Answers are compared once every name is settled, with the node ids,
// addresses and primary_replica written in the README's names, the
// followers listed in the order of their names, and what differs from run
// to run compared by its shape (see readmeNormalizer and
// clusterNormalizer): terms by the order they first appear in, the
// replication lag by being more than zero.
func TestREADMEClusterExamples(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	setup, steps, err := parseClusterSection(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	kills := 0
	var kill *killStep
	for _, s := range steps {
		if s.kill != nil {
			kills, kill = kills+1, s.kill
		}
	}
	if kills != 1 || len(steps) < 4 {
		t.Fatalf("the README's cluster transcript has %d steps and %d kills; expected a kill of the leader among curl lines", len(steps), kills)
	}

	n := len(setup.addrs)
	c := testproc.NewCluster(t, setup.cluster, n)
	c.HTTP = make([]string, n)
	for i := range c.HTTP {
		c.HTTP[i] = testproc.FreeAddr(t)
	}
	for i := range n {
		c.Start(i)
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	first := settledLeader(t, hc, c, -1)

	// role[k] is the process that plays the README's replica k: the
	// first leader plays the one the README kills, the others the rest in
	// order until the next leader is known.
	role := make([]int, n)
	role[kill.leader] = first
	k := 0
	for p := range n {
		if p == first {
			continue
		}
		if k == kill.leader {
			k++
		}
		role[k] = p
		k++
	}

	outputs := make([]string, len(steps))
	for i, s := range steps {
		if s.kill != nil {
			dead := role[kill.leader]
			c.Kill(dead)
			next := settledLeader(t, hc, c, dead)
			// Name the next leader as the README does: swap it with the
			// follower that had its name.
			k := slices.Index(role, next)
			role[k], role[kill.next] = role[kill.next], next
			continue
		}
		k, ok := setup.replicaOfHTTP[s.host()]
		if !ok {
			t.Fatalf("%s: no replica of the README serves HTTP on %s", s.command, s.host())
		}
		out, err := s.run(hc, c.HTTP[role[k]])
		if err != nil {
			t.Fatalf("%s\n%v", s.command, err)
		}
		outputs[i] = out
	}

	t.Logf("the README's replicas 0 to %d were processes %v", n-1, role)
	// readmeName[p] is the README's replica that process p plays.
	readmeName := make([]int, n)
	for k, p := range role {
		readmeName[p] = k
	}
	want, got := newClusterNormalizer(setup.addrs, setup.addrs, nil), newClusterNormalizer(setup.addrs, c.Addrs, readmeName)
	for i, s := range steps {
		if s.kill != nil {
			continue
		}
		w, g := want.normalize(s.output), got.normalize(outputs[i])
		if w != g {
			t.Errorf("%s\n(the README's replica k is process %v[k])\nthe README shows:\n%s\nthe server answered:\n%s\nnormalized:\n%s\nagainst:\n%s",
				s.command, role, s.output, outputs[i], w, g)
		}
	}
}

// clusterSetup is what the README's cluster commands say.
type clusterSetup struct {
	cluster       string         // the cluster id given to format
	addrs         []string       // --addresses, in replica order
	replicaOfHTTP map[string]int // --http address: the replica serving it
}

// clusterStep is a curl step of the cluster transcript, or the kill of its
// leader.
type clusterStep struct {
	readmeStep
	kill *killStep
}

// killStep is "kill -9 <pid of replica K, the leader> ... replica J leads".
type killStep struct {
	leader, next int
}

var (
	readmeFormatLine = regexp.MustCompile(`replica format --cluster ([0-9a-f-]+) --replica \$i --replica-count ([0-9]+) `)
	readmeAddrsLine  = regexp.MustCompile(`(?m)^A=(\S+)$`)
	readmeStartLine  = regexp.MustCompile(`(?m)^\./replica start --data \./data-([0-9]+) --addresses \$A --http (\S+) &$`)
	readmeKillLine   = regexp.MustCompile(`^kill -9 <pid of replica ([0-9]+), the leader> +#.* replica ([0-9]+) leads:$`)
)

// parseClusterSection reads the README's "A 3-replica cluster": its
// commands (the first code block) and the transcript after "From a run of
// the commands above".
func parseClusterSection(readme string) (clusterSetup, []clusterStep, error) {
	var setup clusterSetup
	const heading, intro = "## A 3-replica cluster", "From a run of the commands above"
	i := strings.Index(readme, heading)
	if i < 0 {
		return setup, nil, fmt.Errorf("the README has no section %q", heading)
	}
	section := readme[i:]
	commands, err := codeBlock(section)
	if err != nil {
		return setup, nil, fmt.Errorf("%s: %v", heading, err)
	}
	m := readmeFormatLine.FindStringSubmatch(commands)
	if m == nil {
		return setup, nil, fmt.Errorf("%s: no format loop matching %v", heading, readmeFormatLine)
	}
	setup.cluster = m[1]
	count, _ := strconv.Atoi(m[2])
	a := readmeAddrsLine.FindStringSubmatch(commands)
	if a == nil {
		return setup, nil, fmt.Errorf("%s: no line A=<addresses>", heading)
	}
	setup.addrs = strings.Split(a[1], ",")
	if len(setup.addrs) != count {
		return setup, nil, fmt.Errorf("%s: %d addresses for %d replicas", heading, len(setup.addrs), count)
	}
	setup.replicaOfHTTP = map[string]int{}
	for _, s := range readmeStartLine.FindAllStringSubmatch(commands, -1) {
		k, _ := strconv.Atoi(s[1])
		setup.replicaOfHTTP[s[2]] = k
	}
	if len(setup.replicaOfHTTP) != count {
		return setup, nil, fmt.Errorf("%s: %d start lines with --http for %d replicas", heading, len(setup.replicaOfHTTP), count)
	}

	j := strings.Index(section, intro)
	if j < 0 {
		return setup, nil, fmt.Errorf("%s: no line %q", heading, intro)
	}
	transcript, err := codeBlock(section[j:])
	if err != nil {
		return setup, nil, fmt.Errorf("%s: %v", intro, err)
	}
	var steps []clusterStep
	for _, line := range strings.Split(transcript, "\n") {
		command, isCommand := strings.CutPrefix(line, "$ ")
		switch {
		case !isCommand && len(steps) == 0:
			return setup, nil, fmt.Errorf("%s: output before any command: %q", intro, line)
		case !isCommand:
			s := &steps[len(steps)-1]
			if s.kill != nil {
				return setup, nil, fmt.Errorf("%s: output after a kill: %q", intro, line)
			}
			s.output = strings.TrimPrefix(s.output+"\n"+line, "\n")
		case strings.HasPrefix(command, "kill "):
			k := readmeKillLine.FindStringSubmatch(command)
			if k == nil {
				return setup, nil, fmt.Errorf("%s: a kill not matching %v: %q", intro, readmeKillLine, command)
			}
			leader, _ := strconv.Atoi(k[1])
			next, _ := strconv.Atoi(k[2])
			if leader >= count || next >= count || leader == next {
				return setup, nil, fmt.Errorf("%s: %q names replicas that cannot be", intro, command)
			}
			steps = append(steps, clusterStep{kill: &killStep{leader, next}})
		default:
			s, err := parseCurl(command)
			if err != nil {
				return setup, nil, err
			}
			steps = append(steps, clusterStep{readmeStep: s})
		}
	}
	return setup, steps, nil
}

// codeBlock returns the text of the first fenced block in s.
func codeBlock(s string) (string, error) {
	start := strings.Index(s, "```")
	if start < 0 {
		return "", fmt.Errorf("no code block")
	}
	s = s[start+3:]
	s = s[strings.IndexByte(s, '\n')+1:] // past the fence's info string
	end := strings.Index(s, "```")
	if end < 0 {
		return "", fmt.Errorf("the code block does not end")
	}
	return strings.TrimRight(s[:end], "\n"), nil
}

// settledLeader waits until the running replicas agree on a leader other
// than not, and every one of them (the leader from the followers'
// answers, the followers from the leader's health reports) finds every
// running replica healthy and the others unreachable; it returns the
// leader. Every replica then forwards to it, and every topology says who
// answers.
func settledLeader(t *testing.T, hc *http.Client, c *testproc.Cluster, not int) int {
	t.Helper()
	var last string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		tops := make([]clusterTopology, len(c.Procs)) // of the running replicas
		leader, agreed := -1, true
		for i, p := range c.Procs {
			if p == nil {
				continue
			}
			top, err := getTopology(hc, c.HTTP[i])
			if err != nil {
				agreed, last = false, err.Error()
				break
			}
			tops[i] = top
			if leader < 0 {
				leader = top.primary()
			}
			agreed = agreed && top.primary() == leader
		}
		if !agreed || leader < 0 || leader == not || leader >= len(c.Procs) || c.Procs[leader] == nil {
			continue
		}
		last = fmt.Sprint(tops)
		ok := true
		for j, q := range c.Procs {
			for i, p := range c.Procs {
				want := "healthy"
				if p == nil {
					want = "unreachable"
				}
				ok = ok && (q == nil || tops[j].status(i) == want)
			}
		}
		if ok {
			return leader
		}
	}
	t.Fatalf("the replicas did not settle on a leader (not %d); last seen: %s", not, last)
	return -1
}

// clusterTopology is GET /topology's answer, the parts settledLeader reads.
type clusterTopology struct {
	Shards []struct {
		Primary  clusterNode   `json:"primary"`
		Replicas []clusterNode `json:"replicas"`
	} `json:"shards"`
}

type clusterNode struct {
	NodeID string `json:"node_id"`
	Status string `json:"status"`
}

func getTopology(hc *http.Client, addr string) (clusterTopology, error) {
	var top clusterTopology
	res, err := hc.Get("http://" + addr + "/topology")
	if err != nil {
		return top, err
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(&top); err != nil {
		return top, err
	}
	if len(top.Shards) != 1 {
		return top, fmt.Errorf("%s: %d shards", addr, len(top.Shards))
	}
	return top, nil
}

// primary is the replica the topology names primary, -1 when none.
func (top clusterTopology) primary() int {
	var i int
	if _, err := fmt.Sscanf(top.Shards[0].Primary.NodeID, "replica-%d", &i); err != nil {
		return -1
	}
	return i
}

// status is the status the topology gives replica i, "" when it has none.
func (top clusterTopology) status(i int) string {
	id := fmt.Sprint("replica-", i)
	for _, n := range append([]clusterNode{top.Shards[0].Primary}, top.Shards[0].Replicas...) {
		if n.NodeID == id {
			return n.Status
		}
	}
	return ""
}

// clusterNormalizer rewrites an answer of the cluster into the README's
// terms: each process's node id, address and replica number become those
// of the README's replica it plays (names[p]; nil when the answer is the
// README's own), the replicas of a topology are sorted by node id, terms
// ("version") become V1, V2, ... in the order they first appear, a
// replication lag of more than zero and any node's last contact or lag
// become "<ms>", and the rest is readmeNormalizer's.
type clusterNormalizer struct {
	readmeAddrs []string
	addrs       []string // the answering replicas' addresses, in process order
	names       []int
	terms       map[string]string
	ts          *readmeNormalizer
}

func newClusterNormalizer(readmeAddrs, addrs []string, names []int) *clusterNormalizer {
	return &clusterNormalizer{readmeAddrs: readmeAddrs, addrs: addrs, names: names, terms: map[string]string{}, ts: newReadmeNormalizer()}
}

var (
	clusterNodeID  = regexp.MustCompile(`"replica-([0-9]+)"`)
	clusterPrimary = regexp.MustCompile(`"primary_replica":([0-9]+)`)
	clusterTerm    = regexp.MustCompile(`"version":[0-9]+`)
	clusterLag     = regexp.MustCompile(`"replication_lag_ms":[1-9][0-9]*`)
	clusterNodeMS  = regexp.MustCompile(`"(last_contact_ms|lag_ms)":[0-9]+`)
)

// name is the README's replica that process p plays.
func (n *clusterNormalizer) name(p int) int {
	if n.names == nil || p >= len(n.names) {
		return p
	}
	return n.names[p]
}

// normalize rewrites s, an answer from the replicas on n.addrs.
func (n *clusterNormalizer) normalize(s string) string {
	rename := func(re *regexp.Regexp, format string) {
		s = re.ReplaceAllStringFunc(s, func(m string) string {
			p, _ := strconv.Atoi(re.FindStringSubmatch(m)[1])
			return fmt.Sprintf(format, n.name(p))
		})
	}
	rename(clusterNodeID, `"replica-%d"`)
	rename(clusterPrimary, `"primary_replica":%d`)
	// Through placeholders, so that one address renamed is not renamed
	// again as another.
	for p, a := range n.addrs {
		s = strings.ReplaceAll(s, `"`+a+`"`, fmt.Sprintf("\"\x00%d\"", p))
	}
	for p := range n.addrs {
		s = strings.ReplaceAll(s, fmt.Sprintf("\"\x00%d\"", p), `"`+n.readmeAddrs[n.name(p)]+`"`)
	}
	s = sortReplicas(s)
	s = clusterTerm.ReplaceAllStringFunc(s, func(m string) string {
		if l, ok := n.terms[m]; ok {
			return l
		}
		l := fmt.Sprintf(`"version":V%d`, len(n.terms)+1)
		n.terms[m] = l
		return l
	})
	s = clusterLag.ReplaceAllString(s, `"replication_lag_ms":"<ms>"`)
	s = clusterNodeMS.ReplaceAllString(s, `"$1":"<ms>"`) // null (unknown) stays
	return n.ts.normalize(s)
}

// sortReplicas lists the replicas of a topology answer by node id; any
// other text is returned as it is. Keys come out sorted, numbers as they
// were written.
func sortReplicas(s string) string {
	if !strings.Contains(s, `"shards"`) {
		return s
	}
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var top map[string]any
	if d.Decode(&top) != nil {
		return s
	}
	shards, _ := top["shards"].([]any)
	for _, sh := range shards {
		m, _ := sh.(map[string]any)
		reps, _ := m["replicas"].([]any)
		sort.SliceStable(reps, func(i, j int) bool {
			a, _ := reps[i].(map[string]any)
			b, _ := reps[j].(map[string]any)
			return fmt.Sprint(a["node_id"]) < fmt.Sprint(b["node_id"])
		})
	}
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if e.Encode(top) != nil {
		return s
	}
	return strings.TrimRight(b.String(), "\n")
}
