package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
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
	latestBatch(ctx context.Context, ids []core.Uint128) (found int, err error)
	ping(ctx context.Context) error
	close()
}

type binaryTarget struct {
	c    *client.Client
	acks *ackLog // with --subscribers: when each batch was acknowledged (subscribers.go)
}

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
	if err == nil && b.acks != nil {
		b.acks.add(rep.Results)
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

func (b binaryTarget) ping(ctx context.Context) error {
	_, err := b.c.Ping(ctx)
	return err
}

func (b binaryTarget) latestBatch(ctx context.Context, ids []core.Uint128) (int, error) {
	res, err := b.c.GetLatestBatch(ctx, ids)
	found := 0
	for _, r := range res {
		if r.Found {
			found++
		}
	}
	return found, err
}

func (b binaryTarget) close() { b.c.Close() }

// historyTarget is a target that reads an entity's history (the binary
// protocol's only: --op history).
type historyTarget interface {
	// history reads one page of up to 1,000 of id's events: those of the
	// span before its latest, or from its first with span 0.
	history(ctx context.Context, id core.Uint128, span time.Duration) (events int, err error)
}

func (b binaryTarget) history(ctx context.Context, id core.Uint128, span time.Duration) (int, error) {
	q := core.HistoryQuery{EntityID: id, Page: core.Page{Limit: historyPage}}
	if span > 0 {
		l, err := b.c.GetLatest(ctx, id)
		if err != nil || !l.Found {
			return 0, err
		}
		q.SinceNS = l.Event.TimestampNS - min(l.Event.TimestampNS, uint64(span))
	}
	res, err := b.c.History(ctx, &q)
	if err != nil {
		return 0, err
	}
	return len(res.Events), nil
}

// httpTarget speaks Form B JSON to one gateway over keep-alive
// connections, with net/http's client or with rawHTTP.
type httpTarget struct {
	base string
	// do sends one request and calls f with the 200 answer's body (valid
	// only during f); any other status is an error.
	do   func(ctx context.Context, method, path string, body []byte, f func(resp []byte) error) error
	stop func()
}

func (h httpTarget) close() { h.stop() }

func newHTTPTarget(base string, conns int, client string) (httpTarget, error) {
	switch client {
	case "std":
		tr := &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns, IdleConnTimeout: time.Minute}
		s := &stdHTTP{base: base, hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
		return httpTarget{base: base, do: s.do, stop: s.hc.CloseIdleConnections}, nil
	case "raw":
		r, err := newRawHTTP(base, conns)
		if err != nil {
			return httpTarget{}, err
		}
		return httpTarget{base: base, do: r.do, stop: r.close}, nil
	}
	return httpTarget{}, fmt.Errorf("--http-client: %q is neither raw nor std", client)
}

type stdHTTP struct {
	base string
	hc   *http.Client
}

func (h *stdHTTP) do(ctx context.Context, method, path string, body []byte, f func([]byte) error) error {
	req, err := http.NewRequestWithContext(ctx, method, h.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: HTTP %d: %.200s", method, path, resp.StatusCode, b)
	}
	return f(b)
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
	return h.do(ctx, http.MethodPost, "/events", b, func(resp []byte) error {
		if !bytes.Contains(resp, []byte(`"committed":true`)) {
			return errors.New("batch not committed")
		}
		return nil
	})
}

// eventStart begins every event object the gateway renders: counting it is
// how the bench counts results without decoding the JSON (which would cost
// the load generator more than the gateway spends rendering it).
var eventStart = []byte(`{"id":"`)

func (h httpTarget) radius(ctx context.Context, q *core.RadiusQuery) (int, error) {
	body := fmt.Sprintf(`{"center_lat_nano":%d,"center_lon_nano":%d,"radius_mm":%d}`, q.Center.LatNano, q.Center.LonNano, q.RadiusMM)
	n := 0
	err := h.do(ctx, http.MethodPost, "/query/radius", []byte(body), func(resp []byte) error {
		if !bytes.HasPrefix(resp, []byte(`{"events":[`)) {
			return fmt.Errorf("/query/radius: unexpected answer %.200s", resp)
		}
		n = bytes.Count(resp, eventStart)
		return nil
	})
	return n, err
}

func (h httpTarget) latest(ctx context.Context, id core.Uint128) error {
	return h.do(ctx, http.MethodGet, "/entity/"+id.String(), nil, func([]byte) error { return nil })
}

func (h httpTarget) ping(ctx context.Context) error {
	return h.do(ctx, http.MethodGet, "/ping", nil, func([]byte) error { return nil })
}

func (h httpTarget) latestBatch(ctx context.Context, ids []core.Uint128) (int, error) {
	b := make([]byte, 0, 40*len(ids)+20)
	b = append(b, `{"entity_ids":[`...)
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, id.String()...)
		b = append(b, '"')
	}
	b = append(b, "]}"...)
	n := 0
	err := h.do(ctx, http.MethodPost, "/entities/batch", b, func(resp []byte) error {
		if !bytes.HasPrefix(resp, []byte(`{"events":[`)) {
			return fmt.Errorf("/entities/batch: unexpected answer %.200s", resp)
		}
		n = bytes.Count(resp, eventStart)
		return nil
	})
	return n, err
}

