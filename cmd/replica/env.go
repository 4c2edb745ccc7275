package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// envPrefix starts the name of every flag's environment variable:
// --replica-count is GEOEVENT_REPLICA_COUNT.
const envPrefix = "GEOEVENT_"

// envName is the environment variable of the flag name.
func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// lookupEnv is os.LookupEnv (tests replace it).
var lookupEnv = os.LookupEnv

// applyEnv sets every flag of fset that the command line did not set from
// its environment variable (envName), when that is set: the command line
// wins, the environment comes next, the default last. A repeatable flag
// (--cors-origin) takes the variable as one comma-separated list. An
// empty variable counts as set: GEOEVENT_HTTP= turns dev's HTTP off as
// --http "" does.
func applyEnv(fset *flag.FlagSet) error {
	given := map[string]bool{}
	fset.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fset.VisitAll(func(f *flag.Flag) {
		if err != nil || given[f.Name] {
			return
		}
		v, ok := lookupEnv(envName(f.Name))
		if !ok {
			return
		}
		if serr := fset.Set(f.Name, v); serr != nil {
			err = fmt.Errorf("%s=%q (for --%s): %v", envName(f.Name), v, f.Name, serr)
		}
	})
	return err
}

// commandHelp is what `replica COMMAND -h` says above the flags.
var commandHelp = map[string]string{
	"format": `usage: replica format --cluster ID --replica I --replica-count N --data DIR

Make DIR the data directory of replica I (0-based) of the cluster ID of N
replicas. DIR must be new or empty. Every replica of a cluster is formatted
with the same ID and N.`,
	"start": `usage: replica start --data DIR --addresses A0,A1,... [--http HOST:PORT] [flags]

Serve the replica whose data directory is DIR (made by replica format).
--addresses lists every replica's binary-protocol address in replica order,
the same list on every replica; this replica listens on its own entry.
With --http it also serves the HTTP JSON API, /metrics, /healthz and /readyz.`,
	"dev": `usage: replica dev [--data DIR] [--http HOST:PORT] [--addresses HOST:PORT] [flags]

Run a one-replica cluster for development: format DIR with a random cluster
id when it is new or empty, then serve the binary protocol and the HTTP
JSON API (with /metrics, /healthz and /readyz).`,
	"backup": `usage: replica backup --data DIR --to FILE

Write a consistent backup of the replica whose data directory is DIR to
FILE. When a replica runs on DIR, it serves the backup (on DIR/backup.sock):
its state at the commit index it knew when the backup began, every write
acknowledged before then included. When none runs, the backup is read from
DIR. FILE is replaced only once the backup is whole and checked.`,
	"restore": `usage: replica restore --from FILE --data NEWDIR [--replica I] [--whole-cluster]

Make NEWDIR, new or empty, a data directory holding the state of the backup
FILE, for replica start or dev to serve. Every part of the backup is checked
against its checksum first: a damaged backup is refused and NEWDIR is not
created.`,
}

// printUsage writes a command's help: what it does, then each flag with
// its environment variable, its default and what it does.
func printUsage(fset *flag.FlagSet, w io.Writer) {
	if h := commandHelp[fset.Name()]; h != "" {
		fmt.Fprintf(w, "%s\n\n", h)
	}
	fmt.Fprintf(w, "Flags (each may come from the environment variable beside it instead;\nthe command line wins):\n\n")
	fset.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		head := "  --" + f.Name
		if arg != "" {
			head += " " + arg
		}
		fmt.Fprintf(w, "%-34s %s\n", head, envName(f.Name))
		if d := f.DefValue; d != "" && d != "0" && !strings.Contains(usage, "(default") {
			usage += fmt.Sprintf(" (default %s)", d)
		}
		for _, line := range wrap(usage, 70) {
			fmt.Fprintf(w, "        %s\n", line)
		}
	})
}

// wrap breaks s into lines of at most width characters, between words.
func wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}
