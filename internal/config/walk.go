package config

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// origin is where a key's value came from.
type origin struct {
	line int    // line in the file; 0 when not from the file
	env  string // the environment variable that set it, if any
}

// origins maps key paths ("storage.url", "queues[1]", "queues[1].name") to
// where they were set. A path that is absent kept its default.
type origins map[string]origin

// decodeFile decodes the TOML document data into c (whose values not in
// data are kept) and records in org the line of every key and section it
// sets. name is the file name used in errors.
//
// Two passes read the document: a walk of the unstable parser's AST, which
// knows every key's position and checks each key's name and TOML type
// against specs, and go-toml's Decoder, which fills c and is the judge of
// TOML itself (syntax, redefinitions, integer ranges). The problem on the
// earliest line wins.
func decodeFile(name string, data []byte, c *Config, org origins) error {
	data = bytes.TrimPrefix(data, []byte("\ufeff")) // a UTF-8 byte order mark
	w := newWalker(data, org)
	w.run()

	probs := w.problems
	if w.syntax != nil {
		probs = append(probs, w.syntax)
	}
	dec := toml.NewDecoder(bytes.NewReader(data))
	if len(w.problems) == 0 {
		// The walk already reports unknown keys (and is the stricter: the
		// Decoder matches names case-insensitively), so this is a safety
		// net. It is off when the walk found problems because the Decoder
		// builds each unknown-key error in time linear in the document.
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(c); err != nil {
		probs = append(probs, w.fromDecoder(err))
	}
	if len(probs) == 0 {
		return nil
	}
	e := firstProblem(probs)
	e.File = name
	return e
}

// firstProblem returns the problem on the earliest line (line 0 first);
// among problems on one line, the first in the slice.
func firstProblem(probs []*Error) *Error {
	best := probs[0]
	for _, p := range probs[1:] {
		if p.Line < best.Line {
			best = p
		}
	}
	return best
}

type keyPart struct {
	name string
	off  int // byte offset of the key in the document
}

// tableCtx is the table that key/values are currently added to.
type tableCtx struct {
	path string // key path: "queues[2]"; "" is the root
	spec string // spec path: "queues[]"
	skip bool   // the header was bad (and reported): ignore its keys
}

type walker struct {
	p       unstable.Parser
	data    []byte
	nl      []int   // offsets of the '\n' bytes
	org     origins // filled as keys are found
	leaf    map[string]int
	headers map[string]int
	arrays  map[string]int   // array of tables path -> entries so far
	byLine  map[int][]string // line -> key paths set on it
	ctx     tableCtx

	problems []*Error
	syntax   *Error
}

func newWalker(data []byte, org origins) *walker {
	w := &walker{
		data:    data,
		org:     org,
		leaf:    map[string]int{},
		headers: map[string]int{},
		arrays:  map[string]int{},
		byLine:  map[int][]string{},
	}
	for i, b := range data {
		if b == '\n' {
			w.nl = append(w.nl, i)
		}
	}
	return w
}

// line returns the 1-based line of byte offset off.
func (w *walker) line(off int) int {
	return sort.SearchInts(w.nl, off) + 1
}

// problem records a problem. Only the first is kept: the walk goes through
// the document in order, so it is on the earliest line, and the walk stops.
func (w *walker) problem(line int, key, msg string) {
	if len(w.problems) == 0 {
		w.problems = append(w.problems, &Error{Line: line, Key: key, Msg: msg})
	}
}

func (w *walker) set(path string, line int) {
	if _, ok := w.org[path]; !ok {
		w.org[path] = origin{line: line}
	}
	w.byLine[line] = append(w.byLine[line], path)
}

func (w *walker) run() {
	w.p.Reset(w.data)
	for len(w.problems) == 0 && w.p.NextExpression() {
		e := w.p.Expression()
		switch e.Kind {
		case unstable.KeyValue:
			w.keyValue(w.ctx, e)
		case unstable.Table:
			w.ctx = w.header(e, false)
		case unstable.ArrayTable:
			w.ctx = w.header(e, true)
		}
	}
	if err := w.p.Error(); err != nil && len(w.problems) == 0 {
		w.syntax = w.syntaxError(err)
	}
}

func (w *walker) keyParts(e *unstable.Node) []keyPart {
	var parts []keyPart
	it := e.Key()
	for it.Next() {
		n := it.Node()
		parts = append(parts, keyPart{name: string(n.Data), off: int(n.Raw.Offset)})
	}
	return parts
}

// child resolves key part kp under (path, spec). It reports an unknown key
// and returns ok = false.
func (w *walker) child(path, spec string, kp keyPart, header bool) (np, ns string, s *keySpec, ok bool) {
	np, ns = joinPath(path, kp.name), joinPath(spec, kp.name)
	if strings.ContainsAny(kp.name, ".[]") || !printable(kp.name) {
		np = joinPath(path, strconv.Quote(kp.name))
		w.problem(w.line(kp.off), np, unknownKeyMsg(spec, kp.name, header))
		return np, ns, nil, false
	}
	s = specByPath[ns]
	if s == nil && anyStringKeys[spec] {
		return np, ns, &keySpec{path: ns, kind: kindString, about: "a header value"}, true
	}
	if s == nil {
		w.problem(w.line(kp.off), np, unknownKeyMsg(spec, kp.name, header))
		return np, ns, nil, false
	}
	return np, ns, s, true
}

// header handles a [table] or [[array table]] header and returns the new
// table context.
func (w *walker) header(e *unstable.Node, isArray bool) tableCtx {
	parts := w.keyParts(e)
	path, spec := "", ""
	for i, kp := range parts {
		line := w.line(kp.off)
		np, ns, s, ok := w.child(path, spec, kp, true)
		if !ok {
			return tableCtx{skip: true}
		}
		if i < len(parts)-1 {
			switch s.kind {
			case kindTable:
				path, spec = np, ns
			case kindTableArray:
				n := w.arrays[np]
				if n == 0 {
					w.problem(line, np, fmt.Sprintf("declare %s before [%s]", section(ns+"[]"), headerText(parts)))
					return tableCtx{skip: true}
				}
				path, spec = fmt.Sprintf("%s[%d]", np, n-1), ns+"[]"
			default:
				w.problem(line, np, notTableMsg(np, s))
				return tableCtx{skip: true}
			}
			continue
		}
		if isArray {
			if s.kind != kindTableArray {
				w.problem(line, np, fmt.Sprintf("is not a list of tables: write %s, not [[%s]]", headerFor(np, s), headerText(parts)))
				return tableCtx{skip: true}
			}
			n := w.arrays[np]
			w.arrays[np] = n + 1
			ep := fmt.Sprintf("%s[%d]", np, n)
			w.set(np, line)
			w.set(ep, line)
			return tableCtx{path: ep, spec: ns + "[]"}
		}
		if s.kind != kindTable {
			w.problem(line, np, fmt.Sprintf("is not a section: write %s, not [%s]", headerFor(np, s), headerText(parts)))
			return tableCtx{skip: true}
		}
		if first, dup := w.headers[np]; dup {
			w.problem(line, np, fmt.Sprintf("section [%s] appears twice (first at line %d); merge them", np, first))
			return tableCtx{skip: true}
		}
		w.headers[np] = line
		w.set(np, line)
		return tableCtx{path: np, spec: ns}
	}
	return tableCtx{skip: true}
}

func headerText(parts []keyPart) string {
	names := make([]string, len(parts))
	for i, p := range parts {
		names[i] = p.name
	}
	return strings.Join(names, ".")
}

// headerFor says how key np of spec s is written.
func headerFor(np string, s *keySpec) string {
	switch s.kind {
	case kindTable:
		return "[" + np + "]"
	case kindTableArray:
		return "[[" + np + "]]"
	}
	parent, name := splitPath(s.path)
	return name + " = ... in " + section(parent)
}

func notTableMsg(np string, s *keySpec) string {
	if s.kind == kindTableArray {
		return fmt.Sprintf("is a list of tables: declare each entry with [[%s]]", np)
	}
	return fmt.Sprintf("is %s, not a table", s.kind.noun())
}

// keyValue handles "key = value" in table c.
func (w *walker) keyValue(c tableCtx, e *unstable.Node) {
	if c.skip {
		return
	}
	parts := w.keyParts(e)
	path, spec := c.path, c.spec
	for i, kp := range parts {
		line := w.line(kp.off)
		np, ns, s, ok := w.child(path, spec, kp, false)
		if !ok {
			return
		}
		if i < len(parts)-1 {
			if s.kind != kindTable {
				w.problem(line, np, notTableMsg(np, s))
				return
			}
			w.set(np, line)
			path, spec = np, ns
			continue
		}
		if first, dup := w.leaf[np]; dup {
			w.problem(line, np, fmt.Sprintf("set twice (first at line %d); keep one", first))
			return
		}
		w.leaf[np] = line
		w.set(np, line)
		w.value(np, ns, s, e.Value(), line)
	}
}

// value checks v, the value of key np, against spec s.
func (w *walker) value(np, ns string, s *keySpec, v *unstable.Node, line int) {
	mismatch := func() {
		w.problem(line, np, fmt.Sprintf("must be %s, got %s%s", s.kind.want(), w.describe(v), about(np)))
	}
	switch s.kind {
	case kindString:
		if v.Kind != unstable.String {
			mismatch()
		}
	case kindBool:
		if v.Kind != unstable.Bool {
			mismatch()
		}
	case kindInt:
		if v.Kind != unstable.Integer {
			mismatch()
		}
	case kindFloat:
		if v.Kind != unstable.Float && v.Kind != unstable.Integer {
			mismatch()
		}
	case kindStringList:
		if v.Kind != unstable.Array {
			mismatch()
			return
		}
		it := v.Children()
		for i := 0; it.Next(); i++ {
			if el := it.Node(); el.Kind != unstable.String {
				w.problem(line, np, fmt.Sprintf("must be %s, got %s as entry %d%s", s.kind.want(), w.describe(el), i, about(np)))
				return
			}
		}
	case kindTable:
		if v.Kind != unstable.InlineTable {
			mismatch()
			return
		}
		w.inlineTable(tableCtx{path: np, spec: ns}, v)
	case kindTableArray:
		if v.Kind != unstable.Array {
			mismatch()
			return
		}
		it := v.Children()
		n := 0
		for ; it.Next(); n++ {
			el := it.Node()
			ep := fmt.Sprintf("%s[%d]", np, n)
			if el.Kind != unstable.InlineTable {
				w.problem(line, ep, fmt.Sprintf("must be a table, like { name = \"emails\" }, got %s", w.describe(el)))
				return
			}
			w.set(ep, w.line(int(el.Raw.Offset)))
			w.inlineTable(tableCtx{path: ep, spec: ns + "[]"}, el)
		}
		w.arrays[np] = n
	}
}

func (w *walker) inlineTable(c tableCtx, t *unstable.Node) {
	it := t.Children()
	for it.Next() {
		if kv := it.Node(); kv.Kind == unstable.KeyValue {
			w.keyValue(c, kv)
		}
	}
}

// describe names a value for "got ..." messages.
func (w *walker) describe(v *unstable.Node) string {
	raw := ""
	if v.Raw.Length > 0 && int(v.Raw.Offset)+int(v.Raw.Length) <= len(w.data) {
		raw = shorten(string(w.p.Raw(v.Raw)))
	}
	switch v.Kind {
	case unstable.String:
		return "the string " + raw
	case unstable.Integer:
		return "the whole number " + raw
	case unstable.Float:
		return "the number " + raw
	case unstable.Bool:
		return raw
	case unstable.Array:
		return "a list"
	case unstable.InlineTable:
		return "a table"
	case unstable.LocalDate, unstable.LocalTime, unstable.LocalDateTime, unstable.DateTime:
		return "the date/time " + raw
	}
	return "a " + v.Kind.String()
}

// shorten cuts s to about 40 runes.
func shorten(s string) string {
	const limit = 40
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	return string([]rune(s)[:limit]) + "..."
}

func printable(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

// leadingKey matches the key of a "key = value" line.
var leadingKey = regexp.MustCompile(`^\s*([A-Za-z0-9_-]+(?:\s*\.\s*[A-Za-z0-9_-]+)*)\s*=\s*(.*)$`)

// lineText returns line n (1-based) without its line ending.
func (w *walker) lineText(n int) string {
	start := 0
	if n > 1 && n-2 < len(w.nl) {
		start = w.nl[n-2] + 1
	}
	end := len(w.data)
	if n-1 < len(w.nl) {
		end = w.nl[n-1]
	}
	if start > end {
		return ""
	}
	return strings.TrimSuffix(string(w.data[start:end]), "\r")
}

// syntaxError turns the parser's error into an *Error, guessing the key
// from the text of the line.
func (w *walker) syntaxError(err error) *Error {
	off := len(w.data)
	var perr *unstable.ParserError
	if errors.As(err, &perr) && perr.Highlight != nil {
		if o := cap(w.data) - cap(perr.Highlight); o >= 0 && o <= len(w.data) {
			off = o
		}
	}
	if off == len(w.data) && off > 0 {
		off-- // an error at the end of the input is on the last line
	}
	return w.syntaxAt(w.line(off), err.Error())
}

func (w *walker) syntaxAt(line int, msg string) *Error {
	e := &Error{Line: line, Msg: "TOML syntax error: " + msg}
	if m := leadingKey.FindStringSubmatch(w.lineText(line)); m != nil {
		key := strings.Join(strings.Fields(strings.ReplaceAll(m[1], ".", " ")), ".")
		if !w.ctx.skip {
			key = joinPath(w.ctx.path, key)
		}
		e.Key = key
		if s := specByPath[specPath(key)]; s != nil && s.kind.hint() != "" {
			e.Msg += "; " + s.kind.hint() + about(key)
		} else if looksLikeBareString(m[2]) {
			e.Msg += `; if this is a string, put it in double quotes, like "text"`
		}
	}
	return e
}

// looksLikeBareString reports whether the value text v (the rest of a line
// after "=") is an unquoted word that is not a TOML number or boolean.
func looksLikeBareString(v string) bool {
	if i := strings.IndexByte(v, '#'); i >= 0 {
		v = v[:i]
	}
	v = strings.TrimSpace(v)
	if v == "" || strings.ContainsAny(v[:1], `"'[{`) || v == "true" || v == "false" {
		return false
	}
	return strings.ContainsFunc(v, func(r rune) bool {
		return !strings.ContainsRune("0123456789_+-.eE", r)
	})
}

// fromDecoder turns an error of go-toml's Decoder into an *Error.
func (w *walker) fromDecoder(err error) *Error {
	var strictErr *toml.StrictMissingError
	if errors.As(err, &strictErr) && len(strictErr.Errors) > 0 {
		first := &strictErr.Errors[0]
		line, _ := first.Position()
		for i := range strictErr.Errors {
			if l, _ := strictErr.Errors[i].Position(); l < line {
				first, line = &strictErr.Errors[i], l
			}
		}
		return &Error{Line: line, Key: w.keyAt(line, first.Key()), Msg: "unknown key"}
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		line, _ := de.Position()
		msg := strings.TrimPrefix(de.Error(), "toml: ")
		if len(de.Key()) == 0 {
			return w.syntaxAt(line, msg)
		}
		key := w.keyAt(line, de.Key())
		return &Error{Line: line, Key: key, Msg: msg + about(key)}
	}
	return &Error{Msg: strings.TrimPrefix(err.Error(), "toml: ")}
}

// keyAt names the key the Decoder reported as k on line: the walked key
// path on that line ending in the same name, else k joined with dots.
func (w *walker) keyAt(line int, k toml.Key) string {
	if len(k) == 0 {
		return ""
	}
	last := k[len(k)-1]
	paths := w.byLine[line]
	for i := len(paths) - 1; i >= 0; i-- {
		p := paths[i]
		if p == last || strings.HasSuffix(p, "."+last) || strings.HasSuffix(p, "."+strconv.Quote(last)) {
			return p
		}
	}
	return strings.Join(k, ".")
}

// anyStringKeys are the tables whose keys are the user's own names, each
// with a string value: a schedule's job headers.
var anyStringKeys = map[string]bool{"schedules[].headers": true}
