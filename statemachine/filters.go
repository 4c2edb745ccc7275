package statemachine

import "github.com/geoevent/geoevent/core"

// passes reports whether the entity in slot, whose entity is e, passes a
// query's filter (its visibility and group are the caller's), and the
// work of finding out beyond reading e: the flags live in the entity's
// extension, a read of its own (workEntity) that only a flags filter
// makes.
func (sm *StateMachine) passes(slot uint32, e *entity, f core.Filter) (ok bool, work int) {
	if f.SinceNS != 0 && e.ts <= f.SinceNS {
		return false, 0
	}
	if f.FlagsAll == 0 && f.FlagsAny == 0 {
		return true, 0
	}
	var flags uint16
	if _, x := sm.store.pair(slot); x != nil {
		flags = x.flags
	}
	return f.Match(e.ts, flags), workEntity
}
