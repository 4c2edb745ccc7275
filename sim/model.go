package sim

import (
	"fmt"
	"hash/fnv"
	"math"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/geoevent/geoevent/core"
)

// The per-entity model: a sequential specification of one entity, against
// which porcupine checks the projection of the history onto that entity.
// See the package documentation for how operations are projected.
//
// The model mirrors the state machine's semantics (package statemachine):
// an entity is its events in ascending timestamp order plus an expiry; it
// is visible at an operation's timestamp t when the expiry is 0 or t is
// before it; a write to an invisible entity erases it first; insert appends
// and fails only on an existing key; upsert replaces the named event or,
// without a timestamp, the latest one; a batch commits all or nothing; the
// newest event sets the expiry from its TTL; the TTL operations change it.
//
// Every event also has an expiry of its own, its timestamp plus its TTL
// (none without a TTL; expiryOf). It decides only for the older events
// (all but the latest, whose visibility is the entity's): an older event
// of a visible entity is visible at t when it has no TTL or t is before
// its own expiry, whatever the entity's expiry was while it was the latest.
// History reads show (and page over) the visible events only; an insert
// fails with EVENT_EXISTS only on a key a visible event holds; a write on
// the key of an expired older event takes its place as if it were absent
// (updated false). Operation timestamps only grow, so an expired older
// event stays invisible: put drops the older events that have certainly
// expired at the write (pruneExpired), which changes nothing the model
// accepts and keeps states that differ only in them from multiplying.
// Cleanup, which also removes expired older events now, is left out as
// before: it removes only what is invisible.
//
// The model does not know an operation's timestamp, only bounds for it
// (pin.tLo..pin.tHi: the realtime when it was called and when it returned).
// Timestamps the replies reveal (event timestamps, new expiries) are used
// exactly; an event of a write whose outcome is unknown has a timestamp
// known only within bounds. Where the bounds leave a choice open (is the
// entity expired at this operation?), the model is nondeterministic and
// follows every possibility.

// mev is one stored event of the model.
type mev struct {
	ev     *core.GeoEvent // as the client sent it (timestamp 0 = server assigned, no cell)
	lo, hi uint64         // bounds of its timestamp; equal once known
	fresh  bool           // its timestamp was assigned by the server
}

// mstate is the state of one entity. It is never modified: steps build
// new states.
type mstate struct {
	evs          []mev  // ascending timestamps; empty: nothing stored
	expLo, expHi uint64 // bounds of the expiry; both 0: never expires
}

type pkind uint8

const (
	pkWrite     pkind = iota // insert or upsert: this entity's events of the batch
	pkDelete                 // delete naming this entity
	pkTTLSet                 //
	pkTTLExtend              //
	pkTTLClear               //
	pkLatest                 // get latest, latest batch: every position naming this entity
	pkHistory                // this entity's history
	pkSpatial                // radius or polygon query: this entity's part of the result
	pkLatestAll              // query latest: this entity's part of the result
)

// pin is the input of an operation projected onto one entity.
type pin struct {
	kind     pkind
	op       *opRec
	tLo, tHi uint64

	upsert bool
	evs    []pev // pkWrite: this entity's events, in batch order

	count int  // pkDelete: how often the entity is named
	exact bool // pkDelete: the only entity named, so the counts are its own

	secs uint32 // TTL set and extend

	from, until uint64 // pkHistory: the timestamp range
	limit       int    // pkHistory: the page size

	group   core.GroupFilter // pkSpatial, pkLatestAll
	since   uint64           // pkLatestAll
	partial bool             // pkSpatial, pkLatestAll: a later page, where absence proves nothing
}

type pev struct {
	idx    int
	ev     *core.GeoEvent
	static core.Code // the event's code that does not depend on state
}

// pout is the output of an operation projected onto one entity.
type pout struct {
	known bool // false: the outcome is unknown (a write whose session expired, or never answered)
	code  core.Code

	committed bool
	res       []core.EventResult // pkWrite: parallel to pin.evs

	deleted, notFound uint32

	exp, prev uint64 // TTL: new expiry; previous expiry
	hadTTL    bool

	latest  []core.LatestResult // pkLatest
	events  []core.GeoEvent     // pkHistory: the page; pkSpatial, pkLatestAll: this entity's events in the result
	dists   []uint64            // pkSpatial radius: parallel to events
	hasMore bool
}

