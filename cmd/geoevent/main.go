// Command geoevent is GeoEvent's command line: it speaks a server's HTTP
// JSON API (docs/api.md), as curl would, with readable tables.
//
//	geoevent [--url URL] [--json] [--timeout D] COMMAND [ARGS]
//
// --url is the server's HTTP API (default http://127.0.0.1:8080, or the
// environment variable GEOEVENT_URL). Answers are tables by default;
// --json prints the server's JSON instead (a paged query's pages merged
// into one answer), for scripts. An error names the code, its name and the
// server's message on what to change, and exits 1; a bad command line
// exits 2. docs/cli.md documents every command with examples.
//
// Each command family is one file that registers its commands (register)
// with an order for the help: writes (put, delete, ttl), reads (get,
// history), queries (near, within), the server (stats, status), import
// and export.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the command failed (the server refused it, or it could not be sent)
	exitUsage = 2 // bad command line
)

// defaultURL is the HTTP API of `replica dev`.
const defaultURL = "http://127.0.0.1:8080"

// command is one subcommand.
type command struct {
	name    string
	order   int    // its place in the help
	args    string // its arguments, for the help
	summary string
	run     func(e *env, args []string) int
}

var commands []command

// register adds a command (from an init function of its family's file).
func register(c command) { commands = append(commands, c) }

// env is what a command runs with: the API client, the output settings
// and the streams.
type env struct {
	api            *api
	json           bool
	stdin          io.Reader
	stdout, stderr io.Writer
	stderrTTY      bool // stderr is a terminal: import draws its progress there
	name           string
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv("GEOEVENT_URL"), isTerminal(os.Stderr)))
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func usage() string {
	var b strings.Builder
	b.WriteString(`usage: geoevent [--url URL] [--json] [--timeout D] COMMAND [ARGS]

--url      the server's HTTP API (default ` + defaultURL + `, or $GEOEVENT_URL)
--json     print the server's JSON answers instead of tables
--timeout  give up on a request after D (default 30s)

commands:
`)
	cs := slices.Clone(commands)
	slices.SortStableFunc(cs, func(a, b command) int { return a.order - b.order })
	for _, c := range cs {
		fmt.Fprintf(&b, "  %-8s %s\n", c.name, c.summary)
	}
	b.WriteString(`
Run "geoevent COMMAND -h" for a command's arguments and flags.
Coordinates are degrees; times are RFC 3339 (2026-11-28T10:00:00Z) or
nanoseconds since the epoch; entity ids are UUIDs or decimal ids.
`)
	return b.String()
}

// run is the command line; envURL is $GEOEVENT_URL.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer, envURL string, stderrTTY bool) int {
	fset := flag.NewFlagSet("geoevent", flag.ContinueOnError)
	fset.SetOutput(io.Discard)
	base := defaultURL
	if envURL != "" {
		base = envURL
	}
	url := fset.String("url", base, "")
	asJSON := fset.Bool("json", false, "")
	timeout := fset.Duration("timeout", 30*time.Second, "")
	if err := fset.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage())
			return exitOK
		}
		fmt.Fprintf(stderr, "geoevent: %v\n\n%s", err, usage())
		return exitUsage
	}
	if fset.NArg() == 0 {
		fmt.Fprint(stderr, usage())
		return exitUsage
	}
	name, rest := fset.Arg(0), fset.Args()[1:]
	if name == "help" {
		fmt.Fprint(stdout, usage())
		return exitOK
	}
	a, err := newAPI(*url, *timeout)
	if err != nil {
		fmt.Fprintf(stderr, "geoevent: --url: %v\n", err)
		return exitUsage
	}
	for _, c := range commands {
		if c.name == name {
			e := &env{api: a, json: *asJSON, stdin: stdin, stdout: stdout, stderr: stderr, stderrTTY: stderrTTY, name: name}
			return c.run(e, rest)
		}
	}
	fmt.Fprintf(stderr, "geoevent: unknown command %q\n\n%s", name, usage())
	return exitUsage
}

// flags makes a command's flag set; its usage line is the command's.
func (e *env) flags() *flag.FlagSet {
	fset := flag.NewFlagSet("geoevent "+e.name, flag.ContinueOnError)
	fset.SetOutput(e.stderr)
	for _, c := range commands {
		if c.name == e.name {
			fset.Usage = func() {
				fmt.Fprintf(e.stderr, "usage: geoevent %s %s\n  %s\n", c.name, c.args, c.summary)
				fset.PrintDefaults()
			}
		}
	}
	return fset
}

// parse parses a command's flags, which may stand before and after its
// positional arguments, of which it wants min to max (max -1: no most).
// An argument that starts with '-' and a digit or '.' is a positional one
// (a negative coordinate), unless it is the value of the flag before it.
// ok false: the command exits with code.
func (e *env) parse(fset *flag.FlagSet, args []string, min, max int) (pos []string, code int, ok bool) {
	for len(args) > 0 {
		cut := len(args) // the flags and arguments before the next negative number
		for i, a := range args {
			if a == "--" {
				break
			}
			if isNegative(a) && (i == 0 || !takesValue(fset, args[i-1])) {
				cut = i
				break
			}
		}
		if cut == 0 {
			pos, args = append(pos, args[0]), args[1:]
			continue
		}
		if err := fset.Parse(args[:cut]); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, exitOK, false
			}
			return nil, exitUsage, false
		}
		rest := fset.Args()
		if at := cut - len(rest); at > 0 && args[at-1] == "--" {
			// "--" ends the flags: all after it is positional.
			pos = append(append(pos, rest...), args[cut:]...)
			break
		}
		if len(rest) == 0 {
			args = args[cut:]
			continue
		}
		pos = append(pos, rest[0])
		args = append(slices.Clone(rest[1:]), args[cut:]...)
	}
	if len(pos) < min || (max >= 0 && len(pos) > max) {
		fset.Usage()
		return nil, exitUsage, false
	}
	return pos, exitOK, true
}

// isNegative reports whether a starts like a negative number.
func isNegative(a string) bool {
	return len(a) > 1 && a[0] == '-' && (a[1] == '.' || '0' <= a[1] && a[1] <= '9')
}

// takesValue reports whether arg is a flag of fset that takes the next
// argument as its value (not a boolean, and not -name=value).
func takesValue(fset *flag.FlagSet, arg string) bool {
	name := strings.TrimLeft(arg, "-")
	if len(arg)-len(name) < 1 || len(arg)-len(name) > 2 || strings.Contains(name, "=") {
		return false
	}
	f := fset.Lookup(name)
	if f == nil {
		return false
	}
	b, isBool := f.Value.(interface{ IsBoolFlag() bool })
	return !isBool || !b.IsBoolFlag()
}

// fail prints a command's error and returns the exit code: usage errors
// (a bad argument) exit 2, the rest 1.
func (e *env) fail(err error) int {
	fmt.Fprintf(e.stderr, "geoevent %s: %v\n", e.name, err)
	var ue usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	return exitError
}

// usageError is a bad argument of the command line.
type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

func badArg(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }
