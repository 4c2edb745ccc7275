package http

import "github.com/geoevent/geoevent/core"

// Named objects: the kinds the state machine keeps by name (fences,
// hooks), each a resource of PUT, GET and DELETE /{kind}/{name} and
// GET /{kind}?after=NAME&limit=N. The kinds differ in their bodies, their
// renderings and their codes; the paths, the parameters, the order of the
// checks and the answers of a put and a delete are the same, and are here.

// nameCheck checks a name given in a path or an after parameter.
type nameCheck func(string) (string, *failure)

// nameRule is the check of a kind's names: a fence name's rules
// (core.ValidFenceName), a name outside them refused with code.
func nameRule(kind string, code core.CodeInfo) nameCheck {
	return func(s string) (string, *failure) {
		if !core.ValidFenceName(s) {
			return "", fail(code, "%s name %q: want 1 to %d of A-Z a-z 0-9 _ - .", kind, truncate(s, 80), core.MaxFenceNameLen)
		}
		return s, nil
	}
}

// putNamed answers PUT /{kind}/{name}: parse reads the body (the request
// takes no parameters) into the object op puts under the path's name, and
// the answer says whether the put created it (false: it replaced one).
func putNamed[T any, R ~struct{ Created bool }](c *call, check nameCheck, op *core.Op[T, R], parse func(d *doc, name string) (*T, *failure)) *failure {
	name, f := check(c.pathID)
	if f != nil {
		return f
	}
	d, f := c.bodyNoParams(false)
	if f != nil {
		return f
	}
	obj, f := parse(d, name)
	if f != nil {
		return f
	}
	r, f := submit(c, op, obj)
	if f != nil {
		return f
	}
	return c.ok(func(w *jw) {
		w.open()
		w.key("name")
		w.str(name)
		w.key("created")
		w.boolean(struct{ Created bool }(*r).Created)
		w.close()
	})
}

// getNamed answers GET /{kind}/{name}: the object op finds under the
// path's name, as write renders it.
func getNamed[N ~struct{ Name string }, T any](c *call, check nameCheck, op *core.Op[N, T], write func(*jw, *T)) *failure {
	name, f := c.namedPath(check)
	if f != nil {
		return f
	}
	r, f := submit(c, op, &N{Name: name})
	if f != nil {
		return f
	}
	return c.ok(func(w *jw) { write(w, r) })
}

// deleteNamed answers DELETE /{kind}/{name}: {"deleted": true} once op
// has removed the object (a missing one is op's not-found code).
func deleteNamed[N ~struct{ Name string }, R any](c *call, check nameCheck, op *core.Op[N, R]) *failure {
	name, f := c.namedPath(check)
	if f != nil {
		return f
	}
	if _, f := submit(c, op, &N{Name: name}); f != nil {
		return f
	}
	return c.ok(func(w *jw) {
		w.open()
		w.key("deleted")
		w.boolean(true)
		w.close()
	})
}

// namedPath checks a request on a named object's path: no parameters, and
// a name that check accepts.
func (c *call) namedPath(check nameCheck) (string, *failure) {
	if _, f := c.params(); f != nil {
		return "", f
	}
	return check(c.pathID)
}

// listNamed answers GET /{kind}?after=NAME&limit=N: the page op returns
// after the name after (a name that check accepts, or none) of at most
// limit objects (at most most; 0: op's default), as write renders it.
func listNamed[Q ~struct {
	After string
	Limit uint32
}, L any](c *call, most uint64, check nameCheck, op *core.Op[Q, L], write func(*jw, *L)) *failure {
	p, f := c.params("after", "limit")
	if f != nil {
		return f
	}
	limit, f := p.u64("limit")
	if f != nil {
		return f
	}
	if limit > most {
		return fail(core.QueryResultTooLarge, "limit %d exceeds %d", limit, most)
	}
	after := p["after"]
	if after != "" {
		if after, f = check(after); f != nil {
			return f
		}
	}
	r, f := submit(c, op, &Q{After: after, Limit: uint32(limit)})
	if f != nil {
		return f
	}
	return c.ok(func(w *jw) { write(w, r) })
}

// namedPage writes the members a page of named objects begins with: key's
// array of the objects, as write renders each, has_more and total.
func namedPage[T any](w *jw, key string, objs []T, write func(*jw, *T), hasMore bool, total uint32) {
	w.key(key)
	w.openArr()
	for i := range objs {
		write(w, &objs[i])
	}
	w.closeArr()
	w.key("has_more")
	w.boolean(hasMore)
	w.key("total")
	w.u64(uint64(total))
}

// strs writes an array of strings.
func (w *jw) strs(ss []string) {
	w.openArr()
	for _, s := range ss {
		w.str(s)
	}
	w.closeArr()
}
