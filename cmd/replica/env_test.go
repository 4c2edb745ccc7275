package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/geoevent/geoevent/internal/testproc"
)

// TestFlagsFromEnvironment: every flag of format may come from its
// GEOEVENT_ variable, a flag on the command line wins over its variable,
// and a variable that does not parse is exit code 2, naming it; the
// required flags may come from the environment.
func TestFlagsFromEnvironment(t *testing.T) {
	dir := t.TempDir()
	env := []string{"GEOEVENT_CLUSTER=00000000-0000-0000-0000-0000000e0e01", "GEOEVENT_REPLICA=2",
		"GEOEVENT_REPLICA_COUNT=3", "GEOEVENT_DATA=" + filepath.Join(dir, "from-env")}
	code, stdout, stderr := testproc.Run(t, env, "replica", "format")
	if code != 0 || !strings.Contains(stdout, "replica 2 of 3") {
		t.Fatalf("format from the environment: exit %d\n%s%s", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "from-env")); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = testproc.Run(t, env, "replica", "format", "--data", filepath.Join(dir, "from-flag"), "--replica", "1")
	if code != 0 || !strings.Contains(stdout, "from-flag: cluster 00000000-0000-0000-0000-0000000e0e01, replica 1 of 3") {
		t.Fatalf("flags over the environment: exit %d\n%s%s", code, stdout, stderr)
	}
	code, _, stderr = testproc.Run(t, []string{"GEOEVENT_MAX_CONNECTIONS=many"}, "replica", "dev", "--data", filepath.Join(dir, "dev"))
	if code != 2 || !strings.Contains(stderr, `GEOEVENT_MAX_CONNECTIONS="many" (for --max-connections)`) {
		t.Fatalf("a bad variable: exit %d\n%s", code, stderr)
	}
	code, _, stderr = testproc.Run(t, nil, "replica", "start", "--data", dir)
	if code != 2 || !strings.Contains(stderr, "--addresses is required (or set GEOEVENT_ADDRESSES)") {
		t.Fatalf("a required flag missing: exit %d\n%s", code, stderr)
	}
}

// TestEnvOfRepeatableFlag: a repeatable flag takes its variable as one
// comma-separated list; the command line, when given, replaces it.
func TestEnvOfRepeatableFlag(t *testing.T) {
	env := map[string]string{"GEOEVENT_CORS_ORIGIN": "http://a.example, http://b.example"}
	defer func(old func(string) (string, bool)) { lookupEnv = old }(lookupEnv)
	lookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "http://a.example,http://b.example"},
		{[]string{"--cors-origin", "http://c.example"}, "http://c.example"},
	} {
		fset := flag.NewFlagSet("dev", flag.ContinueOnError)
		var cors originList
		fset.Var(&cors, "cors-origin", corsUsage)
		if err := fset.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if err := applyEnv(fset); err != nil {
			t.Fatal(err)
		}
		if got := fset.Lookup("cors-origin").Value.String(); got != c.want {
			t.Errorf("%v: --cors-origin %q, want %q", c.args, got, c.want)
		}
	}
}
