package jsonkey

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// This file holds the JSON parser and the RFC 8785 serializer. The parser is
// our own rather than encoding/json because the canonical form needs what
// encoding/json hides: member order and duplicate names (I-JSON forbids
// duplicates, encoding/json keeps the last), invalid UTF-8 and lone surrogate
// escapes (encoding/json turns both into U+FFFD, so two different payloads
// would give the same key), and the literal text of numbers (converted to a
// double only when serialized, so that an overflowing number in a field that
// is not part of the key does not reject the job).

// maxDepth bounds the nesting of arrays and objects, as encoding/json does.
const maxDepth = 10000

type kind uint8

const (
	kindNull kind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

func (k kind) String() string {
	switch k {
	case kindNull:
		return "null"
	case kindBool:
		return "a boolean"
	case kindNumber:
		return "a number"
	case kindString:
		return "a string"
	case kindArray:
		return "an array"
	default:
		return "an object"
	}
}

// value is a parsed JSON value. For numbers s holds the literal as written,
// for strings the decoded text (valid UTF-8).
type value struct {
	kind kind
	b    bool
	s    string
	arr  []value
	obj  []member
}

type member struct {
	name string
	val  value
}

// syntaxError is a payload that is not I-JSON, at a byte offset.
type syntaxError struct {
	msg    string
	offset int
}

func (e *syntaxError) Error() string {
	return e.msg + " at byte offset " + strconv.Itoa(e.offset)
}

type parser struct {
	data  []byte
	pos   int
	depth int
	path  []string // reference tokens of the value being parsed, for errors
}

// parse parses one JSON text (RFC 8259, UTF-8, no byte order mark) that must
// also be I-JSON (RFC 7493): no duplicate member names, no lone surrogates.
func parse(data []byte) (value, error) {
	p := &parser{data: data}
	p.skipSpace()
	v, err := p.value()
	if err != nil {
		return value{}, err
	}
	p.skipSpace()
	if p.pos < len(p.data) {
		return value{}, p.errorf("unexpected " + p.describeByte() + " after the JSON value")
	}
	return v, nil
}

func (p *parser) errorf(msg string) error {
	return &syntaxError{msg: msg, offset: p.pos}
}

func (p *parser) describeByte() string {
	if p.pos >= len(p.data) {
		return "end of input"
	}
	c := p.data[p.pos]
	if c >= 0x20 && c < 0x7f {
		return "character " + strconv.QuoteRune(rune(c))
	}
	return "byte 0x" + strconv.FormatUint(uint64(c), 16)
}

func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value() (value, error) {
	if p.pos >= len(p.data) {
		return value{}, p.errorf("unexpected end of input, expected a JSON value")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		s, err := p.string()
		return value{kind: kindString, s: s}, err
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 't':
		return value{kind: kindBool, b: true}, p.literal("true")
	case c == 'f':
		return value{kind: kindBool}, p.literal("false")
	case c == 'n':
		return value{kind: kindNull}, p.literal("null")
	default:
		return value{}, p.errorf("unexpected " + p.describeByte() + ", expected a JSON value")
	}
}

func (p *parser) literal(word string) error {
	if !strings.HasPrefix(string(p.data[p.pos:min(len(p.data), p.pos+len(word))]), word) {
		return p.errorf("unexpected " + p.describeByte() + ", expected a JSON value")
	}
	p.pos += len(word)
	return nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return p.errorf("arrays and objects nested more than " + strconv.Itoa(maxDepth) + " deep")
	}
	return nil
}

func (p *parser) object() (value, error) {
	if err := p.enter(); err != nil {
		return value{}, err
	}
	p.pos++ // '{'
	v := value{kind: kindObject}
	var seen map[string]struct{}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		p.depth--
		return v, nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return value{}, p.errorf("unexpected " + p.describeByte() + ", expected a member name in double quotes")
		}
		start := p.pos
		name, err := p.string()
		if err != nil {
			return value{}, err
		}
		if seen == nil {
			seen = make(map[string]struct{})
		}
		if _, dup := seen[name]; dup {
			p.pos = start
			return value{}, p.errorf("duplicate member name " + quote(name) + " in the object at " + quote(pointerOf(p.path)) + " (I-JSON, which RFC 8785 requires, forbids them)")
		}
		seen[name] = struct{}{}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return value{}, p.errorf("unexpected " + p.describeByte() + ", expected ':' after a member name")
		}
		p.pos++
		p.skipSpace()
		p.path = append(p.path, name)
		val, err := p.value()
		p.path = p.path[:len(p.path)-1]
		if err != nil {
			return value{}, err
		}
		v.obj = append(v.obj, member{name: name, val: val})
		p.skipSpace()
		if p.pos < len(p.data) && p.data[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.pos < len(p.data) && p.data[p.pos] == '}' {
			p.pos++
			p.depth--
			return v, nil
		}
		return value{}, p.errorf("unexpected " + p.describeByte() + ", expected ',' or '}' in an object")
	}
}

