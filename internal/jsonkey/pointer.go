// Package jsonkey derives idempotency keys from fields of a JSON payload:
// JSON pointers (RFC 6901) name the fields, and the key is the canonical
// JSON (RFC 8785, the JSON Canonicalization Scheme) of the array of their
// values, such as ["acc-123",100]. The server derives it for a queue's
// key_fields, and the clients can compute the same key to look it up.
//
// The canonical form is RFC 8785's exactly: no whitespace, object members
// sorted by the UTF-16 code units of their names, strings escaped as
// ECMAScript's JSON.stringify does, numbers written as ECMAScript's
// Number.prototype.toString writes the IEEE-754 double. JCS works on
// doubles, so every number is rounded to the nearest double first: integers
// beyond 2^53 lose precision (9007199254740993 derives the same key as
// 9007199254740992), 1.0, 1e0 and 1 derive the same key, -0 is 0, and a
// number too large for a double (1e400) is an error. Senders that need
// exact large integers or decimals should send them as JSON strings.
//
// The payload must be I-JSON (RFC 7493), as RFC 8785 requires: UTF-8
// without invalid sequences, no lone surrogate escapes, no duplicate member
// names anywhere in it; Derive rejects a payload that is not, rather than
// guess which of two members was meant.
package jsonkey

import (
	"errors"
	"strings"
)

// CheckPointer reports whether p is a JSON pointer (RFC 6901): "" (the whole
// document) or "/"-separated reference tokens in which "~" appears only as
// "~0" or "~1".
func CheckPointer(p string) error {
	if p == "" {
		return nil
	}
	if !strings.HasPrefix(p, "/") {
		return errors.New(`it must start with "/"`)
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '~' && (i+1 >= len(p) || (p[i+1] != '0' && p[i+1] != '1')) {
			return errors.New(`"~" must be written "~0", and "/" inside a name "~1"`)
		}
	}
	return nil
}
