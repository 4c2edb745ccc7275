package http

import (
	"strconv"

	"github.com/geoevent/geoevent/core"
)

// Webhooks: PUT, GET and DELETE /hooks/{name}, GET /hooks.
//
// A hook's body names the URL the leader posts the feed's notifications
// to, and the feed filter, as GET /feed's parameters:
//
//	{"url": "https://example.com/geo", "fences": ["depot"], "types": ["enter", "exit"]}
//
// fences (default: every fence) and types (default: every type) are
// optional. The answer of GET carries the hook's position: "delivered",
// the sequence (a decimal string) its receiver has acknowledged up to,
// and "version", which a put changes. The posts themselves are the
// leader's (io/webhooks.go), each a JSON body that WebhookBody renders.

const hookFieldList = "url, fences, types"

// hookName checks the path's hook name (a fence name's rules).
func hookName(s string) (string, *failure) {
	if !core.ValidFenceName(s) {
		return "", fail(core.InvalidHook, "hook name %q: want 1 to %d of A-Z a-z 0-9 _ - .", truncate(s, 80), core.MaxFenceNameLen)
	}
	return s, nil
}

// PUT /hooks/{name}.
func (g *Gateway) putHook(c *call) *failure {
	name, f := hookName(c.pathID)
	if f != nil {
		return f
	}
	d, f := c.bodyNoParams(false)
	if f != nil {
		return f
	}
	h, f := parseHook(d)
	if f != nil {
		return f
	}
	h.Name = name
	r, f := submit(c, core.PutHook, h)
	if f != nil {
		return f
	}
	return c.ok(putAnswer(name, r.Created))
}

// GET /hooks/{name}.
func (g *Gateway) getHook(c *call) *failure {
	name, f := c.namedPath(hookName)
	if f != nil {
		return f
	}
	r, f := submit(c, core.GetHook, &core.HookName{Name: name})
	if f != nil {
		return f
	}
	return c.ok(func(w *jw) { w.hook(r) })
}

// DELETE /hooks/{name}.
func (g *Gateway) deleteHook(c *call) *failure {
	name, f := c.namedPath(hookName)
	if f != nil {
		return f
	}
	if _, f := submit(c, core.DeleteHook, &core.HookName{Name: name}); f != nil {
		return f
	}
	return c.ok(deleted)
}

// GET /hooks?after=NAME&limit=N.
func (g *Gateway) listHooks(c *call) *failure {
	after, limit, f := c.namePage(core.MaxHookList, hookName)
	if f != nil {
		return f
	}
	r, f := submit(c, core.ListHooks, &core.HookListRequest{After: after, Limit: limit})
	if f != nil {
		return f
	}
	return c.ok(func(w *jw) {
		w.open()
		w.key("hooks")
		w.openArr()
		for i := range r.Hooks {
			w.hook(&r.Hooks[i])
		}
		w.closeArr()
		w.key("has_more")
		w.boolean(r.HasMore)
		w.key("total")
		w.u64(uint64(r.Total))
		w.key("feed_last")
		w.str(strconv.FormatUint(r.FeedLast, 10))
		w.close()
	})
}

// parseHook reads a hook's body (see the top of the file). The URL and
// the names are checked as the state machine checks them (core.CheckHook),
// so that a bad hook is refused before it is submitted.
func parseHook(d *doc) (*core.Hook, *failure) {
	if f := d.object(0, ""); f != nil {
		return nil, f
	}
	h := &core.Hook{}
	var f *failure
	hasURL := false
	d.members(0, func(k, v int32) bool {
		name := d.keyName(k)
		if d.isNull(v) {
			return true
		}
		switch name {
		case "url":
			hasURL = true
			h.URL, f = d.stringOf(v, name)
			if f == nil && !core.ValidHookURL(h.URL) {
				f = fail(core.InvalidHook, "url %q: want an http:// or https:// URL with a host, of at most %d bytes of printable ASCII without spaces",
					truncate(h.URL, 80), core.MaxHookURLLen)
			}
		case "fences":
			if d.nodes[v].kind != kArray {
				f = d.wrongType(v, name, "an array of fence names")
				break
			}
			if n := int(d.nodes[v].n); n > core.MaxHookFenceList {
				f = fail(core.InvalidHook, "fences: %d names; at most %d", n, core.MaxHookFenceList)
				break
			}
			for i, x := range d.elems(v) {
				var s string
				if s, f = d.stringOf(x, index(name, i)); f != nil {
					break
				}
				if !core.ValidFenceName(s) {
					f = fail(core.InvalidHook, "%s: %q is not a fence name", index(name, i), truncate(s, 80))
					break
				}
				h.Fences = append(h.Fences, s)
			}
		case "types":
			if d.nodes[v].kind != kArray {
				f = d.wrongType(v, name, `an array of "enter", "exit", "inside"`)
				break
			}
			for i, x := range d.elems(v) {
				var s string
				if s, f = d.stringOf(x, index(name, i)); f != nil {
					break
				}
				t, ok := core.ParseNotifyType(s)
				if !ok {
					f = fail(core.InvalidHook, "%s: %q is none of enter, exit, inside", index(name, i), truncate(s, 40))
					break
				}
				h.Types |= 1 << t
			}
		default:
			f = unknownField(d, k, "", hookFieldList)
		}
		return f == nil
	})
	if f != nil {
		return nil, f
	}
	if !hasURL {
		return nil, required("url")
	}
	return h, nil
}

// hook writes a hook with its position.
func (w *jw) hook(h *core.Hook) {
	w.open()
	w.key("name")
	w.str(h.Name)
	w.key("url")
	w.str(h.URL)
	w.key("fences")
	w.openArr()
	for _, f := range h.Fences {
		w.str(f)
	}
	w.closeArr()
	w.key("types")
	w.openArr()
	types := h.Types
	if types == 0 {
		types = core.AllNotify
	}
	for _, n := range typeNames(types) {
		w.str(n)
	}
	w.closeArr()
	w.key("delivered")
	w.str(strconv.FormatUint(h.Delivered, 10))
	w.key("version")
	w.u64(h.Version)
	w.close()
}

// WebhookBody is the JSON body of one webhook post (Form B):
//
//	{"hook": NAME, "trimmed": BOOL, "notifications": [...]}
//
// with the notifications rendered as GET /feed renders them. trimmed says
// the feed had dropped notifications after the hook's position before
// they were delivered: these come from the feed's start on.
func WebhookBody(hook string, ns []core.Notification, trimmed bool) []byte {
	var w jw
	w.open()
	w.key("hook")
	w.str(hook)
	w.key("trimmed")
	w.boolean(trimmed)
	w.key("notifications")
	w.openArr()
	for i := range ns {
		w.notification(&ns[i])
	}
	w.closeArr()
	w.close()
	return w.b
}
