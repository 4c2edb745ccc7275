package history

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/geoevent/geoevent/core"
)

// CorruptionError reports stored data that cannot be trusted: a block that
// failed its checksum (pebble's corruption errors) or a key or value the
// store cannot read. Nothing is answered from such data.
type CorruptionError struct {
	File   string       // the damaged file, when pebble names it
	Entity core.Uint128 // the entity being read or written, when known
	// Keys is the damaged block's key range, when pebble names it: its
	// first and last keys, each an entity id and a timestamp (keyString).
	Keys   string
	Detail string
	Err    error // the cause
}

func (e *CorruptionError) Error() string {
	s := "history: corruption"
	if e.File != "" {
		s += " in " + e.File
	}
	if !e.Entity.IsZero() {
		s += " reading entity " + e.Entity.String()
	}
	if e.Keys != "" {
		s += ", keys " + e.Keys
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

func (e *CorruptionError) Unwrap() error { return e.Err }

// wrapErr turns a corruption among err's causes into a *CorruptionError
// naming id; other errors pass unchanged.
func wrapErr(err error, id core.Uint128) error {
	if err == nil {
		return nil
	}
	var ce *CorruptionError
	if errors.As(err, &ce) {
		return err
	}
	var ve *valueError
	if errors.As(err, &ve) || errors.Is(err, errKey) {
		return &CorruptionError{Entity: id, Detail: err.Error(), Err: err}
	}
	if !pebble.IsCorruptionError(err) {
		return err
	}
	ce = &CorruptionError{Entity: id, Detail: err.Error(), Err: err}
	if info := pebble.ExtractDataCorruptionInfo(err); info != nil {
		ce.File = info.Path
		ce.Keys = keyString(info.Bounds.Start) + " to " + keyString(info.Bounds.End.Key)
		ce.Detail = fmt.Sprint(info.Details)
	}
	return ce
}

// keyString shows a key of the store: "entity <id> at <timestamp>" for an
// event's, quoted bytes for any other.
func keyString(k []byte) string {
	if id, ts, err := decodeKey(k); err == nil {
		return fmt.Sprintf("entity %s at %d", id, ts)
	}
	return fmt.Sprintf("%q", k)
}

// keyEntity is the entity of an event key (zero for any other key).
func keyEntity(k []byte) core.Uint128 {
	id, _, _ := decodeKey(k)
	return id
}
