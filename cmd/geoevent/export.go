package main

// export: latest positions, or an entity's history, as NDJSON, CSV or
// GeoJSON that import reads back.

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

func init() {
	register(command{name: "export", order: 110, args: "[--entity ID [--since T] [--until T]] [--format F] [--out FILE]", summary: "write latest positions or a history as NDJSON, CSV or GeoJSON", run: export})
}

// zeroUUID is the value of an id field left unset.
const zeroUUID = "00000000-0000-0000-0000-000000000000"

func export(e *env, args []string) int {
	fset := e.flags()
	entity := fset.String("entity", "", "export entity `ID`'s history, oldest first (default: every entity's latest event, newest first)")
	since := fset.String("since", "", "with --entity: from time `T` (RFC 3339 or ns)")
	until := fset.String("until", "", "with --entity: to time `T` (RFC 3339 or ns)")
	group := fset.String("group", "", "without --entity: only entities of group `N`")
	format := fset.String("format", "", "ndjson, csv or geojson (default: from --out's extension, else ndjson)")
	out := fset.String("out", "-", "write to `FILE` (- is stdout)")
	if _, code, ok := e.parse(fset, args, 0, 0); !ok {
		return code
	}
	f := strings.ToLower(*format)
	if f == "" {
		if f = formatFromName(*out); f == "" {
			f = "ndjson"
		}
	}
	var fetch func(limit int, cursor *string) (page, error)
	if *entity != "" {
		id, err := entityID(*entity)
		if err != nil {
			return e.fail(err)
		}
		q, err := historyQuery(*since, *until)
		if err != nil {
			return e.fail(err)
		}
		fetch = e.api.historyFetch(id, q)
	} else {
		if *since != "" || *until != "" {
			return e.fail(badArg("--since and --until go with --entity"))
		}
		body := map[string]any{}
		if *group != "" {
			body["group_id"] = *group
		}
		fetch = e.api.postPages("/query/latest?form=a", body)
	}
	var w io.Writer = e.stdout
	var file *os.File
	if *out != "-" {
		var err error
		if file, err = os.Create(*out); err != nil {
			return e.fail(err)
		}
		defer file.Close()
		w = file
	}
	bw := bufio.NewWriter(w)
	var ew eventWriter
	switch f {
	case "ndjson", "jsonl", "json":
		ew = &ndjsonWriter{w: bw}
	case "csv":
		ew = &csvWriter{w: csv.NewWriter(bw)}
	case "geojson":
		ew = &geojsonWriter{w: bw}
	default:
		return e.fail(badArg("--format %q: give ndjson, csv or geojson", f))
	}
	n := 0
	err := stream(0, fetch, func(p *page) error {
		for _, raw := range p.Events {
			if string(raw) == "null" {
				continue
			}
			fields, err := exportFields(raw)
			if err != nil {
				return err
			}
			if err := ew.write(fields); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err == nil {
		err = ew.end()
	}
	if err == nil {
		err = bw.Flush()
	}
	if err == nil && file != nil {
		err = file.Close()
	}
	if err != nil {
		return e.fail(err)
	}
	if *out != "-" {
		fmt.Fprintf(e.stderr, "exported %d %s to %s\n", n, plural(n, "event", "events"), *out)
	}
	return exitOK
}

// field is one field of an exported event: its name and JSON text.
type field struct {
	name string
	json json.RawMessage
}

// exportFields are the fields of a Form A event that import takes, in
// eventFields' order, less those at their zero value (entity_id,
// timestamp_ns, lat and lon always).
func exportFields(raw json.RawMessage) ([]field, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("the server's event is not a JSON object: %.200s", raw)
	}
	var out []field
	for i, f := range eventFields {
		v, ok := m[f.name]
		if !ok {
			return nil, fmt.Errorf("the server's event has no %s: %.200s", f.name, raw)
		}
		if text := jsonText(v); i >= 4 && (text == "0" || text == zeroUUID) {
			continue
		}
		out = append(out, field{f.name, v})
	}
	return out, nil
}

// eventWriter writes exported events in one format.
type eventWriter interface {
	write([]field) error
	end() error
}

type ndjsonWriter struct{ w *bufio.Writer }

func (n *ndjsonWriter) write(fs []field) error {
	n.w.WriteByte('{')
	for i, f := range fs {
		if i > 0 {
			n.w.WriteByte(',')
		}
		fmt.Fprintf(n.w, "%q:%s", f.name, f.json)
	}
	_, err := n.w.WriteString("}\n")
	return err
}

func (n *ndjsonWriter) end() error { return nil }

// csvWriter writes every field's column, empty at its zero value.
type csvWriter struct {
	w      *csv.Writer
	header bool
}

func (c *csvWriter) write(fs []field) error {
	if err := c.writeHeader(); err != nil {
		return err
	}
	rec := make([]string, len(eventFields))
	for _, f := range fs {
		for i, ef := range eventFields {
			if ef.name == f.name {
				rec[i] = jsonText(f.json)
			}
		}
	}
	return c.w.Write(rec)
}

// writeHeader writes the header once: the names of eventFields.
func (c *csvWriter) writeHeader() error {
	if c.header {
		return nil
	}
	c.header = true
	names := make([]string, len(eventFields))
	for i, f := range eventFields {
		names[i] = f.name
	}
	return c.w.Write(names)
}

func (c *csvWriter) end() error {
	if err := c.writeHeader(); err != nil { // no event: the header alone
		return err
	}
	c.w.Flush()
	return c.w.Error()
}

// geojsonWriter writes a FeatureCollection of Points whose properties are
// the event's fields but lat and lon.
type geojsonWriter struct {
	w *bufio.Writer
	n int
}

func (g *geojsonWriter) write(fs []field) error {
	if g.n == 0 {
		g.w.WriteString(`{"type":"FeatureCollection","features":[` + "\n")
	} else {
		g.w.WriteString(",\n")
	}
	g.n++
	var lat, lon json.RawMessage
	g.w.WriteString(`{"type":"Feature","properties":{`)
	first := true
	for _, f := range fs {
		switch f.name {
		case "lat":
			lat = f.json
			continue
		case "lon":
			lon = f.json
			continue
		}
		if !first {
			g.w.WriteByte(',')
		}
		first = false
		fmt.Fprintf(g.w, "%q:%s", f.name, f.json)
	}
	_, err := fmt.Fprintf(g.w, `},"geometry":{"type":"Point","coordinates":[%s,%s]}}`, lon, lat)
	return err
}

func (g *geojsonWriter) end() error {
	if g.n == 0 {
		g.w.WriteString(`{"type":"FeatureCollection","features":[`)
	}
	_, err := g.w.WriteString("\n]}\n")
	return err
}
