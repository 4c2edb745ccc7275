package statemachine

import (
	"encoding/base64"
	"encoding/binary"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/statemachine/internal/btree"
)

// A cursor is the last key a page returned, so the next page starts strictly
// after it: pages never repeat or skip an entity whose key did not change,
// whatever is written between them, and a cursor never expires.
//
// Encoding: standard base64 (with padding) of 26 bytes:
//
//	offset size field
//	     0    1 version, 1
//	     1    1 kind: 1 radius, 2 polygon, 3 latest, 4 history
//	     2    8 key.A, little-endian: leaf cell id (radius, polygon) or timestamp_ns (latest, history)
//	    10   16 key.ID, Uint128 little-endian (Lo, Hi): the entity id
//
// A cursor of another kind, version or length is 104 INVALID_CURSOR.
type cursorKind byte

const (
	cursorVersion               = 1
	cursorLen                   = 26
	kindRadius       cursorKind = 1
	kindPolygon      cursorKind = 2
	kindLatest       cursorKind = 3
	kindHistory      cursorKind = 4
	cursorEncodedLen            = (cursorLen + 2) / 3 * 4
)

func encodeCursor(kind cursorKind, k btree.Key) string {
	var b [cursorLen]byte
	b[0] = cursorVersion
	b[1] = byte(kind)
	binary.LittleEndian.PutUint64(b[2:10], k.A)
	k.ID.PutLE(b[10:26])
	return base64.StdEncoding.EncodeToString(b[:])
}

// decodeCursor returns the key of a cursor of the given kind; ok is false
// for the empty cursor (the first page).
func decodeCursor(s string, kind cursorKind) (k btree.Key, ok bool, err error) {
	if s == "" {
		return btree.Key{}, false, nil
	}
	var b [cursorLen + 2]byte
	if len(s) != cursorEncodedLen {
		return btree.Key{}, false, core.Errorf(core.InvalidCursor, "malformed cursor")
	}
	n, decErr := base64.StdEncoding.Strict().Decode(b[:], []byte(s))
	switch {
	case decErr != nil || n != cursorLen || b[0] != cursorVersion:
		return btree.Key{}, false, core.Errorf(core.InvalidCursor, "malformed cursor")
	case cursorKind(b[1]) != kind:
		return btree.Key{}, false, core.Errorf(core.InvalidCursor, "the cursor belongs to another kind of query")
	}
	return btree.Key{A: binary.LittleEndian.Uint64(b[2:10]), ID: core.Uint128FromLE(b[10:26])}, true, nil
}

// pageLimit resolves a page's limit: 0 means the default; above the maximum
// is 300 QUERY_RESULT_TOO_LARGE.
func pageLimit(limit uint32) (int, error) {
	switch {
	case limit == 0:
		return core.DefaultQueryLimit, nil
	case limit > core.MaxQueryLimit:
		return 0, core.Errorf(core.QueryResultTooLarge, "limit %d exceeds %d", limit, core.MaxQueryLimit)
	}
	return int(limit), nil
}
