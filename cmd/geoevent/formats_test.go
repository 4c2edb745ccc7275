package main

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// FuzzImportReaders feeds any input to the three readers: none panics,
// and every row is either a JSON object for POST /events or the reason it
// is not.
func FuzzImportReaders(f *testing.F) {
	for _, seed := range []string{
		"{\"entity_id\": \"1\", \"lat\": 1, \"lon\": 2}\n\n{\"x\"\n",
		"entity_id,lat,lon,timestamp_ns\n1,2,3,4\n\"5,6\n7,8\n",
		"\ufeffEntity_ID, LAT ,lon,group_id\n1,2,3,-4\n1,2,3,18446744073709551615\n",
		`{"type":"FeatureCollection","features":[{"type":"Feature","id":7,"properties":{"group_id":1.5},"geometry":{"type":"Point","coordinates":[1,2]}},{"geometry":null}]}`,
		`{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"entity_id":"1"},"geometry":{"type":"Point","coordinates":[1]}}]}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		readers := []func(io.Reader) (rowReader, error){
			func(r io.Reader) (rowReader, error) { return newNDJSONReader(r), nil },
			func(r io.Reader) (rowReader, error) { rd, _, err := newCSVReader(r); return rd, err },
			func(r io.Reader) (rowReader, error) { return newGeoJSONReader(r) },
		}
		for _, open := range readers {
			rd, err := open(strings.NewReader(in))
			if err != nil {
				continue
			}
			for i := 0; i < 10000; i++ {
				r, err := rd.next()
				if err != nil {
					break
				}
				if r.where == "" {
					t.Fatalf("a row without its place: %+v", r)
				}
				if r.err == nil {
					var m map[string]any
					if json.Unmarshal(r.ev, &m) != nil || m == nil {
						t.Fatalf("%s: not a JSON object: %s", r.where, r.ev)
					}
				}
			}
		}
	})
}
