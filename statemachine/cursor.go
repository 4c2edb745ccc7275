package statemachine

import (
	"encoding/base64"
	"encoding/binary"
	"strings"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/statemachine/internal/btree"
)

// A cursor is the last key a page returned, so the next page starts strictly
// after it: pages never repeat or skip an entity whose key did not change,
// whatever is written between them, and a cursor never expires.
//
// Encoding: URL-safe base64 without padding (RFC 4648 section 5, 35
// characters of A-Z a-z 0-9 - _), so a cursor goes into a URL's query as it
// is, of 26 bytes:
//
//	offset size field
//	     0    1 version, 1
//	     1    1 kind: 1 radius, 2 polygon, 3 latest, 4 history, 5 nearest, 6 bbox
//	     2    8 key.A, little-endian: leaf cell id (radius, polygon, bbox), timestamp_ns (latest,
//	                history) or distance_mm (nearest)
//	    10   16 key.ID, Uint128 little-endian (Lo, Hi): the entity id
//
// Cursors in standard base64 (+ and /), padded to 36 characters or not, are
// accepted too and name the same key: cursors were once issued so, and a
// cursor never expires. So is URL-safe base64 padded with '='. A string
// mixing the two alphabets, with bits set past the 26 bytes, or of another
// kind, version or length is 104 INVALID_CURSOR.
type cursorKind byte

const (
	cursorVersion               = 1
	cursorLen                   = 26
	kindRadius       cursorKind = 1
	kindPolygon      cursorKind = 2
	kindLatest       cursorKind = 3
	kindHistory      cursorKind = 4
	kindNearest      cursorKind = 5
	kindBBox         cursorKind = 6
	cursorEncodedLen            = (cursorLen*8 + 5) / 6   // 35: unpadded
	cursorPaddedLen             = (cursorLen + 2) / 3 * 4 // 36: padded to a multiple of 4
)

// The cursor encodings, strict: trailing bits past the 26 bytes must be
// zero, so each accepted text names one key, and the canonical text of a
// key is the one encodeCursor writes.
var (
	cursorURL       = base64.RawURLEncoding.Strict()
	cursorURLPadded = base64.URLEncoding.Strict()
	cursorStd       = base64.RawStdEncoding.Strict()
	cursorStdPadded = base64.StdEncoding.Strict()
)

func encodeCursor(kind cursorKind, k btree.Key) string {
	var b [cursorLen]byte
	b[0] = cursorVersion
	b[1] = byte(kind)
	binary.LittleEndian.PutUint64(b[2:10], k.A)
	k.ID.PutLE(b[10:26])
	return cursorURL.EncodeToString(b[:])
}

// cursorEncoding picks the decoding of s by its length and alphabet: the
// two alphabets share all but their last two characters (+/ against -_),
// so a cursor holding + or / is standard base64 and any other URL-safe
// (a text in the shared characters reads the same either way). nil when
// the length is neither a padded nor an unpadded cursor's, and for CR and
// LF, which package base64 skips even when strict (a cursor has one text
// per alphabet and padding).
func cursorEncoding(s string) *base64.Encoding {
	std := strings.ContainsAny(s, "+/")
	switch {
	case strings.ContainsAny(s, "\r\n"):
		return nil
	case len(s) == cursorEncodedLen && std:
		return cursorStd
	case len(s) == cursorEncodedLen:
		return cursorURL
	case len(s) == cursorPaddedLen && std:
		return cursorStdPadded
	case len(s) == cursorPaddedLen:
		return cursorURLPadded
	}
	return nil
}

// decodeCursor returns the key of a cursor of the given kind; ok is false
// for the empty cursor (the first page).
func decodeCursor(s string, kind cursorKind) (k btree.Key, ok bool, err error) {
	if s == "" {
		return btree.Key{}, false, nil
	}
	enc := cursorEncoding(s)
	if enc == nil {
		return btree.Key{}, false, core.Errorf(core.InvalidCursor, "malformed cursor")
	}
	var b [cursorLen + 2]byte
	n, decErr := enc.Decode(b[:], []byte(s))
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
