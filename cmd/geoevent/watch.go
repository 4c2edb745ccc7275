package main

// Fences and the feed of their transitions: fence, watch.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

func init() {
	register(command{name: "fence", order: 74, args: "put NAME (--bbox S,W,N,E | --circle LAT,LON,RADIUS_M | --file F) [--group N] [--report T,T] | get NAME | list | delete NAME", summary: "define, show, list and remove fences", run: fence})
	register(command{name: "watch", order: 75, args: "[--after SEQ|now] [--fences A,B] [--types enter,exit,inside] [--count N] | --positions S,W,N,E|FENCE [--group N] [--count N]", summary: "follow the feed of fence transitions, or with --positions every event in an area (until interrupted, or N of them)", run: watch})
}

// notification is one entry of the feed (docs/api.md, Fences and the feed).
type notification struct {
	Seq   string          `json:"seq"`
	Type  string          `json:"type"`
	Fence string          `json:"fence"`
	Event json.RawMessage `json:"event"`
}

// feedPage is a long-poll answer of GET /feed.
type feedPage struct {
	Notifications []json.RawMessage `json:"notifications"`
	Next          string            `json:"next"`
}

// watchWait is how long one long poll waits for a notification: well
// inside the command's request timeout (--timeout, 30 s by default).
const watchWait = 10_000

func watch(e *env, args []string) int {
	fset := e.flags()
	after := fset.String("after", "", "start after sequence `SEQ` (default: the feed's start; now: its end, only new notifications)")
	fences := fset.String("fences", "", "only the fences `A,B`")
	types := fset.String("types", "", "only the types `T,T` (enter, exit, inside)")
	count := fset.Int("count", 0, "stop after `N` notifications (0: never)")
	positions := fset.String("positions", "", "instead, every event the server applies inside an `AREA`: S,W,N,E corners in degrees, or a fence's name (GET /feed/positions)")
	group := fset.String("group", "", "with --positions, only events of group `N`")
	if _, code, ok := e.parse(fset, args, 0, 0); !ok {
		return code
	}
	if *positions != "" {
		if *after != "" || *fences != "" || *types != "" {
			return e.fail(badArg("--positions takes no --after, --fences or --types"))
		}
		return watchPositions(e, *positions, *group, *count)
	}
	if *group != "" {
		return e.fail(badArg("--group goes with --positions"))
	}
	if *after != "" && *after != "now" {
		if _, err := strconv.ParseUint(*after, 10, 64); err != nil {
			return e.fail(badArg("--after %q is not a sequence (a decimal number, or now: the feed's end)", *after))
		}
	}
	q := url.Values{"form": {"a"}, "wait_ms": {strconv.Itoa(watchWait)}}
	if *fences != "" {
		q.Set("fences", *fences)
	}
	if *types != "" {
		q.Set("types", *types)
	}
	// A stream's rows go out as they come, so its columns have fixed
	// widths rather than a table's measured ones.
	const row = "%-20s  %-6s  %-16s  %-36s  %-12s  %-13s  %s\n"
	if !e.json {
		fmt.Fprintf(e.stdout, row, "SEQ", "TYPE", "FENCE", "ENTITY", "LAT", "LON", "TIME")
	}
	seen := 0
	for *count == 0 || seen < *count {
		if *after != "" {
			q.Set("after", *after)
		}
		var p feedPage
		if _, err := e.api.retry("GET", "/feed?"+q.Encode(), nil, &p); err != nil {
			return e.fail(err)
		}
		for _, raw := range p.Notifications {
			if *count > 0 && seen == *count {
				break
			}
			seen++
			if e.json {
				fmt.Fprintln(e.stdout, string(raw))
				continue
			}
			var n notification
			var ev event
			if err := json.Unmarshal(raw, &n); err != nil {
				return e.fail(fmt.Errorf("a notification the client cannot read: %v", err))
			}
			if err := json.Unmarshal(n.Event, &ev); err != nil {
				return e.fail(fmt.Errorf("a notification's event the client cannot read: %v", err))
			}
			fmt.Fprintf(e.stdout, row, n.Seq, n.Type, n.Fence, ev.EntityID,
				degrees(ev.Lat), degrees(ev.Lon), formatTime(ev.TimestampNS.int64()))
		}
		if p.Next != "" {
			*after = p.Next
		}
	}
	return exitOK
}

