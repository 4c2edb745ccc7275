package core

import (
	"bytes"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite core/testdata/ops.golden from the current encoders")

// goldenOps renders one MsgRequest and one MsgReply payload of every
// operation (the samples of the fuzz seeds) and the error reply form, one
// line each: "<name> <form> <hex>".
func goldenOps(t *testing.T) []byte {
	var out bytes.Buffer
	reqs, reps := sampleRequests(), sampleReplies()
	for _, op := range allOps() {
		req, err := AppendRequestMessage(nil, op, reqs[op])
		if err != nil {
			t.Fatalf("%s request: %v", op, err)
		}
		rep, err := AppendReplyMessage(nil, op, reps[op], nil)
		if err != nil {
			t.Fatalf("%s reply: %v", op, err)
		}
		fmt.Fprintf(&out, "%s request %s\n", op, hex.EncodeToString(req))
		fmt.Fprintf(&out, "%s reply %s\n", op, hex.EncodeToString(rep))
	}
	for _, c := range []struct {
		op  Operation
		err error
	}{
		{OpQueryRadius, Errorf(InvalidRadius, "radius_m 0 is not in (0, 1000000]")},
		{OpInsert, errors.New("not a *core.Error")},
	} {
		rep, err := AppendReplyMessage(nil, c.op, nil, c.err)
		if err != nil {
			t.Fatalf("%s error reply: %v", c.op, err)
		}
		fmt.Fprintf(&out, "%s error %s\n", c.op, hex.EncodeToString(rep))
	}
	return out.Bytes()
}

// TestGoldenEncodings pins the wire and log encoding of every operation:
// a change to testdata/ops.golden is a change of format, which replicas and
// clients of different builds would not agree on. go test ./core -run
// Golden -update rewrites it.
func TestGoldenEncodings(t *testing.T) {
	got := goldenOps(t)
	path := filepath.Join("testdata", "ops.golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
		for i := 0; i < len(gl) && i < len(wl); i++ {
			if !bytes.Equal(gl[i], wl[i]) {
				t.Fatalf("line %d differs:\n got %s\nwant %s", i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("got %d lines, want %d", len(gl), len(wl))
	}
	// Every golden payload decodes, and to a value that encodes back.
	for _, line := range bytes.Split(bytes.TrimSpace(want), []byte("\n")) {
		f := bytes.Fields(line)
		b, err := hex.DecodeString(string(f[2]))
		if err != nil {
			t.Fatal(err)
		}
		switch string(f[1]) {
		case "request":
			op, req, err := DecodeRequestMessage(b)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			if again, err := AppendRequestMessage(nil, op, req); err != nil || !bytes.Equal(again, b) {
				t.Fatalf("%s: re-encodes as %x (%v)", f[0], again, err)
			}
		case "reply", "error":
			op, rep, opErr, err := DecodeReplyMessage(b)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			var e error
			if opErr != nil {
				e = opErr
			}
			if again, err := AppendReplyMessage(nil, op, rep, e); err != nil || !bytes.Equal(again, b) {
				t.Fatalf("%s: re-encodes as %x (%v)", f[0], again, err)
			}
		}
	}
}
