package client

import (
	"context"

	"github.com/geoevent/geoevent/core"
)

// Conn is one connection of a session to a replica: it carries frames of
// the binary protocol, one exchange at a time. The client's own is a stream
// over the TCP connection it shares among its sessions (see muxConn);
// Options.Dial can supply another, such as an in-process one that hands
// frames to a replica in the same process (the HTTP gateway's).
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
