package io

import (
	"bufio"
	"context"
	"net"
	"path/filepath"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/geoevent/geoevent/core"
)

// serveBench runs a one-replica server on a new data directory until the
// benchmark ends.
func serveBench(b *testing.B) *Server {
	dir := filepath.Join(b.TempDir(), "data")
	if err := Format(dir, ClusterInfo{Cluster: testCluster, ReplicaIndex: 0, ReplicaCount: 1}); err != nil {
		b.Fatal(err)
	}
	// With metrics, as the server runs (replica start, dev).
	s, err := Open(dir, Options{Addresses: []string{"127.0.0.1:0"}, Metrics: metrics.NewSet()})
	if err != nil {
		b.Fatal(err)
	}
	go s.Run(context.Background())
	b.Cleanup(func() { s.Close() })
	return s
}

// dialBench connects to s and registers.
func dialBench(b *testing.B, s *Server) *rawClient {
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { nc.Close() })
	c := &rawClient{nc: nc, br: bufio.NewReaderSize(nc, 64<<10)}
	nc.Write(core.AppendFrame(nil, core.Header{Request: 1, Type: core.MsgRegister}, core.AppendRegister(nil, testCluster)))
	h, p, err := core.ReadFrame(c.br, nil)
	if err != nil || h.Type != core.MsgRegisterReply {
		b.Fatalf("register: %v %v", h.Type, err)
	}
	c.session, _ = core.DecodeRegisterReply(p)
	c.req = 1
	return c
}

// BenchmarkServerFrames drives a server through one raw connection: the
// reader, the loop and the writer, with requests that touch no disk.
//
//   - ping64: 64 pings written at once, then their 64 replies read (small
//     frames, many to a read);
//   - latestBatch: get-latest of 10,000 unknown ids, two requests in
//     flight (160 KB frames, longer than a read chunk).
func BenchmarkServerFrames(b *testing.B) {
	for _, bc := range []struct {
		name     string
		op       core.Operation
		req      any
		inFlight int
	}{
		{"ping64", core.OpPing, nil, 64},
		{"latestBatch", core.OpGetLatestBatch, func() any {
			ids := make(core.IDList, 10000)
			for i := range ids {
				ids[i] = core.Uint128{Hi: 7, Lo: uint64(i) + 1}
			}
			return &ids
		}(), 2},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := serveBench(b)
			c := dialBench(b, s)
			payload, err := core.AppendRequestMessage(nil, bc.op, bc.req)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(payload) + core.FrameOverhead))
			b.ResetTimer()
			var out []byte
			sent, got := 0, 0
			for got < b.N {
				out = out[:0]
				for sent < b.N && sent-got < bc.inFlight {
					c.req++
					out = core.AppendFrame(out, core.Header{ClientID: c.session, Request: c.req, Type: core.MsgRequest}, payload)
					sent++
				}
				if len(out) > 0 {
					if _, err := c.nc.Write(out); err != nil {
						b.Fatal(err)
					}
				}
				h, _, err := core.ReadFrame(c.br, nil)
				if err != nil || h.Type != core.MsgReply {
					b.Fatalf("%v %v", h.Type, err)
				}
				got++
			}
		})
	}
}
