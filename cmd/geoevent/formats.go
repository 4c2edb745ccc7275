package main

// The input formats of import: NDJSON, CSV with a header, GeoJSON.

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/paulmach/orb"
	"github.com/paulmach/orb/geojson"

	"github.com/geoevent/geoevent/core"
)

// fieldKind is how a field of an event is written in JSON.
type fieldKind int

const (
	kindID      fieldKind = iota // a UUID or a decimal id
	kindDegrees                  // a float
	kindInt                      // a signed integer, sent as a decimal string
	kindUint                     // an unsigned integer, sent as a decimal string
)

// eventFields are the fields of an event that POST /events takes, in the
// order export writes them (lat_nano and lon_nano aside: the files hold
// degrees).
var eventFields = []struct {
	name string
	kind fieldKind
}{
	{"entity_id", kindID}, {"timestamp_ns", kindUint}, {"lat", kindDegrees}, {"lon", kindDegrees},
	{"group_id", kindInt}, {"altitude_mm", kindInt}, {"velocity_mms", kindUint}, {"heading_cdeg", kindUint},
	{"accuracy_mm", kindUint}, {"ttl_seconds", kindUint}, {"flags", kindUint},
	{"correlation_id", kindID}, {"user_data", kindID},
}

func fieldKindOf(name string) (fieldKind, bool) {
	for _, f := range eventFields {
		if f.name == name {
			return f.kind, true
		}
	}
	return 0, false
}

// fieldValue checks a text value of a field and returns its JSON value.
func fieldValue(name string, kind fieldKind, s string) (any, error) {
	switch kind {
	case kindID:
		if _, err := core.ParseID(s, true); err != nil {
			return nil, fmt.Errorf("%s %q is neither a UUID nor a decimal id", name, s)
		}
		return s, nil
	case kindDegrees:
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("%s %q is not a number of degrees", name, s)
		}
		return v, nil
	case kindInt:
		if _, err := strconv.ParseInt(s, 10, 64); err != nil {
			// group_id is a uint64 in the API's Form B: a value above
			// 2^63-1 is taken too.
			if _, err2 := strconv.ParseUint(s, 10, 64); name != "group_id" || err2 != nil {
				return nil, fmt.Errorf("%s %q is not an integer", name, s)
			}
		}
		return s, nil
	default:
		if _, err := strconv.ParseUint(s, 10, 64); err != nil {
			return nil, fmt.Errorf("%s %q is not a whole number", name, s)
		}
		return s, nil
	}
}

// ndjsonReader reads one event object a line; blank lines are skipped.
type ndjsonReader struct {
	br   *bufio.Reader
	line int
}

func newNDJSONReader(r io.Reader) *ndjsonReader {
	return &ndjsonReader{br: bufio.NewReaderSize(r, 64<<10)}
}

func (n *ndjsonReader) next() (row, error) {
	for {
		b, err := n.br.ReadBytes('\n')
		if len(b) == 0 && err != nil {
			return row{}, err
		}
		if err != nil && err != io.EOF {
			return row{}, err
		}
		n.line++
		if len(strings.TrimSpace(string(b))) == 0 {
			continue
		}
		r := row{where: fmt.Sprintf("line %d", n.line)}
		if r.ev, r.err = compactObject(b); r.err == nil {
			r.err = checkEventObject(r.ev)
		}
		return r, nil
	}
}

// checkEventObject checks an NDJSON event's fields as the server would
// their names and types, so that a row the server would refuse whole
// fails alone, without a request.
func checkEventObject(ev json.RawMessage) error {
	d := json.NewDecoder(bytes.NewReader(ev))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return errors.New("not a JSON object")
	}
	seen := map[string]bool{}
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return fmt.Errorf("not valid JSON: %v", err)
		}
		name, _ := t.(string)
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return fmt.Errorf("not valid JSON: %v", err)
		}
		if seen[name] {
			return fmt.Errorf("field %q is given twice", name)
		}
		seen[name] = true
		kind, ok := fieldKindOf(name)
		if name == "lat_nano" || name == "lon_nano" {
			kind, ok = kindInt, true
		}
		if !ok {
			return fmt.Errorf("unknown field %q: an event has entity_id, lat, lon (or lat_nano, lon_nano) and %s", name, optionalFields)
		}
		if string(v) == "null" {
			continue
		}
		if _, err := fieldValue(name, kind, jsonText(v)); err != nil {
			return err
		}
	}
	return nil
}

// optionalFields names an event's other fields, for messages.
var optionalFields = func() string {
	var names []string
	for _, f := range eventFields[4:] {
		names = append(names, f.name)
	}
	return strings.Join(append([]string{"timestamp_ns"}, names...), ", ")
}()

// csvReader reads CSV with a header naming event fields; entity_id, lat
// and lon are required. An empty cell leaves its field out.
type csvReader struct {
	cr      *csv.Reader
	columns []string // by column: the field, or "" for a column ignored
}

