package core

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"io"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"
)

func genHeader() *rapid.Generator[Header] {
	return rapid.Custom(func(t *rapid.T) Header {
		typ := rapid.SampledFrom([]MessageType{MsgRegister, MsgRegisterReply, MsgRequest, MsgReply, MsgError, MsgReplicaFirst, 100, MsgReplicaLast}).Draw(t, "type")
		return Header{ClientID: rapid.Uint64().Draw(t, "client"), Request: rapid.Uint32().Draw(t, "request"), Type: typ}
	})
}

type frame struct {
	h       Header
	payload []byte
}

func genFrame() *rapid.Generator[frame] {
	return rapid.Custom(func(t *rapid.T) frame {
		return frame{genHeader().Draw(t, "header"), rapid.SliceOfN(rapid.Byte(), 0, 200).Draw(t, "payload")}
	})
}

// resum rewrites the checksum of the single frame f after a deliberate edit.
func resum(f []byte) []byte {
	n := len(f)
	binary.LittleEndian.PutUint32(f[n-4:], crc32.Checksum(f[4:n-4], crc32.MakeTable(crc32.Castagnoli)))
	return f
}

func TestCastagnoliTable(t *testing.T) {
	// The check value of CRC-32C.
	if got := crc32.Checksum([]byte("123456789"), castagnoli); got != 0xe3069283 {
		t.Fatalf("CRC-32C check value %#08x", got)
	}
}

func TestFrameLayout(t *testing.T) {
	h := Header{ClientID: 0x0102030405060708, Request: 0x11121314, Type: MsgRequest}
	f := AppendFrame(nil, h, []byte("abc"))
	want := "17000000" + "0807060504030201" + "14131211" + "03" + "01" + "0000" + "616263"
	if got := hex.EncodeToString(f[:len(f)-4]); got != want {
		t.Fatalf("frame\n got %s\nwant %s", got, want)
	}
	if len(f) != FrameOverhead+3 || binary.LittleEndian.Uint32(f) != uint32(len(f)-4) {
		t.Fatalf("length field %d for %d bytes", binary.LittleEndian.Uint32(f), len(f))
	}
	sum := crc32.Checksum(f[4:len(f)-4], crc32.MakeTable(crc32.Castagnoli))
	if binary.LittleEndian.Uint32(f[len(f)-4:]) != sum {
		t.Fatal("checksum is not CRC-32C of bytes 4..20+P")
	}
}

func TestFrameRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		fr := genFrame().Draw(t, "frame")
		prefix := rapid.SliceOfN(rapid.Byte(), 0, 8).Draw(t, "prefix")
		b := AppendFrame(bytes.Clone(prefix), fr.h, fr.payload)
		if !bytes.Equal(b[:len(prefix)], prefix) {
			t.Fatal("AppendFrame changed dst")
		}
		b = b[len(prefix):]
		h, p, rest, err := DecodeFrame(b)
		if err != nil || h != fr.h || !bytes.Equal(p, fr.payload) || len(rest) != 0 {
			t.Fatalf("decode: %+v %x %d %v", h, p, len(rest), err)
		}
		if cap(p) != len(p) {
			t.Fatal("payload capacity reaches into the checksum")
		}
		if !bytes.Equal(AppendFrame(nil, h, p), b) {
			t.Fatal("re-encoding differs")
		}
	})
}

