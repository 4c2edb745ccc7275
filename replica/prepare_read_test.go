package replica

import (
	"bytes"
	"math"
	"reflect"
	"testing"

	"github.com/geoevent/geoevent/core"
)

// ring is n vertices on a circle of r degrees about (lat, lon) degrees.
func ring(lat, lon, r float64, n int) []core.Coordinate {
	out := make([]core.Coordinate, n)
	for i := range out {
		s, c := math.Sincos(2 * math.Pi * float64(i) / float64(n))
		out[i] = core.Coordinate{LatNano: int64((lat + r*s) * 1e9), LonNano: int64((lon + r*c) * 1e9)}
	}
	return out
}

// bigPolygon is a query of 1,100 vertices (preparing helps it) about
// (10, 20) degrees: an outer ring of radius 1 degree with a hole of 0.3.
func bigPolygon(cursor string) *core.PolygonQuery {
	return &core.PolygonQuery{Vertices: ring(10, 20, 1, 1000), Holes: [][]core.Coordinate{ring(10, 20, 0.3, 100)},
		Page: core.Page{Limit: 7, Cursor: cursor}}
}

// polygonEvents are 60 events on a line through bigPolygon: in its hole,
// inside it, and beyond it.
func polygonEvents() *core.InsertRequest {
	req := &core.InsertRequest{}
	for i := range 60 {
		req.Events = append(req.Events, ev(uint64(i+1), 10_000_000_000, 20_000_000_000+int64(i)*25_000_000))
	}
	return req
}

