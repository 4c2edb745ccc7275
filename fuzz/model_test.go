package fuzz

import (
	"bytes"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"
)

// The box every input works in: 16 by 16 grid points 0.00625 degrees
// apart from 45 N 7 E (about 13 km across).
const (
	latBase  = 45_000_000_000
	lonBase  = 7_000_000_000
	gridStep = 6_250_000
	entities = 4  // entities per input
	maxOps   = 16 // operations per input

	earthRadiusM = 6_371_008.8
	// radiusBandM: an entity this close to a radius query's edge may be
	// in or out (the state machine's distance and ours differ in
	// rounding); the comparison skips it.
	radiusBandM = 2.0
	// polygonBand (nanodegrees): likewise for a rectangle's edges, which
	// are great-circle arcs: over 0.1 degree at 45 N an arc along a
	// parallel leaves it by about 10,000 nanodegrees; grid points off an
	// edge are 6,250,000 away.
	polygonBand = 100_000
)

// mEvent is an event of the model; every timestamp is the server's.
type mEvent struct {
	ts       uint64
	lat, lon int64
	ttl      uint32
}

// mEntity is an entity of the model: its events in ascending timestamp
// order and its expiry (0: never). The TTLs used are an hour or more, so
// nothing expires while an input runs.
type mEntity struct {
	evs []mEvent
	exp uint64
}

func (m *mEntity) latest() mEvent { return m.evs[len(m.evs)-1] }

// run is one input's operations against the gateway and the model.
type run struct {
	t     *testing.T
	e     *env
	ids   [entities]string
	group uint64
	model [entities]*mEntity // nil: the entity does not exist
	data  []byte
	ops   []string // what ran, for failure messages
}

func (r *run) next() byte {
	if len(r.data) == 0 {
		return 0
	}
	b := r.data[0]
	r.data = r.data[1:]
	return b
}

func (r *run) fail(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("after %v:\n%s", r.ops, fmt.Sprintf(format, args...))
}

func gridPoint(b byte) (lat, lon int64) {
	return latBase + int64(b>>4)*gridStep, lonBase + int64(b&15)*gridStep
}

// inputs numbers the inputs of this process: each gets fresh entity ids
// and a group of its own.
var inputs atomic.Uint64

// FuzzOperationsAgainstModel runs short sequences of operations through
// the gateway and compares each answer with a reference model (see the
// package documentation).
func FuzzOperationsAgainstModel(f *testing.F) {
	// Seeds in the input's encoding (see step): an operation's byte, then
	// its arguments.
	write := func(upsert bool, evs ...[3]byte) []byte { // entity, grid point, TTL
		b := []byte{0, byte(len(evs) - 1)}
		if upsert {
			b[0] = 1
		}
		for _, ev := range evs {
			b = append(b, ev[:]...)
		}
		return b
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	del := func(a, b byte) []byte { return []byte{2, a, b} }
	ttlSet := func(i, secs byte) []byte { return []byte{3, i, secs} }
	ttlClear := func(i byte) []byte { return []byte{4, i} }
	radius := func(p, m byte) []byte { return []byte{5, p, m} }
	rect := func(p, q byte) []byte { return []byte{6, p, q} }
	latest := func(i byte) []byte { return []byte{7, i} }
	history := func(i byte) []byte { return []byte{8, i} }
	batch := []byte{9}
	for _, s := range [][]byte{
		cat(write(false, [3]byte{0, 0x11, 0}, [3]byte{1, 0x22, 1}), latest(0), history(1), radius(0x11, 20), rect(0x00, 0x33), batch),
		cat(write(true, [3]byte{0, 0x55, 1}), write(true, [3]byte{0, 0x56, 0}), history(0), latest(0), ttlClear(0), batch),
		cat(write(false, [3]byte{0, 0x00, 0}, [3]byte{1, 0xff, 1}, [3]byte{2, 0x88, 0}), radius(0x88, 255), rect(0x12, 0xee), del(1, 0), latest(1), batch),
		cat(ttlSet(1, 1), write(false, [3]byte{1, 0x40, 1}), ttlClear(1), ttlSet(1, 1), history(1), ttlClear(1), ttlSet(1, 0), ttlClear(1), write(true, [3]byte{1, 0x41, 0}, [3]byte{1, 0x42, 1}), history(1), ttlClear(1)),
		cat(write(false, [3]byte{2, 0x7f, 0}, [3]byte{2, 0x7e, 1}), radius(0x7f, 1), radius(0x7e, 0), rect(0x7f, 0x7f), rect(0x6e, 0x8f), del(2, 6), history(2), latest(2)),
		{},
	} {
		f.Add(s)
	}
	e := newEnv(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		n := inputs.Add(1)
		r := &run{t: t, e: e, group: n, data: data}
		for i := range r.ids {
			r.ids[i] = fmt.Sprintf("00000000-0000-4000-8000-%012x", n*entities+uint64(i))
		}
		for len(r.ops) < maxOps && len(r.data) > 0 {
			r.step()
		}
		// Leave nothing behind; the answer is checked like any other.
		r.delete([]int{0, 1, 2, 3})
	})
}