func fence(e *env, args []string) int {
	fset := e.flags()
	bbox := fset.String("bbox", "", "a box: its `S,W,N,E` corners in degrees (W > E crosses the antimeridian)")
	circle := fset.String("circle", "", "a circle: `LAT,LON,RADIUS_M`")
	file := fset.String("file", "", "a polygon: GeoJSON file `F` (as within --file); - is stdin")
	group := fset.String("group", "", "only entities of group `N`")
	report := fset.String("report", "", "the types to report, `T,T` of enter, exit, inside (default enter,exit)")
	return named(e, fset, args, "fence", "/fences", "form=a", func() (map[string]any, error) {
		body, err := fenceShape(e, *bbox, *circle, *file)
		if err != nil {
			return nil, err
		}
		if *group != "" {
			body["group_id"] = *group
		}
		if *report != "" {
			body["report"] = strings.Split(*report, ",")
		}
		return body, nil
	})
}

// fenceShape is a fence's shape in Form A from exactly one of the flags.
func fenceShape(e *env, bbox, circle, file string) (map[string]any, error) {
	given := 0
	for _, f := range []string{bbox, circle, file} {
		if f != "" {
			given++
		}
	}
	if given != 1 {
		return nil, badArg("give the fence's shape: one of --bbox, --circle and --file")
	}
	numbers := func(flag, s string, n int) ([]float64, error) {
		parts := strings.Split(s, ",")
		if len(parts) != n {
			return nil, badArg("--%s wants %d numbers separated by commas, not %q", flag, n, s)
		}
		vs := make([]float64, n)
		for i, p := range parts {
			v, err := strconv.ParseFloat(p, 64)
			if err != nil {
				return nil, badArg("--%s: %q is not a number", flag, p)
			}
			vs[i] = v
		}
		return vs, nil
	}
	point := func(lat, lon float64) map[string]any { return map[string]any{"lat": lat, "lon": lon} }
	switch {
	case bbox != "":
		v, err := numbers("bbox", bbox, 4)
		if err != nil {
			return nil, err
		}
		return map[string]any{"shape": "bbox", "min": point(v[0], v[1]), "max": point(v[2], v[3])}, nil
	case circle != "":
		v, err := numbers("circle", circle, 3)
		if err != nil {
			return nil, err
		}
		return map[string]any{"shape": "circle", "center": point(v[0], v[1]), "radius_m": v[2]}, nil
	}
	data, err := readInput(e, file)
	if err != nil {
		return nil, err
	}
	poly, err := geojsonPolygon(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	body := polygonBody(poly)
	body["shape"] = "polygon"
	return body, nil
}

// watchPositions follows GET /feed/positions: a row per event applied in
// the area (or, with --json, its JSON), "delete" rows for entities the
// stream showed that are deleted or expire. The stream has no timeout
// (--timeout bounds requests, and a stream waits as long as nothing
// moves) and no resume.
func watchPositions(e *env, area, group string, count int) int {
	q := url.Values{"form": {"a"}}
	if strings.Contains(area, ",") {
		q.Set("bbox", area)
	} else {
		q.Set("fence", area)
	}
	if group != "" {
		q.Set("group_id", group)
	}
	resp, err := (&http.Client{Transport: e.api.hc.Transport}).Get(e.api.base + "/feed/positions?" + q.Encode())
	if err != nil {
		return e.fail(fmt.Errorf("cannot reach the server: %w (is it running? --url or GEOEVENT_URL names it)", err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return e.fail(decodeError(resp.StatusCode, raw))
	}
	const row = "%-12s  %-8s  %-36s  %-12s  %-13s  %s\n"
	if !e.json {
		fmt.Fprintf(e.stdout, row, "INDEX", "EVENT", "ENTITY", "LAT", "LON", "TIME")
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var index, kind string
	for seen := 0; count == 0 || seen < count; {
		if !sc.Scan() {
			if err := sc.Err(); err != nil {
				return e.fail(fmt.Errorf("reading the stream: %w", err))
			}
			return e.fail(fmt.Errorf("the server ended the stream"))
		}
		line := sc.Bytes()
		switch {
		case bytes.HasPrefix(line, []byte("id: ")):
			index = string(line[4:])
		case bytes.HasPrefix(line, []byte("event: ")):
			kind = string(line[7:])
		case bytes.HasPrefix(line, []byte("data: ")):
			data := line[6:]
			if kind == "error" {
				return e.fail(decodeError(0, data))
			}
			seen++
			if e.json {
				fmt.Fprintln(e.stdout, string(data))
				continue
			}
			var ev event
			if err := json.Unmarshal(data, &ev); err != nil {
				return e.fail(fmt.Errorf("an event the client cannot read: %v", err))
			}
			if kind == "delete" {
				fmt.Fprintf(e.stdout, row, index, kind, ev.EntityID, "", "", "")
				continue
			}
			fmt.Fprintf(e.stdout, row, index, kind, ev.EntityID, degrees(ev.Lat), degrees(ev.Lon), formatTime(ev.TimestampNS.int64()))
		}
	}
	return exitOK
}
