package main

// The writes: put, delete, ttl.

import (
	"fmt"
	"strconv"

	"github.com/geoevent/geoevent/core"
)

func init() {
	register(command{name: "put", order: 10, args: "ENTITY LAT LON [flags]", summary: "insert (or --upsert) one event", run: put})
	register(command{name: "delete", order: 70, args: "ENTITY...", summary: "erase entities, their history included", run: deleteEntities})
	register(command{name: "ttl", order: 60, args: "set|extend|clear ENTITY [SECONDS]", summary: "set, extend or clear an entity's expiry", run: ttl})
}

// entityID reads an entity id (a UUID, or a decimal id) as the UUID the
// server renders; the API's Form A takes UUIDs only.
func entityID(s string) (string, error) {
	id, err := core.ParseID(s, true)
	if err != nil {
		return "", badArg("entity id %q is neither a UUID nor a decimal id", s)
	}
	return id.String(), nil
}

// entityArgs parses a command whose arguments are one or more entity ids.
func (e *env) entityArgs(args []string) (ids []string, code int, ok bool) {
	pos, code, ok := e.parse(e.flags(), args, 1, -1)
	if !ok {
		return nil, code, false
	}
	ids = make([]string, len(pos))
	for i, s := range pos {
		id, err := entityID(s)
		if err != nil {
			return nil, e.fail(err), false
		}
		ids[i] = id
	}
	return ids, exitOK, true
}

// insertResult is one event's result of POST /events.
type insertResult struct {
	Index       int    `json:"index"`
	Code        int    `json:"code"`
	Message     string `json:"message"`
	Updated     bool   `json:"updated"`
	ID          string `json:"id"`
	TimestampNS number `json:"timestamp_ns"`
}

type insertAnswer struct {
	Results   []insertResult `json:"results"`
	Committed bool           `json:"committed"`
}

// eventHints say what to change for the per-event codes of an insert.
var eventHints = map[int]string{
	7:  "give a non-zero entity id",
	8:  "an event of this entity has this timestamp already: send another timestamp_ns, or --upsert to replace it",
	9:  "lat must be -90 to 90 degrees",
	10: "lon must be -180 to 180 degrees",
	11: "altitude_mm is out of its range",
	12: "velocity_mms is out of its range",
	13: "heading_cdeg must be 0 to 36000 (centidegrees)",
	14: "timestamp_ns is more than 60 s ahead of the server's clock",
	15: "reserved fields must be zero",
}

// eventFailure describes a per-event code.
func eventFailure(r insertResult) string {
	s := fmt.Sprintf("%d %s", r.Code, r.Message)
	if h := eventHints[r.Code]; h != "" {
		s += ": " + h
	}
	return s
}

