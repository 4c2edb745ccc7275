package replica

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/statemachine"
)

// FuzzPrepareRequest feeds PrepareRequest any payload a client may send. It
// must never panic nor change the frame; what it prepares must be the
// batch's bytes with the cells the leader assigns (statemachine.
// AssignRecordCells) and room for the entry's header; and a leader given
// the frame prepared must log the same entry and answer the same as one
// given it bare.
func FuzzPrepareRequest(f *testing.F) {
	for _, op := range []core.Operation{core.OpInsert, core.OpUpsert} {
		p, err := core.AppendRequestMessage(nil, op, insertReq(ev(1, 38_100_000_000, 13_360_000_000), ev(2, 91_000_000_000, 0), ev(0, 0, 0)))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(p)
		f.Add(p[:len(p)-1])   // a record cut short
		f.Add(p[:5])          // a count of three, no records
		bad := bytes.Clone(p) // reserved bytes set
		bad[len(bad)-1] = 1
		f.Add(bad)
	}
	stats, _ := core.AppendRequestMessage(nil, core.OpStats, nil)
	f.Add(stats)
	f.Add([]byte{})
	f.Add([]byte{byte(core.OpInsert), 0, 0, 0, 0}) // an empty batch

	f.Fuzz(func(t *testing.T, payload []byte) {
		if len(payload) > 64<<10 {
			return
		}
		h := core.Header{ClientID: 1, Request: 1, Type: core.MsgRequest}
		orig := bytes.Clone(payload)
		prepared := PrepareRequest(h, payload)
		if !bytes.Equal(payload, orig) {
			t.Fatal("PrepareRequest changed the frame")
		}
		if PrepareRequest(core.Header{Type: core.MsgRegister}, payload) != nil {
			t.Fatal("prepared a register frame")
		}
		if _, _, batch := batchRequest(payload); batch != (prepared != nil) {
			t.Fatalf("a batch: %v, prepared: %v", batch, prepared != nil)
		}
		if prepared == nil {
			return
		}
		want := make([]byte, entryHeaderSize, entryHeaderSize+len(payload)-1)
		binary.LittleEndian.PutUint32(want[entryBaseSize:], requestSum(payload)) // for the loop
		want = append(want, payload[1:]...)
		statemachine.AssignRecordCells(want[entryHeaderSize+4:])
		if !bytes.Equal(prepared, want) {
			t.Fatal("the prepared entry is not the batch with its cells")
		}
		for off := entryHeaderSize + 4; off < len(prepared); off += core.RecordSize {
			if binary.LittleEndian.Uint64(prepared[off+56:]) == 0 && core.ValidCoordinate(
				int64(binary.LittleEndian.Uint64(prepared[off+64:])), int64(binary.LittleEndian.Uint64(prepared[off+72:]))) {
				t.Fatalf("a valid position at %d got no cell", off)
			}
		}

		// The loop takes a prepared batch as its own.
		run := func(prepare bool) ([]byte, []reply) {
			n := newNode(t, Config{})
			h.ClientID = n.register(1)
			p := bytes.Clone(payload)
			if prepare {
				n.r.ReceivePrepared(1, h, p, PrepareRequest(h, p))
			} else {
				n.r.Receive(1, h, p)
			}
			n.settle()
			var logged []byte
			if d, err := decodeEntry(n.io.durable[len(n.io.durable)-1].Data); err == nil && d.kind == kindOperation {
				if !d.summed || d.sum != requestSum(payload) {
					t.Fatalf("the entry's checksum: summed %v, %08x, want %08x", d.summed, d.sum, requestSum(payload))
				}
				logged = d.payload
			}
			return logged, n.replies(1)
		}
		bareEntry, bareReplies := run(false)
		prepEntry, prepReplies := run(true)
		if !bytes.Equal(bareEntry, prepEntry) {
			t.Fatal("a prepared batch logged another entry than the bare one")
		}
		if len(bareReplies) != 1 || !reflect.DeepEqual(bareReplies, prepReplies) {
			t.Fatalf("replies: bare %+v, prepared %+v", bareReplies, prepReplies)
		}
	})
}