func (p *parser) array() (value, error) {
	if err := p.enter(); err != nil {
		return value{}, err
	}
	p.pos++ // '['
	v := value{kind: kindArray}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		p.depth--
		return v, nil
	}
	for {
		p.skipSpace()
		p.path = append(p.path, strconv.Itoa(len(v.arr)))
		val, err := p.value()
		p.path = p.path[:len(p.path)-1]
		if err != nil {
			return value{}, err
		}
		v.arr = append(v.arr, val)
		p.skipSpace()
		if p.pos < len(p.data) && p.data[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.pos < len(p.data) && p.data[p.pos] == ']' {
			p.pos++
			p.depth--
			return v, nil
		}
		return value{}, p.errorf("unexpected " + p.describeByte() + ", expected ',' or ']' in an array")
	}
}

// number scans a number as RFC 8259 writes it and keeps its literal.
func (p *parser) number() (value, error) {
	d := p.data
	start := p.pos
	i := p.pos
	if i < len(d) && d[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
			n++
		}
		return n
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		digits()
	default:
		p.pos = i
		return value{}, p.errorf("unexpected " + p.describeByte() + " in a number, expected a digit")
	}
	if i < len(d) && d[i] == '.' {
		i++
		if digits() == 0 {
			p.pos = i
			return value{}, p.errorf("unexpected " + p.describeByte() + " in a number, expected a digit after '.'")
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if digits() == 0 {
			p.pos = i
			return value{}, p.errorf("unexpected " + p.describeByte() + " in a number, expected a digit in the exponent")
		}
	}
	p.pos = i
	return value{kind: kindNumber, s: string(d[start:i])}, nil
}