// TestDecodeFrameStream decodes a buffer of several frames frame by frame,
// from every prefix: complete frames come out, a partial tail is
// ErrIncomplete with rest = the tail, and feeding the stream in random
// chunks yields the same frames.
func TestDecodeFrameStream(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		frames := rapid.SliceOfN(genFrame(), 1, 5).Draw(t, "frames")
		var stream []byte
		var ends []int
		for _, fr := range frames {
			stream = AppendFrame(stream, fr.h, fr.payload)
			ends = append(ends, len(stream))
		}
		for n := 0; n <= len(stream); n++ {
			b := stream[:n]
			got := 0
			for {
				h, p, rest, err := DecodeFrame(b)
				if errors.Is(err, ErrIncomplete) {
					if !bytes.Equal(rest, b) {
						t.Fatalf("prefix %d: ErrIncomplete must return rest = input", n)
					}
					var e *Error
					if errors.As(err, &e) {
						t.Fatal("ErrIncomplete is a *core.Error")
					}
					break
				}
				if err != nil {
					t.Fatalf("prefix %d: %v", n, err)
				}
				if h != frames[got].h || !bytes.Equal(p, frames[got].payload) {
					t.Fatalf("prefix %d: frame %d differs", n, got)
				}
				got++
				b = rest
			}
			complete := 0
			for _, e := range ends {
				if e <= n {
					complete++
				}
			}
			if got != complete {
				t.Fatalf("prefix %d: %d frames decoded, %d complete", n, got, complete)
			}
		}
		// Random chunks, as a connection delivers them.
		var buf []byte
		got := 0
		for off := 0; off < len(stream); {
			k := rapid.IntRange(1, len(stream)-off).Draw(t, "chunk")
			buf = append(buf, stream[off:off+k]...)
			off += k
			for {
				h, p, rest, err := DecodeFrame(buf)
				if errors.Is(err, ErrIncomplete) {
					break
				}
				if err != nil || h != frames[got].h || !bytes.Equal(p, frames[got].payload) {
					t.Fatalf("chunked: frame %d: %v", got, err)
				}
				got++
				buf = rest
			}
		}
		if got != len(frames) || len(buf) != 0 {
			t.Fatalf("chunked: %d of %d frames, %d bytes left", got, len(frames), len(buf))
		}
	})
}

// TestFrameBitFlips: no single-bit flip of a frame is accepted. A flip
// after the length field is CHECKSUM_MISMATCH; a flip of the length field
// is a bad length, a checksum mismatch or an incomplete frame.
func TestFrameBitFlips(t *testing.T) {
	payloads := [][]byte{nil, []byte("x"), bytes.Repeat([]byte{0xa5}, 61)}
	for _, payload := range payloads {
		f := AppendFrame(nil, Header{ClientID: 42, Request: 7, Type: MsgReply}, payload)
		for bit := 0; bit < 8*len(f); bit++ {
			g := bytes.Clone(f)
			g[bit/8] ^= 1 << (bit % 8)
			_, _, _, err := DecodeFrame(g)
			switch {
			case err == nil:
				t.Fatalf("payload %d bytes: flip of bit %d accepted", len(payload), bit)
			case bit/8 >= FrameLengthSize:
				wantCode(t, err, ChecksumMismatch)
			case !errors.Is(err, ErrIncomplete):
				if c := codeOf(t, err); c != MalformedRequest.Code && c != ChecksumMismatch.Code {
					t.Fatalf("bit %d: code %d", bit, c)
				}
			}
		}
	}
}

func TestFrameLengthEdges(t *testing.T) {
	// The largest payload is accepted.
	big := make([]byte, MaxFramePayload)
	big[len(big)-1] = 7
	f := AppendFrame(nil, Header{Type: MsgRequest}, big)
	if len(f) != MaxFrameSize || binary.LittleEndian.Uint32(f) != MaxFrameBody {
		t.Fatalf("largest frame is %d bytes", len(f))
	}
	if _, p, _, err := DecodeFrame(f); err != nil || len(p) != MaxFramePayload || p[len(p)-1] != 7 {
		t.Fatalf("largest frame: %v", err)
	}
	if _, p, err := ReadFrame(bytes.NewReader(f), nil); err != nil || len(p) != MaxFramePayload {
		t.Fatalf("ReadFrame largest frame: %v", err)
	}
	// A payload of 10 MiB, SPEC's native request envelope, fits.
	if MaxFramePayload < 10<<20 {
		t.Fatal("a 10 MiB payload does not fit")
	}
	// One more is refused from the length field alone.
	for _, l := range []uint32{MaxFrameBody + 1, ^uint32(0), minFrameBody - 1, 0} {
		b := binary.LittleEndian.AppendUint32(nil, l)
		_, _, _, err := DecodeFrame(b)
		wantCode(t, err, MalformedRequest)
		_, _, err = ReadFrame(bytes.NewReader(append(b, make([]byte, 64)...)), nil)
		wantCode(t, err, MalformedRequest)
	}
	// The smallest frame: an empty payload.
	f = AppendFrame(nil, Header{Type: MsgRegister}, nil)
	if h, p, rest, err := DecodeFrame(f); err != nil || h.Type != MsgRegister || len(p) != 0 || len(rest) != 0 {
		t.Fatalf("empty payload: %v", err)
	}
	// AppendFrame refuses an oversized payload loudly.
	defer func() {
		if recover() == nil {
			t.Fatal("an oversized payload did not panic")
		}
	}()
	AppendFrame(nil, Header{Type: MsgRequest}, make([]byte, MaxFramePayload+1))
}

