package main

// import: events from NDJSON, CSV or GeoJSON, in batches.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

func init() {
	register(command{name: "import", order: 100, args: "FILE [--format F] [--upsert] [--batch N]", summary: "insert events from NDJSON, CSV or GeoJSON (- is stdin)", run: importEvents})
}

// The API's limits on a batch (docs/api.md): 10,000 events, and a body of
// 16 MiB. A batch is cut at maxBatchBytes of events, well under the body
// limit, so that one batch never holds much of the server's body budget.
const (
	maxBatchEvents = 10000
	maxBatchBytes  = 4 << 20
)

// row is one event of an input: where it is (for messages) and its JSON
// object for POST /events, or why it could not be read.
type row struct {
	seq   int    // its place among the rows, from 0
	where string // "line 12", "feature 3"
	ev    json.RawMessage
	err   error
}

// rowReader reads an input's rows; io.EOF ends it. An error other than a
// row's own (row.err) ends the import.
type rowReader interface {
	next() (row, error)
}

// failure is a row that was not imported, and why.
type failure struct {
	seq   int    // the row's place in the input, for the report's order
	Where string `json:"row"`
	Code  int    `json:"code,omitempty"`
	Error string `json:"error"`
}

// importer sends rows in batches and keeps the tally.
type importer struct {
	e        *env
	mode     string // "insert" or "upsert"
	batchMax int
	rows     int // read so far
	imported int
	failed   []failure
	progress *progress
}

func importEvents(e *env, args []string) int {
	fset := e.flags()
	format := fset.String("format", "", "the input's format `F`: ndjson, csv or geojson (default: from the file's extension)")
	upsert := fset.Bool("upsert", false, "replace existing events (see put --upsert) instead of failing them with EVENT_EXISTS")
	batch := fset.Int("batch", maxBatchEvents, "at most `N` events a request (1 to 10000)")
	pos, code, ok := e.parse(fset, args, 1, 1)
	if !ok {
		return code
	}
	if *batch < 1 || *batch > maxBatchEvents {
		return e.fail(badArg("--batch %d: give 1 to %d", *batch, maxBatchEvents))
	}
	name := pos[0]
	f := *format
	if f == "" {
		f = formatFromName(name)
		if f == "" {
			return e.fail(badArg("cannot tell the format of %q from its name: give --format ndjson, csv or geojson", name))
		}
	}
	var in io.Reader = e.stdin
	var size int64 = -1
	if name != "-" {
		file, err := os.Open(name)
		if err != nil {
			return e.fail(err)
		}
		defer file.Close()
		if st, err := file.Stat(); err == nil && st.Mode().IsRegular() {
			size = st.Size()
		}
		in = file
	}
	counted := &countingReader{r: in}
	var rd rowReader
	var err error
	switch strings.ToLower(f) {
	case "ndjson", "jsonl", "json":
		rd = newNDJSONReader(counted)
	case "csv":
		var ignored []string
		rd, ignored, err = newCSVReader(counted)
		if len(ignored) > 0 {
			fmt.Fprintf(e.stderr, "geoevent import: ignoring column(s) %s (not fields of an event)\n", strings.Join(ignored, ", "))
		}
	case "geojson":
		rd, err = newGeoJSONReader(counted)
	default:
		return e.fail(badArg("--format %q: give ndjson, csv or geojson", f))
	}
	if err != nil {
		return e.fail(fmt.Errorf("%s: %w", name, err))
	}
	im := &importer{e: e, mode: "insert", batchMax: *batch}
	if *upsert {
		im.mode = "upsert"
	}
	if e.stderrTTY {
		im.progress = newProgress(e.stderr, counted, size)
	}
	start := time.Now()
	runErr := im.run(rd)
	im.progress.finish()
	return im.report(name, time.Since(start), runErr)
}