// step decodes and runs one operation.
func (r *run) step() {
	switch op := r.next() % 10; op {
	case 0, 1:
		n := int(r.next()%3) + 1
		ents := make([]int, n)
		evs := make([]mEvent, n)
		for i := range n {
			ents[i] = int(r.next() % entities)
			evs[i].lat, evs[i].lon = gridPoint(r.next())
			if r.next()&1 == 1 {
				evs[i].ttl = 3600
			}
		}
		r.write(op == 1, ents, evs)
	case 2:
		a := int(r.next() % entities)
		ents := []int{a}
		if b := r.next(); b&4 != 0 {
			ents = append(ents, (a+1+int(b%3))%entities)
		}
		r.delete(ents)
	case 3:
		r.ttlSet(int(r.next()%entities), []uint32{0, 3600, 86400}[r.next()%3])
	case 4:
		r.ttlClear(int(r.next() % entities))
	case 5:
		lat, lon := gridPoint(r.next())
		r.radius(lat, lon, int64(r.next())*60+1)
	case 6:
		lat1, lon1 := gridPoint(r.next())
		lat2, lon2 := gridPoint(r.next())
		r.polygon(lat1, lon1, lat2, lon2)
	case 7:
		r.getLatest(int(r.next() % entities))
	case 8:
		r.history(int(r.next() % entities))
	case 9:
		r.batchLatest()
	}
}

// errorCode is a Form B error's code, or -1.
func errorCode(a answer) int64 {
	c, ok := i64(get(a.body, "error", "code"))
	if !ok {
		return -1
	}
	return c
}

