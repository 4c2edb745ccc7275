package statemachine

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/geoevent/geoevent/core"
)

// Webhooks (core/hooks.go). A hook is a name, a URL and a feed filter,
// with the sequence it has been delivered up to. The state machine only
// keeps them: the leader's io layer reads the feed, posts to the URL and
// submits hook_delivered once the receiver has acknowledged, so the
// position is replicated and a new leader resumes from it.
//
// A hook is never modified in place (a put or a delivery replaces it
// whole), so a frozen view shares them.

// hookSet is the hooks.
type hookSet struct {
	byName  map[string]*core.Hook
	names   []string // sorted
	version uint64   // the last Version given to a put
}

// PutHook defines or replaces a hook. A new hook is delivered from the
// feed's newest sequence on (the notifications made after it); a
// replaced one keeps its position, and takes a new Version.
func (sm *StateMachine) PutHook(opTS uint64, req *core.Hook) (core.PutHookReply, error) {
	if err := core.CheckHook(req); err != nil {
		return core.PutHookReply{}, err
	}
	hs := &sm.hooks
	old, exists := hs.byName[req.Name]
	if !exists && len(hs.byName) >= core.MaxHooks {
		return core.PutHookReply{}, core.Errorf(core.TooManyHooks, "there are %d hooks, the most there may be", core.MaxHooks)
	}
	h := &core.Hook{Name: strings.Clone(req.Name), URL: strings.Clone(req.URL), Types: req.Types}
	if len(req.Fences) > 0 {
		h.Fences = make([]string, len(req.Fences))
		for i, f := range req.Fences {
			h.Fences[i] = strings.Clone(f)
		}
	}
	if exists {
		h.Delivered = old.Delivered
	} else {
		h.Delivered = sm.watch.feed.lastSeq
		if hs.byName == nil {
			hs.byName = make(map[string]*core.Hook)
		}
		i, _ := slices.BinarySearch(hs.names, h.Name)
		hs.names = slices.Insert(hs.names, i, h.Name)
	}
	hs.version++
	h.Version = hs.version
	hs.byName[h.Name] = h
	return core.PutHookReply{Created: !exists}, nil
}

// GetHook returns a hook with its position.
func (sm *StateMachine) GetHook(opTS uint64, req *core.HookName) (core.Hook, error) {
	h, ok := sm.hooks.byName[req.Name]
	if !ok {
		return core.Hook{}, core.Errorf(core.HookNotFound, "no hook named %q", req.Name)
	}
	return *h, nil
}

// DeleteHook removes a hook; 242 HOOK_NOT_FOUND when there is none.
func (sm *StateMachine) DeleteHook(opTS uint64, req *core.HookName) (core.DeleteHookReply, error) {
	hs := &sm.hooks
	if _, ok := hs.byName[req.Name]; !ok {
		return core.DeleteHookReply{}, core.Errorf(core.HookNotFound, "no hook named %q", req.Name)
	}
	delete(hs.byName, req.Name)
	i, _ := slices.BinarySearch(hs.names, req.Name)
	hs.names = slices.Delete(hs.names, i, i+1)
	return core.DeleteHookReply{Deleted: true}, nil
}

// ListHooks pages through the hooks in name order, with the feed's newest
// sequence.
func (sm *StateMachine) ListHooks(opTS uint64, req *core.HookListRequest) (core.HookList, error) {
	limit := int(req.Limit)
	switch {
	case limit == 0:
		limit = core.DefaultHookList
	case limit > core.MaxHookList:
		return core.HookList{}, core.Errorf(core.QueryResultTooLarge, "limit %d exceeds %d", limit, core.MaxHookList)
	}
	hs := &sm.hooks
	i := 0
	if req.After != "" {
		var found bool
		if i, found = slices.BinarySearch(hs.names, req.After); found {
			i++
		}
	}
	out := core.HookList{Total: uint32(len(hs.names)), FeedLast: sm.watch.feed.lastSeq}
	for ; i < len(hs.names) && len(out.Hooks) < limit; i++ {
		out.Hooks = append(out.Hooks, *hs.byName[hs.names[i]])
	}
	out.HasMore = i < len(hs.names)
	return out, nil
}

