package core

import "encoding/binary"

// Webhooks. A hook is replicated state: a name, the URL the leader posts
// the feed's notifications to, and a feed filter. put_hook, delete_hook and
// hook_delivered go through the log; the delivering itself happens outside
// the state machine, in the leader's io layer, which submits
// hook_delivered once a receiver has acknowledged a batch. The delivered
// position is therefore the same on every replica, and a new leader
// resumes from it: delivery is at least once.

// The hook operations, the codes after the fence and feed operations'.
const (
	OpPutHook       Operation = 29 // PUT /hooks/{name}
	OpGetHook       Operation = 30 // GET /hooks/{name}
	OpListHooks     Operation = 31 // GET /hooks
	OpDeleteHook    Operation = 32 // DELETE /hooks/{name}
	OpHookDelivered Operation = 33 // submitted by the leader's deliverer, not by clients
)

// Limits of hooks.
const (
	MaxHooks         = 1_000 // hooks a state machine holds
	MaxHookURLLen    = 2_048 // bytes of a hook's URL
	DefaultHookList  = 100   // hooks per list page when the request sets none
	MaxHookList      = 1_000 // hooks per list page
	MaxHookFenceList = MaxFeedFenceFilter
)

// Hook is a webhook: the request of put_hook and the reply of get_hook.
// Name follows the rules of a fence name (ValidFenceName). URL is an
// http:// or https:// URL (ValidHookURL). Fences and Types are the feed
// filter, as a feed read's: no fences means every fence, Types 0 every
// type.
//
// Delivered and Version are the state machine's, in replies only (a
// put_hook request must leave them zero). Delivered is the sequence the
// hook has been delivered up to: the notifications after it that match
// the filter are still to be posted. A new hook starts at the feed's
// newest sequence when it is put, so it posts the notifications made
// after it; putting a hook that exists keeps its position. Version
// changes with every put of the hook, so that an acknowledgement of a
// delivery under an earlier definition (another URL or filter, or a hook
// deleted and put again) does not move the new one's position.
type Hook struct {
	Name   string
	URL    string
	Fences []string
	Types  NotifyMask

	Delivered uint64
	Version   uint64
}

// PutHookReply says whether the hook is new (false: it replaced one).
type PutHookReply struct {
	Created bool
}

// HookName names one hook: the request of get_hook and delete_hook.
type HookName struct {
	Name string
}

// DeleteHookReply is delete_hook's answer; a hook that does not exist is
// 242 HOOK_NOT_FOUND instead.
type DeleteHookReply struct {
	Deleted bool
}

// HookListRequest pages through the hooks in name order, after the name
// After ("" = from the first).
type HookListRequest struct {
	After string
	Limit uint32 // 0 = DefaultHookList
}

// HookList is one page of hooks, with the total count and the sequence
// of the newest notification the feed has made (0: none), by which a
// deliverer measures how far behind each hook is.
type HookList struct {
	Hooks    []Hook
	HasMore  bool
	Total    uint32
	FeedLast uint64
}

// HookDelivered says that the notifications of the hook Name up to the
// sequence Seq have been delivered, under the hook's definition Version.
// The state machine keeps a hook's position monotonic: a lower Seq, or
// another Version, changes nothing (Advanced false); it is no error.
type HookDelivered struct {
	Name    string
	Version uint64
	Seq     uint64
}

// HookDeliveredReply is the hook's position after hook_delivered.
type HookDeliveredReply struct {
	Delivered uint64
	Advanced  bool
}

// ValidHookURL reports whether s may be a hook's URL: 1 to MaxHookURLLen
// bytes of printable ASCII without spaces, starting with http:// or
// https:// (in any case) and a host that is not empty. It is a check of
// bytes alone (no URL parser), so that every replica of every build
// agrees on it.
func ValidHookURL(s string) bool {
	if len(s) == 0 || len(s) > MaxHookURLLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	rest, ok := cutSchemeFold(s, "http://")
	if !ok {
		if rest, ok = cutSchemeFold(s, "https://"); !ok {
			return false
		}
	}
	return len(rest) > 0 && rest[0] != '/' && rest[0] != '?' && rest[0] != '#' && rest[0] != ':' && rest[0] != '@'
}

// cutSchemeFold cuts prefix (lower case ASCII) off s, ignoring the case
// of s.
func cutSchemeFold(s, prefix string) (string, bool) {
	if len(s) < len(prefix) {
		return s, false
	}
	for i := 0; i < len(prefix); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != prefix[i] {
			return s, false
		}
	}
	return s[len(prefix):], true
}

// CheckHook validates a put_hook request: 121 INVALID_HOOK for the name,
// the URL, the filter's fence names (at most MaxHookFenceList, each a
// fence name) or types, or a Delivered or Version that is not zero.
func CheckHook(h *Hook) error {
	switch {
	case !ValidFenceName(h.Name):
		return Errorf(InvalidHook, "hook name %q: want 1 to %d of A-Z a-z 0-9 _ - .", h.Name, MaxFenceNameLen)
	case !ValidHookURL(h.URL):
		return Errorf(InvalidHook, "hook %s: url: want an http:// or https:// URL with a host, of at most %d bytes of printable ASCII without spaces", h.Name, MaxHookURLLen)
	case len(h.Fences) > MaxHookFenceList:
		return Errorf(InvalidHook, "hook %s: %d fence names; at most %d", h.Name, len(h.Fences), MaxHookFenceList)
	case h.Types&^AllNotify != 0:
		return Errorf(InvalidHook, "hook %s: unknown notification types %#x", h.Name, uint8(h.Types))
	case h.Delivered != 0 || h.Version != 0:
		return Errorf(InvalidHook, "hook %s: delivered and version are the state machine's", h.Name)
	}
	for _, f := range h.Fences {
		if !ValidFenceName(f) {
			return Errorf(InvalidHook, "hook %s: fence name %q is not a fence name", h.Name, f)
		}
	}
	return nil
}