func (r *run) write(upsert bool, ents []int, evs []mEvent) {
	name := "insert"
	if upsert {
		name = "upsert"
	}
	r.ops = append(r.ops, fmt.Sprintf("%s%v%v", name, ents, evs))
	var body []any
	for i, ev := range evs {
		m := map[string]any{"entity_id": r.ids[ents[i]], "lat_nano": ev.lat, "lon_nano": ev.lon, "group_id": r.group}
		if ev.ttl != 0 {
			m["ttl_seconds"] = ev.ttl
		}
		body = append(body, m)
	}
	req := map[string]any{"events": body}
	if upsert {
		req["mode"] = "upsert"
	}
	a := r.e.do(r.t, "POST", "/events", req)
	if a.status != 200 || get(a.body, "committed") != true {
		r.fail("%s: %d %s", name, a.status, a.raw)
	}
	for i, ev := range evs {
		res := get(a.body, "results", i)
		if c, _ := i64(get(res, "code")); c != 0 {
			r.fail("%s: event %d has code %d: %s", name, i, c, a.raw)
		}
		ts, ok := u64(get(res, "timestamp_ns"))
		if !ok {
			r.fail("%s: event %d has no timestamp: %s", name, i, a.raw)
		}
		ev.ts = ts
		m := r.model[ents[i]]
		if m != nil && ts <= m.latest().ts {
			r.fail("%s: event %d got timestamp %d, not after the entity's latest %d", name, i, ts, m.latest().ts)
		}
		if upsert {
			if want := m != nil; get(res, "updated") != want {
				r.fail("%s: event %d: updated should be %v: %s", name, i, want, a.raw)
			}
		}
		switch {
		case m == nil:
			m = &mEntity{evs: []mEvent{ev}}
			r.model[ents[i]] = m
		case upsert: // without a timestamp, upsert replaces the latest event
			m.evs[len(m.evs)-1] = ev
		default:
			m.evs = append(m.evs, ev)
		}
		m.exp = 0 // the newest event sets the expiry from its TTL
		if ev.ttl != 0 {
			m.exp = ts + uint64(ev.ttl)*1_000_000_000
		}
	}
}

func (r *run) delete(ents []int) {
	r.ops = append(r.ops, fmt.Sprintf("delete%v", ents))
	var ids []string
	deleted := uint64(0)
	for _, i := range ents {
		ids = append(ids, r.ids[i])
		if r.model[i] != nil {
			deleted++
		}
		r.model[i] = nil
	}
	a := r.e.do(r.t, "DELETE", "/entities", map[string]any{"entity_ids": ids})
	d, _ := u64(get(a.body, "deleted_count"))
	nf, _ := u64(get(a.body, "not_found_count"))
	if a.status != 200 || d != deleted || nf != uint64(len(ents))-deleted {
		r.fail("delete: want %d deleted, %d not found; got %d %s", deleted, uint64(len(ents))-deleted, a.status, a.raw)
	}
}

func (r *run) ttlSet(i int, secs uint32) {
	r.ops = append(r.ops, fmt.Sprintf("ttlSet(%d,%d)", i, secs))
	t0 := uint64(time.Now().UnixNano())
	a := r.e.do(r.t, "POST", "/ttl/set", map[string]any{"entity_id": r.ids[i], "ttl_seconds": secs})
	t1 := uint64(time.Now().UnixNano())
	m := r.model[i]
	if m == nil {
		if a.status != 400 || errorCode(a) != 3 {
			r.fail("ttl set of an unknown entity: want 400 with code 3, got %d %s", a.status, a.raw)
		}
		return
	}
	exp, ok := u64(get(a.body, "expires_at_ns"))
	if a.status != 200 || get(a.body, "success") != true || !ok {
		r.fail("ttl set: %d %s", a.status, a.raw)
	}
	d := uint64(secs) * 1_000_000_000
	const slack = uint64(time.Second) // the server's clock against ours
	if secs == 0 && exp != 0 || secs != 0 && (exp+slack < t0+d || exp > t1+d+slack) {
		r.fail("ttl set %d s between %d and %d: expires_at_ns %d", secs, t0, t1, exp)
	}
	m.exp = exp
}

func (r *run) ttlClear(i int) {
	r.ops = append(r.ops, fmt.Sprintf("ttlClear(%d)", i))
	a := r.e.do(r.t, "POST", "/ttl/clear", map[string]any{"entity_id": r.ids[i]})
	m := r.model[i]
	if m == nil {
		if a.status != 400 || errorCode(a) != 3 {
			r.fail("ttl clear of an unknown entity: want 400 with code 3, got %d %s", a.status, a.raw)
		}
		return
	}
	if a.status != 200 || get(a.body, "success") != true {
		r.fail("ttl clear: %d %s", a.status, a.raw)
	}
	prev := get(a.body, "previous_expires_at_ns")
	if p, ok := u64(prev); m.exp == 0 && prev != nil || m.exp != 0 && (!ok || p != m.exp) {
		r.fail("ttl clear: previous expiry should be %d (0: null): %s", m.exp, a.raw)
	}
	m.exp = 0
}

