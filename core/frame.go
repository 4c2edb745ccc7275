package core

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
	"unicode/utf8"
)

// The wire frame of the binary protocol (SPEC.md "Binary protocol summary"),
// used between clients and replicas and between replicas. Every integer is
// little-endian:
//
//	offset size field
//	     0    4 length L: the number of bytes after this field
//	            (16 header + P payload + 4 checksum), 20 <= L <= MaxFrameBody
//	     4    8 client id: the session id (0 before registering); in a
//	            replica-to-replica frame, the sender's replica index
//	    12    4 request number (uint32); a reply echoes its request's
//	    16    1 message type (MessageType): 1..5, or 64..127 between replicas
//	    17    1 protocol version, 1
//	    18    2 reserved, zero
//	    20    P payload, P = L - 20 (at most MaxFramePayload = 10 MiB + 4)
//	  20+P    4 CRC-32C (Castagnoli) of bytes 4 .. 20+P (header and payload)
//
// A frame whose length is out of range, whose version is not 1, whose
// reserved bytes are not zero or whose type is unknown is MALFORMED_REQUEST;
// one whose checksum does not match is CHECKSUM_MISMATCH. Either means the
// byte stream cannot be trusted: the connection must be closed. The length
// field itself is not covered by the checksum; a corrupted length shows up
// as a bad length, a checksum mismatch, or a frame that never completes.
//
// Payloads of the client messages:
//
//	MsgRegister       16  cluster id, Uint128 (Lo then Hi, as Uint128.PutLE)
//	MsgRegisterReply   8  session id, uint64
//	MsgRequest         1  operation (Operation)
//	                   *  the operation's request encoding (AppendRequest)
//	MsgReply           1  operation, echoing the request's
//	                   2  result code (Code)
//	                   *  code 0: the operation's reply encoding (AppendReply);
//	                      other codes: u16 message length + message (UTF-8,
//	                      at most MaxErrorMessage bytes)
//	MsgError           2  result code, not 0
//	                   2  message length, at most MaxErrorMessage
//	                   *  message, UTF-8
//
// MsgError reports a failure that is not an operation's result (an unknown
// or evicted session, a malformed request); the request number echoes the
// failed frame's where there was one.
const (
	FrameLengthSize   = 4                              // the length field
	FrameHeaderSize   = 16                             // client id, request, type, version, reserved
	FrameChecksumSize = 4                              // CRC-32C
	FrameOverhead     = 24                             // length + header + checksum
	ProtocolVersion   = 1                              // byte 17 of every frame
	MaxFrameBody      = 10<<20 + 24                    // largest L
	MaxFramePayload   = MaxFrameBody - 20              // 10 MiB + 4
	MaxFrameSize      = FrameLengthSize + MaxFrameBody // a whole frame, length field included
	MaxErrorMessage   = 1024                           // bytes of an error message
	minFrameBody      = FrameHeaderSize + FrameChecksumSize
)

// MessageType is byte 16 of a frame.
type MessageType uint8

// Client protocol messages. Types 64..127 (MsgReplicaFirst..MsgReplicaLast)
// are reserved for replica-to-replica messages: 64..126 are the replica
// package's, 127 is the peer connection's hello (package io); every other
// value is refused by DecodeFrame.
const (
	MsgRegister      MessageType = 1 // client -> replica: cluster id
	MsgRegisterReply MessageType = 2 // replica -> client: session id
	MsgRequest       MessageType = 3 // client -> replica: operation + request
	MsgReply         MessageType = 4 // replica -> client: operation + code + reply
	MsgError         MessageType = 5 // replica -> client: code + message

	MsgReplicaFirst MessageType = 64
	MsgReplicaLast  MessageType = 127
)

// Valid reports whether t is a client message type or lies in the replica range.
func (t MessageType) Valid() bool {
	return (t >= MsgRegister && t <= MsgError) || t.Replica()
}

// Replica reports whether t lies in the replica-to-replica range 64..127.
func (t MessageType) Replica() bool { return t >= MsgReplicaFirst && t <= MsgReplicaLast }

func (t MessageType) String() string {
	switch t {
	case MsgRegister:
		return "register"
	case MsgRegisterReply:
		return "register_reply"
	case MsgRequest:
		return "request"
	case MsgReply:
		return "reply"
	case MsgError:
		return "error"
	}
	if t.Replica() {
		return fmt.Sprintf("replica(%d)", uint8(t))
	}
	return fmt.Sprintf("unknown(%d)", uint8(t))
}

// Header is the part of a frame's header that varies: version and reserved
// bytes are constant.
type Header struct {
	ClientID uint64
	Request  uint32
	Type     MessageType
}