// A read prepared beside the loop (PrepareRead, ReceivePreparedRead) is
// answered exactly as the same frame received bare, with a session and
// without, page after page; a query of the same rings shares a recent
// one's polygon; small polygons, other operations and other frames are
// not prepared, and a frame that does not decode is not prepared either.
func TestPreparedReadAnswersAlike(t *testing.T) {
	n := newNode(t, Config{})
	session := n.register(1)
	if rp := n.call(1, session, 1, core.OpInsert, polygonEvents()); rp.err != nil {
		t.Fatal(rp.err)
	}
	var recent *PreparedRead
	for _, sessionless := range []bool{false, true} {
		cursor, pages, events := "", 0, 0
		for {
			p, err := core.AppendRequestMessage(nil, core.OpQueryPolygon, bigPolygon(cursor))
			if err != nil {
				t.Fatal(err)
			}
			h := core.Header{ClientID: session, Request: 1, Type: core.MsgRequest}
			if sessionless {
				h.ClientID = 0
				p = core.AppendSessionlessRead(nil, testCluster, p)
			}
			pr := PrepareRead(h, bytes.Clone(p), []*PreparedRead{nil, recent})
			if pr == nil {
				t.Fatal("a polygon query of 1,100 vertices was not prepared")
			}
			if recent == nil {
				if pr.Share(pr) || !pr.Build() || pr.Bytes() < 1100*200 {
					t.Fatalf("the polygon was not built (%d bytes)", pr.Bytes())
				}
				recent = pr
			} else if pr.Polygon() != recent.Polygon() || !reflect.DeepEqual(pr.req, PrepareRead(h, p, nil).req) {
				t.Fatal("a query of the same rings did not take the recent polygon, or not its own other fields")
			}
			if again := PrepareRead(h, p, nil); again.Polygon() != nil || !again.Share(recent) || again.Polygon() != recent.Polygon() {
				t.Fatal("a query of the same rings did not share the recent polygon")
			}
			n.r.Receive(1, h, bytes.Clone(p))
			n.settle()
			bare := n.replies(1)
			n.r.ReceivePreparedRead(1, h, bytes.Clone(p), pr)
			n.settle()
			prepared := n.replies(1)
			if len(bare) != 1 || bare[0].err != nil || !reflect.DeepEqual(bare, prepared) {
				t.Fatalf("page %d: bare %+v, prepared %+v", pages, bare, prepared)
			}
			res := bare[0].value.(*core.QueryResult)
			pages++
			events += len(res.Events)
			if !res.HasMore {
				break
			}
			cursor = res.Cursor
		}
		// The line crosses the ring at 21 degrees and the hole at 20.3:
		// 12 events in the hole, 28 in the polygon, 20 beyond.
		if events != 28 || pages < 4 {
			t.Fatalf("sessionless %v: %d events in %d pages, want 28 in 4 or more", sessionless, events, pages)
		}
	}

	h := core.Header{ClientID: session, Request: 1, Type: core.MsgRequest}
	small := bigPolygon("")
	small.Vertices, small.Holes = small.Vertices[:900], nil
	for what, req := range map[string]any{"small polygon": small, "radius": &core.RadiusQuery{Center: core.Coordinate{LatNano: 1}, RadiusMM: 1000}} {
		op := core.OpQueryPolygon
		if what == "radius" {
			op = core.OpQueryRadius
		}
		p, _ := core.AppendRequestMessage(nil, op, req)
		if PrepareRead(h, p, nil) != nil {
			t.Fatalf("a %s was prepared", what)
		}
	}
	// Other rings do not share; an invalid polygon is found so where it is
	// prepared, and the loop answers its error as for a bare frame, with
	// the limit's error first (checked before the polygon).
	p, _ := core.AppendRequestMessage(nil, core.OpQueryPolygon, &core.PolygonQuery{Vertices: ring(10, 20.001, 1, 1000), Holes: [][]core.Coordinate{ring(10, 20, 0.3, 100)}})
	if other := PrepareRead(h, p, []*PreparedRead{recent}); other == nil || other.Share(recent) || other.Polygon() != nil {
		t.Fatal("a query of other rings took the recent polygon")
	}
	bowtie := bigPolygon("")
	bowtie.Vertices[0], bowtie.Vertices[1] = bowtie.Vertices[1], bowtie.Vertices[0]
	p, _ = core.AppendRequestMessage(nil, core.OpQueryPolygon, bowtie)
	badLimit := *bowtie
	badLimit.Limit = core.MaxQueryLimit + 1
	pl, _ := core.AppendRequestMessage(nil, core.OpQueryPolygon, &badLimit)
	for _, c := range []struct {
		p    []byte
		code core.CodeInfo
	}{{p, core.InvalidPolygon}, {pl, core.QueryResultTooLarge}} {
		bad := PrepareRead(h, c.p, []*PreparedRead{recent})
		if bad == nil || !bad.Build() || bad.Polygon().Err() == nil || bad.Bytes() > 1024 {
			t.Fatal("an invalid polygon was not found so")
		}
		n.r.Receive(1, h, bytes.Clone(c.p))
		n.r.ReceivePreparedRead(1, h, bytes.Clone(c.p), bad)
		n.settle()
		if rs := n.replies(1); len(rs) != 2 || rs[0].err == nil || rs[0].err.Code != c.code.Code || !reflect.DeepEqual(rs[0], rs[1]) {
			t.Fatalf("an invalid polygon, bare and prepared: %+v %+v", rs[0].err, rs[1].err)
		}
	}
	p, _ = core.AppendRequestMessage(nil, core.OpQueryPolygon, bigPolygon(""))
	for what, f := range map[string]func() *PreparedRead{
		"register frame":    func() *PreparedRead { return PrepareRead(core.Header{Type: core.MsgRegister}, p, nil) },
		"truncated frame":   func() *PreparedRead { return PrepareRead(h, p[:len(p)-3], nil) },
		"sessionless frame": func() *PreparedRead { return PrepareRead(core.Header{Type: core.MsgRequest}, p, nil) }, // no cluster id
		"peer frame":        func() *PreparedRead { return PreparePeer(core.Header{Type: msgHeartbeat}, p, nil) },
	} {
		if f() != nil {
			t.Fatalf("a %s was prepared", what)
		}
	}
}