// matches reports what differs between a rendered event and the model's.
func (r *run) matches(got any, i int, want mEvent) string {
	ts, _ := u64(get(got, "timestamp_ns"))
	lat, _ := i64(get(got, "lat_nano"))
	lon, _ := i64(get(got, "lon_nano"))
	ttl, _ := u64(get(got, "ttl_seconds"))
	g, _ := u64(get(got, "group_id"))
	if get(got, "entity_id") != r.ids[i] || ts != want.ts || lat != want.lat || lon != want.lon ||
		ttl != uint64(want.ttl) || g != r.group {
		return fmt.Sprintf("got %v, want entity %s %+v in group %d", got, r.ids[i], want, r.group)
	}
	return ""
}

// entityOf is the index of an entity id of this input, or -1.
func (r *run) entityOf(v any) int {
	for i, id := range r.ids {
		if v == id {
			return i
		}
	}
	return -1
}

// spatial checks a query's answer against in, which says for a point
// whether it is inside (1), outside (-1) or too near the edge to tell (0),
// and what distance in metres the answer should carry (radius queries).
func (r *run) spatial(what string, a answer, in func(lat, lon int64) (int, float64), radius bool) {
	if a.status != 200 || get(a.body, "has_more") != false {
		r.fail("%s: %d %s", what, a.status, a.raw)
	}
	evs, _ := get(a.body, "events").([]any)
	seen := map[int]bool{}
	for _, ev := range evs {
		i := r.entityOf(get(ev, "entity_id"))
		if i < 0 || seen[i] || r.model[i] == nil {
			r.fail("%s: an event of no live entity of this input, or twice: %v in %s", what, ev, a.raw)
		}
		seen[i] = true
		want := r.model[i].latest()
		if msg := r.matches(ev, i, want); msg != "" {
			r.fail("%s: %s", what, msg)
		}
		side, dist := in(want.lat, want.lon)
		if side < 0 {
			r.fail("%s: entity %d at %d,%d is outside: %s", what, i, want.lat, want.lon, a.raw)
		}
		if radius {
			got, ok := u64(get(ev, "distance_mm"))
			if !ok || math.Abs(float64(got)/1000-dist) > radiusBandM {
				r.fail("%s: entity %d: distance_mm %v, want about %.0f m", what, i, get(ev, "distance_mm"), dist)
			}
		}
	}
	for i, m := range r.model {
		if m == nil || seen[i] {
			continue
		}
		l := m.latest()
		if side, _ := in(l.lat, l.lon); side > 0 {
			r.fail("%s: entity %d at %d,%d is inside and missing: %s", what, i, l.lat, l.lon, a.raw)
		}
	}
}

func distanceM(lat1, lon1, lat2, lon2 int64) float64 {
	rad := func(n int64) float64 { return float64(n) / 1e9 * math.Pi / 180 }
	dLat, dLon := rad(lat2-lat1), rad(lon2-lon1)
	h := math.Sin(dLat/2)*math.Sin(dLat/2) + math.Cos(rad(lat1))*math.Cos(rad(lat2))*math.Sin(dLon/2)*math.Sin(dLon/2)
	return 2 * earthRadiusM * math.Asin(math.Min(1, math.Sqrt(h)))
}

func (r *run) radius(lat, lon, m int64) {
	what := fmt.Sprintf("radius(%d,%d,%d m)", lat, lon, m)
	r.ops = append(r.ops, what)
	a := r.e.do(r.t, "POST", "/query/radius", map[string]any{
		"center_lat_nano": lat, "center_lon_nano": lon, "radius_mm": m * 1000, "group_id": r.group})
	r.spatial(what, a, func(plat, plon int64) (int, float64) {
		d := distanceM(lat, lon, plat, plon)
		switch {
		case d <= float64(m)-radiusBandM:
			return 1, d
		case d > float64(m)+radiusBandM:
			return -1, d
		}
		return 0, d
	}, true)
}

