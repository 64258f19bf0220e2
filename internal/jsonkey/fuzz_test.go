package jsonkey

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// FuzzDerive takes a payload and key fields separated by newlines. When
// Derive succeeds, the key must be valid JSON already in canonical form, the
// same values as encoding/json reads at those pointers, and the same key
// from the payload re-encoded by encoding/json (members reordered, indented,
// strings escaped differently). When it fails, the error is a *FieldError.
func FuzzDerive(f *testing.F) {
	f.Add([]byte(`{"amount":100,"account":"acc-123"}`), "/account\n/amount")
	f.Add([]byte(`{"a":{"b":[1,2,{"c":"\u00e9\ud83d\ude00"}]}}`), "/a/b/2\n/a/b/0")
	f.Add([]byte(`{"m~n":1,"a/b":[true,null]}`), "/m~0n\n/a~1b/1")
	f.Add([]byte(`{"n":[1e21,1e-7,-0,5e-324,1.7976931348623157e308,9007199254740993]}`), "/n")
	f.Add([]byte(`{"\u20ac":1,"\r":2,"\ufb33":3,"1":4,"\ud83d\ude00":5,"\u0080":6,"\u00f6":7}`), "")
	f.Add([]byte(`{"a":1,"a":2}`), "/a")
	f.Add([]byte(`[1,2]`), "/0")
	f.Add([]byte("{\"s\":\"\xff\"}"), "/s")
	f.Add([]byte(`{"s":"\u2028\u0000<&>"}`), "/s")
	f.Fuzz(func(t *testing.T, payload []byte, fields string) {
		pointers := strings.Split(fields, "\n")
		if len(pointers) > 8 {
			// The key grows with pointers × payload (each "" copies the
			// whole payload): keep each run small.
			pointers = pointers[:8]
		}
		key, err := Derive(payload, pointers)
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %T is not a *FieldError: %v", err, err)
			}
			if fe.Reason == "" {
				t.Fatalf("FieldError without a reason")
			}
			return
		}
		if !json.Valid([]byte(key)) {
			t.Fatalf("key %q is not valid JSON", key)
		}
		again, err := canonicalize([]byte(key))
		if err != nil {
			t.Fatalf("canonicalizing the key %q: %v", key, err)
		}
		if string(again) != key {
			t.Fatalf("the key is not canonical:\n%q\n%q", key, again)
		}

		// encoding/json reads the same payload (our parser is no more
		// lenient) and finds the same values.
		var doc any
		dec := json.NewDecoder(bytes.NewReader(payload))
		dec.UseNumber()
		if err := dec.Decode(&doc); err != nil {
			t.Fatalf("Derive accepted %q, encoding/json did not: %v", payload, err)
		}
		var values []any
		dec = json.NewDecoder(strings.NewReader(key))
		dec.UseNumber()
		if err := dec.Decode(&values); err != nil {
			t.Fatalf("decoding the key %q: %v", key, err)
		}
		if len(values) != len(pointers) {
			t.Fatalf("key %q has %d values for %d pointers", key, len(values), len(pointers))
		}
		for i, p := range pointers {
			want, ok := lookup(doc, p)
			if !ok {
				t.Fatalf("Derive resolved %q, the reference lookup did not", p)
			}
			if !reflect.DeepEqual(asFloats(values[i]), asFloats(want)) {
				t.Fatalf("value of %q: key has %#v, payload %#v", p, values[i], want)
			}
		}

		// Reordered and re-indented, the payload derives the same key.
		re, err := json.MarshalIndent(doc, "", "\t")
		if err != nil {
			t.Fatalf("re-encoding: %v", err)
		}
		key2, err := Derive(re, pointers)
		if err != nil {
			t.Fatalf("Derive of the re-encoded payload %q: %v", re, err)
		}
		if key2 != key {
			t.Fatalf("re-encoded payload gives another key:\n%q\n%q", key, key2)
		}
	})
}

// lookup is a plain RFC 6901 evaluation over what encoding/json decodes.
func lookup(doc any, p string) (any, bool) {
	if p == "" {
		return doc, true
	}
	for _, raw := range strings.Split(p[1:], "/") {
		token := strings.ReplaceAll(strings.ReplaceAll(raw, "~1", "/"), "~0", "~")
		switch v := doc.(type) {
		case map[string]any:
			next, ok := v[token]
			if !ok {
				return nil, false
			}
			doc = next
		case []any:
			if token == "" || (len(token) > 1 && token[0] == '0') || strings.TrimLeft(token, "0123456789") != "" {
				return nil, false
			}
			i, err := strconv.Atoi(token)
			if err != nil || i >= len(v) {
				return nil, false
			}
			doc = v[i]
		default:
			return nil, false
		}
	}
	return doc, true
}

// asFloats replaces each json.Number by its float64 (which is what JCS
// keeps), -0 by 0.
func asFloats(v any) any {
	switch v := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return "bad number " + string(v)
		}
		return f + 0
	case []any:
		out := make([]any, len(v))
		for i := range v {
			out[i] = asFloats(v[i])
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k := range v {
			out[k] = asFloats(v[k])
		}
		return out
	default:
		return v
	}
}
