package http

import "testing"

// FuzzFastRequestParse: the fast path's request parser never panics, and
// what it accepts is a request line with a clean origin-form target, one
// Host and a Content-Length of digits.
func FuzzFastRequestParse(f *testing.F) {
	f.Add([]byte("GET /entity/x?form=a HTTP/1.1\r\nHost: x\r\n\r\n"))
	f.Add([]byte("POST /events HTTP/1.1\r\nHost: x\r\nContent-Length: 12\r\nConnection: close\r\n\r\n"))
	f.Add([]byte("GET /a/../b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"))
	f.Fuzz(func(t *testing.T, head []byte) {
		var q fastRequest
		if !q.parse(head) {
			return
		}
		if q.path == "" || q.path[0] != '/' || q.contentLength < 0 || q.method == "" {
			t.Fatalf("%q accepted as %+v", head, q)
		}
		if !cleanTarget([]byte(q.target)) {
			t.Fatalf("%q: target %q is not clean", head, q.target)
		}
	})
}
