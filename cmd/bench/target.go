package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/geoevent/geoevent/client"
	"github.com/geoevent/geoevent/core"
)

// target is what the bench drives: the binary protocol through the Go
// client, or the HTTP JSON API (Form B).
type target interface {
	write(ctx context.Context, evs []core.GeoEvent, upsert bool) error
	radius(ctx context.Context, q *core.RadiusQuery) (results int, err error)
	latest(ctx context.Context, id core.Uint128) error
	close()
}

type binaryTarget struct{ c *client.Client }

func (b binaryTarget) write(ctx context.Context, evs []core.GeoEvent, upsert bool) error {
	var rep *core.InsertReply
	var err error
	if upsert {
		rep, err = b.c.Upsert(ctx, evs)
	} else {
		rep, err = b.c.Insert(ctx, evs)
	}
	if err == nil && !rep.Committed {
		err = errors.New("batch not committed")
	}
	return err
}

func (b binaryTarget) radius(ctx context.Context, q *core.RadiusQuery) (int, error) {
	res, err := b.c.QueryRadius(ctx, q)
	if err != nil {
		return 0, err
	}
	return len(res.Events), nil
}

func (b binaryTarget) latest(ctx context.Context, id core.Uint128) error {
	_, err := b.c.GetLatest(ctx, id)
	return err
}

func (b binaryTarget) close() { b.c.Close() }

// httpTarget speaks Form B JSON to one gateway with keep-alive connections.
type httpTarget struct {
	base string
	hc   *http.Client
}

func newHTTPTarget(base string, conns int) httpTarget {
	tr := &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns, IdleConnTimeout: time.Minute}
	return httpTarget{base: base, hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

func (h httpTarget) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, h.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: HTTP %d: %.200s", method, path, resp.StatusCode, b)
	}
	return b, nil
}

func (h httpTarget) write(ctx context.Context, evs []core.GeoEvent, upsert bool) error {
	b := make([]byte, 0, 96*len(evs)+32)
	b = append(b, `{"mode":"`...)
	if upsert {
		b = append(b, "upsert"...)
	} else {
		b = append(b, "insert"...)
	}
	b = append(b, `","events":[`...)
	for i := range evs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"entity_id":"`...)
		b = append(b, evs[i].EntityID.String()...)
		b = append(b, `","lat_nano":`...)
		b = strconv.AppendInt(b, evs[i].LatNano, 10)
		b = append(b, `,"lon_nano":`...)
		b = strconv.AppendInt(b, evs[i].LonNano, 10)
		b = append(b, '}')
	}
	b = append(b, "]}"...)
	resp, err := h.do(ctx, http.MethodPost, "/events", b)
	if err == nil && !bytes.Contains(resp, []byte(`"committed":true`)) {
		err = errors.New("batch not committed")
	}
	return err
}

func (h httpTarget) radius(ctx context.Context, q *core.RadiusQuery) (int, error) {
	body := fmt.Sprintf(`{"center_lat_nano":%d,"center_lon_nano":%d,"radius_mm":%d}`, q.Center.LatNano, q.Center.LonNano, q.RadiusMM)
	resp, err := h.do(ctx, http.MethodPost, "/query/radius", []byte(body))
	if err != nil {
		return 0, err
	}
	var r struct{ Events []json.RawMessage }
	if err := json.Unmarshal(resp, &r); err != nil {
		return 0, err
	}
	return len(r.Events), nil
}

func (h httpTarget) latest(ctx context.Context, id core.Uint128) error {
	_, err := h.do(ctx, http.MethodGet, "/entity/"+id.String(), nil)
	return err
}

func (h httpTarget) close() { h.hc.CloseIdleConnections() }
