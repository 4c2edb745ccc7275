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

// FuzzFrameReader: a connection's reader (frameReader, scan, detach,
// compact, as Server.read drives them), which hands the loop all the
// complete frames its buffer holds at once, gets the same frames in the
// same order as reading them one at a time with core.ReadFrame, and stops
// in the same way (a bad frame, the stream's end between frames or inside
// one), however the stream is split into reads. With a tight budget the
// reader may instead stop on a frame longer than a chunk that the budget
// cannot grow a buffer for (errBudget), after the frames before it. The
// frames handed over stay intact until the loop (here: later, readAhead
// events behind) is done with them, and every byte taken from the budget
// is given back.
func FuzzFrameReader(f *testing.F) {
	frame := func(t core.MessageType, payload []byte) []byte {
		return core.AppendFrame(nil, core.Header{ClientID: 7, Request: 9, Type: t}, payload)
	}
	var stream []byte
	for _, size := range []int{0, 1, 100, 400, 3, 2000, 2000} {
		stream = append(stream, frame(core.MsgRequest, bytes.Repeat([]byte{byte(size)}, size))...)
	}
	f.Add(stream, []byte{}, false)
	f.Add(stream, []byte{0, 3, 255, 17}, true)
	bad := bytes.Clone(stream)
	bad[len(bad)-1] ^= 1 // the last frame's checksum
	f.Add(bad, []byte{200}, false)
	f.Add(append(frame(core.MsgRequest, []byte("a")), frame(core.MsgReplicaFirst, []byte("b"))...), []byte{}, false)
	f.Add(append(frame(core.MsgRequest, []byte("a")), 0, 0, 0, 0), []byte{}, false)
	f.Add(append(frame(core.MsgRequest, []byte("a")), 0xff, 0xff, 0xff, 0xff), []byte{1}, false)
	f.Add(stream[:len(stream)-5], []byte{9, 9}, false)
	var small []byte
	for i := range 50 {
		small = append(small, frame(core.MsgRequest, bytes.Repeat([]byte{byte(i)}, 80+i))...)
	}
	f.Add(small, []byte{150, 140, 255, 10}, true)

	f.Fuzz(checkFrameReader)
}

// TestFrameReaderGrowsBuffers is FuzzFrameReader's check on frames longer
// than a chunk, among short ones, for which the reader grows buffers (the
// fuzzer slows to a crawl on inputs this long, so they are no seeds).
func TestFrameReaderGrowsBuffers(t *testing.T) {
	var long []byte
	for _, size := range []int{100, readChunk + 1000, 10, 3*readChunk + 7, 5, readChunk - 24, readChunk} {
		long = core.AppendFrame(long, core.Header{ClientID: 7, Request: uint32(size), Type: core.MsgRequest}, bytes.Repeat([]byte{byte(size)}, size))
	}
	for _, tight := range []bool{false, true} {
		for _, sizes := range [][]byte{nil, {255, 0, 255}, {7}} {
			checkFrameReader(t, long, sizes, tight)
			checkFrameReader(t, long[:len(long)-100], sizes, tight)
		}
	}
}

func checkFrameReader(t *testing.T, stream, sizes []byte, tight bool) {
	br := bufio.NewReaderSize(nil, 64<<10)
	{
		// One at a time.
		var want []readFrame
		br.Reset(&chunkedReader{data: stream})
		var wantErr error
		for wantErr == nil {
			var fr readFrame
			if fr, wantErr = readClientFrame(br, nil); wantErr == nil {
				want = append(want, fr)
			}
		}

		limit := 1 << 30
		if tight {
			limit = readAhead * readChunk // with one event in the loop, no chunk for the next frame
		}
		budget := &readBudget{limit: limit}
		r := &frameReader{src: &chunkedReader{data: stream, sizes: sizes}, budget: budget}
		var (
			got     []readFrame
			gotErr  error
			pending [][]netFrame // the events "in the loop", oldest first
			bufs    [][]byte     // their buffers (nil: the reader's, kept)
		)
		// handled is the loop being done with the oldest event: it reads
		// the frames only now, so a reader that wrote over them shows.
		handled := func() {
			for _, m := range pending[0] {
				got = append(got, readFrame{m.h, string(m.payload)})
			}
			budget.release(bufs[0])
			pending, bufs = pending[1:], bufs[1:]
		}
		for gotErr == nil {
			frames, end, _, _, _, err := scan(r.buf, nil, false)
			for i := range frames {
				if frames[i].h.Type.Replica() {
					frames, err = frames[:i], errors.New("a replica frame")
					break
				}
			}
			if len(frames) > 0 {
				if len(pending) == readAhead {
					handled()
				}
				var buf []byte
				ok := true
				if err == nil {
					buf, ok = r.detach(end)
				}
				pending, bufs = append(pending, frames), append(bufs, buf)
				if !ok || err != nil {
					for len(pending) > 0 {
						handled()
					}
					if err == nil {
						r.compact(end)
					}
				}
			}
			if err != nil {
				gotErr = err
				break
			}
			if len(frames) > 0 {
				continue
			}
			if r.buf == nil {
				for len(pending) > 0 { // the loop goes on: the budget frees up
					handled()
				}
			}
			if gotErr = r.fill(nil); gotErr == stdio.EOF && len(r.buf) > 0 {
				gotErr = stdio.ErrUnexpectedEOF
			}
		}
		for len(pending) > 0 {
			handled()
		}
		if gotErr == errBudget {
			if !tight || len(r.buf) < core.FrameLengthSize || int(leUint32(r.buf))+core.FrameLengthSize <= readChunk {
				t.Fatalf("the budget refused a frame of %d bytes (limit %d)", len(r.buf), limit)
			}
			if len(got) > len(want) {
				t.Fatalf("%d frames read before the budget refused one, %d in all", len(got), len(want))
			}
			want = want[:len(got)]
		}
		r.drop()
		if n := budget.inUse(); n != 0 {
			t.Fatalf("%d bytes of the budget not given back", n)
		}

		if len(got) != len(want) {
			t.Fatalf("%d frames read by the reader, %d one at a time (errors %v, %v)", len(got), len(want), gotErr, wantErr)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("frame %d: %+v by the reader, %+v one at a time", i, got[i].h, want[i].h)
			}
		}
		if gotErr != errBudget && (gotErr == stdio.EOF) != (wantErr == stdio.EOF) ||
			(gotErr == stdio.ErrUnexpectedEOF) != (wantErr == stdio.ErrUnexpectedEOF) && gotErr != errBudget {
			t.Fatalf("the stream ended with %v by the reader, %v one at a time", gotErr, wantErr)
		}
	}
}
