package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestCLIDoc replays docs/cli.md: every "$ geoevent ..." line of its
// console blocks runs, in order, against a fresh dev server, and its
// output (stdout, then stderr) must be the one the page shows, times and
// timestamps aside. "$ printf '...' | geoevent ..." gives the command
// that input. GEOEVENT_UPDATE_CLI_DOC=1 writes the outputs into the page
// instead.
func TestCLIDoc(t *testing.T) {
	path, err := filepath.Abs("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	url := startDev(t)
	t.Chdir(t.TempDir()) // files the page's commands write
	update := os.Getenv("GEOEVENT_UPDATE_CLI_DOC") != ""

	lines := strings.SplitAfter(string(doc), "\n")
	var out strings.Builder
	inConsole, ran := false, 0
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		out.WriteString(line)
		trimmed := strings.TrimRight(line, "\n")
		switch {
		case trimmed == "```console":
			inConsole = true
			continue
		case inConsole && trimmed == "```":
			inConsole = false
			continue
		case !inConsole || !strings.HasPrefix(trimmed, "$ "):
			continue
		}
		// The documented output: the lines up to the next command, a
		// blank line or the block's end.
		j := i + 1
		for j < len(lines) && !strings.HasPrefix(lines[j], "$ ") && strings.TrimSpace(lines[j]) != "" && strings.TrimRight(lines[j], "\n") != "```" {
			j++
		}
		documented := strings.Join(lines[i+1:j], "")
		stdin, args, err := parseDocCommand(strings.TrimPrefix(trimmed, "$ "))
		if err != nil {
			t.Fatalf("%s:%d: %v", path, i+1, err)
		}
		ran++
		r := cli(t, url, stdin, args...)
		got := r.stdout + r.stderr
		if update {
			out.WriteString(got)
		} else {
			out.WriteString(documented)
			if normalize(got) != normalize(documented) {
				t.Errorf("%s:%d: %s\ngot:\n%s\nthe page shows:\n%s", path, i+1, trimmed, got, documented)
			}
		}
		i = j - 1
	}
	if ran < 20 {
		t.Errorf("the page runs %d commands; every subcommand should be shown", ran)
	}
	for _, c := range commands {
		if !strings.Contains(string(doc), "$ geoevent "+c.name) && !strings.Contains(string(doc), "| geoevent "+c.name) {
			t.Errorf("docs/cli.md shows no run of %s", c.name)
		}
	}
	if update {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

var (
	rfc3339  = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z`)
	epochNS  = regexp.MustCompile(`\b1[7-9]\d{17}\b`)
	duration = regexp.MustCompile(`in \d+\.\ds(, \d+ events/s)?`)
)

// normalize blanks what differs from run to run: times and timestamps the
// server assigns, durations and rates, and the widths of table columns.
func normalize(s string) string {
	s = rfc3339.ReplaceAllString(s, "TIME")
	s = epochNS.ReplaceAllString(s, "NS")
	s = duration.ReplaceAllString(s, "in SECONDS")
	return spaces.ReplaceAllString(s, " ")
}

// parseDocCommand splits a documented command line: "geoevent ARGS" or
// "printf 'INPUT' | geoevent ARGS", with single or double quotes.
func parseDocCommand(line string) (stdin string, args []string, err error) {
	words, err := splitWords(line)
	if err != nil {
		return "", nil, err
	}
	if len(words) > 3 && words[0] == "printf" && words[2] == "|" {
		stdin = strings.ReplaceAll(words[1], `\n`, "\n")
		words = words[3:]
	}
	if len(words) == 0 || words[0] != "geoevent" {
		return "", nil, fmt.Errorf("not a geoevent command: %s", line)
	}
	return stdin, words[1:], nil
}

// splitWords splits a line into words as a shell would for the page's
// commands: spaces separate, quotes group.
func splitWords(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\'' || c == '"':
			end := strings.IndexByte(line[i+1:], c)
			if end < 0 {
				return nil, fmt.Errorf("unclosed quote in %s", line)
			}
			cur.WriteString(line[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == ' ':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