// rawHTTP is a minimal HTTP/1.1 client for the bench: a pool of keep-alive
// connections to one host, each carrying one request at a time, requests
// written with one write and answers read with Content-Length (what the
// gateway always sends). It spends a fraction of net/http's client CPU per
// request, which matters when the bench shares the machine's cores with the
// server it measures.
type rawHTTP struct {
	addr, host string
	pool       chan *rawConn // nil entries: dial on use
}

type rawConn struct {
	nc   net.Conn
	br   *bufio.Reader
	wbuf []byte
	body []byte
}

func newRawHTTP(base string, conns int) (*rawHTTP, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("--http: want http://HOST:PORT, not %q", base)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	r := &rawHTTP{addr: addr, host: u.Host, pool: make(chan *rawConn, conns)}
	for range conns {
		r.pool <- nil
	}
	return r, nil
}

func (r *rawHTTP) close() {
	for range cap(r.pool) {
		if c := <-r.pool; c != nil {
			c.nc.Close()
		}
	}
}

func (r *rawHTTP) do(ctx context.Context, method, path string, body []byte, f func([]byte) error) (err error) {
	var c *rawConn
	select {
	case c = <-r.pool:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() {
		if err != nil && c != nil && !errors.As(err, new(*statusError)) {
			c.nc.Close() // the connection's state is unknown
			c = nil
		}
		r.pool <- c
	}()
	if c == nil {
		d := net.Dialer{Timeout: 5 * time.Second}
		nc, err := d.DialContext(ctx, "tcp", r.addr)
		if err != nil {
			return err
		}
		c = &rawConn{nc: nc, br: bufio.NewReaderSize(nc, 64<<10)}
	}
	if err := c.nc.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		return err
	}
	w := append(c.wbuf[:0], method...)
	w = append(w, ' ')
	w = append(w, path...)
	w = append(w, " HTTP/1.1\r\nHost: "...)
	w = append(w, r.host...)
	w = append(w, "\r\n"...)
	if body != nil {
		w = append(w, "Content-Type: application/json\r\nContent-Length: "...)
		w = strconv.AppendInt(w, int64(len(body)), 10)
		w = append(w, "\r\n"...)
	}
	w = append(w, "\r\n"...)
	w = append(w, body...)
	c.wbuf = w
	if _, err := c.nc.Write(w); err != nil {
		return err
	}
	status, err := c.readResponse()
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if status != http.StatusOK {
		return &statusError{fmt.Sprintf("%s %s: HTTP %d: %.200s", method, path, status, c.body)}
	}
	return f(c.body)
}

// statusError is an answer other than 200: the connection stays usable.
type statusError struct{ msg string }

func (e *statusError) Error() string { return e.msg }

// readResponse reads one answer into c.body and returns its status.
func (c *rawConn) readResponse() (int, error) {
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	// HTTP/1.1 200 OK
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return 0, fmt.Errorf("bad status line %q", line)
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, fmt.Errorf("bad status line %q", line)
	}
	length := -1
	for {
		line, err := c.br.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return 0, fmt.Errorf("bad header line %q", line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil || length < 0 {
				return 0, fmt.Errorf("bad Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return 0, fmt.Errorf("Transfer-Encoding %q is not supported (the gateway sends Content-Length)", value)
		}
	}
	if length < 0 {
		return 0, errors.New("an answer without Content-Length")
	}
	if cap(c.body) < length {
		c.body = make([]byte, length)
	}
	c.body = c.body[:length]
	if _, err := io.ReadFull(c.br, c.body); err != nil {
		return 0, err
	}
	return status, nil
}

// historyPage is the events a --op history page asks for.
const historyPage = 1_000
