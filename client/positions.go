package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/geoevent/geoevent/core"
)

// PositionArea selects a position stream's events: those inside the box
// from Min (south-west) to Max (north-east), in nanodegrees (a Min.LonNano
// above Max.LonNano crosses the antimeridian), or, with Fence set,
// inside that fence's shape as it is when the stream opens; with Group
// set, only that group's.
type PositionArea struct {
	Min, Max core.Coordinate
	Fence    string
	Group    core.GroupFilter
}

// PositionEvent is one event of a position stream: an event applied
// inside the area (or an entity's first outside it after being shown
// inside), or, with Deleted, the deletion, erasure or expiry of an entity
// the stream showed (only Event.EntityID is set). Index is the log index
// of the entry that wrote it.
type PositionEvent struct {
	Index   uint64
	Event   core.GeoEvent
	Deleted bool
}

// PositionWatcher is an open position stream. It is not safe for
// concurrent use.
type PositionWatcher struct {
	body io.ReadCloser
	r    *bufio.Reader
}

// maxPositionLine bounds a line of the stream (an event's JSON is about
// 400 bytes).
const maxPositionLine = 64 << 10

// WatchPositions opens GET /feed/positions at baseURL, a replica's HTTP
// gateway (replica start --http): every event that replica applies in
// area, from now on, until ctx ends or Close. Positions are not durable
// and the stream does not resume: open another one (on any replica) after
// an error, and load the area with a bbox query first. hc nil is
// http.DefaultClient.
func WatchPositions(ctx context.Context, hc *http.Client, baseURL string, area PositionArea) (*PositionWatcher, error) {
	q := url.Values{}
	if area.Fence != "" {
		q.Set("fence", area.Fence)
	} else {
		q.Set("bbox", strings.Join([]string{degreesText(area.Min.LatNano), degreesText(area.Min.LonNano),
			degreesText(area.Max.LatNano), degreesText(area.Max.LonNano)}, ","))
	}
	if area.Group.Set {
		q.Set("group_id", strconv.FormatUint(area.Group.ID, 10))
	}
	req, err := http.NewRequestWithContext(ctx, "GET", strings.TrimRight(baseURL, "/")+"/feed/positions?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if hc == nil {
		hc = http.DefaultClient
	}
	res, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		defer res.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		return nil, httpError(res.StatusCode, b)
	}
	return &PositionWatcher{body: res.Body, r: bufio.NewReaderSize(res.Body, maxPositionLine)}, nil
}

// Next returns the stream's next event, waiting for one. It fails with
// the stream's error event (245 STREAM_FELL_BEHIND: the reader was too
// slow), io.EOF when the server ended the stream, or the connection's or
// the context's error.
func (w *PositionWatcher) Next() (PositionEvent, error) {
	var ev PositionEvent
	var kind string
	for {
		line, err := w.r.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				return ev, fmt.Errorf("position stream: a line longer than %d bytes", maxPositionLine)
			}
			return ev, err
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0:
			kind = ""
		case bytes.HasPrefix(line, []byte("id: ")):
			ev.Index, _ = strconv.ParseUint(string(line[4:]), 10, 64)
		case bytes.HasPrefix(line, []byte("event: ")):
			kind = string(line[7:])
		case bytes.HasPrefix(line, []byte("data: ")):
			data := line[6:]
			switch kind {
			case "position":
				e, err := decodeEventJSON(data)
				if err != nil {
					return ev, err
				}
				ev.Event = e
				return ev, nil
			case "delete":
				var d struct {
					EntityID string `json:"entity_id"`
				}
				if err := json.Unmarshal(data, &d); err != nil {
					return ev, fmt.Errorf("position stream: delete: %w", err)
				}
				id, err := core.ParseID(d.EntityID, true)
				if err != nil {
					return ev, fmt.Errorf("position stream: delete: %w", err)
				}
				ev.Event, ev.Deleted = core.GeoEvent{EntityID: id}, true
				return ev, nil
			case "error":
				return ev, httpError(0, data)
			}
		}
	}
}

// Close ends the stream.
func (w *PositionWatcher) Close() error { return w.body.Close() }

// degreesText writes nanodegrees as exact decimal degrees.
func degreesText(nano int64) string {
	sign := ""
	u := uint64(nano)
	if nano < 0 {
		sign, u = "-", uint64(-nano)
	}
	return fmt.Sprintf("%s%d.%09d", sign, u/1_000_000_000, u%1_000_000_000)
}

// httpError makes an error of a gateway's JSON error body (Form B:
// {"error": {code, message, details}}), or of the status and body when it
// is not one.
func httpError(status int, body []byte) error {
	var e struct {
		Error struct {
			Code    core.Code `json:"code"`
			Message string    `json:"message"`
			Details string    `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Code != 0 {
		info, ok := e.Error.Code.Info()
		if !ok || info.Name != e.Error.Message {
			info = core.CodeInfo{Code: e.Error.Code, Name: e.Error.Message, HTTPStatus: status}
		}
		return &core.Error{CodeInfo: info, Message: e.Error.Details}
	}
	return fmt.Errorf("position stream: HTTP %d: %.200s", status, body)
}

// decodeEventJSON decodes an event as the gateway renders it (Form B:
// 64-bit values above 2^53 as decimal strings).
func decodeEventJSON(b []byte) (core.GeoEvent, error) {
	var j struct {
		EntityID      string      `json:"entity_id"`
		CorrelationID string      `json:"correlation_id"`
		UserData      string      `json:"user_data"`
		TimestampNS   json.Number `json:"timestamp_ns"`
		LatNano       int64       `json:"lat_nano"`
		LonNano       int64       `json:"lon_nano"`
		GroupID       json.Number `json:"group_id"`
		AltitudeMM    int32       `json:"altitude_mm"`
		VelocityMMS   uint32      `json:"velocity_mms"`
		TTLSeconds    uint32      `json:"ttl_seconds"`
		AccuracyMM    uint32      `json:"accuracy_mm"`
		HeadingCdeg   uint16      `json:"heading_cdeg"`
		Flags         uint16      `json:"flags"`
	}
	var ev core.GeoEvent
	if err := json.Unmarshal(b, &j); err != nil {
		return ev, fmt.Errorf("position stream: event: %w", err)
	}
	var err error
	if ev.EntityID, err = core.ParseID(j.EntityID, true); err != nil {
		return ev, fmt.Errorf("position stream: entity_id: %w", err)
	}
	if ev.CorrelationID, err = core.ParseID(j.CorrelationID, true); err != nil {
		return ev, fmt.Errorf("position stream: correlation_id: %w", err)
	}
	if ev.UserData, err = core.ParseID(j.UserData, true); err != nil {
		return ev, fmt.Errorf("position stream: user_data: %w", err)
	}
	if ev.TimestampNS, err = strconv.ParseUint(string(j.TimestampNS), 10, 64); err != nil {
		return ev, fmt.Errorf("position stream: timestamp_ns: %w", err)
	}
	if ev.GroupID, err = strconv.ParseUint(string(j.GroupID), 10, 64); err != nil {
		return ev, fmt.Errorf("position stream: group_id: %w", err)
	}
	ev.LatNano, ev.LonNano, ev.AltitudeMM, ev.VelocityMMS = j.LatNano, j.LonNano, j.AltitudeMM, j.VelocityMMS
	ev.TTLSeconds, ev.AccuracyMM, ev.HeadingCdeg, ev.Flags = j.TTLSeconds, j.AccuracyMM, j.HeadingCdeg, j.Flags
	return ev, nil
}