func TestMessageTypeString(t *testing.T) {
	for typ, want := range map[MessageType]string{
		MsgRegister: "register", MsgRegisterReply: "register_reply", MsgRequest: "request", MsgReply: "reply",
		MsgError: "error", 64: "replica(64)", 0: "unknown(0)", 200: "unknown(200)",
	} {
		if got := typ.String(); got != want {
			t.Errorf("%d: %q, want %q", uint8(typ), got, want)
		}
	}
}

func TestFrameHeaderChecks(t *testing.T) {
	base := AppendFrame(nil, Header{ClientID: 1, Request: 2, Type: MsgRequest}, []byte("payload"))
	edit := func(off int, v byte) []byte {
		g := bytes.Clone(base)
		g[off] = v
		return resum(g)
	}
	for _, g := range [][]byte{edit(17, 0), edit(17, 2), edit(18, 1), edit(19, 0x80)} {
		_, _, _, err := DecodeFrame(g)
		wantCode(t, err, MalformedRequest)
	}
	for typ := 0; typ < 256; typ++ {
		_, _, _, err := DecodeFrame(edit(16, byte(typ)))
		valid := (typ >= 1 && typ <= 5) || (typ >= 64 && typ <= 127)
		if valid != (err == nil) || valid != MessageType(typ).Valid() {
			t.Fatalf("type %d: %v", typ, err)
		}
		if err != nil {
			wantCode(t, err, MalformedRequest)
		}
	}
}

// oneByteReader returns at most one byte per Read, as a slow socket.
type oneByteReader struct{ r io.Reader }

func (o oneByteReader) Read(p []byte) (int, error) {
	if len(p) > 1 {
		p = p[:1]
	}
	return o.r.Read(p)
}

