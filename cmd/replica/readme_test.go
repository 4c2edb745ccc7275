package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/geoevent/geoevent/internal/testproc"
)

// TestREADMEExamples replays the curl transcripts of the README (its
// short tour) and of docs/api.md (every endpoint), each introduced by
// "Every line below is from one run against a fresh", against a fresh dev
// server each, in order, and checks that every answer is the one printed
// there. What differs from run to run is compared by its shape (see
// readmeNormalizer): timestamps by the order they first appear in, cursors
// and the uptime not at all. So the examples stay what the server answers:
// change an answer, and the page must change too.
func TestREADMEExamples(t *testing.T) {
	for _, doc := range []struct {
		name     string
		minSteps int
	}{{"README.md", 4}, {filepath.Join("docs", "api.md"), 20}} {
		t.Run(filepath.Base(doc.name), func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("..", "..", doc.name))
			if err != nil {
				t.Fatal(err)
			}
			steps, err := parseTranscript(string(raw))
			if err != nil {
				t.Fatal(err)
			}
			if len(steps) < doc.minSteps {
				t.Fatalf("found %d curl examples in %s; expected at least %d", len(steps), doc.name, doc.minSteps)
			}
			replayTranscript(t, steps)
		})
	}
}

// replayTranscript runs steps against a fresh dev server.
func replayTranscript(t *testing.T, steps []readmeStep) {
	srv := testproc.StartDev(t, testproc.DevOptions{Dir: filepath.Join(t.TempDir(), "dev-data"), HTTP: true})
	httpAddr := strings.TrimPrefix(srv.URL, "http://")
	// The README shows some cluster id; the server must show the one its
	// banner printed.
	clusterID := srv.Cluster.String()

	want, got := newReadmeNormalizer(), newReadmeNormalizer()
	hc := &http.Client{Timeout: 30 * time.Second}
	for _, s := range steps {
		out, err := s.run(hc, httpAddr)
		if err != nil {
			t.Fatalf("%s\n%v", s.command, err)
		}
		// The dev server of the README listens on the default address.
		out = strings.ReplaceAll(out, srv.Addr, "127.0.0.1:3000")
		out = strings.ReplaceAll(out, `"cluster_id":"`+clusterID+`"`, `"cluster_id":"<the banner's>"`)
		s.output = readmeClusterID.ReplaceAllString(s.output, `"cluster_id":"<the banner's>"`)
		if w, g := want.normalize(s.output), got.normalize(out); w != g {
			t.Errorf("%s\nthe README shows:\n%s\nthe server answered:\n%s", s.command, s.output, out)
		}
	}
}

// readmeStep is one "$ curl ..." line of the transcript and the output
// printed under it.
type readmeStep struct {
	command  string // without the "$ "
	method   string
	url      string // as written: host:port/path
	headers  []string
	body     string
	hasBody  bool
	writeOut string // curl's -w format, "" when none
	output   string // the lines printed, joined by "\n"
}

// parseTranscript returns the steps of the README's first code block
// after the line that introduces the transcript.
func parseTranscript(readme string) ([]readmeStep, error) {
	const intro = "Every line below is from one run against a fresh"
	i := strings.Index(readme, intro)
	if i < 0 {
		return nil, fmt.Errorf("the README has no line %q", intro)
	}
	transcript, err := codeBlock(readme[i:])
	if err != nil {
		return nil, fmt.Errorf("after %q: %v", intro, err)
	}
	var steps []readmeStep
	for _, block := range strings.Split(transcript, "\n\n") {
		lines := strings.Split(strings.Trim(block, "\n"), "\n")
		if !strings.HasPrefix(lines[0], "$ ") {
			return nil, fmt.Errorf("a transcript block does not start with a command: %q", lines[0])
		}
		s, err := parseCurl(strings.TrimPrefix(lines[0], "$ "))
		if err != nil {
			return nil, err
		}
		if !strings.HasPrefix(s.url, "localhost:8080/") {
			return nil, fmt.Errorf("%s: the URL is not on localhost:8080", s.command)
		}
		s.output = strings.Join(lines[1:], "\n")
		steps = append(steps, s)
	}
	return steps, nil
}

