package io

import (
	"bufio"
	"bytes"
	"errors"
	stdio "io"
	"testing"

	"github.com/geoevent/geoevent/core"
)

// chunkedReader returns data in pieces whose sizes come from sizes (1 to
// 256 bytes each, cycling), as a socket may split a stream.
type chunkedReader struct {
	data  []byte
	sizes []byte
	k     int
}

func (r *chunkedReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, stdio.EOF
	}
	n := len(r.data)
	if len(r.sizes) > 0 {
		n = min(n, 1+int(r.sizes[r.k%len(r.sizes)]))
		r.k++
	}
	n = copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

type readFrame struct {
	h       core.Header
	payload string
}

// readClientFrame reads one frame as a client connection's reader does:
// a replica-to-replica frame is an error.
func readClientFrame(br *bufio.Reader, buf []byte) (readFrame, error) {
	h, p, err := core.ReadFrame(br, buf)
	if err == nil && h.Type.Replica() {
		err = errors.New("a replica frame")
	}
	return readFrame{h, string(p)}, err
}

// FuzzReadBuffered: a connection's reader, which hands the loop each frame
// it reads together with the complete frames buffered behind it
// (Server.readBuffered), gets the same frames in the same order as reading
// them one at a time, and stops at the same frame (a bad one, or the
// stream's end), however the stream is split into reads.
func FuzzReadBuffered(f *testing.F) {
	frame := func(t core.MessageType, payload []byte) []byte {
		return core.AppendFrame(nil, core.Header{ClientID: 7, Request: 9, Type: t}, payload)
	}
	var stream []byte
	for _, size := range []int{0, 1, 100, 400, 3, 2000, 2000} {
		stream = append(stream, frame(core.MsgRequest, bytes.Repeat([]byte{byte(size)}, size))...)
	}
	f.Add(stream, []byte{})
	f.Add(stream, []byte{0, 3, 255, 17})
	bad := bytes.Clone(stream)
	bad[len(bad)-1] ^= 1 // the last frame's checksum
	f.Add(bad, []byte{200})
	f.Add(append(frame(core.MsgRequest, []byte("a")), frame(core.MsgReplicaFirst, []byte("b"))...), []byte{})
	f.Add(append(frame(core.MsgRequest, []byte("a")), 0, 0, 0, 0), []byte{})
	f.Add(append(frame(core.MsgRequest, []byte("a")), 0xff, 0xff, 0xff, 0xff), []byte{1})
	f.Add(stream[:len(stream)-5], []byte{9, 9})

	s := &Server{disk: &disk{}} // a follower's: prepares nothing
	br := bufio.NewReaderSize(nil, readBufferSize)
	buf := make([]byte, initialFrameBuffer)
	room := make([]byte, 0, 4096) // batches of a few frames, so that small streams fill them
	f.Fuzz(func(t *testing.T, stream, sizes []byte) {
		// One at a time, as the reader did before batching.
		var want []readFrame
		br.Reset(&chunkedReader{data: stream})
		var wantErr error
		for wantErr == nil {
			var fr readFrame
			if fr, wantErr = readClientFrame(br, nil); wantErr == nil {
				want = append(want, fr)
			}
		}

		// As the reader does: a frame, then those buffered behind it.
		var got []readFrame
		br.Reset(&chunkedReader{data: stream, sizes: sizes})
		var gotErr error
		for gotErr == nil {
			var fr readFrame
			if fr, gotErr = readClientFrame(br, buf); gotErr != nil {
				break
			}
			got = append(got, fr)
			var more []netFrame
			more, _, gotErr = s.readBuffered(br, evFrame, 0, nil, room[:0])
			for _, m := range more {
				if m.prepared != nil {
					t.Fatal("a follower's reader prepared a frame")
				}
				got = append(got, readFrame{m.h, string(m.payload)})
			}
		}

		if len(got) != len(want) {
			t.Fatalf("%d frames read with batching, %d one at a time (errors %v, %v)", len(got), len(want), gotErr, wantErr)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("frame %d: %+v with batching, %+v one at a time", i, got[i].h, want[i].h)
			}
		}
		if (gotErr == stdio.EOF) != (wantErr == stdio.EOF) {
			t.Fatalf("the stream ended with %v with batching, %v one at a time", gotErr, wantErr)
		}
	})
}
