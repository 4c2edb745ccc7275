package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/geoevent/geoevent/core"
)

// fakeRESP is a tiny RESP2 server on loopback that records the commands it
// is sent and answers each the way Redis or Tile38 does, so that the bench's
// --redis and --tile38 targets are tested without either server. An entity
// whose member name ends in a zero byte is absent.
type fakeRESP struct {
	ln   net.Listener
	mu   sync.Mutex
	cmds [][]string
}

func newFakeRESP(t *testing.T) *fakeRESP {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeRESP{ln: ln}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				f.serve(c)
			}()
		}
	}()
	return f
}

// commands returns what was sent so far, one string a command, arguments
// quoted (member names are binary), leaving out the connections' HELLO.
func (f *fakeRESP) commands() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.cmds {
		if strings.EqualFold(c[0], "HELLO") {
			continue
		}
		q := make([]string, len(c))
		for i, a := range c {
			q[i] = a
			if strings.ContainsRune(a, 0) || strings.ContainsRune(a, 1) {
				q[i] = strconv.Quote(a)
			}
		}
		out = append(out, strings.Join(q, " "))
	}
	return out
}

func (f *fakeRESP) serve(c net.Conn) {
	br, bw := bufio.NewReader(c), bufio.NewWriter(c)
	for {
		args, err := readCommand(br)
		if err != nil {
			return
		}
		f.mu.Lock()
		f.cmds = append(f.cmds, args)
		f.mu.Unlock()
		bw.WriteString(answer(args))
		if br.Buffered() == 0 { // answer a pipeline's commands together
			if bw.Flush() != nil {
				return
			}
		}
	}
}

// readCommand reads one RESP array of bulk strings.
func readCommand(br *bufio.Reader) ([]string, error) {
	line, err := br.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(line, "*") {
		return nil, fmt.Errorf("not an array: %q", line)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil || n < 1 {
		return nil, fmt.Errorf("bad array header %q", line)
	}
	args := make([]string, n)
	for i := range args {
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, err
		}
		l, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "$")))
		if err != nil || l < 0 {
			return nil, fmt.Errorf("bad bulk header %q", line)
		}
		b := make([]byte, l+2)
		if _, err := io.ReadFull(br, b); err != nil {
			return nil, err
		}
		args[i] = string(b[:l])
	}
	return args, nil
}

func bulk(s string) string { return "$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n" }

func absent(member string) bool { return member == "" || member[len(member)-1] == 0 }

func answer(args []string) string {
	switch strings.ToUpper(args[0]) {
	case "HELLO": // as Tile38 (and Redis before 6) answer it
		return "-ERR unknown command 'HELLO'\r\n"
	case "GEOADD":
		if args[1] == "broken" {
			return "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
		}
		return ":" + strconv.Itoa((len(args)-2)/3) + "\r\n"
	case "GEOSEARCH": // two matches, WITHCOORD
		item := "*2\r\n" + bulk("m") + "*2\r\n" + bulk("13.36") + bulk("38.11")
		return "*2\r\n" + item + item
	case "GEOPOS":
		s := "*" + strconv.Itoa(len(args)-2) + "\r\n"
		for _, m := range args[2:] {
			if absent(m) {
				s += "*-1\r\n"
			} else {
				s += "*2\r\n" + bulk("13.36") + bulk("38.11")
			}
		}
		return s
	case "SET":
		return "+OK\r\n"
	case "WITHIN": // three matches, POINTS
		item := "*2\r\n" + bulk("id") + "*2\r\n" + bulk("38.11") + bulk("13.36")
		return "*2\r\n:0\r\n*3\r\n" + item + item + item
	case "GET":
		if absent(args[2]) {
			return "-ERR id not found\r\n"
		}
		return "*2\r\n" + bulk("38.11") + bulk("13.36")
	}
	return "-ERR unknown command '" + args[0] + "'\r\n"
}

func TestMember(t *testing.T) {
	got := member(core.Uint128{Hi: 0x0102030405060708, Lo: 0x090a0b0c0d0e0f10})
	want := "\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10"
	if got != want {
		t.Fatalf("member %q, want %q", got, want)
	}
}

// TestRedisTarget checks the commands --redis sends (one GEOADD a batch,
// lon before lat, GEOSEARCH of 1000 m, GEOPOS) and how it reads the
// answers, with a connection per session and autopipelined.
func TestRedisTarget(t *testing.T) {
	for _, pipe := range []bool{false, true} {
		t.Run(fmt.Sprintf("pipeline=%v", pipe), func(t *testing.T) { testRedisTarget(t, pipe) })
	}
}