func put(e *env, args []string) int {
	fset := e.flags()
	group := fset.String("group", "", "the group id `N`")
	ttlSecs := fset.Uint("ttl", 0, "expire the event `SECONDS` after its timestamp (0: never)")
	at := fset.String("time", "", "the event's timestamp `T` (RFC 3339 or ns; default: the server's clock)")
	alt := fset.Int("altitude-mm", 0, "altitude in millimetres")
	vel := fset.Uint("velocity-mms", 0, "speed in millimetres per second")
	heading := fset.Uint("heading-cdeg", 0, "heading in centidegrees, 0 to 36000")
	acc := fset.Uint("accuracy-mm", 0, "accuracy in millimetres")
	upsert := fset.Bool("upsert", false, "replace the event at --time, or without it the entity's latest")
	pos, code, ok := e.parse(fset, args, 3, 3)
	if !ok {
		return code
	}
	id, err := entityID(pos[0])
	if err != nil {
		return e.fail(err)
	}
	lat, err := parseCoord("latitude", pos[1])
	if err != nil {
		return e.fail(err)
	}
	lon, err := parseCoord("longitude", pos[2])
	if err != nil {
		return e.fail(err)
	}
	ev := map[string]any{"entity_id": id, "lat": lat, "lon": lon}
	if *group != "" {
		ev["group_id"] = *group
	}
	if *at != "" {
		ns, err := parseTime(*at)
		if err != nil {
			return e.fail(err)
		}
		ev["timestamp_ns"] = strconv.FormatInt(ns, 10)
	}
	for name, v := range map[string]int64{"ttl_seconds": int64(*ttlSecs), "altitude_mm": int64(*alt),
		"velocity_mms": int64(*vel), "heading_cdeg": int64(*heading), "accuracy_mm": int64(*acc)} {
		if v != 0 {
			ev[name] = v
		}
	}
	body := map[string]any{"events": []any{ev}}
	if *upsert {
		body["mode"] = "upsert"
	}
	var ans insertAnswer
	raw, err := e.api.do("POST", "/events", body, &ans)
	if err != nil {
		return e.fail(err)
	}
	if e.json {
		printRaw(e.stdout, raw)
	}
	if len(ans.Results) != 1 {
		return e.fail(fmt.Errorf("the server answered %d results for one event", len(ans.Results)))
	}
	r := ans.Results[0]
	if !ans.Committed || r.Code != 0 {
		return e.fail(fmt.Errorf("%s", eventFailure(r)))
	}
	if !e.json {
		verb := "inserted"
		if r.Updated {
			verb = "updated"
		}
		fmt.Fprintf(e.stdout, "%s %s at %s (timestamp_ns %s)\n", verb, id, formatTime(r.TimestampNS.int64()), r.TimestampNS)
	}
	return exitOK
}

func deleteEntities(e *env, args []string) int {
	ids, code, ok := e.entityArgs(args)
	if !ok {
		return code
	}
	var ans struct {
		Deleted  int `json:"deleted_count"`
		NotFound int `json:"not_found_count"`
	}
	raw, err := e.api.do("DELETE", "/entities?form=a", map[string]any{"entity_ids": ids}, &ans)
	if err != nil {
		return e.fail(err)
	}
	if e.json {
		printRaw(e.stdout, raw)
		return exitOK
	}
	fmt.Fprintf(e.stdout, "deleted %d %s, %d not found\n", ans.Deleted, plural(ans.Deleted, "entity", "entities"), ans.NotFound)
	return exitOK
}

func ttl(e *env, args []string) int {
	fset := e.flags()
	pos, code, ok := e.parse(fset, args, 2, 3)
	if !ok {
		return code
	}
	op := pos[0]
	want := map[string]int{"set": 3, "extend": 3, "clear": 2}[op]
	if want == 0 || len(pos) != want {
		fset.Usage()
		return exitUsage
	}
	id, err := entityID(pos[1])
	if err != nil {
		return e.fail(err)
	}
	body := map[string]any{"entity_id": id}
	if want == 3 {
		secs, err := strconv.ParseUint(pos[2], 10, 32)
		if err != nil {
			return e.fail(badArg("SECONDS %q is not a whole number of seconds", pos[2]))
		}
		field := map[string]string{"set": "ttl_seconds", "extend": "extend_by_seconds"}[op]
		body[field] = secs
	}
	var ans struct {
		Expires     number `json:"expires_at_ns"`
		PrevExpires number `json:"previous_expires_at_ns"`
		NewExpires  number `json:"new_expires_at_ns"`
	}
	raw, err := e.api.do("POST", "/ttl/"+op+"?form=a", body, &ans)
	if err != nil {
		return e.fail(err)
	}
	if e.json {
		printRaw(e.stdout, raw)
		return exitOK
	}
	switch op {
	case "set":
		fmt.Fprintf(e.stdout, "%s expires at %s\n", id, formatTime(ans.Expires.int64()))
	case "extend":
		fmt.Fprintf(e.stdout, "%s expires at %s (was %s)\n", id, formatTime(ans.NewExpires.int64()), formatTime(ans.PrevExpires.int64()))
	case "clear":
		fmt.Fprintf(e.stdout, "%s never expires (was %s)\n", id, formatTime(ans.PrevExpires.int64()))
	}
	return exitOK
}
