package client

import (
	"bufio"
	"context"
	"net"
	"time"

	"github.com/geoevent/geoevent/core"
)

// Conn is one connection of a session to a replica: it carries frames of
// the binary protocol, one exchange at a time. The client's own is a TCP
// connection; Options.Dial can supply another, such as an in-process one
// that hands frames to a replica in the same process (the HTTP gateway's).
// Whatever carries the frames, the session protocol above it is the same:
// register, request numbers, retries and deduplication.
type Conn interface {
	// Exchange sends the frame (h, payload) and returns the next frame
	// that arrives on the connection: the answer, which the session then
	// checks (its type, session and request number). The returned payload
	// needs to stay valid only until the next Exchange or Close. Exchange
	// must not modify payload, and must give up when ctx is done. Any
	// error means the connection is unusable: the session closes it and
	// opens another (the attempt is retried as after any connection
	// error). A *core.Error returned here is taken as a frame that could
	// not be trusted, not as the server's answer.
	Exchange(ctx context.Context, h core.Header, payload []byte) (core.Header, []byte, error)
	// Close closes the connection. An exchange in flight fails.
	Close() error
}

// tcpConn is the TCP connection of the client's default Dial.
type tcpConn struct {
	nc   net.Conn
	br   *bufio.Reader
	wbuf []byte
	rbuf []byte
	// broken is set when a cancelled context may have moved the
	// connection's deadline into the past after an exchange completed:
	// the session must not reuse the connection.
	broken bool
}

func dialTCP(ctx context.Context, addr string, timeout time.Duration) (*tcpConn, error) {
	d := net.Dialer{Timeout: timeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	return &tcpConn{nc: nc, br: bufio.NewReaderSize(nc, 64<<10)}, nil
}

// Exchange writes one frame and reads one, under ctx's deadline; cancelling
// ctx aborts a blocked read or write at once.
func (c *tcpConn) Exchange(ctx context.Context, h core.Header, payload []byte) (core.Header, []byte, error) {
	if dl, ok := ctx.Deadline(); ok {
		if err := c.nc.SetDeadline(dl); err != nil {
			return core.Header{}, nil, err
		}
	} else if err := c.nc.SetDeadline(time.Time{}); err != nil {
		return core.Header{}, nil, err
	}
	nc := c.nc
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	defer func() {
		if !stop() {
			// The deadline may have been moved into the past after the
			// exchange finished: do not reuse the connection.
			c.broken = true
		}
	}()
	c.wbuf = core.AppendFrame(c.wbuf[:0], h, payload)
	if _, err := nc.Write(c.wbuf); err != nil {
		return core.Header{}, nil, err
	}
	if c.rbuf == nil {
		c.rbuf = make([]byte, 64<<10)
	}
	return core.ReadFrame(c.br, c.rbuf)
}

func (c *tcpConn) Close() error { return c.nc.Close() }
