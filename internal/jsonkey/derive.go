package jsonkey

import (
	"errors"
	"strconv"
	"strings"
)

// FieldError is why no key could be derived: a pointer that names nothing in
// the payload, or (Pointer "") a payload that is not a JSON object. The
// server answers it with INVALID_FIELD naming Pointer.
type FieldError struct {
	// Pointer is the key field at fault, or "" when the payload itself is.
	Pointer string
	// Reason says what is wrong and what to do, in a sentence without the
	// pointer.
	Reason string
	// Problem is the part of Reason that says what is wrong, without the
	// advice about the queue's key_fields (a uniqueness rule's caller gives
	// its own); Reason itself when there is no such advice.
	Problem string
}

// keyFieldsError is a FieldError whose Reason is problem followed by the
// advice of a queue that derives its key from key_fields.
func keyFieldsError(pointer, problem, advice string) *FieldError {
	return &FieldError{Pointer: pointer, Problem: problem, Reason: problem + "; " + advice}
}

// plainError is a FieldError with no key_fields advice to tell apart.
func plainError(pointer, reason string) *FieldError {
	return &FieldError{Pointer: pointer, Reason: reason, Problem: reason}
}

func (e *FieldError) Error() string {
	if e.Pointer == "" {
		return "payload: " + e.Reason
	}
	return "field " + quote(e.Pointer) + ": " + e.Reason
}

// Derive returns the idempotency key that pointers (a queue's key_fields)
// derive from payload: the RFC 8785 canonical JSON of the array of the
// values they point at, such as ["acc-123",100] for
// {"amount": 100, "account": "acc-123"} and ["/account", "/amount"].
//
// The payload must be one JSON object in UTF-8 that is also I-JSON (RFC
// 7493): no duplicate member names, no lone surrogates. Each pointer (RFC
// 6901) must name a member or array element that exists; "-" names none.
// Numbers in the values are read as IEEE-754 doubles, as RFC 8785 says, so
// 9007199254740993 gives the same key as 9007199254740992, 1.0 the same as 1,
// and a number beyond the doubles (1e400) is an error. Every error is a
// *FieldError.
func Derive(payload []byte, pointers []string) (string, error) {
	if len(pointers) == 0 {
		return "", plainError("", "no key_fields to derive an idempotency key from; list JSON pointers like [\"/account\", \"/amount\"]")
	}
	// Pointers are checked before the payload: a bad pointer is the
	// configuration's fault, whatever the job carries.
	for _, p := range pointers {
		if err := CheckPointer(p); err != nil {
			return "", plainError(p, "is not a JSON pointer (RFC 6901): "+err.Error()+"; write it like \"/account\" or \"/order/id\"")
		}
	}
	advice := "the queue derives its idempotency key from key_fields " + quoteList(pointers)
	if len(payload) == 0 {
		return "", keyFieldsError("", "is empty, not a JSON object", advice+", so every job needs a JSON object payload holding them, or an explicit key")
	}
	doc, err := parse(payload)
	if err != nil {
		return "", keyFieldsError("", "is not valid JSON (I-JSON, RFC 7493): "+err.Error(), advice+", so every job needs a JSON object payload holding them, or an explicit key")
	}
	if doc.kind != kindObject {
		return "", keyFieldsError("", "is "+doc.kind.String()+", not a JSON object", advice+", so every job needs a JSON object payload holding them, or an explicit key")
	}
	b := []byte{'['}
	for i, p := range pointers {
		v, why := resolve(&doc, p)
		if why != "" {
			return "", keyFieldsError(p, why, advice+", so every job needs them, or send an explicit key")
		}
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = appendCanonical(b, v); err != nil {
			var nf *errNotFinite
			if errors.As(err, &nf) {
				return "", plainError(p, nf.Error()+"; send a number within ±1.7976931348623157e308 (or the value as a string), or an explicit key")
			}
			return "", plainError(p, err.Error())
		}
	}
	return string(append(b, ']')), nil
}

var (
	tokenUnescaper = strings.NewReplacer("~1", "/", "~0", "~")
	tokenEscaper   = strings.NewReplacer("~", "~0", "/", "~1")
)

// resolve evaluates the valid pointer p against doc (RFC 6901 section 4),
// returning the value or why there is none.
func resolve(doc *value, p string) (*value, string) {
	if p == "" {
		return doc, ""
	}
	v := doc
	at := 0 // p[:at] is the pointer of v
	for _, raw := range strings.Split(p[1:], "/") {
		token := tokenUnescaper.Replace(raw)
		parent := p[:at]
		switch v.kind {
		case kindObject:
			var next *value
			for i := range v.obj {
				if v.obj[i].name == token {
					next = &v.obj[i].val
					break
				}
			}
			if next == nil {
				if parent == "" {
					return nil, "not in the payload"
				}
				return nil, "not in the payload (the object at " + quote(parent) + " has no member " + quote(token) + ")"
			}
			v = next
		case kindArray:
			i, why := arrayIndex(token, len(v.arr))
			if why != "" {
				return nil, why + " (" + quote(parent) + " is an array of " + strconv.Itoa(len(v.arr)) + ")"
			}
			v = &v.arr[i]
		default:
			return nil, "not in the payload (" + quote(parent) + " is " + v.kind.String() + ", which has no members or elements)"
		}
		at += 1 + len(raw)
	}
	return v, ""
}

// arrayIndex reads an RFC 6901 array index: "0" or decimal digits without a
// leading zero, below n.
func arrayIndex(token string, n int) (int, string) {
	if token == "-" {
		return 0, `"-" names the element after the last one, which never exists; name an index from 0`
	}
	valid := token != "" && (token == "0" || token[0] != '0')
	for i := 0; i < len(token) && valid; i++ {
		valid = token[i] >= '0' && token[i] <= '9'
	}
	if !valid {
		return 0, quote(token) + " is not an array index (a decimal number without leading zeros, from 0)"
	}
	i, err := strconv.Atoi(token)
	if err != nil || i >= n {
		return 0, "not in the payload (there is no element " + token + ")"
	}
	return i, ""
}

// quote writes s as a JSON string, the way messages show names.
func quote(s string) string {
	return string(appendString(nil, strings.ToValidUTF8(s, "\uFFFD")))
}

func quoteList(list []string) string {
	b := []byte{'['}
	for i, s := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, strings.ToValidUTF8(s, "\uFFFD"))
	}
	if len(b) > 300 {
		// Messages stay readable when the pointers are long.
		b = append([]byte(strings.ToValidUTF8(string(b[:300]), "")), "…"...)
		return string(b)
	}
	return string(append(b, ']'))
}

// pointerOf writes reference tokens as a JSON pointer.
func pointerOf(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(tokenEscaper.Replace(t))
	}
	return b.String()
}