func TestReadFrame(t *testing.T) {
	var stream []byte
	frames := []frame{
		{Header{ClientID: 1, Request: 1, Type: MsgRequest}, []byte("first")},
		{Header{ClientID: 1, Request: 2, Type: MsgRequest}, bytes.Repeat([]byte("z"), 300)},
		{Header{ClientID: 9, Request: 3, Type: MsgReplicaFirst}, nil},
	}
	for _, fr := range frames {
		stream = AppendFrame(stream, fr.h, fr.payload)
	}
	for _, slow := range []bool{false, true} {
		var r io.Reader = bytes.NewReader(stream)
		if slow {
			r = oneByteReader{r}
		}
		buf := make([]byte, 64)
		for i, fr := range frames {
			h, p, err := ReadFrame(r, buf)
			if err != nil || h != fr.h || !bytes.Equal(p, fr.payload) {
				t.Fatalf("frame %d: %+v %v", i, h, err)
			}
			if len(fr.payload)+FrameOverhead <= len(buf) && len(p) > 0 && &p[0] != &buf[FrameLengthSize+FrameHeaderSize] {
				t.Fatalf("frame %d: buf not reused", i)
			}
		}
		if _, _, err := ReadFrame(r, buf); err != io.EOF {
			t.Fatalf("at the end: %v, want io.EOF", err)
		}
	}
	// A frame cut anywhere is io.ErrUnexpectedEOF.
	for n := 1; n < FrameOverhead+len(frames[0].payload); n++ {
		if _, _, err := ReadFrame(bytes.NewReader(stream[:n]), nil); err != io.ErrUnexpectedEOF {
			t.Fatalf("cut at %d: %v", n, err)
		}
	}
	// A corrupted frame is the decoder's *Error.
	bad := bytes.Clone(stream)
	bad[25] ^= 1
	_, _, err := ReadFrame(bytes.NewReader(bad), nil)
	wantCode(t, err, ChecksumMismatch)
	// A bad length is refused before anything more is read or allocated.
	r := bytes.NewReader(append(binary.LittleEndian.AppendUint32(nil, MaxFrameBody+1), make([]byte, 100)...))
	_, _, err = ReadFrame(r, nil)
	wantCode(t, err, MalformedRequest)
	if r.Len() != 100 {
		t.Fatalf("%d bytes read past a bad length", 100-r.Len())
	}
	// Reading errors pass through.
	boom := errors.New("boom")
	if _, _, err := ReadFrame(io.MultiReader(bytes.NewReader(stream[:10]), errReader{boom}), nil); err != boom {
		t.Fatalf("reader error: %v", err)
	}
	// A large enough buffer means no allocation.
	big := make([]byte, 1024)
	br := bytes.NewReader(stream)
	allocs := testing.AllocsPerRun(50, func() {
		br.Reset(stream)
		if _, _, err := ReadFrame(br, big); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("ReadFrame allocates %.1f times with a large buffer", allocs)
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func TestRegisterMessages(t *testing.T) {
	cluster := Uint128{Hi: 5, Lo: 6}
	p := AppendRegister(nil, cluster)
	if got, err := DecodeRegister(p); err != nil || got != cluster || len(p) != 16 {
		t.Fatalf("register: %v %v", got, err)
	}
	for _, n := range []int{0, 15, 17} {
		_, err := DecodeRegister(make([]byte, n))
		wantCode(t, err, MalformedRequest)
	}
	p = AppendRegisterReply(nil, 77)
	if got, err := DecodeRegisterReply(p); err != nil || got != 77 || len(p) != 8 {
		t.Fatalf("register reply: %v %v", got, err)
	}
	for _, n := range []int{0, 7, 9} {
		_, err := DecodeRegisterReply(make([]byte, n))
		wantCode(t, err, MalformedRequest)
	}
}

func TestErrorMessages(t *testing.T) {
	p := AppendErrorMessage(nil, EntityNotFound.Code, "entity x not found")
	if hex.EncodeToString(p[:4]) != "0300"+"1200" {
		t.Fatalf("layout %x", p)
	}
	e, err := DecodeErrorMessage(p)
	if err != nil || e.CodeInfo != EntityNotFound || e.Message != "entity x not found" {
		t.Fatalf("%+v %v", e, err)
	}
	// Code 0 is sent as 500; unknown codes decode with the name UNKNOWN.
	if e, err := DecodeErrorMessage(AppendErrorMessage(nil, 0, "")); err != nil || e.Code != InternalError.Code {
		t.Fatalf("code 0: %+v %v", e, err)
	}
	if e, err := DecodeErrorMessage(AppendErrorMessage(nil, 599, "")); err != nil || e.Code != 599 || e.Name != "UNKNOWN" {
		t.Fatalf("code 599: %+v %v", e, err)
	}
	// Long and invalid messages are made valid and cut on a rune boundary.
	for _, msg := range []string{strings.Repeat("é", 600), strings.Repeat("a", 1023) + "€", "bad \xff\xfe utf-8"} {
		e, err := DecodeErrorMessage(AppendErrorMessage(nil, 1, msg))
		if err != nil || len(e.Message) > MaxErrorMessage || !utf8.ValidString(e.Message) || !strings.HasPrefix(msg, e.Message[:min(len(e.Message), 3)]) {
			t.Fatalf("%q: %q %v", msg[:10], e.Message, err)
		}
	}
	bad := [][]byte{
		nil, {1}, {1, 0}, {1, 0, 1}, {0, 0, 0, 0}, {1, 0, 2, 0, 'a'}, {1, 0, 1, 0, 'a', 'b'}, {1, 0, 1, 0, 0xff},
		append([]byte{1, 0, 0x01, 0x04}, make([]byte, 1025)...),
	}
	for _, p := range bad {
		_, err := DecodeErrorMessage(p)
		wantCode(t, err, MalformedRequest)
	}
	if _, err := DecodeErrorMessage(append([]byte{1, 0, 0x00, 0x04}, make([]byte, 1024)...)); err != nil {
		t.Fatalf("a 1024-byte message: %v", err)
	}
}

func TestRequestReplyMessages(t *testing.T) {
	req := &TTLSetRequest{EntityID: Uint128{Lo: 3}, TTLSeconds: 9}
	p, err := AppendRequestMessage([]byte{}, OpTTLSet, req)
	if err != nil || p[0] != byte(OpTTLSet) {
		t.Fatalf("%x %v", p, err)
	}
	op, v, err := DecodeRequestMessage(p)
	if err != nil || op != OpTTLSet || !reflect.DeepEqual(v, req) {
		t.Fatalf("%v %+v %v", op, v, err)
	}
	_, _, err = DecodeRequestMessage(nil)
	wantCode(t, err, MalformedRequest)
	_, _, err = DecodeRequestMessage([]byte{200})
	wantCode(t, err, UnknownOperation)
	if out, err := AppendRequestMessage([]byte("keep"), OpTTLSet, &DeleteRequest{}); err == nil || string(out) != "keep" {
		t.Fatalf("failed request message: %q %v", out, err)
	}

	// Success.
	reply := &TTLSetReply{ExpiresAtNS: 11}
	p, err = AppendReplyMessage(nil, OpTTLSet, reply, nil)
	if err != nil || hex.EncodeToString(p[:3]) != "040000" {
		t.Fatalf("%x %v", p, err)
	}
	op, v, opErr, err := DecodeReplyMessage(p)
	if err != nil || opErr != nil || op != OpTTLSet || !reflect.DeepEqual(v, reply) {
		t.Fatalf("%v %+v %v %v", op, v, opErr, err)
	}
	// A typed nil *Error is success.
	var none *Error
	if _, err := AppendReplyMessage(nil, OpTTLSet, reply, none); err != nil {
		t.Fatal(err)
	}
	// An operation's error keeps its code and message; others are 500.
	for _, c := range []struct {
		err  error
		want CodeInfo
		msg  string
	}{
		{Errorf(EntityNotFound, "entity %d not found", 3), EntityNotFound, "entity 3 not found"},
		{errors.New("disk on fire"), InternalError, "disk on fire"},
		{&Error{CodeInfo: OK, Message: "odd"}, InternalError, "odd"},
	} {
		p, err := AppendReplyMessage(nil, OpTTLSet, nil, c.err)
		if err != nil {
			t.Fatal(err)
		}
		op, v, opErr, err := DecodeReplyMessage(p)
		if err != nil || op != OpTTLSet || v != nil || opErr == nil || opErr.CodeInfo != c.want || opErr.Message != c.msg {
			t.Fatalf("%v: %v %+v %+v %v", c.err, op, v, opErr, err)
		}
	}
	_, err = AppendReplyMessage(nil, 0, nil, nil)
	wantCode(t, err, UnknownOperation)
	for _, p := range [][]byte{nil, {4, 0}, {4, 1, 0}, {4, 0, 0}, {4, 3, 0, 1, 0}} {
		_, _, _, err := DecodeReplyMessage(p)
		wantCode(t, err, MalformedRequest)
	}
	_, _, _, err = DecodeReplyMessage([]byte{0, 0, 0})
	wantCode(t, err, UnknownOperation)
}

// appendMessage re-encodes a decoded message payload of type typ.
func reencodeMessage(t *testing.T, typ MessageType, p []byte) ([]byte, bool) {
	switch typ {
	case MsgRegister:
		c, err := DecodeRegister(p)
		if err != nil {
			codeOf(t, err)
			return nil, false
		}
		return AppendRegister(nil, c), true
	case MsgRegisterReply:
		s, err := DecodeRegisterReply(p)
		if err != nil {
			codeOf(t, err)
			return nil, false
		}
		return AppendRegisterReply(nil, s), true
	case MsgRequest:
		op, v, err := DecodeRequestMessage(p)
		if err != nil {
			if !decodeCodeOK(codeOf(t, err)) {
				t.Fatalf("request message: %v", err)
			}
			return nil, false
		}
		out, err := AppendRequestMessage(nil, op, v)
		if err != nil {
			t.Fatalf("accepted request message does not re-encode: %v", err)
		}
		return out, true
	case MsgReply:
		op, v, opErr, err := DecodeReplyMessage(p)
		if err != nil {
			if !decodeCodeOK(codeOf(t, err)) {
				t.Fatalf("reply message: %v", err)
			}
			return nil, false
		}
		var e error
		if opErr != nil {
			e = opErr
		}
		out, err := AppendReplyMessage(nil, op, v, e)
		if err != nil {
			t.Fatalf("accepted reply message does not re-encode: %v", err)
		}
		return out, true
	case MsgError:
		e, err := DecodeErrorMessage(p)
		if err != nil {
			wantCode(t, err, MalformedRequest)
			return nil, false
		}
		return AppendErrorMessage(nil, e.Code, e.Message), true
	}
	return nil, false
}

func FuzzDecodeFrame(f *testing.F) {
	reg := AppendFrame(nil, Header{Type: MsgRegister}, AppendRegister(nil, Uint128{Lo: 1}))
	req, _ := AppendRequestMessage(nil, OpPing, nil)
	reqFrame := AppendFrame(nil, Header{ClientID: 5, Request: 1, Type: MsgRequest}, req)
	f.Add(reg)
	f.Add(reqFrame)
	f.Add(append(bytes.Clone(reg), reqFrame...))
	f.Add(reqFrame[:len(reqFrame)-1])
	f.Add(AppendFrame(nil, Header{Type: MsgReplicaLast}, []byte("replica")))
	f.Add([]byte{})
	f.Add([]byte{20, 0, 0})
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, p, rest, err := DecodeFrame(b)
		switch {
		case errors.Is(err, ErrIncomplete):
			if !bytes.Equal(rest, b) {
				t.Fatal("ErrIncomplete with rest != input")
			}
			return
		case err != nil:
			if c := codeOf(t, err); c != MalformedRequest.Code && c != ChecksumMismatch.Code {
				t.Fatalf("code %d: %v", c, err)
			}
			return
		}
		n := len(b) - len(rest)
		if !bytes.Equal(AppendFrame(nil, h, p), b[:n]) {
			t.Fatal("an accepted frame re-encodes differently")
		}
		if out, ok := reencodeMessage(t, h.Type, p); ok && !bytes.Equal(out, p) {
			t.Fatalf("an accepted %s payload re-encodes differently", h.Type)
		}
	})
}

// FuzzDecodeMessage fuzzes the message payload decoders directly (through
// DecodeFrame, the checksum keeps the fuzzer out): accepted payloads
// re-encode to the same bytes.
func FuzzDecodeMessage(f *testing.F) {
	f.Add(byte(MsgRegister), AppendRegister(nil, Uint128{Hi: 1}))
	f.Add(byte(MsgRegisterReply), AppendRegisterReply(nil, 3))
	f.Add(byte(MsgError), AppendErrorMessage(nil, 211, "no quorum"))
	for op, v := range sampleRequests() {
		p, _ := AppendRequestMessage(nil, op, v)
		f.Add(byte(MsgRequest), p)
	}
	for op, v := range sampleReplies() {
		p, _ := AppendReplyMessage(nil, op, v, nil)
		f.Add(byte(MsgReply), p)
	}
	p, _ := AppendReplyMessage(nil, OpGetLatest, nil, Errorf(EntityNotFound, "gone"))
	f.Add(byte(MsgReply), p)
	f.Fuzz(func(t *testing.T, typ byte, p []byte) {
		if out, ok := reencodeMessage(t, MessageType(typ), p); ok && !bytes.Equal(out, p) {
			t.Fatalf("an accepted %s payload re-encodes differently:\n%x\n%x", MessageType(typ), p, out)
		}
	})
}

func TestBeginFinishFrameMatchesAppendFrame(t *testing.T) {
	h := Header{ClientID: 1<<40 + 3, Request: 77, Type: MsgReply}
	for _, payload := range [][]byte{nil, {1}, bytes.Repeat([]byte("geo"), 1000)} {
		want := AppendFrame([]byte("prefix"), h, payload)
		b, start := BeginFrame([]byte("prefix"))
		got := FinishFrame(append(b, payload...), start, h)
		if !bytes.Equal(got, want) {
			t.Fatalf("payload of %d bytes: %x, want %x", len(payload), got, want)
		}
	}
}

// FuzzCutSessionlessRead: a payload it accepts is the cluster id and a
// request, and AppendSessionlessRead makes it again.
func FuzzCutSessionlessRead(f *testing.F) {
	p, _ := AppendRequestMessage(nil, OpStats, nil)
	f.Add(AppendSessionlessRead(nil, Uint128{Hi: 1, Lo: 2}, p))
	f.Add([]byte{})
	f.Add(make([]byte, 16))
	f.Fuzz(func(t *testing.T, p []byte) {
		cluster, req, err := CutSessionlessRead(p)
		if err != nil {
			if len(p) > 16 {
				t.Fatalf("refused %d bytes: %v", len(p), err)
			}
			return
		}
		if len(req) == 0 {
			t.Fatal("accepted a payload without a request")
		}
		if out := AppendSessionlessRead(nil, cluster, req); !bytes.Equal(out, p) {
			t.Fatalf("re-encodes as %x, want %x", out, p)
		}
	})
}
