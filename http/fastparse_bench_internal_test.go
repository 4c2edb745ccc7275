package http

import "testing"

// The fast path's request head parser on the heads cmd/bench and a browser
// send.

func benchParseHead(b *testing.B, head string) {
	h := []byte(head)
	b.SetBytes(int64(len(h)))
	b.ReportAllocs()
	for b.Loop() {
		q := fastRequest{host: "127.0.0.1:8080"}
		_ = q.parse(h)
	}
}

func BenchmarkParseHeadGet(b *testing.B) {
	benchParseHead(b, "GET /entity/00000000-0000-0001-0000-0000000135b4 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: Go-http-client/1.1\r\nAccept-Encoding: gzip\r\n\r\n")
}

func BenchmarkParseHeadPost(b *testing.B) {
	benchParseHead(b, "POST /query/radius HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Type: application/json\r\nContent-Length: 81\r\n\r\n")
}

func BenchmarkParseHeadBrowser(b *testing.B) {
	benchParseHead(b, "POST /query/radius HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nConnection: keep-alive\r\nContent-Length: 81\r\n"+
		"sec-ch-ua-platform: \"Linux\"\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36\r\n"+
		"Accept: */*\r\nContent-Type: application/json\r\nOrigin: http://localhost:3000\r\nSec-Fetch-Site: same-site\r\nSec-Fetch-Mode: cors\r\n"+
		"Referer: http://localhost:3000/\r\nAccept-Encoding: gzip, deflate, br, zstd\r\nAccept-Language: en-US,en;q=0.9\r\n\r\n")
}