// A polygon query sent to a follower is forwarded to the leader, whose
// reader prepares it (PreparePeer): the answer is the one a bare frame
// gets.
func TestForwardedReadPrepared(t *testing.T) {
	c := newCluster(t, 3, Config{})
	l := c.leader()
	f := (l + 1) % 3
	w := c.client(l, 1)
	if rp := w.call(core.OpInsert, polygonEvents()); rp.err != nil {
		t.Fatal(rp.err)
	}
	cl := c.client(f, 2)
	bare := cl.call(core.OpQueryPolygon, bigPolygon(""))
	c.prepare = true
	prepared := cl.call(core.OpQueryPolygon, bigPolygon(""))
	if c.prepared != 1 {
		t.Fatalf("%d forwarded frames prepared, want 1", c.prepared)
	}
	if bare.err != nil || !reflect.DeepEqual(bare, prepared) {
		t.Fatalf("bare %+v, prepared %+v", bare, prepared)
	}
	if len(bare.value.(*core.QueryResult).Events) != 7 {
		t.Fatalf("%+v: want a page of 7", bare.value)
	}
}

// FuzzPrepareRead feeds PrepareRead and PreparePeer any payload. They must
// never panic nor change the frame; PrepareRead prepares only a polygon
// query that decodes, and a replica given the frame prepared answers as
// one given it bare.
func FuzzPrepareRead(f *testing.F) {
	p, err := core.AppendRequestMessage(nil, core.OpQueryPolygon, bigPolygon(""))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(p, false)
	f.Add(core.AppendSessionlessRead(nil, testCluster, p), true)
	f.Add(p[:len(p)-1], false)
	bad := bytes.Clone(p) // a vertex out of range: decodes, does not build
	bad[1+2+7] = 0x7f
	f.Add(bad, false)
	other, _ := core.AppendRequestMessage(nil, core.OpQueryPolygon, &core.PolygonQuery{Vertices: bigPolygon("").Vertices, Holes: bigPolygon("").Holes,
		Group: core.GroupFilter{Set: true, ID: 5}, Page: core.Page{Limit: 9, Cursor: "AAAA"}})
	f.Add(other, false) // the seed's rings, other fields
	f.Add([]byte{byte(core.OpQueryPolygon)}, false)
	f.Add([]byte{}, true)
	// A read of the seed polygon, built: a frame of its rings takes them.
	seed := PrepareRead(core.Header{ClientID: 1, Type: core.MsgRequest}, p, nil)
	if seed == nil || !seed.Build() {
		f.Fatal("the seed polygon was not prepared")
	}
	f.Fuzz(func(t *testing.T, payload []byte, sessionless bool) {
		h := core.Header{ClientID: 1, Request: 1, Type: core.MsgRequest}
		if sessionless {
			h.ClientID = 0
		}
		orig := bytes.Clone(payload)
		pr := PrepareRead(h, payload, []*PreparedRead{seed})
		alone := PrepareRead(h, payload, nil)
		PreparePeer(core.Header{Type: msgForward}, payload, []*PreparedRead{seed})
		if !bytes.Equal(payload, orig) {
			t.Fatal("preparing changed the frame")
		}
		if (pr == nil) != (alone == nil) {
			t.Fatalf("prepared %v with a recent read, %v without", pr != nil, alone != nil)
		}
		if pr == nil {
			return
		}
		if !reflect.DeepEqual(pr.req, alone.req) {
			t.Fatal("the query decoded with a recent read's rings differs from its own")
		}
		pr.Build()
		request := payload
		if sessionless {
			_, request, _ = core.CutSessionlessRead(payload)
		}
		if op, _, err := core.DecodeRequestMessage(request); op != core.OpQueryPolygon || err != nil {
			t.Fatalf("prepared a frame of operation %v (%v)", op, err)
		}
		n := newNode(t, Config{})
		h.ClientID = n.register(1)
		if sessionless {
			h.ClientID = 0
			payload = core.AppendSessionlessRead(nil, testCluster, request)
		}
		n.r.Receive(1, h, bytes.Clone(payload))
		n.settle()
		n.r.ReceivePreparedRead(1, h, bytes.Clone(payload), pr)
		n.settle()
		if rs := n.replies(1); len(rs) != 2 || !reflect.DeepEqual(rs[0], rs[1]) {
			t.Fatalf("replies: %+v", rs)
		}
	})
}