// formatFromName is the format a file's extension names ("" if none).
func formatFromName(name string) string {
	lower := strings.ToLower(name)
	for _, ext := range []struct{ suffix, format string }{
		{".ndjson", "ndjson"}, {".jsonl", "ndjson"}, {".csv", "csv"}, {".geojson", "geojson"}, {".json", "geojson"},
	} {
		if strings.HasSuffix(lower, ext.suffix) {
			return ext.format
		}
	}
	return ""
}

// run reads every row and sends them in batches; an error stops it (the
// input cannot be read, or the server cannot be reached).
func (im *importer) run(rd rowReader) error {
	var batch []row
	size := 0
	for {
		r, err := rd.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		r.seq, im.rows = im.rows, im.rows+1
		if r.err != nil {
			im.failed = append(im.failed, failure{seq: r.seq, Where: r.where, Error: r.err.Error()})
			continue
		}
		if len(batch) > 0 && (len(batch) == im.batchMax || size+len(r.ev) > maxBatchBytes) {
			if err := im.send(batch); err != nil {
				return err
			}
			batch, size = batch[:0], 0
		}
		batch = append(batch, r)
		size += len(r.ev) + 1
	}
	if len(batch) > 0 {
		return im.send(batch)
	}
	return nil
}

// eventIndex finds the event a request error names ("events[12].lat: ...").
var eventIndex = regexp.MustCompile(`^events\[(\d+)\]`)

// send inserts a batch: one request, all or nothing. The rows the server
// refuses are set aside with their codes and the rest are sent again as a
// new batch, so that every valid row is imported and nothing of a batch is
// half-written. An error is returned only when the import cannot go on.
func (im *importer) send(batch []row) error {
	rows := append([]row(nil), batch...)
	for len(rows) > 0 {
		events := make([]json.RawMessage, len(rows))
		for i, r := range rows {
			events[i] = r.ev
		}
		var ans insertAnswer
		_, err := im.e.api.retry("POST", "/events", map[string]any{"mode": im.mode, "events": events}, &ans)
		var ae *apiError
		switch {
		case err == nil && ans.Committed:
			im.imported += len(rows)
			im.progress.add(len(rows))
			return nil
		case err == nil:
			// Not committed: the events whose code is not 0 are the
			// reasons; the others are valid and go again.
			bad := map[int]bool{}
			for _, res := range ans.Results {
				if res.Code != 0 && res.Index >= 0 && res.Index < len(rows) && !bad[res.Index] {
					bad[res.Index] = true
					im.failed = append(im.failed, failure{seq: rows[res.Index].seq, Where: rows[res.Index].where, Code: res.Code, Error: eventFailure(res)})
				}
			}
			if len(bad) == 0 {
				return fmt.Errorf("the server did not commit a batch and named no event that failed: %+v", ans)
			}
			rows = without(rows, bad)
		case errors.As(err, &ae) && ae.status == http.StatusBadRequest && eventIndex.MatchString(ae.message):
			// The request was refused for one event's field (a wrong
			// type): that row fails, the rest go again.
			i, _ := strconv.Atoi(eventIndex.FindStringSubmatch(ae.message)[1])
			if i >= len(rows) {
				return err
			}
			// The row is named by its place in the file, not in the batch.
			own := *ae
			own.message = strings.TrimPrefix(eventIndex.ReplaceAllString(own.message, ""), ".")
			im.failed = append(im.failed, failure{seq: rows[i].seq, Where: rows[i].where, Code: ae.code, Error: own.Error()})
			rows = without(rows, map[int]bool{i: true})
		case errors.As(err, &ae) && ae.status != http.StatusServiceUnavailable:
			// The whole batch was refused (or timed out: then it may
			// have been written); its rows are reported, the import goes on.
			for _, r := range rows {
				im.failed = append(im.failed, failure{seq: r.seq, Where: r.where, Code: ae.code, Error: ae.Error()})
			}
			return nil
		default:
			return err
		}
	}
	return nil
}

