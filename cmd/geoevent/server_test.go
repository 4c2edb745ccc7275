package main

import (
	"net"
	"strings"
	"testing"
)

func TestStatsStatusHelp(t *testing.T) {
	url := startDev(t)
	ok(t, url, "put", "1", "1", "1")
	mustContain(t, "stats", ok(t, url, "stats"), "event_count ", "entity_count ")
	mustContain(t, "status", ok(t, url, "status"), "cluster_state ", "healthy")
	mustContain(t, "stats --json", ok(t, url, "--json", "stats"), `"event_count":1`)

	// Every command is in the help, and each answers -h.
	help := ok(t, url, "help")
	for _, c := range commands {
		if !strings.Contains(help, "\n  "+c.name+" ") {
			t.Errorf("help lacks %s", c.name)
		}
		if r := cli(t, url, "", c.name, "-h"); r.code != 0 || !strings.Contains(r.stderr, "usage: geoevent "+c.name) {
			t.Errorf("%s -h: exit %d, stderr %q", c.name, r.code, r.stderr)
		}
	}
}

func TestURL(t *testing.T) {
	url := startDev(t)
	var out, errOut strings.Builder
	// GEOEVENT_URL names the server when --url does not.
	if code := run([]string{"stats"}, strings.NewReader(""), &out, &errOut, url, false); code != 0 {
		t.Errorf("stats with GEOEVENT_URL: exit %d: %s", code, errOut.String())
	}
	// Nothing listening: the error says so and how to name the server.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	r := cli(t, dead, "", "stats")
	if r.code != 1 || !strings.Contains(r.stderr, "cannot reach the server") || !strings.Contains(r.stderr, "GEOEVENT_URL") {
		t.Errorf("stats without a server: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := cli(t, "localhost:8080", "", "stats"); r.code != 2 {
		t.Errorf("--url without a scheme: exit %d", r.code)
	}
}
