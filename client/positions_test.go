package client

import (
	"bufio"
	"bytes"
	"io"
	"testing"
)

// FuzzPositionStream: whatever a server sends, reading a position stream
// ends in an error (io.EOF at the end) and never panics; the seeds'
// events decode.
func FuzzPositionStream(f *testing.F) {
	ok := "id: 7\nevent: position\ndata: {\"id\":\"x\",\"entity_id\":\"0f58b13b-f4ae-48e5-8494-2db23afb6d19\",\"correlation_id\":\"00000000-0000-0000-0000-000000000000\",\"user_data\":\"00000000-0000-0000-0000-000000000000\",\"timestamp_ns\":\"1795838340283599195\",\"lat_nano\":500000000,\"lon_nano\":-2500000000,\"group_id\":\"18446744073709551615\",\"altitude_mm\":-3,\"velocity_mms\":0,\"ttl_seconds\":0,\"accuracy_mm\":0,\"heading_cdeg\":0,\"flags\":1}\n\n" +
		": keep-alive\n\nid: 8\nevent: delete\ndata: {\"entity_id\":\"0f58b13b-f4ae-48e5-8494-2db23afb6d19\"}\n\n"
	f.Add(ok)
	f.Add("event: error\ndata: {\"error\":{\"code\":245,\"message\":\"STREAM_FELL_BEHIND\",\"details\":\"slow\"}}\n\n")
	f.Add("event: position\ndata: {\"entity_id\":5}\n\n")
	f.Add("event: delete\ndata: {}\n\n")
	f.Fuzz(func(t *testing.T, s string) {
		w := &PositionWatcher{body: io.NopCloser(bytes.NewReader([]byte(s))), r: bufio.NewReaderSize(bytes.NewReader([]byte(s)), 64)}
		for range 1000 {
			if _, err := w.Next(); err != nil {
				return
			}
		}
	})
	w := &PositionWatcher{r: bufio.NewReader(bytes.NewReader([]byte(ok)))}
	ev, err := w.Next()
	if err != nil || ev.Index != 7 || ev.Event.LonNano != -2_500_000_000 || ev.Event.GroupID != 1<<64-1 || ev.Event.Flags != 1 {
		f.Fatalf("%+v %v", ev, err)
	}
	if ev, err := w.Next(); err != nil || !ev.Deleted || ev.Index != 8 {
		f.Fatalf("%+v %v", ev, err)
	}
	if _, err := w.Next(); err != io.EOF {
		f.Fatalf("end: %v", err)
	}
	if s := degreesText(-1_500_000_001); s != "-1.500000001" {
		f.Fatal(s)
	}
}
