package main

// The reads of entities: get, history.

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

func init() {
	register(command{name: "get", order: 20, args: "ENTITY...", summary: "entities' latest events", run: get})
	register(command{name: "history", order: 50, args: "ENTITY [--since T] [--until T] [--limit N]", summary: "an entity's events by time, oldest first", run: history})
}

func get(e *env, args []string) int {
	ids, code, ok := e.entityArgs(args)
	if !ok {
		return code
	}
	// Form A leaves out an entity not found; the ids are UUIDs as the
	// answer shows them, so the missing ones are those it does not name.
	var ans struct {
		Events []json.RawMessage `json:"events"`
	}
	raw, err := e.api.do("POST", "/entities/batch?form=a", map[string]any{"entity_ids": ids}, &ans)
	if err != nil {
		return e.fail(err)
	}
	evs, err := decodeEvents(ans.Events)
	if err != nil {
		return e.fail(err)
	}
	found := map[string]bool{}
	for _, ev := range evs {
		if ev != nil {
			found[ev.EntityID] = true
		}
	}
	var missing []string
	for _, id := range ids {
		if !found[id] {
			missing = append(missing, id)
		}
	}
	if e.json {
		printRaw(e.stdout, raw)
	} else if len(found) > 0 {
		printEvents(e.stdout, evs, false)
	}
	if len(missing) > 0 {
		return e.fail(fmt.Errorf("3 ENTITY_NOT_FOUND: no entity %s (never written, deleted or expired)", strings.Join(missing, ", ")))
	}
	return exitOK
}

func history(e *env, args []string) int {
	fset := e.flags()
	since := fset.String("since", "", "from time `T` (RFC 3339 or ns), inclusive")
	until := fset.String("until", "", "to time `T` (RFC 3339 or ns), inclusive")
	limit := fset.Int("limit", 100, "at most `N` events (0: all)")
	pos, code, ok := e.parse(fset, args, 1, 1)
	if !ok {
		return code
	}
	id, err := entityID(pos[0])
	if err != nil {
		return e.fail(err)
	}
	q, err := historyQuery(*since, *until)
	if err != nil {
		return e.fail(err)
	}
	all, err := e.api.historyPages(id, q, *limit)
	if err != nil {
		return e.fail(err)
	}
	return e.printPage(all)
}

// historyQuery is the query of a history's pages in Form A, from since to
// until (each "": no bound).
func historyQuery(since, until string) (url.Values, error) {
	q := url.Values{"form": {"a"}}
	for _, b := range []struct{ name, v string }{{"since_ns", since}, {"until_ns", until}} {
		if b.v != "" {
			ns, err := parseTime(b.v)
			if err != nil {
				return nil, err
			}
			q.Set(b.name, strconv.FormatInt(ns, 10))
		}
	}
	return q, nil
}

// historyPages pages through an entity's history: at most max events (0:
// all), query q (form, since_ns, until_ns) on every page.
func (a *api) historyPages(id string, q url.Values, max int) (*page, error) {
	return collect(max, a.historyFetch(id, q))
}

// historyFetch fetches the pages of an entity's history.
func (a *api) historyFetch(id string, q url.Values) func(limit int, cursor *string) (page, error) {
	return func(limit int, cursor *string) (p page, err error) {
		q.Set("limit", strconv.Itoa(limit))
		if cursor != nil {
			q.Set("cursor", *cursor)
		}
		_, err = a.retry("GET", "/entity/"+url.PathEscape(id)+"/history?"+q.Encode(), nil, &p)
		return p, err
	}
}

// printPage prints a (merged) page: its JSON, or its events as a table.
func (e *env) printPage(p *page) int {
	if e.json {
		if err := printJSON(e.stdout, p); err != nil {
			return e.fail(err)
		}
		return exitOK
	}
	evs, err := decodeEvents(p.Events)
	if err != nil {
		return e.fail(err)
	}
	printEvents(e.stdout, evs, p.HasMore)
	return exitOK
}
