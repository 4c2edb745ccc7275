package main

// The server's state: stats, status.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

func init() {
	register(command{name: "stats", order: 80, summary: "the cluster's counts: events, entities, storage", run: func(e *env, args []string) int { return e.showObject("/stats", args) }})
	register(command{name: "status", order: 90, summary: "this server's state: cluster state, node, uptime", run: func(e *env, args []string) int { return e.showObject("/status", args) }})
}

// showObject GETs path, whose answer is a JSON object, and prints its
// fields as name and value, in the server's order.
func (e *env) showObject(path string, args []string) int {
	if _, code, ok := e.parse(e.flags(), args, 0, 0); !ok {
		return code
	}
	raw, err := e.api.retry("GET", path, nil, nil)
	if err != nil {
		return e.fail(err)
	}
	if e.json {
		printRaw(e.stdout, raw)
		return exitOK
	}
	kv, err := objectFields(raw)
	if err != nil {
		return e.fail(fmt.Errorf("the server's answer is not a JSON object: %.200s", raw))
	}
	printFields(e.stdout, kv...)
	return exitOK
}

// objectFields lists a JSON object's fields as name, value pairs in their
// order; a value that is not a string is its JSON text.
func objectFields(raw []byte) ([]string, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("not an object")
	}
	var kv []string
	for d.More() {
		k, err := d.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return nil, err
		}
		s := string(v)
		var str string
		if json.Unmarshal(v, &str) == nil {
			s = str
		}
		kv = append(kv, fmt.Sprint(k), strings.TrimSpace(s))
	}
	return kv, nil
}