// ErrIncomplete is DecodeFrame's answer when the bytes hold only the start
// of a frame: read more and call again. It is not a *Error and does not mean
// the stream is bad.
var ErrIncomplete = errors.New("core: incomplete frame, more bytes needed")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// AppendFrame appends one frame carrying payload to dst. The payload must be
// at most MaxFramePayload bytes (a longer one is a programming error and
// panics: no request or reply within the spec's limits comes near it), and
// h.Type should be valid, or the receiver refuses the frame.
func AppendFrame(dst []byte, h Header, payload []byte) []byte {
	b, start := BeginFrame(dst)
	return FinishFrame(append(b, payload...), start, h)
}

// BeginFrame appends room for a frame's length and header to dst and
// returns it with the frame's start; append the payload after it, then call
// FinishFrame. It builds a large frame without copying its payload.
func BeginFrame(dst []byte) (b []byte, start int) {
	start = len(dst)
	return append(dst, make([]byte, FrameLengthSize+FrameHeaderSize)...), start
}

// FinishFrame completes the frame begun at start (see BeginFrame) with
// header h and the checksum.
func FinishFrame(b []byte, start int, h Header) []byte {
	putFrameHead(b[start:], len(b)-start-FrameLengthSize-FrameHeaderSize, h)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start+FrameLengthSize:], castagnoli))
}

// FinishFramePieces is FinishFrame for a frame held in pieces, to be
// written back to back: pieces[0] begins with the space BeginFrame left
// (at start 0), and the payload is the rest of pieces[0] and every later
// piece in turn. It fills in the length and header h in pieces[0], and
// returns pieces with the checksum appended as a last piece of its own. The
// later pieces are only read, so they may alias memory that must not
// change.
func FinishFramePieces(pieces [][]byte, h Header) [][]byte {
	payload := -FrameLengthSize - FrameHeaderSize
	for _, p := range pieces {
		payload += len(p)
	}
	putFrameHead(pieces[0], payload, h)
	sum := crc32.Checksum(pieces[0][FrameLengthSize:], castagnoli)
	for _, p := range pieces[1:] {
		sum = crc32.Update(sum, castagnoli, p)
	}
	return append(pieces, binary.LittleEndian.AppendUint32(nil, sum))
}

// putFrameHead writes the length field and header h of a frame whose
// payload is payload bytes long into b's first FrameLengthSize +
// FrameHeaderSize bytes. A payload over MaxFramePayload is the caller's
// bug (the replica bounds what it puts in a frame): it panics.
func putFrameHead(b []byte, payload int, h Header) {
	if payload > MaxFramePayload {
		panic(fmt.Sprintf("core: frame payload of %d bytes exceeds %d", payload, MaxFramePayload))
	}
	le := binary.LittleEndian
	le.PutUint32(b, uint32(payload+minFrameBody))
	le.PutUint64(b[4:], h.ClientID)
	le.PutUint32(b[12:], h.Request)
	b[16], b[17], b[18], b[19] = byte(h.Type), ProtocolVersion, 0, 0
}

// DecodeFrame decodes the first frame of b, which may hold several frames or
// only part of one. It returns the frame's header, its payload (aliasing b,
// with its capacity cut at the payload's end) and the bytes after the frame.
//
// When b holds less than a whole frame it returns ErrIncomplete and rest = b;
// a length out of range is reported as soon as the length field is there.
// Any other error is a *Error (MALFORMED_REQUEST, or CHECKSUM_MISMATCH; the
// checksum is verified before the version, reserved and type bytes) and the
// connection must be closed.
func DecodeFrame(b []byte) (h Header, payload []byte, rest []byte, err error) {
	if len(b) < FrameLengthSize {
		return Header{}, nil, b, ErrIncomplete
	}
	le := binary.LittleEndian
	l := le.Uint32(b)
	if l < minFrameBody || l > MaxFrameBody {
		return Header{}, nil, nil, Errorf(MalformedRequest, "frame length %d outside %d..%d", l, minFrameBody, MaxFrameBody)
	}
	n := FrameLengthSize + int(l)
	if len(b) < n {
		return Header{}, nil, b, ErrIncomplete
	}
	f := b[:n]
	if sum := crc32.Checksum(f[FrameLengthSize:n-FrameChecksumSize], castagnoli); sum != le.Uint32(f[n-FrameChecksumSize:]) {
		return Header{}, nil, nil, Errorf(ChecksumMismatch, "frame checksum %#08x, computed %#08x", le.Uint32(f[n-FrameChecksumSize:]), sum)
	}
	switch {
	case f[17] != ProtocolVersion:
		return Header{}, nil, nil, Errorf(MalformedRequest, "protocol version %d, want %d", f[17], ProtocolVersion)
	case f[18] != 0 || f[19] != 0:
		return Header{}, nil, nil, Errorf(MalformedRequest, "frame reserved bytes 18-19 are not zero")
	case !MessageType(f[16]).Valid():
		return Header{}, nil, nil, Errorf(MalformedRequest, "unknown message type %d", f[16])
	}
	h = Header{ClientID: le.Uint64(f[4:12]), Request: le.Uint32(f[12:16]), Type: MessageType(f[16])}
	end := n - FrameChecksumSize
	return h, f[20:end:end], b[n:], nil
}

