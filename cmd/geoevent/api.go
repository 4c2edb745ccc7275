package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// api is a client of the HTTP JSON API.
type api struct {
	base string // scheme://host[:port][/prefix], without a trailing slash
	hc   *http.Client
}

func newAPI(raw string, timeout time.Duration) (*api, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("%q is not an http:// or https:// URL with a host (e.g. %s)", raw, defaultURL)
	}
	return &api{base: strings.TrimRight(raw, "/"), hc: &http.Client{Timeout: timeout}}, nil
}

// apiError is an error answer of the server: its HTTP status and the
// code, name and message of its body (either form).
type apiError struct {
	status  int
	code    int
	name    string
	message string
}

func (e *apiError) Error() string {
	s := fmt.Sprintf("%d %s: %s", e.code, e.name, e.message)
	if e.retryable() {
		s += " (retryable: the same request may succeed in a moment)"
	}
	return s
}

// retryable reports whether the server may accept the same request again:
// its status is 503 (refused before anything was written, or a leader
// being elected) or 504 (a timeout: it may have been written).
func (e *apiError) retryable() bool {
	return e.status == http.StatusServiceUnavailable || e.status == http.StatusGatewayTimeout
}

// do sends a request (body nil: none) and decodes a 200 answer into out
// (nil: not decoded); raw is the answer's bytes. A non-200 answer is an
// *apiError.
func (a *api) do(method, path string, body any, out any) (raw []byte, err error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, a.base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the server: %w (is it running? --url or GEOEVENT_URL names it)", err)
	}
	defer resp.Body.Close()
	raw, err = io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return raw, decodeError(resp.StatusCode, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return raw, fmt.Errorf("the server's answer is not what this command expects (%v): %.200s", err, raw)
		}
	}
	return raw, nil
}

// decodeError reads an error body of either form: Form A's {error_code,
// error_name, message}, Form B's {"error": {code, message (the name),
// details}}.
func decodeError(status int, raw []byte) *apiError {
	var b struct {
		Code    *int   `json:"error_code"`
		Name    string `json:"error_name"`
		Message string `json:"message"`
		Error   *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Details string `json:"details"`
		} `json:"error"`
	}
	e := &apiError{status: status}
	switch err := json.Unmarshal(raw, &b); {
	case err == nil && b.Code != nil:
		e.code, e.name, e.message = *b.Code, b.Name, b.Message
	case err == nil && b.Error != nil:
		e.code, e.name, e.message = b.Error.Code, b.Error.Message, b.Error.Details
	default:
		e.name, e.message = http.StatusText(status), fmt.Sprintf("HTTP %d: %.200s", status, bytes.TrimSpace(raw))
	}
	return e
}

// retry sends a request again while the server answers 503 (it refused
// before writing: busy, or electing a leader), up to about 5 s.
func (a *api) retry(method, path string, body, out any) (raw []byte, err error) {
	wait := 100 * time.Millisecond
	for try := 0; ; try++ {
		raw, err = a.do(method, path, body, out)
		var ae *apiError
		if !errors.As(err, &ae) || ae.status != http.StatusServiceUnavailable || try == 6 {
			return raw, err
		}
		time.Sleep(wait)
		wait *= 2
	}
}

// number is an integer field of an answer: a JSON number or a decimal
// string (the API renders values above 2^53-1 as strings).
type number string

func (n *number) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "null" {
		s = ""
	}
	*n = number(s)
	return nil
}

func (n number) int64() int64 {
	v, _ := strconv.ParseInt(string(n), 10, 64)
	return v
}