// HookDelivered moves a hook's position up to req.Seq when req.Version is
// the hook's and req.Seq is above its position; otherwise it changes
// nothing and says so (Advanced false). Errors: 242 HOOK_NOT_FOUND; 108
// INVALID_ARGUMENT for a sequence the feed has not made yet.
func (sm *StateMachine) HookDelivered(opTS uint64, req *core.HookDelivered) (core.HookDeliveredReply, error) {
	h, ok := sm.hooks.byName[req.Name]
	if !ok {
		return core.HookDeliveredReply{}, core.Errorf(core.HookNotFound, "no hook named %q", req.Name)
	}
	if last := sm.watch.feed.lastSeq; req.Seq > last {
		return core.HookDeliveredReply{}, core.Errorf(core.InvalidArgument, "sequence %d is beyond the feed's newest, %d", req.Seq, last)
	}
	if req.Version != h.Version || req.Seq <= h.Delivered {
		return core.HookDeliveredReply{Delivered: h.Delivered}, nil
	}
	c := *h
	c.Delivered = req.Seq
	sm.hooks.byName[req.Name] = &c
	return core.HookDeliveredReply{Delivered: c.Delivered, Advanced: true}, nil
}

// hookView is the hooks as a snapshot sees them.
type hookView struct {
	hooks   []*core.Hook // name order
	version uint64
}

func (sm *StateMachine) hookView() hookView {
	hs := &sm.hooks
	v := hookView{hooks: make([]*core.Hook, len(hs.names)), version: hs.version}
	for i, n := range hs.names {
		v.hooks[i] = hs.byName[n]
	}
	return v
}

// The hooks section of a snapshot, after the fences and the feed, present
// only once a hook has been put (so that a state without hooks encodes,
// and digests, as before hooks existed, and snapshots of then read as a
// state without hooks):
//
//	4 magic "HOOK"
//	8 the last version given
//	4 hook count H (at most core.MaxHooks)
//	H hooks in name order, each a u32 length and get_hook's reply
//	  encoding (core.GetHook) of the hook
const hookMagic = "HOOK"

// append appends the section.
func (v *hookView) append(buf []byte) []byte {
	if len(v.hooks) == 0 && v.version == 0 {
		return buf
	}
	le := binary.LittleEndian
	buf = append(buf, hookMagic...)
	buf = le.AppendUint64(buf, v.version)
	buf = le.AppendUint32(buf, uint32(len(v.hooks)))
	for _, h := range v.hooks {
		at := len(buf)
		buf = append(buf, 0, 0, 0, 0)
		buf, _ = core.GetHook.AppendReply(buf, h) // a hook that was accepted encodes
		le.PutUint32(buf[at:], uint32(len(buf)-at-4))
	}
	return buf
}

// readHooks reads the section into sm when the snapshot has one: what
// follows the fences and the feed is then more than the checksum.
func (d *snapshotReader) readHooks(sm *StateMachine) error {
	if d.err != nil {
		return d.err
	}
	if p, _ := d.r.Peek(5); len(p) < 5 || string(p[:4]) != hookMagic {
		return nil // another section, or the checksum (readRetention decides)
	}
	d.bytes(4)
	hs := &sm.hooks
	hs.version = d.u64()
	n := binary.LittleEndian.Uint32(d.bytes(4))
	switch {
	case d.err != nil:
	case hs.version == 0:
		return d.fail("a hooks section of a state that never had a hook")
	case n > core.MaxHooks:
		return d.fail(fmt.Sprintf("%d hooks exceed %d", n, core.MaxHooks))
	}
	for i := uint32(0); i < n && d.err == nil; i++ {
		l := binary.LittleEndian.Uint32(d.bytes(4))
		if d.err != nil {
			break
		}
		if l > core.MaxFramePayload {
			return d.fail(fmt.Sprintf("hook %d is %d bytes", i, l))
		}
		b := d.blob(int(l))
		if d.err != nil {
			break
		}
		h, err := core.GetHook.DecodeReply(b)
		if err != nil {
			return d.fail(fmt.Sprintf("hook %d: %v", i, err))
		}
		def := *h
		def.Delivered, def.Version = 0, 0
		switch {
		case core.CheckHook(&def) != nil:
			return d.fail(fmt.Sprintf("hook %d is invalid", i))
		case i > 0 && h.Name <= hs.names[len(hs.names)-1]:
			return d.fail(fmt.Sprintf("hook %d is out of order", i))
		case h.Version == 0 || h.Version > hs.version || h.Delivered > sm.watch.feed.lastSeq:
			return d.fail(fmt.Sprintf("hook %d's version or position is out of range", i))
		}
		if hs.byName == nil {
			hs.byName = make(map[string]*core.Hook)
		}
		hs.byName[h.Name] = h
		hs.names = append(hs.names, h.Name)
	}
	return d.err
}
