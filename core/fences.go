package core

import "fmt"

// Geofences and the change feed (issue 38). A fence is replicated state:
// put_fence and delete_fence go through the log; every applied write is
// judged against the fences, and each transition it makes is a
// notification appended to the feed, which read_feed pages through.

// The fence and feed operations. Codes 24-28 leave 18-23 to the query
// operations being added beside them; codes are never reused.
const (
	OpPutFence    Operation = 24 // PUT /fences/{name}
	OpGetFence    Operation = 25 // GET /fences/{name}
	OpListFences  Operation = 26 // GET /fences
	OpDeleteFence Operation = 27 // DELETE /fences/{name}
	OpReadFeed    Operation = 28 // GET /feed
)

// FenceShape is the kind of a fence's area.
type FenceShape uint8

const (
	FencePolygon FenceShape = 1 // Vertices and Holes, as a polygon query
	FenceCircle  FenceShape = 2 // the points within RadiusMM of Center, as a radius query
	FenceBBox    FenceShape = 3 // Min.LatNano <= lat <= Max.LatNano, longitude from Min.LonNano east to Max.LonNano
)

func (s FenceShape) String() string {
	switch s {
	case FencePolygon:
		return "polygon"
	case FenceCircle:
		return "circle"
	case FenceBBox:
		return "bbox"
	}
	return fmt.Sprintf("shape(%d)", uint8(s))
}

// NotifyType is a notification's kind; as a bit set (NotifyMask) it says
// which kinds a fence reports or a feed reader wants.
type NotifyType uint8

const (
	NotifyEnter  NotifyType = 1 // the entity's latest position moved from outside the fence to inside
	NotifyExit   NotifyType = 2 // from inside to outside, or the entity inside was deleted or expired
	NotifyInside NotifyType = 3 // from inside to inside: a move within the fence
)

