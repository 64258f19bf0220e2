package server

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// strictJSON is the Connect JSON codec with two changes from connect-go's
// default: an unknown field is an error, not silently dropped (a misspelled
// "idempotencykey" must not turn a keyed enqueue into an unkeyed one), and
// false, zero and empty values are written out, so a first enqueue answers
// "deduplicated": false rather than leaving the field out. It checks the
// bounds on lists before it decodes (counts.go).
type strictJSON struct{ counts *beforeDecode }

func (strictJSON) Name() string { return "json" }

func (strictJSON) Marshal(m any) ([]byte, error) {
	msg, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("json codec: %T is not a proto.Message", m)
	}
	return protojson.MarshalOptions{EmitDefaultValues: true}.Marshal(msg)
}

func (c strictJSON) Unmarshal(data []byte, m any) error {
	msg, ok := m.(proto.Message)
	if !ok {
		return fmt.Errorf("json codec: %T is not a proto.Message", m)
	}
	if aerr := c.counts.check(msg, data, true); aerr != nil {
		refusedBeforeDecode(msg, aerr)
		return nil
	}
	// An error is the interceptor's to answer, as INVALID_FIELD (decode.go).
	if len(data) == 0 {
		decodeFailed(msg, errors.New("empty body: send a JSON object, e.g. {}"))
		return nil
	}
	if err := (protojson.UnmarshalOptions{}).Unmarshal(data, msg); err != nil {
		if at, ok := loneSurrogate(data); ok {
			// protojson says "unexpected EOF" or "invalid escape code",
			// which points nowhere near the cause.
			decodeFailed(msg, fmt.Errorf("(line %s): %s is half of a UTF-16 surrogate pair, without the other half, which is no character: write a character above U+FFFF as the whole pair (\\ud83d\\ude00 for U+1F600), or as UTF-8",
				jsonPosition(data, at), data[at:at+6]))
			return nil
		}
		decodeFailed(msg, fmt.Errorf("%w (field names are lowerCamelCase, e.g. jobType, idempotencyKey)", err))
	}
	return nil
}

// loneSurrogate returns the offset of the first \u escape in a string of
// the JSON text data that is half of a UTF-16 surrogate pair without its
// other half (JSON text escapes a character above U+FFFF as a pair, such as
// \ud83d\ude00).
func loneSurrogate(data []byte) (int, bool) {
	inString := false
	for i := 0; i < len(data); i++ {
		switch {
		case data[i] == '"':
			inString = !inString
		case !inString || data[i] != '\\':
		case i+1 < len(data) && data[i+1] == 'u':
			r, ok := unicodeEscape(data[i:])
			switch {
			case !ok || !utf16.IsSurrogate(r):
				i++
			case r < 0xdc00: // a first half: the second must follow
				if r2, ok := unicodeEscape(data[i+6:]); ok && utf16.DecodeRune(r, r2) != utf8.RuneError {
					i += 11
					continue
				}
				return i, true
			default: // a second half with no first
				return i, true
			}
		default:
			i++ // the escaped character, which may be a quote
		}
	}
	return 0, false
}

// unicodeEscape decodes the \uXXXX escape at the start of b.
func unicodeEscape(b []byte) (rune, bool) {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[2:6]), 16, 16)
	return rune(v), err == nil
}

// jsonPosition is offset in data as protojson's errors give a position:
// line:column, both from 1, the column in characters.
func jsonPosition(data []byte, offset int) string {
	line, start := 1, 0
	for i, c := range data[:offset] {
		if c == '\n' {
			line, start = line+1, i+1
		}
	}
	return fmt.Sprintf("%d:%d", line, utf8.RuneCount(data[start:offset])+1)
}