const never = 0

func satAdd(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

func (s mstate) neverExpires() bool { return s.expLo == never && s.expHi == never }

// visOptions: can the entity be visible, and can it be invisible, at an
// operation whose timestamp lies in [tLo, tHi]? (Visible iff t < expiry.)
func (s mstate) visOptions(tLo, tHi uint64) []bool {
	switch {
	case len(s.evs) == 0:
		return []bool{false}
	case s.neverExpires():
		return []bool{true}
	}
	var out []bool
	if tLo < s.expHi {
		out = append(out, true)
	}
	if tHi >= s.expLo {
		out = append(out, false)
	}
	return out
}

func (s mstate) latest() *mev { return &s.evs[len(s.evs)-1] }

func (s mstate) maxLo() uint64 {
	m := uint64(0)
	for _, e := range s.evs {
		m = max(m, e.lo)
	}
	return m
}

// keyAt is the index of the event at exactly client timestamp ts, or -1.
// (Server timestamps lie after the run's start, client ones before.)
func (s mstate) keyAt(ts uint64) int {
	for i, e := range s.evs {
		if !e.fresh && e.lo == ts {
			return i
		}
	}
	return -1
}

func expiryOf(e mev) (uint64, uint64) {
	if e.ev.TTLSeconds == 0 {
		return never, never
	}
	ttl := uint64(e.ev.TTLSeconds) * 1_000_000_000
	return satAdd(e.lo, ttl), satAdd(e.hi, ttl)
}

// olderVis: can e, as an older event (not the latest) of a visible entity,
// be visible, and can it be invisible, at an operation whose timestamp
// lies in [tLo, tHi]? It is visible iff it has no TTL or t is before its
// own expiry.
func olderVis(e *mev, tLo, tHi uint64) (vis, invis bool) {
	if e.ev.TTLSeconds == 0 {
		return true, false
	}
	lo, hi := expiryOf(*e)
	return tLo < hi, tHi >= lo
}

// pruneExpired drops the older events of s that have certainly expired at
// an operation whose timestamp is at least tLo. Every later operation has
// a later timestamp, so they stay invisible, and a write on their key
// finds them absent (updated false, no EVENT_EXISTS) as it finds no event:
// dropping them changes nothing the model accepts. s.evs must not be
// shared (put calls it on the slice it built).
func pruneExpired(s mstate, tLo uint64) mstate {
	if len(s.evs) < 2 {
		return s
	}
	last := len(s.evs) - 1
	kept := s.evs[:0]
	for i, e := range s.evs {
		if vis, _ := olderVis(&e, tLo, tLo); i == last || vis {
			kept = append(kept, e)
		}
	}
	s.evs = kept
	return s
}

// matches: is got the model's event e (content as sent, timestamp within
// bounds)? The cell id is checked elsewhere.
func matches(e *mev, got *core.GeoEvent) bool {
	want := *e.ev
	want.TimestampNS, want.CellID = got.TimestampNS, got.CellID
	return want == *got && got.TimestampNS >= e.lo && got.TimestampNS <= e.hi
}

// step is the nondeterministic step function.
func step(state, input, output any) []any {
	s, in, out := state.(mstate), input.(*pin), output.(*pout)
	var next []mstate
	switch in.kind {
	case pkWrite:
		next = stepWrite(s, in, out)
	case pkDelete:
		next = stepDelete(s, in, out)
	case pkTTLSet, pkTTLExtend, pkTTLClear:
		next = stepTTL(s, in, out)
	default:
		if readOK(s, in, out) {
			next = []mstate{s}
		}
	}
	res := make([]any, len(next))
	for i := range next {
		res[i] = next[i]
	}
	return res
}

func stepWrite(s mstate, in *pin, out *pout) []mstate {
	if out.known && out.code != 0 {
		return nil
	}
	var next []mstate
	if !out.known {
		next = append(next, s) // not executed, or not committed
	}
	for _, vis := range s.visOptions(in.tLo, in.tHi) {
		for _, codes := range validate(s, in, vis) {
			failed := false
			for _, c := range codes {
				failed = failed || c != 0
			}
			if !out.known {
				if !failed {
					next = append(next, applyWrite(s, in, vis, nil)...)
				}
				continue
			}
			ok := true
			for i := range in.evs {
				if out.res[i].Code != codes[i] {
					ok = false
				}
			}
			switch {
			case !ok || (failed && out.committed):
			case !out.committed:
				next = append(next, s)
			default:
				next = append(next, applyWrite(s, in, vis, out.res)...)
			}
		}
	}
	return next
}

// validate gives every combination of codes the batch's events can get
// from validation, on the state before the batch with the entity visible
// or not: more than one where an insert names the key of an older event
// that may or may not have expired at the operation (EVENT_EXISTS only if
// it is visible).
func validate(s mstate, in *pin, vis bool) [][]core.Code {
	combos := [][]core.Code{nil}
	for i, pe := range in.evs {
		opts := []core.Code{pe.static}
		if ts := pe.ev.TimestampNS; pe.static == 0 && !in.upsert && ts != 0 {
			opts = []core.Code{0}
			dupInBatch := false
			for j := 0; j < i && !dupInBatch; j++ {
				// An earlier event of the batch on this key passed
				// (a duplicate now), or failed on it: the key is held
				// by a visible event, or by an event of the batch
				// before it. Either way this one fails too.
				dupInBatch = in.evs[j].static == 0 && in.evs[j].ev.TimestampNS == ts
			}
			k := -1
			if vis {
				k = s.keyAt(ts)
			}
			switch {
			case dupInBatch, k >= 0 && k == len(s.evs)-1:
				opts[0] = core.EventExists.Code
			case k >= 0:
				canVis, canInvis := olderVis(&s.evs[k], in.tLo, in.tHi)
				opts = opts[:0]
				if canVis {
					opts = append(opts, core.EventExists.Code)
				}
				if canInvis {
					opts = append(opts, 0)
				}
			}
		}
		var grown [][]core.Code
		for _, c := range combos {
			for _, o := range opts {
				grown = append(grown, append(c[:len(c):len(c)], o))
			}
		}
		combos = grown
	}
	return combos
}

// applyWrite puts the batch's events of this entity in order; res, when
// known, gives each one's result (timestamp, updated).
func applyWrite(s mstate, in *pin, firstVis bool, res []core.EventResult) []mstate {
	states := []mstate{s}
	for i, pe := range in.evs {
		var r *core.EventResult
		if res != nil {
			r = &res[i]
		}
		var next []mstate
		for _, st := range states {
			opts := []bool{firstVis}
			if i > 0 {
				opts = st.visOptions(in.tLo, in.tHi)
			}
			for _, vis := range opts {
				if ns, ok := put(st, in, pe, vis, r); ok {
					next = append(next, ns)
				}
			}
		}
		states = next
	}
	return states
}

// put stores one event (statemachine's put).
func put(s mstate, in *pin, pe pev, vis bool, r *core.EventResult) (mstate, bool) {
	fresh := pe.ev.TimestampNS == 0
	ne := mev{ev: pe.ev, fresh: fresh}
	switch {
	case !fresh:
		ne.lo, ne.hi = pe.ev.TimestampNS, pe.ev.TimestampNS
		if r != nil && r.TimestampNS != ne.lo {
			return s, false
		}
	case r != nil:
		ts := r.TimestampNS
		if ts < in.tLo || ts > in.tHi || ts <= s.maxLo() {
			return s, false
		}
		ne.lo, ne.hi = ts, ts
	default:
		ne.lo = max(in.tLo, s.maxLo()+1)
		ne.hi = max(in.tHi, ne.lo)
	}
	evs := s.evs
	if !vis {
		evs = nil // an expired entity is erased before the write
	}
	var ns mstate
	updated := false
	becomesLatest := true
	switch {
	case len(evs) == 0:
		ns.evs = []mev{ne}
	case fresh && in.upsert:
		ns.evs = append(append(make([]mev, 0, len(evs)), evs[:len(evs)-1]...), ne)
		updated = true
	case fresh:
		ns.evs = append(append(make([]mev, 0, len(evs)+1), evs...), ne)
	default:
		// A client timestamp: its place among the client-timestamped
		// events, which all precede the server-timestamped ones.
		i := 0
		for i < len(evs) && !evs[i].fresh && evs[i].lo < ne.lo {
			i++
		}
		if i < len(evs) && !evs[i].fresh && evs[i].lo == ne.lo {
			becomesLatest = i == len(evs)-1
			if becomesLatest {
				// The latest event is visible with its entity.
				if !in.upsert {
					return s, false // validation rejects an existing key
				}
				updated = true
			} else {
				// An older event: an expired one is absent, and the
				// new event takes its place (updated false); a
				// visible one is replaced by an upsert (updated
				// true), while an insert fails validation on it.
				canVis, canInvis := olderVis(&evs[i], in.tLo, in.tHi)
				switch {
				case r != nil && r.Updated:
					if !in.upsert || !canVis {
						return s, false
					}
					updated = true
				case !canInvis:
					if !in.upsert || r != nil {
						return s, false
					}
					updated = true
				}
			}
			ns.evs = append([]mev(nil), evs...)
			ns.evs[i] = ne
		} else {
			ns.evs = make([]mev, 0, len(evs)+1)
			ns.evs = append(append(append(ns.evs, evs[:i]...), ne), evs[i:]...)
			becomesLatest = i == len(evs)
		}
	}
	if r != nil && r.Updated != updated {
		return s, false
	}
	if becomesLatest {
		ns.expLo, ns.expHi = expiryOf(ne)
	} else {
		ns.expLo, ns.expHi = s.expLo, s.expHi
	}
	return pruneExpired(ns, in.tLo), true
}

func stepDelete(s mstate, in *pin, out *pout) []mstate {
	if !out.known {
		return []mstate{s, {}}
	}
	if out.code != 0 {
		return nil
	}
	if !in.exact {
		return []mstate{{}}
	}
	for _, vis := range s.visOptions(in.tLo, in.tHi) {
		d := uint32(0)
		if vis {
			d = 1
		}
		if out.deleted == d && out.notFound == uint32(in.count)-d {
			return []mstate{{}}
		}
	}
	return nil
}

func withExpiry(s mstate, lo, hi uint64) mstate {
	return mstate{evs: s.evs, expLo: lo, expHi: hi}
}

func stepTTL(s mstate, in *pin, out *pout) []mstate {
	var next []mstate
	secs := uint64(in.secs) * 1_000_000_000
	for _, vis := range s.visOptions(in.tLo, in.tHi) {
		if !out.known {
			next = append(next, s)
			if !vis {
				continue
			}
			switch in.kind {
			case pkTTLSet:
				if in.secs == 0 {
					next = append(next, withExpiry(s, never, never))
				} else {
					next = append(next, withExpiry(s, satAdd(in.tLo, secs), satAdd(in.tHi, secs)))
				}
			case pkTTLExtend:
				if !s.neverExpires() {
					next = append(next, withExpiry(s, satAdd(s.expLo, secs), satAdd(s.expHi, secs)))
				}
			case pkTTLClear:
				next = append(next, withExpiry(s, never, never))
			}
			continue
		}
		if !vis {
			if out.code == core.EntityNotFound.Code {
				next = append(next, s)
			}
			continue
		}
		switch in.kind {
		case pkTTLSet:
			switch {
			case out.code != 0:
			case in.secs == 0 && out.exp == never:
				next = append(next, withExpiry(s, never, never))
			case in.secs != 0 && out.exp >= satAdd(in.tLo, secs) && out.exp <= satAdd(in.tHi, secs):
				next = append(next, withExpiry(s, out.exp, out.exp))
			}
		case pkTTLExtend:
			switch {
			case s.neverExpires():
				if out.code == core.NoTTLSet.Code {
					next = append(next, s)
				}
			case out.code != 0:
			case out.prev >= s.expLo && out.prev <= s.expHi && out.exp == satAdd(out.prev, secs):
				next = append(next, withExpiry(s, out.exp, out.exp))
			}
		case pkTTLClear:
			switch {
			case out.code != 0:
			case s.neverExpires() && !out.hadTTL && out.prev == never:
				next = append(next, withExpiry(s, never, never))
			case !s.neverExpires() && out.hadTTL && out.prev >= s.expLo && out.prev <= s.expHi:
				next = append(next, withExpiry(s, never, never))
			}
		}
	}
	return next
}

// readOK: could some visibility of s at the read's time give its output?
func readOK(s mstate, in *pin, out *pout) bool {
	if out.code != 0 {
		return false
	}
	for _, vis := range s.visOptions(in.tLo, in.tHi) {
		var ok bool
		switch in.kind {
		case pkLatest:
			ok = latestOK(s, vis, out)
		case pkHistory:
			ok = historyOK(s, vis, in, out)
		case pkSpatial:
			ok = spatialOK(s, vis, in, out)
		case pkLatestAll:
			ok = latestAllOK(s, vis, in, out)
		}
		if ok {
			return true
		}
	}
	return false
}

func latestOK(s mstate, vis bool, out *pout) bool {
	for i := range out.latest {
		r := &out.latest[i]
		if vis != r.Found || (vis && !matches(s.latest(), &r.Event)) {
			return false
		}
	}
	return true
}

func inRange(e *mev, from, until uint64) tri {
	switch {
	case e.hi < from || e.lo > until:
		return triNo
	case e.lo >= from && e.hi <= until:
		return triYes
	}
	return triMaybe
}

// shown: is event j of s (a visible entity) in a history read's result,
// before paging: in the read's range and visible at the read? The latest
// event is visible with the entity; an older one by its own expiry
// (olderVis). Each event's visibility is judged on its own, though the
// events' expiries are bound together by the one timestamp of the read:
// an over-approximation, which may accept a page that no single timestamp
// would give, never refuse one that some timestamp gives.
func shown(s mstate, j int, in *pin) tri {
	r := inRange(&s.evs[j], in.from, in.until)
	if j == len(s.evs)-1 || r == triNo {
		return r
	}
	switch vis, invis := olderVis(&s.evs[j], in.tLo, in.tHi); {
	case !vis:
		return triNo
	case invis:
		return triMaybe
	}
	return r
}

func historyOK(s mstate, vis bool, in *pin, out *pout) bool {
	if !vis {
		return len(out.events) == 0 && !out.hasMore
	}
	if len(out.events) > in.limit {
		return false
	}
	j := 0
	for k := range out.events {
		g := &out.events[k]
		if g.TimestampNS < in.from || g.TimestampNS > in.until || (k > 0 && g.TimestampNS <= out.events[k-1].TimestampNS) {
			return false
		}
		for ; j < len(s.evs) && !matches(&s.evs[j], g); j++ {
			if shown(s, j, in) == triYes {
				return false // an event in range, and visible, is missing
			}
		}
		if j == len(s.evs) {
			return false // not an event of the entity
		}
		if j < len(s.evs)-1 && g.TTLSeconds != 0 && g.ExpiresAtNS() <= in.tLo {
			return false // an older event after its own expiry (exact: its timestamp is shown)
		}
		j++
	}
	more := false
	for ; j < len(s.evs); j++ {
		switch shown(s, j, in) {
		case triYes:
			if !out.hasMore {
				return false
			}
			more = true
		case triMaybe:
			more = true
		}
	}
	if out.hasMore {
		return more && len(out.events) == in.limit
	}
	return true
}

func spatialOK(s mstate, vis bool, in *pin, out *pout) bool {
	if len(out.events) > 1 {
		return false
	}
	if !vis {
		return len(out.events) == 0
	}
	l := s.latest()
	groupOK := !in.group.Set || l.ev.GroupID == in.group.ID
	inside, d := in.op.region.contains(l.ev.LatNano, l.ev.LonNano)
	if len(out.events) == 0 {
		return !groupOK || inside != triYes || in.partial || out.hasMore
	}
	if !groupOK || inside == triNo || !matches(l, &out.events[0]) {
		return false
	}
	if in.op.region.radius {
		got := out.dists[0]
		if got > in.op.region.radiusMM || math.Abs(float64(got)/1000-d) > geoMarginM {
			return false
		}
	}
	return true
}

func latestAllOK(s mstate, vis bool, in *pin, out *pout) bool {
	if len(out.events) > 1 {
		return false
	}
	if !vis {
		return len(out.events) == 0
	}
	l := s.latest()
	groupOK := !in.group.Set || l.ev.GroupID == in.group.ID
	after := triMaybe
	switch {
	case l.lo > in.since:
		after = triYes
	case l.hi <= in.since:
		after = triNo
	}
	if len(out.events) == 0 {
		return !groupOK || after != triYes || in.partial || out.hasMore
	}
	return groupOK && after != triNo && matches(l, &out.events[0]) && out.events[0].TimestampNS > in.since
}

func stateEqual(a, b any) bool {
	x, y := a.(mstate), b.(mstate)
	if x.expLo != y.expLo || x.expHi != y.expHi || len(x.evs) != len(y.evs) {
		return false
	}
	for i := range x.evs {
		if x.evs[i] != y.evs[i] {
			return false
		}
	}
	return true
}

func stateHash(a any) uint64 {
	s := a.(mstate)
	h := fnv.New64a()
	var b [8]byte
	put := func(v uint64) {
		for i := range b {
			b[i] = byte(v >> (8 * i))
		}
		h.Write(b[:])
	}
	put(s.expLo)
	put(s.expHi)
	for _, e := range s.evs {
		put(e.ev.UserData.Hi)
		put(e.ev.UserData.Lo)
		put(e.lo)
		put(e.hi)
	}
	return h.Sum64()
}

func describeState(a any) string {
	s := a.(mstate)
	var b strings.Builder
	if s.neverExpires() {
		b.WriteString("expiry never; ")
	} else {
		fmt.Fprintf(&b, "expiry %d..%d; ", s.expLo, s.expHi)
	}
	fmt.Fprintf(&b, "%d events", len(s.evs))
	for i, e := range s.evs {
		if i >= len(s.evs)-4 || i < 2 {
			fmt.Fprintf(&b, " [tag %d.%d ts %d..%d ttl %d]", e.ev.UserData.Hi, e.ev.UserData.Lo, e.lo, e.hi, e.ev.TTLSeconds)
		} else if i == 2 {
			b.WriteString(" ...")
		}
	}
	return b.String()
}

func describeOperation(input, output any) string {
	in, out := input.(*pin), output.(*pout)
	s := fmt.Sprintf("op %d client %d %s %s", in.op.id, in.op.client, in.op.kind, describeReq(in.op))
	if !out.known {
		return s + " -> unknown"
	}
	return s + " -> " + describeReply(in.op.reply) + fmt.Sprintf(" (code %d)", out.code)
}

// stepBudget bounds the work of checking one entity: the number of model
// steps (of single states) porcupine may ask for. A history whose writes
// of unknown outcome leave too many possible states open exceeds it; the
// partition is then reported as unchecked instead of being checked for
// ever. The count does not depend on timing, so neither does the outcome.
const stepBudget = 2_000_000

// newEntityModel is the porcupine model of one entity; when budget is not
// nil, every step spends one unit of it, and once it is spent every step
// fails (and *over is set).
func newEntityModel(budget *int64, over *bool) porcupine.Model {
	st := step
	if budget != nil {
		st = func(state, input, output any) []any {
			if *budget--; *budget < 0 {
				*over = true
			}
			if *over {
				return nil
			}
			return step(state, input, output)
		}
	}
	nm := porcupine.NondeterministicModel{
		Init:              func() []any { return []any{mstate{}} },
		Step:              st,
		Equal:             stateEqual,
		Hash:              stateHash,
		DescribeOperation: describeOperation,
		DescribeState:     describeState,
	}
	return nm.ToModel()
}