func (t NotifyType) String() string {
	switch t {
	case NotifyEnter:
		return "enter"
	case NotifyExit:
		return "exit"
	case NotifyInside:
		return "inside"
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// ParseNotifyType reads "enter", "exit" or "inside".
func ParseNotifyType(s string) (NotifyType, bool) {
	switch s {
	case "enter":
		return NotifyEnter, true
	case "exit":
		return NotifyExit, true
	case "inside":
		return NotifyInside, true
	}
	return 0, false
}

// NotifyMask is a set of notification types: bit 1<<t for type t.
type NotifyMask uint8

// DefaultNotify is what a fence that names no types reports.
const DefaultNotify = NotifyMask(1<<NotifyEnter | 1<<NotifyExit)

// AllNotify is every type.
const AllNotify = NotifyMask(1<<NotifyEnter | 1<<NotifyExit | 1<<NotifyInside)

// Has reports whether t is in m.
func (m NotifyMask) Has(t NotifyType) bool { return t <= NotifyInside && m&(1<<t) != 0 }

// Limits of fences and the feed.
const (
	MaxFences          = 1_000_000 // fences a state machine holds
	MaxFenceNameLen    = 64        // bytes; see ValidFenceName
	DefaultFenceList   = 100       // fences per list page when the request sets none
	MaxFenceList       = 1_000     // fences per list page
	DefaultFeedLimit   = 1_000     // notifications per feed page when the request sets none
	MaxFeedLimit       = 10_000    // notifications per feed page
	MaxFeedFenceFilter = 64        // fence names in one feed filter

	// DefaultFeedRetentionNS and DefaultFeedRetentionCount bound the
	// feed: notifications older than the first (by their operation's
	// time) or beyond the newest second are dropped.
	DefaultFeedRetentionNS    = 24 * 3600 * 1_000_000_000
	DefaultFeedRetentionCount = 10_000_000
)

// ValidFenceName reports whether s is a fence name: 1 to 64 bytes of ASCII
// letters, digits, '_', '-' and '.', so that a name is a URL path segment
// and a feed filter's comma-separated list element as it is.
func ValidFenceName(s string) bool {
	if len(s) == 0 || len(s) > MaxFenceNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// Fence is a fence's definition: the request of put_fence and the reply
// of get_fence. Fields of the other shapes are zero.
type Fence struct {
	Name  string
	Shape FenceShape

	Vertices []Coordinate   // polygon
	Holes    [][]Coordinate // polygon

	Center   Coordinate // circle
	RadiusMM uint64     // circle

	Min, Max Coordinate // bbox: south-west and north-east corners

	Group  GroupFilter // only entities whose latest event has this group_id
	Report NotifyMask  // the types it reports; 0 = DefaultNotify
}

// PutFenceReply says whether the fence is new (false: it replaced one).
type PutFenceReply struct {
	Created bool
}

// FenceName names one fence: the request of get_fence and delete_fence.
type FenceName struct {
	Name string
}

// DeleteFenceReply is delete_fence's answer; a fence that does not exist
// is 240 FENCE_NOT_FOUND instead.
type DeleteFenceReply struct {
	Deleted bool
}

// FenceListRequest pages through the fences in name order, after the name
// After ("" = from the first).
type FenceListRequest struct {
	After string
	Limit uint32 // 0 = DefaultFenceList
}

// FenceList is one page of fences, with the total count.
type FenceList struct {
	Fences  []Fence
	HasMore bool
	Total   uint32
}

// FeedRequest reads the feed: the notifications with sequence numbers
// above After, of the fences named (none = every fence) and the types in
// Types (0 = every type), at most Limit of them.
type FeedRequest struct {
	After  uint64
	Fences []string
	Types  NotifyMask
	Limit  uint32 // 0 = DefaultFeedLimit
}

// Notification is one entry of the feed: a transition of Event's entity
// with respect to Fence. Seq is the log index of the write that made it
// times 2^32 plus its position among that write's notifications, so it
// grows with the log and is the same on every replica. Prev is the
// entity's latest position before Event (HasPrev false: the entity was
// new). An exit by deletion or expiry carries the entity's last event as
// Event and Prev both.
type Notification struct {
	Seq     uint64
	Type    NotifyType
	Fence   string
	Event   GeoEvent
	Prev    Coordinate
	HasPrev bool
	OpNS    uint64 // the time of the operation that made it
}

// FeedPage is a page of the feed. Start is the sequence of the oldest
// notification the feed retains (0: none yet). Next is where the page
// ends: the reader asks for the notifications after Next to go on (it
// passes notifications that the filter skipped, and equals the request's
// After when the feed holds nothing newer). HasMore says the feed holds
// notifications after Next now. Last is the sequence of the newest
// notification the feed has made (0: none), by which a reader that wants
// only new notifications starts at the end (FeedEnd).
type FeedPage struct {
	Notifications []Notification
	Start, Next   uint64
	HasMore       bool
	Last          uint64
}

// FeedEnd, as a FeedRequest's After, asks for the notifications after the
// newest the serving replica has made: the page is empty, and its Next
// and Last are that sequence, from which the reader goes on. No sequence
// reaches it (a sequence is a log index times 2^32 plus a count).
const FeedEnd = ^uint64(0)

// The entries of the fence and feed operations (appended to the table in
// optable.go).
var (
	PutFence = &Op[Fence, PutFenceReply]{Code: OpPutFence, Name: "put_fence", Writes: true,
		encReq: func(e encoder, r *Fence) encoder { e.fence(r); return e },
		decReq: func(d decoder) (*Fence, decoder) { r := d.fence(); return r, d },
		encRep: func(e encoder, r *PutFenceReply) encoder { e.bool(r.Created); return e },
		decRep: func(d decoder) (*PutFenceReply, decoder) { r := &PutFenceReply{Created: d.bool()}; return r, d }}
	GetFence = &Op[FenceName, Fence]{Code: OpGetFence, Name: "get_fence",
		encReq: encFenceName, decReq: decFenceName,
		encRep: func(e encoder, r *Fence) encoder { e.fence(r); return e },
		decRep: func(d decoder) (*Fence, decoder) { r := d.fence(); return r, d }}
	ListFences = &Op[FenceListRequest, FenceList]{Code: OpListFences, Name: "list_fences",
		encReq: func(e encoder, r *FenceListRequest) encoder { e.str(r.After); e.u32(r.Limit); return e },
		decReq: func(d decoder) (*FenceListRequest, decoder) {
			r := &FenceListRequest{After: d.str("after"), Limit: d.u32()}
			return r, d
		},
		encRep: func(e encoder, r *FenceList) encoder {
			e.u32(uint32(len(r.Fences)))
			for i := range r.Fences {
				e.fence(&r.Fences[i])
			}
			e.bool(r.HasMore)
			e.u32(r.Total)
			return e
		},
		decRep: func(d decoder) (*FenceList, decoder) {
			r := &FenceList{}
			if n := d.count32(fenceMinSize, MaxFenceList, "fences"); n > 0 {
				r.Fences = make([]Fence, n)
				for i := range r.Fences {
					r.Fences[i] = *d.fence()
				}
			}
			r.HasMore = d.bool()
			r.Total = d.u32()
			return r, d
		}}
	DeleteFence = &Op[FenceName, DeleteFenceReply]{Code: OpDeleteFence, Name: "delete_fence", Writes: true,
		encReq: encFenceName, decReq: decFenceName,
		encRep: func(e encoder, r *DeleteFenceReply) encoder { e.bool(r.Deleted); return e },
		decRep: func(d decoder) (*DeleteFenceReply, decoder) { r := &DeleteFenceReply{Deleted: d.bool()}; return r, d }}
	ReadFeed = &Op[FeedRequest, FeedPage]{Code: OpReadFeed, Name: "read_feed",
		encReq: func(e encoder, r *FeedRequest) encoder {
			e.u64(r.After)
			if len(r.Fences) > maxU16Count {
				e.fail(InvalidArgument, "%d fence names; the encoding carries at most %d", len(r.Fences), maxU16Count)
			}
			e.u16(uint16(len(r.Fences)))
			for _, f := range r.Fences {
				e.str(f)
			}
			e.b = append(e.b, byte(r.Types))
			e.u32(r.Limit)
			return e
		},
		decReq: func(d decoder) (*FeedRequest, decoder) {
			r := &FeedRequest{After: d.u64()}
			if n := d.count16(2, "fence names"); n > 0 {
				r.Fences = make([]string, n)
				for i := range r.Fences {
					r.Fences[i] = d.str("fence name")
				}
			}
			r.Types = NotifyMask(d.u8())
			r.Limit = d.u32()
			return r, d
		},
		encRep: func(e encoder, r *FeedPage) encoder {
			if len(r.Notifications) > MaxFeedLimit {
				e.fail(InternalError, "%d notifications exceed %d", len(r.Notifications), MaxFeedLimit)
			}
			e.u32(uint32(len(r.Notifications)))
			for i := range r.Notifications {
				n := &r.Notifications[i]
				e.u64(n.Seq)
				e.b = append(e.b, byte(n.Type))
				e.str(n.Fence)
				e.b = n.Event.AppendRecord(e.b)
				e.bool(n.HasPrev)
				e.coord(n.Prev)
				e.u64(n.OpNS)
			}
			e.u64(r.Start)
			e.u64(r.Next)
			e.bool(r.HasMore)
			if r.Last != 0 { // optional, so that pages of before it decode
				e.u64(r.Last)
			}
			return e
		},
		decRep: func(d decoder) (*FeedPage, decoder) {
			r := &FeedPage{}
			if n := d.count32(notificationMinSize, MaxFeedLimit, "notifications"); n > 0 {
				r.Notifications = make([]Notification, n)
				for i := range r.Notifications {
					x := &r.Notifications[i]
					x.Seq = d.u64()
					x.Type = NotifyType(d.u8())
					x.Fence = d.str("fence")
					d.record(i, &x.Event)
					x.HasPrev = d.bool()
					x.Prev = d.coord()
					x.OpNS = d.u64()
				}
			}
			r.Start = d.u64()
			r.Next = d.u64()
			r.HasMore = d.bool()
			if d.err == nil && len(d.b) > 0 {
				if r.Last = d.u64(); d.err == nil && r.Last == 0 {
					d.fail("a trailing last of 0")
				}
			}
			return r, d
		}}
)

// Sizes of the smallest encodings, by which decoders bound counts.
const (
	fenceMinSize        = 2 + 1 + 2 + 2 + 16 + 8 + 16 + 16 + 9 + 1
	notificationMinSize = 8 + 1 + 2 + RecordSize + 1 + 16 + 8
)

// fence encodes a fence: str name, u8 shape, ring vertices, u16 hole
// count and rings, coord center, u64 radius_mm, coord min, coord max,
// group, u8 report.
func (e *encoder) fence(f *Fence) {
	e.str(f.Name)
	e.b = append(e.b, byte(f.Shape))
	e.polygon(f.Vertices, f.Holes)
	e.coord(f.Center)
	e.u64(f.RadiusMM)
	e.coord(f.Min)
	e.coord(f.Max)
	e.group(f.Group)
	e.b = append(e.b, byte(f.Report))
}

func (d *decoder) fence() *Fence {
	f := &Fence{Name: d.str("name"), Shape: FenceShape(d.u8())}
	f.Vertices, f.Holes = d.polygon()
	f.Center = d.coord()
	f.RadiusMM = d.u64()
	f.Min = d.coord()
	f.Max = d.coord()
	f.Group = d.group()
	f.Report = NotifyMask(d.u8())
	return f
}

// polygon encodes rings as a polygon query does: ring vertices, u16 hole
// count, that many rings.
func (e *encoder) polygon(vertices []Coordinate, holes [][]Coordinate) {
	e.ring(vertices, "vertices")
	if len(holes) > maxU16Count {
		e.fail(PolygonTooComplex, "%d holes; the encoding carries at most %d", len(holes), maxU16Count)
	}
	e.u16(uint16(len(holes)))
	for _, h := range holes {
		e.ring(h, "hole")
	}
}

func (d *decoder) polygon() (vertices []Coordinate, holes [][]Coordinate) {
	vertices = d.ring("vertices")
	if n := d.count16(2, "holes"); n > 0 {
		holes = make([][]Coordinate, n)
		for i := range holes {
			holes[i] = d.ring("hole")
		}
	}
	return vertices, holes
}

func encFenceName(e encoder, r *FenceName) encoder { e.str(r.Name); return e }
func decFenceName(d decoder) (*FenceName, decoder) {
	r := &FenceName{Name: d.str("name")}
	return r, d
}
