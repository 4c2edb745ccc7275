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

// hookName checks a hook's name: a fence name's rules.
var hookName = nameRule("hook", core.InvalidHook)

func (g *Gateway) putHook(c *call) *failure { return putNamed(c, hookName, core.PutHook, parseHook) }

func (g *Gateway) getHook(c *call) *failure { return getNamed(c, hookName, core.GetHook, (*jw).hook) }

func (g *Gateway) deleteHook(c *call) *failure { return deleteNamed(c, hookName, core.DeleteHook) }

func (g *Gateway) listHooks(c *call) *failure {
	return listNamed(c, core.MaxHookList, hookName, core.ListHooks, func(w *jw, r *core.HookList) {
		w.open()
		namedPage(w, "hooks", r.Hooks, (*jw).hook, r.HasMore, r.Total)
		w.key("feed_last")
		w.str(strconv.FormatUint(r.FeedLast, 10))
		w.close()
	})
}

// parseHook reads the body (see the top of the file) of the hook name.
// The URL and the names are checked as the state machine checks them
// (core.CheckHook), so that a bad hook is refused before it is submitted.
func parseHook(d *doc, name string) (*core.Hook, *failure) {
	if f := d.object(0, ""); f != nil {
		return nil, f
	}
	h := &core.Hook{Name: name}
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
			h.Types, f = parseTypes(d, v, name, core.InvalidHook)
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
	w.strs(h.Fences)
	w.key("types")
	types := h.Types
	if types == 0 {
		types = core.AllNotify
	}
	w.strs(typeNames(types))
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
