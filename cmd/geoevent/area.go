package main

// The box and nearest queries: bbox, nearest.

import (
	"fmt"
	"strconv"
)

func init() {
	register(command{name: "bbox", order: 45, args: "MIN_LAT MIN_LON MAX_LAT MAX_LON [--group N] [--limit N]", summary: "entities inside a box of parallels and meridians (MIN_LON > MAX_LON crosses the antimeridian)", run: bbox})
	register(command{name: "nearest", order: 46, args: "LAT LON K [--max-distance M] [--group N]", summary: "the K entities nearest a point, nearest first", run: nearest})
}

func bbox(e *env, args []string) int {
	fset, group, limit := e.spatialFlags()
	pos, code, ok := e.parse(fset, args, 4, 4)
	if !ok {
		return code
	}
	body := map[string]any{}
	for i, name := range []string{"min_lat", "min_lon", "max_lat", "max_lon"} {
		v, err := parseCoord(name, pos[i])
		if err != nil {
			return e.fail(err)
		}
		body[name] = v
	}
	return e.query("/query/bbox?form=a", body, *group, *limit)
}

func nearest(e *env, args []string) int {
	fset := e.flags()
	group := fset.String("group", "", "only entities of group `N`")
	maxDist := fset.Float64("max-distance", 0, "only entities within `M` metres (0: any distance)")
	pos, code, ok := e.parse(fset, args, 3, 3)
	if !ok {
		return code
	}
	lat, lon, err := parsePoint(pos[0], pos[1])
	if err != nil {
		return e.fail(err)
	}
	k, err := strconv.Atoi(pos[2])
	if err != nil {
		return e.fail(badArg("K %q is not a whole number of entities", pos[2]))
	}
	body := map[string]any{"center_lat": lat, "center_lon": lon, "k": k}
	if *maxDist > 0 {
		body["max_distance_m"] = *maxDist
	}
	if *group != "" {
		body["group_id"] = *group
	}
	var p page
	if _, err := e.api.retry("POST", "/query/nearest?form=a", body, &p); err != nil {
		return e.fail(err)
	}
	// The table's hint names K, not --limit, which nearest does not take.
	more := p.HasMore && !e.json
	if more {
		p.HasMore = false
	}
	code = e.printPage(&p)
	if more && code == exitOK {
		fmt.Fprintln(e.stdout, "(more lie farther: raise K)")
	}
	return code
}