// event is an event of a Form A answer (degrees).
type event struct {
	EntityID      string   `json:"entity_id"`
	CorrelationID string   `json:"correlation_id"`
	UserData      string   `json:"user_data"`
	TimestampNS   number   `json:"timestamp_ns"`
	Lat           float64  `json:"lat"`
	Lon           float64  `json:"lon"`
	GroupID       number   `json:"group_id"`
	AltitudeMM    number   `json:"altitude_mm"`
	VelocityMMS   number   `json:"velocity_mms"`
	TTLSeconds    number   `json:"ttl_seconds"`
	AccuracyMM    number   `json:"accuracy_mm"`
	HeadingCdeg   number   `json:"heading_cdeg"`
	Flags         number   `json:"flags"`
	DistanceMM    *number  `json:"distance_mm"`
	Raw           rawEvent `json:"-"`
}

// rawEvent is an event's JSON as the server sent it (for --json).
type rawEvent = json.RawMessage

// page is a page of a paged answer.
type page struct {
	Events  []json.RawMessage `json:"events"`
	HasMore bool              `json:"has_more"`
	Cursor  *string           `json:"cursor"`
}

// decodeEvents decodes a page's events (nulls stay nil).
func decodeEvents(raws []json.RawMessage) ([]*event, error) {
	out := make([]*event, len(raws))
	for i, r := range raws {
		if string(r) == "null" {
			continue
		}
		ev := &event{Raw: r}
		if err := json.Unmarshal(r, ev); err != nil {
			return nil, fmt.Errorf("the server's event is not what this command expects (%v): %.200s", err, r)
		}
		out[i] = ev
	}
	return out, nil
}

// pages runs a paged POST query: body is sent with "limit" and "cursor"
// set for each page, until max events (0: all) or the last page.
func (a *api) pages(path string, body map[string]any, max int) (*page, error) {
	return collect(max, a.postPages(path, body))
}

// postPages fetches the pages of a POST query whose body is body.
func (a *api) postPages(path string, body map[string]any) func(limit int, cursor *string) (page, error) {
	return func(limit int, cursor *string) (p page, err error) {
		body["limit"] = limit
		if cursor != nil {
			body["cursor"] = *cursor
		}
		_, err = a.retry("POST", path, body, &p)
		return p, err
	}
}

// collect fetches pages (each of at most limit events, after cursor; nil:
// the first) until max events (0: all) or the last page. The merged
// answer has every event and the last page's has_more and cursor.
func collect(max int, fetch func(limit int, cursor *string) (page, error)) (*page, error) {
	all := &page{Events: []json.RawMessage{}}
	err := stream(max, fetch, func(p *page) error {
		all.Events = append(all.Events, p.Events...)
		all.HasMore, all.Cursor = p.HasMore, p.Cursor
		return nil
	})
	if err != nil {
		return nil, err
	}
	return all, nil
}

// stream fetches pages as collect does and hands each to each.
func stream(max int, fetch func(limit int, cursor *string) (page, error), each func(*page) error) error {
	var cursor *string
	for n := 0; ; {
		limit := 1000
		if max > 0 && max-n < limit {
			limit = max - n
		}
		p, err := fetch(limit, cursor)
		if err != nil {
			return err
		}
		n += len(p.Events)
		if err := each(&p); err != nil {
			return err
		}
		if !p.HasMore || p.Cursor == nil || (max > 0 && n >= max) {
			return nil
		}
		cursor = p.Cursor
	}
}

// parseTime reads a time: RFC 3339, or nanoseconds since the Unix epoch.
func parseTime(s string) (int64, error) {
	if ns, err := strconv.ParseInt(s, 10, 64); err == nil {
		return ns, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, badArg("%q is neither an RFC 3339 time (2026-11-28T10:00:00Z) nor nanoseconds since the epoch", s)
	}
	return t.UnixNano(), nil
}

// formatTime renders nanoseconds since the epoch as RFC 3339 in UTC.
func formatTime(ns int64) string {
	if ns == 0 {
		return "-"
	}
	return time.Unix(0, ns).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// parseCoord reads a latitude or longitude in degrees.
func parseCoord(what, s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, badArg("%s %q is not a number of degrees", what, s)
	}
	return v, nil
}
