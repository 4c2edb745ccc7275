package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/geoevent/geoevent/internal/testproc"
)

func TestMain(m *testing.M) { testproc.Main(m, "../replica") }

// startDev starts `replica dev` on free loopback ports with a new data
// directory, and returns its HTTP API's URL; the test's cleanup stops it.
func startDev(t testing.TB) string {
	t.Helper()
	return testproc.StartDev(t, testproc.DevOptions{HTTP: true, StopAtCleanup: true}).URL
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
