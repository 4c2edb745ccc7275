package http

import "time"

// SetFeedKeepAlive sets the streams' keep-alive interval until the
// returned function restores it; no stream may be open meanwhile.
func SetFeedKeepAlive(d time.Duration) (restore func()) {
	old := feedKeepAlive
	feedKeepAlive = d
	return func() { feedKeepAlive = old }
}
