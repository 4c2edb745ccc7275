package http

import (
	"errors"
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
// applied entries (core.AppliedWrites), read for all the streams by the
// hub, positionhub.go; see io/publish.go), with no resume (Last-Event-ID
// is not read). A reader that does not read its socket fast enough, so
// that more than positionsPendingMax bytes wait for it, gets "event:
// error" with 245 STREAM_FELL_BEHIND and the stream ends; neither the
// replica's loop nor the hub ever waits for a reader. A replica serves
// Config.MaxPositionStreams (10,000) at once; one more is 503 with 212
// CLUSTER_BUSY. A gateway without Config.Feed (a remote backend) has no
// stream: 400 INVALID_ARGUMENT.

// DefaultMaxPositionStreams bounds the position streams a gateway serves
// at once (Config.MaxPositionStreams).
const DefaultMaxPositionStreams = 10_000

// positionsTracked bounds the entities a position stream remembers having
// shown inside its area (for deletes and the move out).
const positionsTracked = 100_000

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
	inArea, covering, err := statemachine.FenceArea(def)
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
	body := errorBody(c.form, core.StreamFellBehind, "this reader fell too far behind the replica's applied events (the stream keeps a bounded buffer): open a new stream")
	failBody := append(append([]byte("event: error\ndata: "), body...), "\n\n"...)
	sub := newPosSub(inArea, covering, req.group, c.form == formA, failBody)
	g.posHub.join(sub, src, g.streams.done())
	defer g.posHub.leave(sub)

	out, ok := c.startSSE()
	if !ok {
		return nil
	}
	defer out.close()
	// A ticker, not a timer made for each wait: at each tick, a stream
	// silent for half the period writes a keep-alive, so that it is never
	// silent for longer than feedKeepAlive.
	tick := time.NewTicker(feedKeepAlive / 2)
	defer tick.Stop()
	lastWrite := time.Now()
	var spare []byte
	for {
		select {
		case <-out.gone:
			return nil
		case <-g.streams.done():
			return nil
		case <-sub.wake:
			b, failed := sub.take(spare)
			if len(b) > 0 {
				if out.write(b) != nil {
					return nil
				}
				lastWrite = time.Now()
			}
			if failed {
				return nil
			}
			spare = b
		case now := <-tick.C:
			if now.Sub(lastWrite) < feedKeepAlive/2 {
				continue
			}
			if out.write([]byte(": keep-alive\n\n")) != nil {
				return nil
			}
			lastWrite = now
		}
	}
}
