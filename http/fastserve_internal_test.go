package http

import (
	"bytes"
	"testing"
)

// FuzzFastRequestParse: the fast path's request parser never panics; what
// it serves is a request line with a clean origin-form target, one Host, a
// Content-Length of digits and no Transfer-Encoding; what it refuses frames
// a body two ways.
func FuzzFastRequestParse(f *testing.F) {
	f.Add([]byte("GET /entity/x?form=a HTTP/1.1\r\nHost: x\r\n\r\n"))
	f.Add([]byte("POST /events HTTP/1.1\r\nHost: x\r\nContent-Length: 12\r\nConnection: close\r\n\r\n"))
	f.Add([]byte("GET /a/../b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"))
	f.Add([]byte("POST /events HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"))
	f.Add([]byte("POST /events HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\n"))
	f.Add([]byte("POST /events HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"))
	f.Add([]byte("OPTIONS /events HTTP/1.1\r\nHost: x\r\nOrigin: http://a\r\nAccess-Control-Request-Method: POST\r\n\r\n"))
	f.Add([]byte("POST /events HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\n"))
	f.Fuzz(func(t *testing.T, head []byte) {
		var q fastRequest
		lower := bytes.ToLower(head)
		switch q.parse(head) {
		case parseHandOver:
			return
		case parseReject:
			if !bytes.Contains(lower, []byte("transfer-encoding")) && bytes.Count(lower, []byte("content-length")) < 2 || q.reject == "" {
				t.Fatalf("%q refused (%q) though it frames no body two ways", head, q.reject)
			}
			return
		}
		if bytes.Contains(lower, []byte("\ntransfer-encoding")) {
			t.Fatalf("%q: served with a Transfer-Encoding", head)
		}
		if q.path == "" || q.path[0] != '/' || q.contentLength < 0 || q.method == "" {
			t.Fatalf("%q accepted as %+v", head, q)
		}
		if !cleanTarget([]byte(q.target)) {
			t.Fatalf("%q: target %q is not clean", head, q.target)
		}
	})
}