// newCSVReader reads the header; ignored lists the columns that name no
// field of an event.
func newCSVReader(r io.Reader) (rd *csvReader, ignored []string, err error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1 // a row of the wrong width is that row's failure, not the file's
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err != nil {
		return nil, nil, fmt.Errorf("reading the CSV header: %w", err)
	}
	rd = &csvReader{cr: cr, columns: make([]string, len(header))}
	seen := map[string]bool{}
	for i, h := range header {
		name := strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
		if _, ok := fieldKindOf(name); !ok {
			ignored = append(ignored, strconv.Quote(h))
			continue
		}
		if seen[name] {
			return nil, nil, fmt.Errorf("the CSV header names %s twice", name)
		}
		seen[name] = true
		rd.columns[i] = name
	}
	for _, need := range []string{"entity_id", "lat", "lon"} {
		if !seen[need] {
			return nil, nil, fmt.Errorf("the CSV header has no %s column: the first line must name the columns, e.g. entity_id,lat,lon,timestamp_ns", need)
		}
	}
	return rd, ignored, nil
}

func (c *csvReader) next() (row, error) {
	rec, err := c.cr.Read()
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return row{where: fmt.Sprintf("line %d", pe.StartLine), err: fmt.Errorf("not CSV: %v", pe.Err)}, nil
	}
	if err != nil {
		return row{}, err
	}
	line, _ := c.cr.FieldPos(0) // only after a record was read: it panics otherwise
	r := row{where: fmt.Sprintf("line %d", line)}
	if len(rec) != len(c.columns) {
		r.err = fmt.Errorf("%d cells where the header names %d", len(rec), len(c.columns))
		return r, nil
	}
	ev := map[string]any{}
	for i, cell := range rec {
		name := c.columns[i]
		cell = strings.TrimSpace(cell)
		if name == "" || cell == "" {
			continue
		}
		kind, _ := fieldKindOf(name)
		if ev[name], r.err = fieldValue(name, kind, cell); r.err != nil {
			return r, nil
		}
	}
	r.ev, r.err = json.Marshal(ev)
	return r, nil
}

// geojsonReader reads a FeatureCollection of Points: the entity id is the
// property entity_id or else the feature's id, the other properties that
// name event fields are taken, and the rest ignored. Properties are read
// as their JSON text, so that a timestamp_ns written as a number keeps
// every digit (a float64 holds 53 bits).
type geojsonReader struct {
	features []geojsonFeature
	i        int
}

type geojsonFeature struct {
	ID         json.RawMessage            `json:"id"`
	Geometry   json.RawMessage            `json:"geometry"`
	Properties map[string]json.RawMessage `json:"properties"`
}

func newGeoJSONReader(r io.Reader) (*geojsonReader, error) {
	var fc struct {
		Type     string           `json:"type"`
		Features []geojsonFeature `json:"features"`
	}
	if err := json.NewDecoder(r).Decode(&fc); err != nil || fc.Type != "FeatureCollection" {
		if err == nil {
			err = fmt.Errorf("its type is %q", fc.Type)
		}
		return nil, fmt.Errorf("not a GeoJSON FeatureCollection: %v", err)
	}
	return &geojsonReader{features: fc.Features}, nil
}

func (g *geojsonReader) next() (row, error) {
	if g.i >= len(g.features) {
		return row{}, io.EOF
	}
	f := g.features[g.i]
	r := row{where: fmt.Sprintf("feature %d", g.i)}
	g.i++
	var geom orb.Geometry
	if len(f.Geometry) > 0 && string(f.Geometry) != "null" {
		gm, err := geojson.UnmarshalGeometry(f.Geometry)
		if err != nil {
			r.err = fmt.Errorf("geometry: %v", err)
			return r, nil
		}
		geom = gm.Geometry()
	}
	pt, ok := geom.(orb.Point)
	if !ok {
		name := "no geometry"
		if geom != nil {
			name = "a " + geom.GeoJSONType()
		}
		r.err = fmt.Errorf("%s, not a Point", name)
		return r, nil
	}
	ev := map[string]any{"lat": pt.Lat(), "lon": pt.Lon()}
	for name, v := range f.Properties {
		kind, ok := fieldKindOf(name)
		if !ok || name == "lat" || name == "lon" || string(v) == "null" {
			continue
		}
		if ev[name], r.err = fieldValue(name, kind, jsonText(v)); r.err != nil {
			return r, nil
		}
	}
	if ev["entity_id"] == nil && len(f.ID) > 0 && string(f.ID) != "null" {
		if ev["entity_id"], r.err = fieldValue("entity_id", kindID, jsonText(f.ID)); r.err != nil {
			return r, nil
		}
	}
	if ev["entity_id"] == nil {
		r.err = errors.New("no entity_id: give the property entity_id or the feature's id")
		return r, nil
	}
	r.ev, r.err = json.Marshal(ev)
	return r, nil
}

// jsonText is a JSON string's value, or another value's JSON text.
func jsonText(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	return string(v)
}