// parseCurl reads the curl options the transcript uses: -s, -X, -H, -d, -w
// and one URL; words are bare or in single quotes, as a shell reads them.
func parseCurl(command string) (readmeStep, error) {
	s := readmeStep{command: command}
	words, err := shellWords(command)
	if err != nil {
		return s, fmt.Errorf("%s: %v", command, err)
	}
	if len(words) == 0 || words[0] != "curl" {
		return s, fmt.Errorf("not a curl command: %s", command)
	}
	for i := 1; i < len(words); i++ {
		w := words[i]
		arg := func() (string, error) {
			if i+1 >= len(words) {
				return "", fmt.Errorf("%s: %s needs a value", command, w)
			}
			i++
			return words[i], nil
		}
		var err error
		switch w {
		case "-s":
		case "-X":
			s.method, err = arg()
		case "-H":
			var h string
			h, err = arg()
			s.headers = append(s.headers, h)
		case "-d":
			s.body, err = arg()
			s.hasBody = true
		case "-w":
			s.writeOut, err = arg()
		default:
			if strings.HasPrefix(w, "-") || s.url != "" {
				return s, fmt.Errorf("%s: unexpected %q", command, w)
			}
			s.url = w
		}
		if err != nil {
			return s, err
		}
	}
	if !strings.Contains(s.url, "/") {
		return s, fmt.Errorf("%s: the URL has no path", command)
	}
	if s.method == "" {
		s.method = "GET"
		if s.hasBody {
			s.method = "POST" // as curl does for -d
		}
	}
	return s, nil
}

// shellWords splits a command line into words: spaces separate them, and
// single quotes keep everything up to the next one, as in a POSIX shell.
func shellWords(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord, quoted := false, false
	for _, r := range line {
		switch {
		case quoted && r == '\'':
			quoted = false
		case quoted:
			cur.WriteRune(r)
		case r == '\'':
			quoted, inWord = true, true
		case r == ' ':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quoted {
		return nil, fmt.Errorf("unterminated quote")
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// host is the host and port the step's URL names.
func (s readmeStep) host() string {
	h, _, _ := strings.Cut(s.url, "/")
	return h
}

// run sends the step's request to the server at httpAddr, in place of the
// host its URL names, and returns what curl would print: the body, then
// the -w format with the status.
func (s readmeStep) run(hc *http.Client, httpAddr string) (string, error) {
	url := "http://" + httpAddr + strings.TrimPrefix(s.url, s.host())
	var body io.Reader
	if s.hasBody {
		body = strings.NewReader(s.body)
	}
	req, err := http.NewRequest(s.method, url, body)
	if err != nil {
		return "", err
	}
	for _, h := range s.headers {
		name, value, ok := strings.Cut(h, ":")
		if !ok {
			return "", fmt.Errorf("header %q has no colon", h)
		}
		req.Header.Set(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	res, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return "", err
	}
	out := string(b)
	if s.writeOut != "" {
		w := strings.ReplaceAll(s.writeOut, "%{http_code}", strconv.Itoa(res.StatusCode))
		out += strings.ReplaceAll(w, `\n`, "\n")
	}
	return strings.TrimRight(out, "\n"), nil
}

// readmeNormalizer rewrites what differs between two runs of the
// transcript: each nanosecond timestamp (19 digits: every one this
// century) becomes T1, T2, ... in the order it first appears, so that
// equal timestamps stay equal and a timestamp's reuse (an event's id, a TTL
// extended from the expiry set before) is still checked; cursors, which
// hold timestamps, become "<cursor>"; the uptime becomes "<s>".
type readmeNormalizer struct {
	ts map[string]string
}

func newReadmeNormalizer() *readmeNormalizer {
	return &readmeNormalizer{ts: map[string]string{}}
}

var (
	readmeTimestamp = regexp.MustCompile(`\b[0-9]{19}\b`)
	readmeCursor    = regexp.MustCompile(`"cursor":"[^"]*"`)
	readmeUptime    = regexp.MustCompile(`"uptime_seconds":[0-9]+`)
	readmeClusterID = regexp.MustCompile(`"cluster_id":"[0-9a-f-]{36}"`)
)

func (n *readmeNormalizer) normalize(s string) string {
	s = readmeCursor.ReplaceAllString(s, `"cursor":"<cursor>"`)
	s = readmeUptime.ReplaceAllString(s, `"uptime_seconds":<s>`)
	return readmeTimestamp.ReplaceAllStringFunc(s, func(ts string) string {
		if l, ok := n.ts[ts]; ok {
			return l
		}
		l := "T" + strconv.Itoa(len(n.ts)+1)
		n.ts[ts] = l
		return l
	})
}
