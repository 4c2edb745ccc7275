package http

import (
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/statemachine"
)

// GET /feed/positions: every event this replica applies inside an area,
// as it applies it, as Server-Sent Events (a live map's layer).
//
//	bbox=MINLAT,MINLON,MAXLAT,MAXLON  degrees, as /query/bbox's fields (a
//	                                  box whose min_lon exceeds its max_lon
//	                                  crosses the antimeridian)
//	fence=NAME                        or the fence's shape, as it is at the
//	                                  request (its group filter included)
//	group_id=G                        only events of that group
//
// Each event is "event: position", "id:" the log index of its entry,
// "data:" the event's JSON as GET /entity/{id} shows it (Form A with
// ?form=a). An entity the stream has shown inside the area that is
// deleted, erased or expires gets "event: delete" with data
// {"entity_id": ...}; one that moves out of the area gets one more
// position (its first outside), so a map can move it out, and then none
// until it is back. The stream remembers at most positionsTracked such
// entities; those beyond get no delete and no last position.
//
// The stream is not replicated state and not durable: it is what this
// replica applies while the stream is open (the io layer's ring of the
// applied entries (core.AppliedWrites), read at the stream's own cursor;
// see io/publish.go), with no resume (Last-Event-ID is not read). A
// reader that falls more than the ring behind (it does not read its
// socket fast enough) gets "event: error" with 245 STREAM_FELL_BEHIND and
// the stream ends; the replica's loop never waits for a reader. A
// replica serves Config.MaxPositionStreams (10,000) at once; one more is 503 with 212
// CLUSTER_BUSY. A gateway without Config.Feed (a remote backend) has no
// stream: 400 INVALID_ARGUMENT.

// DefaultMaxPositionStreams bounds the position streams a gateway serves
// at once (Config.MaxPositionStreams).
const DefaultMaxPositionStreams = 10_000

// positionsTracked bounds the entities a position stream remembers having
// shown inside its area (for deletes and the move out).
const positionsTracked = 100_000

// positionsFlushBytes is how much a stream buffers before it writes.
const positionsFlushBytes = 256 << 10

// positionsRequest is a position stream's parameters: a box (as a bbox
// fence) or a fence's name, and a group.
type positionsRequest struct {
	box   *core.Fence
	fence string
	group core.GroupFilter
}

// parsePositionParams reads the parameters of GET /feed/positions.
func parsePositionParams(p params, fm form) (*positionsRequest, *failure) {
	req := &positionsRequest{}
	box, hasBox := p["bbox"]
	name, hasFence := p["fence"]
	switch {
	case hasBox && hasFence:
		return nil, malformed("give bbox or fence, not both")
	case hasFence:
		n, f := fenceName(name)
		if f != nil {
			return nil, f
		}
		req.fence = n
	case hasBox:
		parts := strings.Split(box, ",")
		if len(parts) != 4 {
			return nil, malformed("bbox: %q is not MINLAT,MINLON,MAXLAT,MAXLON in degrees", truncate(box, 80))
		}
		names := [4]string{"min_lat", "min_lon", "max_lat", "max_lon"}
		limits := [4]int64{core.MaxLatNano, core.MaxLonNano, core.MaxLatNano, core.MaxLonNano}
		var v [4]int64
		for i, s := range parts {
			d, err := parseJSON([]byte(s))
			if err != nil || d.nodes[0].kind != kNumber {
				return nil, malformed("bbox %s: %q is not a number of degrees", names[i], truncate(s, 40))
			}
			var f *failure
			if v[i], f = d.degrees(0, "bbox "+names[i], limits[i]); f != nil {
				return nil, f
			}
		}
		if v[0] > v[2] {
			return nil, fail(core.InvalidPolygon, "bbox min_lat %s exceeds max_lat %s", parts[0], parts[2])
		}
		req.box = &core.Fence{Name: "bbox", Shape: core.FenceBBox,
			Min: core.Coordinate{LatNano: v[0], LonNano: v[1]}, Max: core.Coordinate{LatNano: v[2], LonNano: v[3]}}
	default:
		return nil, malformed("give an area: bbox=MINLAT,MINLON,MAXLAT,MAXLON (degrees) or fence=NAME")
	}
	if s, ok := p["group_id"]; ok {
		d, err := parseJSON([]byte(s))
		if err != nil || d.nodes[0].kind != kNumber {
			return nil, malformed("query parameter group_id: %q is not an integer", truncate(s, 40))
		}
		id, f := d.groupID(0, "group_id", fm)
		if f != nil {
			return nil, f
		}
		req.group = core.GroupFilter{Set: true, ID: id}
	}
	return req, nil
}

// positionStreams counts the position streams open (for the limit and
// the metrics).
type positionStreams struct{ n atomic.Int64 }