// ReadFrame reads exactly one frame from r. It reuses buf (its whole
// capacity) when the frame fits, and otherwise allocates exactly the frame's
// declared length, after checking it against MaxFrameBody; a caller that
// passes a buffer of MaxFrameSize capacity never allocates. The payload
// aliases that buffer.
//
// Errors: io.EOF when r ends before the first byte of a frame,
// io.ErrUnexpectedEOF when it ends inside one, any other error of r as it
// is, and DecodeFrame's *Error for a bad frame (close the connection).
func ReadFrame(r io.Reader, buf []byte) (Header, []byte, error) {
	buf = buf[:cap(buf)]
	if len(buf) < FrameLengthSize {
		buf = make([]byte, FrameLengthSize)
	}
	if _, err := io.ReadFull(r, buf[:FrameLengthSize]); err != nil {
		return Header{}, nil, err
	}
	l := binary.LittleEndian.Uint32(buf)
	if l < minFrameBody || l > MaxFrameBody {
		return Header{}, nil, Errorf(MalformedRequest, "frame length %d outside %d..%d", l, minFrameBody, MaxFrameBody)
	}
	n := FrameLengthSize + int(l)
	if len(buf) < n {
		nb := make([]byte, n)
		copy(nb, buf[:FrameLengthSize])
		buf = nb
	}
	if _, err := io.ReadFull(r, buf[FrameLengthSize:n]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Header{}, nil, err
	}
	h, payload, _, err := DecodeFrame(buf[:n])
	if err != nil {
		return Header{}, nil, err
	}
	return h, payload, nil
}

// AppendRegister appends a MsgRegister payload: the cluster id.
func AppendRegister(dst []byte, cluster Uint128) []byte {
	var b [16]byte
	cluster.PutLE(b[:])
	return append(dst, b[:]...)
}

// DecodeRegister decodes a MsgRegister payload.
func DecodeRegister(p []byte) (cluster Uint128, err error) {
	if len(p) != 16 {
		return Uint128{}, Errorf(MalformedRequest, "register payload is %d bytes, want 16", len(p))
	}
	return Uint128FromLE(p), nil
}

// A MsgRequest without a session (client id 0) is a read: it needs no
// registration, as it changes nothing and has nothing to deduplicate. Its
// payload is the cluster id (16 bytes, as in a register) followed by the
// request, so that a client on the wrong cluster learns it from a read too.

// AppendSessionlessRead appends the payload of a read without a session:
// cluster, then request (a MsgRequest payload).
func AppendSessionlessRead(dst []byte, cluster Uint128, request []byte) []byte {
	return append(AppendRegister(dst, cluster), request...)
}

// CutSessionlessRead splits the payload of a read without a session.
func CutSessionlessRead(p []byte) (cluster Uint128, request []byte, err error) {
	if len(p) < 17 {
		return Uint128{}, nil, Errorf(MalformedRequest, "a request without a session is %d bytes: want the cluster id (16) and a request", len(p))
	}
	return Uint128FromLE(p[:16]), p[16:], nil
}

// AppendRegisterReply appends a MsgRegisterReply payload: the session id.
func AppendRegisterReply(dst []byte, session uint64) []byte {
	return binary.LittleEndian.AppendUint64(dst, session)
}

// DecodeRegisterReply decodes a MsgRegisterReply payload.
func DecodeRegisterReply(p []byte) (session uint64, err error) {
	if len(p) != 8 {
		return 0, Errorf(MalformedRequest, "register reply payload is %d bytes, want 8", len(p))
	}
	return binary.LittleEndian.Uint64(p), nil
}

// AppendRequestMessage appends a MsgRequest payload: op, then req encoded
// by AppendRequest. On error dst is returned unchanged.
func AppendRequestMessage(dst []byte, op Operation, req any) ([]byte, error) {
	out, err := AppendRequest(append(dst, byte(op)), op, req)
	if err != nil {
		return dst, err
	}
	return out, nil
}