func testRedisTarget(t *testing.T, pipe bool) {
	f := newFakeRESP(t)
	r, err := newRESPTarget(f.ln.Addr().String(), false, "fleet", 2, pipe)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	ctx := context.Background()
	evs := []core.GeoEvent{
		{EntityID: core.Uint128{Hi: 1, Lo: 1}, LatNano: 38_110_000_000, LonNano: 13_360_000_000},
		{EntityID: core.Uint128{Hi: 1, Lo: 2}, LatNano: -5_500_000_000, LonNano: 6_000_000_001},
	}
	if err := r.write(ctx, evs, false); err != nil {
		t.Fatal(err)
	}
	if err := r.write(ctx, evs[1:], true); err != nil {
		t.Fatal(err)
	}
	q := &core.RadiusQuery{Center: core.Coordinate{LatNano: 38_500_000_000, LonNano: 13_250_000_000}, RadiusMM: 1_000_000}
	if n, err := r.radius(ctx, q); err != nil || n != 2 {
		t.Fatalf("radius: %d %v", n, err)
	}
	if err := r.latest(ctx, core.Uint128{Hi: 1, Lo: 1}); err != nil {
		t.Fatal(err)
	}
	if n, err := r.latestBatch(ctx, []core.Uint128{{Hi: 1, Lo: 1}, {Hi: 1, Lo: 0x100}, {Hi: 1, Lo: 3}}); err != nil || n != 2 {
		t.Fatalf("latest batch: %d found, %v", n, err)
	}
	id1, id2 := strconv.Quote(member(evs[0].EntityID)), strconv.Quote(member(evs[1].EntityID))
	want := []string{
		"GEOADD fleet 13.36 38.11 " + id1 + " 6.000000001 -5.5 " + id2,
		"GEOADD fleet 6.000000001 -5.5 " + id2,
		"GEOSEARCH fleet FROMLONLAT 13.25 38.5 BYRADIUS 1000 m WITHCOORD",
		"GEOPOS fleet " + id1,
		"GEOPOS fleet " + id1 + " " + strconv.Quote(member(core.Uint128{Hi: 1, Lo: 0x100})) + " " + strconv.Quote(member(core.Uint128{Hi: 1, Lo: 3})),
	}
	if got := f.commands(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("commands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// An error answer is the operation's error.
	broken, _ := newRESPTarget(f.ln.Addr().String(), false, "broken", 1, pipe)
	defer broken.close()
	if err := broken.write(ctx, evs, true); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("an error answer was not reported: %v", err)
	}

	// Concurrent sessions each get their own answer.
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids := []core.Uint128{{Hi: 1, Lo: 1}}
			if i%2 == 0 {
				ids = append(ids, core.Uint128{Hi: 1, Lo: 0x100})
			}
			if n, err := r.latestBatch(ctx, ids); err != nil || n != 1 {
				errs <- fmt.Errorf("session %d: %d found, %v", i, n, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestTile38Target checks the commands --tile38 sends (SET ... POINT lat
// lon per event, pipelined; WITHIN ... CIRCLE with a LIMIT above Tile38's
// default of 100; GET ... POINT) and that "id not found" counts as not
// found rather than as an error.
func TestTile38Target(t *testing.T) {
	f := newFakeRESP(t)
	r, _ := newRESPTarget(f.ln.Addr().String(), true, "fleet", 2, false)
	defer r.close()
	ctx := context.Background()
	evs := []core.GeoEvent{
		{EntityID: core.Uint128{Hi: 1, Lo: 1}, LatNano: 38_110_000_000, LonNano: 13_360_000_000},
		{EntityID: core.Uint128{Hi: 1, Lo: 2}, LatNano: 37_200_000_000, LonNano: 14_000_000_000},
	}
	if err := r.write(ctx, evs, true); err != nil {
		t.Fatal(err)
	}
	if err := r.write(ctx, evs[:1], true); err != nil {
		t.Fatal(err)
	}
	q := &core.RadiusQuery{Center: core.Coordinate{LatNano: 38_500_000_000, LonNano: 13_250_000_000}, RadiusMM: 1_000_000}
	if n, err := r.radius(ctx, q); err != nil || n != 3 {
		t.Fatalf("radius: %d %v", n, err)
	}
	if err := r.latest(ctx, core.Uint128{Hi: 1, Lo: 1}); err != nil {
		t.Fatal(err)
	}
	if err := r.latest(ctx, core.Uint128{Hi: 1, Lo: 0x100}); err != nil {
		t.Fatalf("an absent id is not an error: %v", err)
	}
	if n, err := r.latestBatch(ctx, []core.Uint128{{Hi: 1, Lo: 0x100}, {Hi: 1, Lo: 1}, {Hi: 1, Lo: 3}}); err != nil || n != 2 {
		t.Fatalf("latest batch: %d found, %v", n, err)
	}
	m := func(lo uint64) string { return strconv.Quote(member(core.Uint128{Hi: 1, Lo: lo})) }
	want := []string{
		"SET fleet " + m(1) + " POINT 38.11 13.36",
		"SET fleet " + m(2) + " POINT 37.2 14",
		"SET fleet " + m(1) + " POINT 38.11 13.36",
		"WITHIN fleet LIMIT 1000000 POINTS CIRCLE 38.5 13.25 1000",
		"GET fleet " + m(1) + " POINT",
		"GET fleet " + m(0x100) + " POINT",
		"GET fleet " + m(0x100) + " POINT",
		"GET fleet " + m(1) + " POINT",
		"GET fleet " + m(3) + " POINT",
	}
	if got := f.commands(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("commands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
