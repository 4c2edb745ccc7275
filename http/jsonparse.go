package http

import (
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// A strict, single-pass JSON parser (RFC 8259) into a flat tree.
//
// Why not encoding/json: request decoding needs the exact text of numbers
// (degrees are converted to nanodegrees from their decimal text, 64-bit
// integers must not pass through float64), exact and case-sensitive field
// names, duplicate-key and invalid-UTF-8 rejection, and error messages that
// name the field; and a 10,000-event body should be parsed once, without a
// map per event.
//
// The tree is a slice of nodes in document order. A container's children
// follow it; each node records where its subtree ends, so siblings are found
// by skipping. An object's children alternate key, value.

type kind uint8

const (
	kNull kind = iota
	kFalse
	kTrue
	kNumber
	kString
	kArray
	kObject
)

func (k kind) String() string {
	switch k {
	case kNull:
		return "null"
	case kFalse, kTrue:
		return "a boolean"
	case kNumber:
		return "a number"
	case kString:
		return "a string"
	case kArray:
		return "an array"
	}
	return "an object"
}

type node struct {
	kind kind
	esc  bool // a string with escapes: decode with doc.str
	// start, end: the number's text, or a string's contents between its
	// quotes (still escaped when esc), or a container's span.
	start, end int32
	next       int32 // index of the node after this one's subtree
	n          int32 // containers: members (objects) or elements (arrays)
}

type doc struct {
	src   []byte
	nodes []node
}

// maxDepth bounds nesting: no request needs more than 4 levels (holes,
// ring, vertex), and a bound keeps a hostile body from exhausting the stack.
const maxDepth = 64

// syntaxError is a body that is not JSON, at byte offset off.
type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string { return fmt.Sprintf("invalid JSON at byte %d: %s", e.off, e.msg) }

type parser struct {
	src   []byte
	pos   int
	nodes []node
}

// parseJSON parses src, which must hold exactly one JSON value (surrounding
// white space allowed).
func parseJSON(src []byte) (*doc, error) {
	if len(src) > 1<<31-1 {
		return nil, &syntaxError{0, "document too large"}
	}
	p := &parser{src: src, nodes: make([]node, 0, 16+len(src)/12)}
	p.ws()
	if err := p.value(0); err != nil {
		return nil, err
	}
	p.ws()
	if p.pos != len(src) {
		return nil, p.errf("unexpected %s after the top-level value", p.what())
	}
	return &doc{src: src, nodes: p.nodes}, nil
}

func (p *parser) errf(format string, args ...any) error {
	return &syntaxError{p.pos, fmt.Sprintf(format, args...)}
}

// what describes the byte at pos for an error message.
func (p *parser) what() string {
	if p.pos >= len(p.src) {
		return "end of input"
	}
	c := p.src[p.pos]
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

func (p *parser) ws() {
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) error {
	if depth >= maxDepth {
		return p.errf("nesting deeper than %d levels", maxDepth)
	}
	if p.pos >= len(p.src) {
		return p.errf("unexpected end of input, want a value")
	}
	switch c := p.src[p.pos]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		return p.string()
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 't':
		return p.literal("true", kTrue)
	case c == 'f':
		return p.literal("false", kFalse)
	case c == 'n':
		return p.literal("null", kNull)
	}
	return p.errf("unexpected %s, want a value", p.what())
}

func (p *parser) literal(lit string, k kind) error {
	if len(p.src)-p.pos < len(lit) || string(p.src[p.pos:p.pos+len(lit)]) != lit {
		return p.errf("unexpected %s, want a value", p.what())
	}
	i := len(p.nodes)
	p.nodes = append(p.nodes, node{kind: k, start: int32(p.pos), end: int32(p.pos + len(lit))})
	p.pos += len(lit)
	p.nodes[i].next = int32(len(p.nodes))
	return nil
}

func (p *parser) number() error {
	start := p.pos
	if p.src[p.pos] == '-' {
		p.pos++
	}
	digits := func() int {
		n := 0
		for p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	switch {
	case p.pos < len(p.src) && p.src[p.pos] == '0':
		p.pos++
	case digits() == 0:
		return p.errf("unexpected %s in a number", p.what())
	}
	if p.pos < len(p.src) && p.src[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return p.errf("unexpected %s after the decimal point", p.what())
		}
	}
	if p.pos < len(p.src) && (p.src[p.pos] == 'e' || p.src[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.src) && (p.src[p.pos] == '+' || p.src[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return p.errf("unexpected %s in an exponent", p.what())
		}
	}
	p.nodes = append(p.nodes, node{kind: kNumber, start: int32(start), end: int32(p.pos), next: int32(len(p.nodes) + 1)})
	return nil
}

func (p *parser) string() error {
	p.pos++ // the opening quote
	start := p.pos
	esc := false
	for {
		// The common bytes first: printable ASCII other than '"' and '\\'.
		for p.pos < len(p.src) && plainByte[p.src[p.pos]] {
			p.pos++
		}
		if p.pos >= len(p.src) {
			return p.errf("unterminated string")
		}
		c := p.src[p.pos]
		switch {
		case c == '"':
			p.nodes = append(p.nodes, node{kind: kString, esc: esc, start: int32(start), end: int32(p.pos), next: int32(len(p.nodes) + 1)})
			p.pos++
			return nil
		case c == '\\':
			esc = true
			if p.pos+1 >= len(p.src) {
				return p.errf("unterminated string")
			}
			switch p.src[p.pos+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p.pos += 2
			case 'u':
				if p.pos+6 > len(p.src) {
					return p.errf("unterminated \\u escape")
				}
				for _, h := range p.src[p.pos+2 : p.pos+6] {
					if !isHex(h) {
						return p.errf("invalid \\u escape")
					}
				}
				p.pos += 6
			default:
				return p.errf("invalid escape \\%c", p.src[p.pos+1])
			}
		case c < 0x20:
			return p.errf("control character 0x%02x in a string (escape it)", c)
		case c < utf8.RuneSelf:
			p.pos++
		default:
			r, size := utf8.DecodeRune(p.src[p.pos:])
			if r == utf8.RuneError && size <= 1 {
				return p.errf("invalid UTF-8 in a string")
			}
			p.pos += size
		}
	}
}

// plainByte is true for the bytes a string holds as they are and that need
// no check: ASCII from 0x20 on, but '"' and '\\'.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func (p *parser) array(depth int) error {
	i := len(p.nodes)
	p.nodes = append(p.nodes, node{kind: kArray, start: int32(p.pos)})
	p.pos++
	p.ws()
	n := 0
	if p.pos < len(p.src) && p.src[p.pos] == ']' {
		p.pos++
	} else {
		for {
			if err := p.value(depth + 1); err != nil {
				return err
			}
			n++
			p.ws()
			if p.pos >= len(p.src) {
				return p.errf("unexpected end of input in an array")
			}
			if p.src[p.pos] == ']' {
				p.pos++
				break
			}
			if p.src[p.pos] != ',' {
				return p.errf("unexpected %s in an array, want ',' or ']'", p.what())
			}
			p.pos++
			p.ws()
		}
	}
	p.nodes[i].end, p.nodes[i].n, p.nodes[i].next = int32(p.pos), int32(n), int32(len(p.nodes))
	return nil
}

func (p *parser) object(depth int) error {
	i := len(p.nodes)
	p.nodes = append(p.nodes, node{kind: kObject, start: int32(p.pos)})
	p.pos++
	p.ws()
	n := 0
	var set map[string]struct{} // keys of a large object
	if p.pos < len(p.src) && p.src[p.pos] == '}' {
		p.pos++
	} else {
		for {
			if p.pos >= len(p.src) || p.src[p.pos] != '"' {
				return p.errf("unexpected %s in an object, want a quoted field name", p.what())
			}
			keyPos, key := p.pos, int32(len(p.nodes))
			if err := p.string(); err != nil {
				return err
			}
			p.ws()
			if p.pos >= len(p.src) || p.src[p.pos] != ':' {
				return p.errf("unexpected %s after a field name, want ':'", p.what())
			}
			p.pos++
			p.ws()
			if err := p.value(depth + 1); err != nil {
				return err
			}
			n++
			if err := p.checkDuplicate(i, n, key, keyPos, &set); err != nil {
				return err
			}
			p.ws()
			if p.pos >= len(p.src) {
				return p.errf("unexpected end of input in an object")
			}
			if p.src[p.pos] == '}' {
				p.pos++
				break
			}
			if p.src[p.pos] != ',' {
				return p.errf("unexpected %s in an object, want ',' or '}'", p.what())
			}
			p.pos++
			p.ws()
		}
	}
	p.nodes[i].end, p.nodes[i].n, p.nodes[i].next = int32(p.pos), int32(n), int32(len(p.nodes))
	return nil
}

// checkDuplicate rejects the key at node index key when an earlier key of
// the object at node index obj is equal (n keys so far, key included).
// Small objects compare pairwise; from the 17th key on, a set is kept.
func (p *parser) checkDuplicate(obj int, n int, key int32, keyPos int, set *map[string]struct{}) error {
	d := doc{src: p.src, nodes: p.nodes}
	if n <= 16 {
		k := int32(obj + 1)
		for j := 1; j < n; j++ {
			if d.keyEq(k, key) {
				return &syntaxError{keyPos, fmt.Sprintf("duplicate field %q", d.str(key))}
			}
			k = p.nodes[p.nodes[k].next].next
		}
		return nil
	}
	if *set == nil {
		*set = make(map[string]struct{}, 2*n)
		k := int32(obj + 1)
		for j := 1; j < n; j++ {
			(*set)[d.str(k)] = struct{}{}
			k = p.nodes[p.nodes[k].next].next
		}
	}
	s := d.str(key)
	if _, dup := (*set)[s]; dup {
		return &syntaxError{keyPos, fmt.Sprintf("duplicate field %q", s)}
	}
	(*set)[s] = struct{}{}
	return nil
}

// keyEq reports whether string nodes a and b hold the same text.
func (d *doc) keyEq(a, b int32) bool {
	if !d.nodes[a].esc && !d.nodes[b].esc {
		return string(d.raw(a)) == string(d.raw(b))
	}
	return d.str(a) == d.str(b)
}

// raw is the source text of node i (a number's text, a string's contents).
func (d *doc) raw(i int32) []byte { return d.src[d.nodes[i].start:d.nodes[i].end] }

// str returns string node i decoded.
func (d *doc) str(i int32) string {
	nd := &d.nodes[i]
	s := d.src[nd.start:nd.end]
	if !nd.esc {
		return string(s)
	}
	out := make([]byte, 0, len(s))
	for j := 0; j < len(s); {
		c := s[j]
		if c != '\\' {
			out = append(out, c)
			j++
			continue
		}
		switch s[j+1] {
		case '"', '\\', '/':
			out = append(out, s[j+1])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := rune(hex4(s[j+2 : j+6]))
			j += 6
			if utf16.IsSurrogate(r) {
				if j+6 <= len(s) && s[j] == '\\' && s[j+1] == 'u' {
					if r2 := utf16.DecodeRune(r, rune(hex4(s[j+2:j+6]))); r2 != utf8.RuneError {
						out = utf8.AppendRune(out, r2)
						j += 6
						continue
					}
				}
				r = utf8.RuneError // a lone surrogate
			}
			out = utf8.AppendRune(out, r)
			continue
		}
		j += 2
	}
	return string(out)
}

func hex4(b []byte) uint16 {
	var v uint16
	for _, c := range b {
		v <<= 4
		switch {
		case c >= '0' && c <= '9':
			v |= uint16(c - '0')
		case c >= 'a' && c <= 'f':
			v |= uint16(c - 'a' + 10)
		default:
			v |= uint16(c - 'A' + 10)
		}
	}
	return v
}

// keyIs reports whether string node i equals s, without allocating for
// keys that have no escapes.
func (d *doc) keyIs(i int32, s string) bool {
	if !d.nodes[i].esc {
		return string(d.raw(i)) == s
	}
	return d.str(i) == s
}

// members calls f for each member of object node i, in order, until f
// returns false. key and val are node indexes.
func (d *doc) members(i int32, f func(key, val int32) bool) {
	k := i + 1
	for j := int32(0); j < d.nodes[i].n; j++ {
		v := d.nodes[k].next
		if !f(k, v) {
			return
		}
		k = d.nodes[v].next
	}
}

// elems returns the element nodes of array node i.
func (d *doc) elems(i int32) []int32 {
	out := make([]int32, 0, d.nodes[i].n)
	k := i + 1
	for j := int32(0); j < d.nodes[i].n; j++ {
		out = append(out, k)
		k = d.nodes[k].next
	}
	return out
}