// GET /feed/positions.
func (g *Gateway) positions(c *call) *failure {
	p, f := c.params("bbox", "fence", "group_id")
	if f != nil {
		return f
	}
	req, f := parsePositionParams(p, c.form)
	if f != nil {
		return f
	}
	src := g.cfg.Feed
	if src == nil {
		return fail(core.InvalidArgument, "this gateway has no replica of its own: ask a replica's gateway (replica start --http) for /feed/positions")
	}
	def := req.box
	if def == nil {
		if def, f = submit(c, core.GetFence, &core.FenceName{Name: req.fence}); f != nil {
			return f
		}
	}
	inArea, err := statemachine.FenceArea(def)
	if err != nil {
		var ce *core.Error
		if errors.As(err, &ce) {
			return fail(ce.CodeInfo, "%s", ce.Message)
		}
		return fail(core.InternalError, "%v", err)
	}
	most := int64(g.cfg.MaxPositionStreams)
	if most <= 0 {
		most = DefaultMaxPositionStreams
	}
	if g.posStreams.n.Add(1) > most {
		g.posStreams.n.Add(-1)
		return fail(core.ClusterBusy, "this replica serves %d position streams, its most: retry later, or on another replica", most)
	}
	defer g.posStreams.n.Add(-1)
	cursor := src.PositionsListen()
	defer src.PositionsUnlisten()

	out, ok := c.startSSE()
	if !ok {
		return nil
	}
	defer out.close()
	ps := positionStream{inArea: inArea, group: req.group, shown: map[core.Uint128]struct{}{}}
	ps.w.formA = c.form == formA
	write := func() bool {
		if len(ps.w.b) == 0 {
			return true
		}
		err := out.write(ps.w.b)
		ps.w.b = ps.w.b[:0]
		return err == nil
	}
	var batches []core.AppliedWrites
	lastWrite := time.Now()
	for {
		var changed <-chan struct{}
		var behind bool
		batches, cursor, changed, behind = src.PositionsAfter(cursor, batches[:0])
		if behind {
			write()
			body := errorBody(c.form, core.StreamFellBehind, "this reader fell too far behind the replica's applied events (the stream keeps a bounded buffer): open a new stream")
			ps.w.b = append(append(append(ps.w.b, "event: error\ndata: "...), body...), "\n\n"...)
			write()
			return nil
		}
		for i := range batches {
			ps.batch(&batches[i])
			if len(ps.w.b) >= positionsFlushBytes && !write() {
				return nil
			}
		}
		clear(batches) // the ring's writes are not held past their turn
		if len(ps.w.b) == 0 && time.Since(lastWrite) >= feedKeepAlive {
			ps.w.b = append(ps.w.b, ": keep-alive\n\n"...)
		}
		if len(ps.w.b) > 0 {
			if !write() {
				return nil
			}
			lastWrite = time.Now()
		}
		if changed == nil {
			continue
		}
		t := time.NewTimer(time.Until(lastWrite.Add(feedKeepAlive)))
		select {
		case <-out.gone:
			t.Stop()
			return nil
		case <-g.streams.done():
			t.Stop()
			return nil
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}

// positionStream filters applied writes to the events of one stream's
// area and renders them.
type positionStream struct {
	inArea func(latNano, lonNano int64, group uint64) bool
	group  core.GroupFilter
	shown  map[core.Uint128]struct{} // entities last shown inside the area
	w      jw
	data   jw
}

// batch renders the events of one applied entry that the stream shows.
func (ps *positionStream) batch(b *core.AppliedWrites) {
	for i := range b.Writes {
		hw := &b.Writes[i]
		switch hw.Kind {
		case core.HistoryPut:
			ev := &hw.Event
			inside := (!ps.group.Set || ps.group.ID == ev.GroupID) && ps.inArea(ev.LatNano, ev.LonNano, ev.GroupID)
			_, was := ps.shown[ev.EntityID]
			switch {
			case inside && !was && len(ps.shown) < positionsTracked:
				ps.shown[ev.EntityID] = struct{}{}
			case !inside && was:
				delete(ps.shown, ev.EntityID) // its last position, then none
			case !inside:
				continue
			}
			ps.data.b, ps.data.formA = ps.data.b[:0], ps.w.formA
			ps.data.event(ev, nil)
			ps.sse(b.Index, "position", ps.data.b)
		case core.HistoryDeleteEntity:
			if _, was := ps.shown[hw.EntityID]; was {
				delete(ps.shown, hw.EntityID)
				ps.data.b = ps.data.b[:0]
				ps.data.open()
				ps.data.key("entity_id")
				ps.data.id(hw.EntityID)
				ps.data.close()
				ps.sse(b.Index, "delete", ps.data.b)
			}
		}
	}
}

func (ps *positionStream) sse(index uint64, event string, data []byte) {
	b := append(ps.w.b, "id: "...)
	b = strconv.AppendUint(b, index, 10)
	b = append(b, "\nevent: "...)
	b = append(b, event...)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	ps.w.b = append(b, "\n\n"...)
}