func (r *run) polygon(lat1, lon1, lat2, lon2 int64) {
	if lat1 > lat2 {
		lat1, lat2 = lat2, lat1
	}
	if lon1 > lon2 {
		lon1, lon2 = lon2, lon1
	}
	if lat1 == lat2 {
		lat2 += gridStep
	}
	if lon1 == lon2 {
		lon2 += gridStep
	}
	what := fmt.Sprintf("rectangle(%d,%d..%d,%d)", lat1, lon1, lat2, lon2)
	r.ops = append(r.ops, what)
	v := func(lat, lon int64) map[string]any { return map[string]any{"lat_nano": lat, "lon_nano": lon} }
	a := r.e.do(r.t, "POST", "/query/polygon", map[string]any{ // counter-clockwise
		"vertices": []any{v(lat1, lon1), v(lat1, lon2), v(lat2, lon2), v(lat2, lon1)}, "group_id": r.group})
	near := func(x, edge int64) bool { return x-edge < polygonBand && edge-x < polygonBand }
	r.spatial(what, a, func(lat, lon int64) (int, float64) {
		switch {
		case near(lat, lat1) || near(lat, lat2) || near(lon, lon1) || near(lon, lon2):
			return 0, 0
		case lat > lat1 && lat < lat2 && lon > lon1 && lon < lon2:
			return 1, 0
		}
		return -1, 0
	}, false)
}

func (r *run) getLatest(i int) {
	r.ops = append(r.ops, fmt.Sprintf("latest(%d)", i))
	a := r.e.do(r.t, "GET", "/entity/"+r.ids[i], nil)
	if a.status != 200 {
		r.fail("latest: %d %s", a.status, a.raw)
	}
	m := r.model[i]
	if m == nil {
		if get(a.body, "found") != false || get(a.body, "event") != nil {
			r.fail("latest of an unknown entity: %s", a.raw)
		}
		return
	}
	if get(a.body, "found") != true {
		r.fail("latest: not found: %s", a.raw)
	}
	if msg := r.matches(get(a.body, "event"), i, m.latest()); msg != "" {
		r.fail("latest: %s", msg)
	}
}

func (r *run) history(i int) {
	r.ops = append(r.ops, fmt.Sprintf("history(%d)", i))
	a := r.e.do(r.t, "GET", "/entity/"+r.ids[i]+"/history", nil)
	evs, ok := get(a.body, "events").([]any)
	if a.status != 200 || !ok || get(a.body, "has_more") != false {
		r.fail("history: %d %s", a.status, a.raw)
	}
	var want []mEvent
	if m := r.model[i]; m != nil {
		want = m.evs
	}
	if len(evs) != len(want) {
		r.fail("history: %d events, want %d: %s", len(evs), len(want), a.raw)
	}
	for k := range evs {
		if msg := r.matches(evs[k], i, want[k]); msg != "" {
			r.fail("history: event %d: %s", k, msg)
		}
	}
}

func (r *run) batchLatest() {
	r.ops = append(r.ops, "batch")
	a := r.e.do(r.t, "POST", "/entities/batch", map[string]any{"entity_ids": r.ids[:]})
	evs, ok := get(a.body, "events").([]any)
	if a.status != 200 || !ok || len(evs) != entities {
		r.fail("batch: %d %s", a.status, a.raw)
	}
	for i, m := range r.model {
		if m == nil {
			if evs[i] != nil {
				r.fail("batch: entity %d is unknown, got %v", i, evs[i])
			}
			continue
		}
		if msg := r.matches(evs[i], i, m.latest()); msg != "" {
			r.fail("batch: entity %d: %s", i, msg)
		}
	}
}