// string decodes a string literal; p.pos is at its opening quote.
func (p *parser) string() (string, error) {
	d := p.data
	p.pos++
	start := p.pos
	// Fast path: no escapes.
	for i := p.pos; i < len(d); {
		c := d[i]
		if c == '"' {
			s := string(d[start:i])
			p.pos = i + 1
			return s, nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
		if c < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(d[i:])
		if r == utf8.RuneError && size == 1 {
			p.pos = i
			return "", p.errorf("invalid UTF-8 in a string")
		}
		i += size
	}
	var b []byte
	for p.pos < len(d) {
		c := d[p.pos]
		switch {
		case c == '"':
			p.pos++
			return string(b), nil
		case c < 0x20:
			return "", p.errorf("control character 0x" + strconv.FormatUint(uint64(c), 16) + " in a string (write it as an escape like \\n or \\u001f)")
		case c == '\\':
			r, err := p.escape()
			if err != nil {
				return "", err
			}
			b = utf8.AppendRune(b, r)
		case c < utf8.RuneSelf:
			b = append(b, c)
			p.pos++
		default:
			r, size := utf8.DecodeRune(d[p.pos:])
			if r == utf8.RuneError && size == 1 {
				return "", p.errorf("invalid UTF-8 in a string")
			}
			b = append(b, d[p.pos:p.pos+size]...)
			p.pos += size
		}
	}
	return "", p.errorf("unexpected end of input in a string")
}

// escape decodes one escape sequence at p.pos (a backslash), joining a
// surrogate pair written as two \u escapes.
func (p *parser) escape() (rune, error) {
	d := p.data
	if p.pos+1 >= len(d) {
		p.pos++
		return 0, p.errorf("unexpected end of input in a string")
	}
	c := d[p.pos+1]
	switch c {
	case '"', '\\', '/':
		p.pos += 2
		return rune(c), nil
	case 'b':
		p.pos += 2
		return '\b', nil
	case 'f':
		p.pos += 2
		return '\f', nil
	case 'n':
		p.pos += 2
		return '\n', nil
	case 'r':
		p.pos += 2
		return '\r', nil
	case 't':
		p.pos += 2
		return '\t', nil
	case 'u':
		r, ok := hex4(d[p.pos+2:])
		if !ok {
			p.pos += 2
			return 0, p.errorf("invalid \\u escape in a string, expected four hex digits")
		}
		switch {
		case r >= 0xd800 && r < 0xdc00:
			if len(d) >= p.pos+12 && d[p.pos+6] == '\\' && d[p.pos+7] == 'u' {
				if r2, ok := hex4(d[p.pos+8:]); ok && r2 >= 0xdc00 && r2 < 0xe000 {
					p.pos += 12
					return utf16.DecodeRune(r, r2), nil
				}
			}
			return 0, p.errorf("lone surrogate \\u" + strconv.FormatUint(uint64(r), 16) + " in a string (I-JSON forbids it)")
		case r >= 0xdc00 && r < 0xe000:
			return 0, p.errorf("lone surrogate \\u" + strconv.FormatUint(uint64(r), 16) + " in a string (I-JSON forbids it)")
		}
		p.pos += 6
		return r, nil
	default:
		p.pos++
		r, _ := utf8.DecodeRune(d[p.pos:])
		return 0, p.errorf("invalid escape \\" + string(r) + " in a string")
	}
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// errNotFinite is a number beyond the range of IEEE-754 doubles.
type errNotFinite struct{ literal string }

func (e *errNotFinite) Error() string {
	return "the number " + e.literal + " is beyond the range of IEEE-754 doubles, which RFC 8785 numbers are"
}

// appendCanonical appends the RFC 8785 serialization of v.
func appendCanonical(b []byte, v *value) ([]byte, error) {
	switch v.kind {
	case kindNull:
		return append(b, "null"...), nil
	case kindBool:
		if v.b {
			return append(b, "true"...), nil
		}
		return append(b, "false"...), nil
	case kindNumber:
		f, err := strconv.ParseFloat(v.s, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			// ParseFloat fails only with ErrRange here: the literal is
			// well-formed. Underflow is no error: it rounds to 0 or a
			// subnormal, as in ECMAScript.
			return b, &errNotFinite{literal: v.s}
		}
		return appendNumber(b, f), nil
	case kindString:
		return appendString(b, v.s), nil
	case kindArray:
		b = append(b, '[')
		for i := range v.arr {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendCanonical(b, &v.arr[i]); err != nil {
				return b, err
			}
		}
		return append(b, ']'), nil
	default:
		members := v.obj
		if !slices.IsSortedFunc(members, func(a, b member) int { return compareUTF16(a.name, b.name) }) {
			members = slices.Clone(members)
			sortMembers(members)
		}
		b = append(b, '{')
		for i := range members {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, members[i].name)
			b = append(b, ':')
			var err error
			if b, err = appendCanonical(b, &members[i].val); err != nil {
				return b, err
			}
		}
		return append(b, '}'), nil
	}
}

// appendNumber appends f as ECMAScript's Number.prototype.toString writes
// it (ECMA-262, Number::toString), which RFC 8785 section 3.2.2.3 adopts:
// the shortest decimal that reads back as f, in plain notation for
// 1e-7 < |f| < 1e21 and with an exponent otherwise; -0 is "0".
func appendNumber(b []byte, f float64) []byte {
	if f == 0 {
		return append(b, '0')
	}
	if f < 0 {
		b = append(b, '-')
		f = -f
	}
	// Shortest round-trip digits, as d.ddddde±XX.
	var tmp [32]byte
	e := strconv.AppendFloat(tmp[:0], f, 'e', -1, 64)
	ePos := -1
	for i, c := range e {
		if c == 'e' {
			ePos = i
			break
		}
	}
	mant, exp := e[:ePos], e[ePos+1:]
	var digits []byte
	digits = append(digits, mant[0])
	if len(mant) > 2 {
		digits = append(digits, mant[2:]...)
	}
	x, _ := strconv.Atoi(string(exp))
	k := len(digits)
	n := x + 1 // the decimal point sits after n digits
	switch {
	case k <= n && n <= 21:
		b = append(b, digits...)
		for range n - k {
			b = append(b, '0')
		}
	case 0 < n && n <= 21:
		b = append(b, digits[:n]...)
		b = append(b, '.')
		b = append(b, digits[n:]...)
	case -6 < n && n <= 0:
		b = append(b, "0."...)
		for range -n {
			b = append(b, '0')
		}
		b = append(b, digits...)
	default:
		b = append(b, digits[0])
		if k > 1 {
			b = append(b, '.')
			b = append(b, digits[1:]...)
		}
		b = append(b, 'e')
		if n-1 >= 0 {
			b = append(b, '+')
		}
		b = strconv.AppendInt(b, int64(n-1), 10)
	}
	return b
}

// appendString appends s (valid UTF-8) quoted as ECMAScript's JSON.stringify
// does: the two-character escapes \b \t \n \f \r \" \\, other control
// characters as \u00xx with lowercase hex, everything else as it is
// (including U+007F, U+2028 and U+2029).
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"':
			b = append(b, '\\', '"')
		case '\\':
			b = append(b, '\\', '\\')
		case '\b':
			b = append(b, '\\', 'b')
		case '\t':
			b = append(b, '\\', 't')
		case '\n':
			b = append(b, '\\', 'n')
		case '\f':
			b = append(b, '\\', 'f')
		case '\r':
			b = append(b, '\\', 'r')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// utf16Order maps a code point to a number whose order is the order of its
// first UTF-16 code unit, ties broken as the second unit would: code points
// below U+D800 stay, supplementary ones (encoded from the surrogates
// U+D800-U+DFFF) stay above them, and U+E000-U+FFFF move above those.
func utf16Order(r rune) rune {
	if r >= 0xe000 && r <= 0xffff {
		return r + 0x110000
	}
	return r
}

// compareUTF16 compares two valid UTF-8 strings by their UTF-16 code units,
// as RFC 8785 section 3.2.3 sorts member names.
func compareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			if utf16Order(ra) < utf16Order(rb) {
				return -1
			}
			return 1
		}
		a, b = a[na:], b[nb:]
	}
	switch {
	case a == "" && b == "":
		return 0
	case a == "":
		return -1
	default:
		return 1
	}
}

func sortMembers(m []member) {
	slices.SortFunc(m, func(a, b member) int { return compareUTF16(a.name, b.name) })
}

// canonicalize returns the RFC 8785 form of a whole JSON document.
func canonicalize(doc []byte) ([]byte, error) {
	v, err := parse(doc)
	if err != nil {
		return nil, err
	}
	return appendCanonical(nil, &v)
}
