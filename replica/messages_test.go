package replica

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/geoevent/geoevent/core"
)

// sampleMessages has one message of every type with every field it carries set.
func sampleMessages() []message {
	es := []core.LogEntry{{Index: 11, Term: 3, Data: []byte("first")}, {Index: 12, Term: 4, Data: []byte{}}}
	return []message{
		{typ: msgAppend, term: 4, prevIndex: 10, prevTerm: 2, commit: 9, seq: 77, entries: es},
		{typ: msgAppend, term: 4, prevIndex: 10, prevTerm: 2, commit: 9, seq: 77, entries: []core.LogEntry{}},
		{typ: msgAppendReply, term: 4, seq: 7, ok: true, index: 12, hint: 3, hintTerm: 2},
		{typ: msgVote, term: 5, pre: true, lastIndex: 12, lastTerm: 4},
		{typ: msgVoteReply, term: 5, pre: true, ok: true},
		{typ: msgHeartbeat, term: 5, prevIndex: 7, prevTerm: 4, commit: 6, seq: 9},
		{typ: msgHeartbeatReply, term: 5, seq: 9},
		{typ: msgSnapshot, term: 5, index: 100, snapTerm: 4, offset: 3, total: 10, stateLen: 6, data: []byte("chunk")},
		{typ: msgSnapshotReply, term: 5, index: 100, offset: 8, ok: false},
		{typ: msgForward, conn: 42, client: core.Header{ClientID: 9, Request: 3, Type: core.MsgRequest}, frame: []byte{1, 2, 3}},
		{typ: msgForwardReply, conn: 42, frame: []byte("a whole frame")},
		{typ: msgHealth, term: 6, health: []nodeHealth{{}, {contactAgeNS: unknownNS, lagNS: 5, recovering: true}, {contactAgeNS: 3}}},
	}
}

// frameOf is m's frame from replica `from` in one buffer.
func frameOf(m *message, from uint32) []byte { return bytes.Join(m.encode(from), nil) }

// An append's frame sends each entry's data from the entry itself, not from
// a copy; the pieces still make the one frame that FinishFrame would.
func TestAppendFrameSharesEntryData(t *testing.T) {
	data := [][]byte{bytes.Repeat([]byte{7}, 1000), {}, []byte("third")}
	m := message{typ: msgAppend, term: 4, prevIndex: 10, prevTerm: 2, commit: 9, seq: 77}
	for i, d := range data {
		m.entries = append(m.entries, core.LogEntry{Index: uint64(11 + i), Term: 4, Data: d})
	}
	pieces := m.encode(3)
	shared := 0
	for _, p := range pieces {
		for _, d := range data {
			if len(p) > 0 && len(d) > 0 && &p[0] == &d[0] {
				shared++
			}
		}
	}
	if shared != 2 {
		t.Fatalf("%d of the 2 non-empty entries are sent from their own memory", shared)
	}
	// The same frame, built in one buffer as every other message is.
	b, start := core.BeginFrame(nil)
	b = binary.LittleEndian.AppendUint64(b, m.term)
	for _, v := range []uint64{m.prevIndex, m.prevTerm, m.commit, m.seq} {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(data)))
	for _, e := range m.entries {
		b = binary.LittleEndian.AppendUint64(b, e.Term)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(e.Data)))
		b = append(b, e.Data...)
	}
	want := core.FinishFrame(b, start, core.Header{ClientID: 3, Type: msgAppend})
	if got := bytes.Join(pieces, nil); !bytes.Equal(got, want) {
		t.Fatalf("the pieces join to %d bytes that differ from the %d-byte frame", len(got), len(want))
	}
}

func TestMessagesRoundTrip(t *testing.T) {
	for _, m := range sampleMessages() {
		frame := frameOf(&m, 2)
		h, payload, rest, err := core.DecodeFrame(frame)
		if err != nil || len(rest) != 0 {
			t.Fatalf("%d: frame: %v", m.typ, err)
		}
		got, err := decodeMessage(h, payload)
		if err != nil {
			t.Fatalf("%d: %v", m.typ, err)
		}
		m.from = 2
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("type %d:\n got %+v\nwant %+v", m.typ, got, m)
		}
		// Every strict prefix of the payload is refused, never a panic.
		for n := range len(payload) {
			if _, err := decodeMessage(h, payload[:n]); err == nil && m.typ != msgForward && m.typ != msgForwardReply && m.typ != msgSnapshot {
				t.Fatalf("type %d: a payload cut to %d of %d bytes decoded", m.typ, n, len(payload))
			}
		}
	}
}

// FuzzDecodeMessage: whatever arrives, decoding never panics, and what
// decodes encodes back to the same payload.
func FuzzDecodeMessage(f *testing.F) {
	for _, m := range sampleMessages() {
		frame := frameOf(&m, 1)
		h, payload, _, _ := core.DecodeFrame(frame)
		f.Add(uint8(h.Type), payload)
	}
	f.Fuzz(func(t *testing.T, typ uint8, payload []byte) {
		h := core.Header{ClientID: 1, Type: core.MessageType(typ)}
		m, err := decodeMessage(h, payload)
		if err != nil {
			return
		}
		_, again, _, err := core.DecodeFrame(frameOf(&m, 1))
		if err != nil {
			t.Fatalf("re-encoded frame: %v", err)
		}
		if !bytes.Equal(again, payload) {
			t.Fatalf("type %d: payload %x re-encodes as %x", typ, payload, again)
		}
	})
}