// without is rows less the indexes in drop.
func without(rows []row, drop map[int]bool) []row {
	kept := rows[:0:0]
	for i, r := range rows {
		if !drop[i] {
			kept = append(kept, r)
		}
	}
	return kept
}

// report prints what was imported and which rows failed; the exit code
// is 0 when every row was imported.
func (im *importer) report(name string, took time.Duration, runErr error) int {
	e := im.e
	slices.SortStableFunc(im.failed, func(a, b failure) int { return a.seq - b.seq })
	if e.json {
		out := map[string]any{"imported": im.imported, "failed": im.failed}
		if im.failed == nil {
			out["failed"] = []failure{}
		}
		if runErr != nil {
			out["error"] = runErr.Error()
		}
		printJSON(e.stdout, out)
	} else {
		rate := ""
		if secs := took.Seconds(); secs > 0 && im.imported > 0 {
			rate = fmt.Sprintf(", %.0f events/s", float64(im.imported)/secs)
		}
		fmt.Fprintf(e.stdout, "imported %d %s from %s in %.1fs%s\n", im.imported, plural(im.imported, "event", "events"), name, took.Seconds(), rate)
		if n := len(im.failed); n > 0 {
			fmt.Fprintf(e.stdout, "%d %s not imported:\n", n, plural(n, "row", "rows"))
			const shown = 100
			for i, f := range im.failed {
				if i == shown {
					fmt.Fprintf(e.stdout, "  ... and %d more (--json lists them all)\n", n-shown)
					break
				}
				fmt.Fprintf(e.stdout, "  %s: %s\n", f.Where, f.Error)
			}
		}
	}
	if runErr != nil {
		return e.fail(fmt.Errorf("stopped: %w", runErr))
	}
	if len(im.failed) > 0 {
		return exitError
	}
	return exitOK
}

// countingReader counts the bytes read through it (for the progress).
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// progress draws a progress line on a terminal: events imported, rate,
// and with a known input size the share read and the time left.
type progress struct {
	w     io.Writer
	in    *countingReader
	size  int64 // -1: unknown
	start time.Time
	last  time.Time
	done  int
}

func newProgress(w io.Writer, in *countingReader, size int64) *progress {
	now := time.Now()
	return &progress{w: w, in: in, size: size, start: now, last: now}
}

// add counts n events imported, redrawing at most 5 times a second.
func (p *progress) add(n int) {
	if p == nil {
		return
	}
	p.done += n
	if now := time.Now(); now.Sub(p.last) >= 200*time.Millisecond {
		p.last = now
		p.draw(now)
	}
}

func (p *progress) draw(now time.Time) {
	secs := now.Sub(p.start).Seconds()
	rate := 0.0
	if secs > 0 {
		rate = float64(p.done) / secs
	}
	line := fmt.Sprintf("%d events, %.0f/s", p.done, rate)
	if p.size > 0 {
		frac := float64(p.in.n) / float64(p.size)
		if frac > 1 {
			frac = 1
		}
		const width = 30
		bar := strings.Repeat("#", int(frac*width)) + strings.Repeat(".", width-int(frac*width))
		eta := "?"
		if frac > 0 {
			eta = (time.Duration(secs*(1-frac)/frac) * time.Second).Round(time.Second).String()
		}
		line = fmt.Sprintf("[%s] %3.0f%%  %s  ETA %s", bar, frac*100, line, eta)
	}
	fmt.Fprintf(p.w, "\r%-78s", line)
}

// finish draws the last line and ends it.
func (p *progress) finish() {
	if p == nil {
		return
	}
	p.draw(time.Now())
	fmt.Fprintln(p.w)
}

// compactObject checks that b is one JSON object and returns it compacted.
func compactObject(b []byte) (json.RawMessage, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return nil, errors.New("not a JSON object")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return nil, fmt.Errorf("not valid JSON: %v", err)
	}
	return buf.Bytes(), nil
}