// The entries of the hook operations (in the table in optable.go).
var (
	PutHook = &Op[Hook, PutHookReply]{Code: OpPutHook, Name: "put_hook", Writes: true,
		encReq: func(e encoder, r *Hook) encoder { e.hook(r); return e },
		decReq: func(d decoder) (*Hook, decoder) { r := d.hook(); return r, d },
		encRep: func(e encoder, r *PutHookReply) encoder { e.bool(r.Created); return e },
		decRep: func(d decoder) (*PutHookReply, decoder) { r := &PutHookReply{Created: d.bool()}; return r, d }}
	GetHook = &Op[HookName, Hook]{Code: OpGetHook, Name: "get_hook",
		encReq: encHookName, decReq: decHookName,
		encRep: func(e encoder, r *Hook) encoder { e.hook(r); return e },
		decRep: func(d decoder) (*Hook, decoder) { r := d.hook(); return r, d }}
	ListHooks = &Op[HookListRequest, HookList]{Code: OpListHooks, Name: "list_hooks",
		encReq: func(e encoder, r *HookListRequest) encoder { e.str(r.After); e.u32(r.Limit); return e },
		decReq: func(d decoder) (*HookListRequest, decoder) {
			r := &HookListRequest{After: d.str("after"), Limit: d.u32()}
			return r, d
		},
		encRep: func(e encoder, r *HookList) encoder {
			if len(r.Hooks) > MaxHookList {
				e.fail(InternalError, "%d hooks exceed %d", len(r.Hooks), MaxHookList)
			}
			e.u32(uint32(len(r.Hooks)))
			for i := range r.Hooks {
				e.hook(&r.Hooks[i])
			}
			e.bool(r.HasMore)
			e.u32(r.Total)
			e.u64(r.FeedLast)
			return e
		},
		decRep: func(d decoder) (*HookList, decoder) {
			r := &HookList{}
			if n := d.count32(hookMinSize, MaxHookList, "hooks"); n > 0 {
				r.Hooks = make([]Hook, n)
				for i := range r.Hooks {
					r.Hooks[i] = *d.hook()
				}
			}
			r.HasMore = d.bool()
			r.Total = d.u32()
			r.FeedLast = d.u64()
			return r, d
		}}
	DeleteHook = &Op[HookName, DeleteHookReply]{Code: OpDeleteHook, Name: "delete_hook", Writes: true,
		encReq: encHookName, decReq: decHookName,
		encRep: func(e encoder, r *DeleteHookReply) encoder { e.bool(r.Deleted); return e },
		decRep: func(d decoder) (*DeleteHookReply, decoder) { r := &DeleteHookReply{Deleted: d.bool()}; return r, d }}
	HookDeliveredOp = &Op[HookDelivered, HookDeliveredReply]{Code: OpHookDelivered, Name: "hook_delivered", Writes: true,
		encReq: func(e encoder, r *HookDelivered) encoder { e.str(r.Name); e.u64(r.Version); e.u64(r.Seq); return e },
		decReq: func(d decoder) (*HookDelivered, decoder) {
			r := &HookDelivered{Name: d.str("name"), Version: d.u64(), Seq: d.u64()}
			return r, d
		},
		encRep: func(e encoder, r *HookDeliveredReply) encoder { e.u64(r.Delivered); e.bool(r.Advanced); return e },
		decRep: func(d decoder) (*HookDeliveredReply, decoder) {
			r := &HookDeliveredReply{Delivered: d.u64(), Advanced: d.bool()}
			return r, d
		}}
)

// hookMinSize is the smallest encoding of a hook, by which a list's
// decoder bounds its count.
const hookMinSize = 2 + 2 + 2 + 1 + 8 + 8

// hook encodes a hook: str name, u16 url length and url (up to
// MaxHookURLLen bytes), u16 fence count and str fences, u8 types, u64
// delivered, u64 version.
func (e *encoder) hook(h *Hook) {
	e.str(h.Name)
	if len(h.URL) > MaxHookURLLen {
		e.fail(InvalidHook, "a url of %d bytes exceeds %d", len(h.URL), MaxHookURLLen)
		return
	}
	e.b = binary.LittleEndian.AppendUint16(e.b, uint16(len(h.URL)))
	e.b = append(e.b, h.URL...)
	if len(h.Fences) > maxU16Count {
		e.fail(InvalidHook, "%d fence names; the encoding carries at most %d", len(h.Fences), maxU16Count)
		return
	}
	e.u16(uint16(len(h.Fences)))
	for _, f := range h.Fences {
		e.str(f)
	}
	e.b = append(e.b, byte(h.Types))
	e.u64(h.Delivered)
	e.u64(h.Version)
}

func (d *decoder) hook() *Hook {
	h := &Hook{Name: d.str("name")}
	if n := int(d.u16()); d.err == nil {
		if n > MaxHookURLLen {
			d.fail("url of %d bytes exceeds %d", n, MaxHookURLLen)
		} else {
			h.URL = string(d.take(n, "url"))
		}
	}
	if n := d.count16(2, "fence names"); n > 0 {
		h.Fences = make([]string, n)
		for i := range h.Fences {
			h.Fences[i] = d.str("fence name")
		}
	}
	h.Types = NotifyMask(d.u8())
	h.Delivered = d.u64()
	h.Version = d.u64()
	return h
}

func encHookName(e encoder, r *HookName) encoder { e.str(r.Name); return e }
func decHookName(d decoder) (*HookName, decoder) {
	r := &HookName{Name: d.str("name")}
	return r, d
}