// DecodeRequestMessage decodes a MsgRequest payload; see DecodeRequest for
// the value's type. An operation byte that names no operation is
// UNKNOWN_OPERATION.
func DecodeRequestMessage(p []byte) (Operation, any, error) {
	if len(p) < 1 {
		return OpInvalid, nil, Errorf(MalformedRequest, "request payload is empty")
	}
	op := Operation(p[0])
	req, err := DecodeRequest(op, p[1:])
	if err != nil {
		return op, nil, err
	}
	return op, req, nil
}

// AppendReplyMessage appends a MsgReply payload for op: when opErr is nil,
// code 0 and reply encoded by AppendReply; otherwise opErr's code and
// message (a *Error; any other error, or a *Error with code 0, is sent as
// 500 INTERNAL_ERROR) and reply is ignored. On error dst is returned
// unchanged.
func AppendReplyMessage(dst []byte, op Operation, reply any, opErr error) ([]byte, error) {
	o, ok := Lookup(op)
	if !ok {
		return dst, Errorf(UnknownOperation, "unknown operation %d", op)
	}
	out, failed := appendReplyHead(dst, op, opErr)
	if failed {
		return out, nil
	}
	out, err := o.AppendReplyValue(out, reply)
	if err != nil {
		return dst, err
	}
	return out, nil
}

// DecodeReplyMessage decodes a MsgReply payload. For code 0 it returns the
// reply value (see DecodeReply) and a nil opErr; for any other code it
// returns a nil reply and the operation's error, whose CodeInfo is the code
// table's row (a code the table does not know gets the name "UNKNOWN",
// HTTP status 500). err is a decoding failure.
func DecodeReplyMessage(p []byte) (op Operation, reply any, opErr *Error, err error) {
	op, rest, opErr, err := cutReplyHead(p)
	if err != nil || opErr != nil {
		return op, nil, opErr, err
	}
	reply, err = DecodeReply(op, rest)
	if err != nil {
		return op, nil, nil, err
	}
	return op, reply, nil, nil
}

// AppendErrorMessage appends a MsgError payload. Code 0 is sent as 500
// INTERNAL_ERROR; the message is made valid UTF-8 and cut to at most
// MaxErrorMessage bytes on a rune boundary.
func AppendErrorMessage(dst []byte, code Code, msg string) []byte {
	if code == 0 {
		code = InternalError.Code
	}
	return appendMessage(binary.LittleEndian.AppendUint16(dst, uint16(code)), msg)
}

// DecodeErrorMessage decodes a MsgError payload into an *Error whose CodeInfo
// is the code table's row (see DecodeReplyMessage for unknown codes).
func DecodeErrorMessage(p []byte) (*Error, error) {
	if len(p) < 2 {
		return nil, Errorf(MalformedRequest, "error payload is %d bytes, want at least 2", len(p))
	}
	code := Code(binary.LittleEndian.Uint16(p))
	if code == 0 {
		return nil, Errorf(MalformedRequest, "error message with code 0")
	}
	msg, err := decodeMessage(p[2:])
	if err != nil {
		return nil, err
	}
	return &Error{CodeInfo: codeInfo(code), Message: msg}, nil
}

func errorCode(err error) (Code, string) {
	if e, ok := err.(*Error); ok {
		if e.Code == 0 {
			return InternalError.Code, e.Message
		}
		return e.Code, e.Message
	}
	return InternalError.Code, err.Error()
}

func codeInfo(c Code) CodeInfo {
	if info, ok := c.Info(); ok {
		return info
	}
	return CodeInfo{Code: c, Name: "UNKNOWN", HTTPStatus: 500}
}

// appendMessage appends u16 length + msg, made valid UTF-8 and cut to
// MaxErrorMessage bytes on a rune boundary.
func appendMessage(dst []byte, msg string) []byte {
	if !utf8.ValidString(msg) {
		msg = strings.ToValidUTF8(msg, "\uFFFD")
	}
	if len(msg) > MaxErrorMessage {
		cut := MaxErrorMessage
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut]
	}
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(msg)))
	return append(dst, msg...)
}

// decodeMessage decodes exactly u16 length + UTF-8 message from p.
func decodeMessage(p []byte) (string, error) {
	if len(p) < 2 {
		return "", Errorf(MalformedRequest, "error message truncated")
	}
	n := int(binary.LittleEndian.Uint16(p))
	switch {
	case n > MaxErrorMessage:
		return "", Errorf(MalformedRequest, "error message of %d bytes exceeds %d", n, MaxErrorMessage)
	case len(p)-2 != n:
		return "", Errorf(MalformedRequest, "error message length %d, %d bytes follow", n, len(p)-2)
	case !utf8.Valid(p[2:]):
		return "", Errorf(MalformedRequest, "error message is not UTF-8")
	}
	return string(p[2:]), nil
}
