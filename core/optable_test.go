package core

import (
	"bytes"
	"testing"
)

// TestOpTable checks the table's shape: one entry per valid code, at its
// code, named as the operation prints, writing exactly for the operations
// that go through the log with a change.
func TestOpTable(t *testing.T) {
	writes := map[Operation]bool{OpInsert: true, OpUpsert: true, OpDeleteEntities: true, OpTTLSet: true,
		OpTTLExtend: true, OpTTLClear: true, OpCleanupExpired: true, OpPutFence: true, OpDeleteFence: true,
		OpPutHook: true, OpDeleteHook: true, OpHookDelivered: true, OpSetFeedRetention: true}
	names := map[string]bool{}
	for _, op := range allOps() {
		o, ok := Lookup(op)
		if !ok || o.Operation() != op {
			t.Fatalf("%d: entry %v %v", op, o, ok)
		}
		if op.Mutates() != writes[op] || o.writes() != writes[op] {
			t.Errorf("%s: writes %v, want %v", op, o.writes(), writes[op])
		}
		if names[o.name()] || o.name() == "" {
			t.Errorf("%s: name %q repeated or empty", op, o.name())
		}
		names[o.name()] = true
	}
	for _, op := range []Operation{OpInvalid, OpQueryNearest + 1, 255} {
		if o, ok := Lookup(op); ok || o != nil {
			t.Errorf("Lookup(%d) = %v, %v", op, o, ok)
		}
	}
	if OpInvalid.String() != "invalid" || Operation(200).String() != "unknown" || OpQueryRadius.String() != "query_radius" {
		t.Errorf("names: %s %s %s", OpInvalid, Operation(200), OpQueryRadius)
	}
}

// TestTypedMatchesUntyped: the typed entry and the untyped view encode the
// same bytes, and a typed reply message of another operation is refused.
func TestTypedMatchesUntyped(t *testing.T) {
	req := sampleRequests()[OpQueryRadius].(*RadiusQuery)
	a, err := QueryRadius.AppendRequestMessage(nil, req)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := AppendRequestMessage(nil, OpQueryRadius, req); err != nil || !bytes.Equal(a, b) {
		t.Fatalf("typed %x, untyped %x (%v)", a, b, err)
	}
	rep := sampleReplies()[OpQueryRadius].(*QueryResult)
	m, err := QueryRadius.AppendReplyMessage(nil, rep, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, opErr, err := QueryRadius.DecodeReplyMessage(m); err != nil || opErr != nil || len(got.Events) != 1 || got.DistancesMM[0] != 42 {
		t.Fatalf("decode: %+v %v %v", got, opErr, err)
	}
	_, _, err = QueryPolygon.DecodeReplyMessage(m)
	wantCode(t, err, MalformedRequest)
	m, _ = QueryRadius.AppendReplyMessage(nil, nil, Errorf(InvalidRadius, "no"))
	if _, opErr, err := QueryRadius.DecodeReplyMessage(m); err != nil || opErr == nil || opErr.Code != InvalidRadius.Code {
		t.Fatalf("error reply: %v %v", opErr, err)
	}
	_, err = QueryRadius.AppendRequest(nil, nil)
	wantCode(t, err, InternalError)
	_, err = QueryRadius.AppendReply(nil, nil)
	wantCode(t, err, InternalError)
	if b, err := Ping.AppendRequest(nil, nil); err != nil || len(b) != 0 {
		t.Fatalf("ping request %x %v", b, err)
	}
}
