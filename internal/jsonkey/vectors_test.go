package jsonkey

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// testdata/vectors.json holds the cases of this package's tables with what
// Derive answers, for the clients in other languages to check against
// (clients/typescript/test/jsonkey.test.ts): the key, or the error's pointer
// and message. go test -run TestVectors -update rewrites it.
var update = flag.Bool("update", false, "rewrite testdata/vectors.json")

type vector struct {
	Name string `json:"name"`
	// Payload is the payload's text; PayloadHex its bytes when they are not
	// valid UTF-8.
	Payload    string       `json:"payload,omitempty"`
	PayloadHex string       `json:"payload_hex,omitempty"`
	Pointers   []string     `json:"pointers"`
	Key        string       `json:"key,omitempty"`
	Error      *vectorError `json:"error,omitempty"`
}

type vectorError struct {
	Pointer string `json:"pointer"`
	Message string `json:"message"`
}

func vectorCases() []vector {
	var out []vector
	add := func(name, payload string, pointers []string) {
		if len(payload) > 4096 {
			return
		}
		v := vector{Name: name, Pointers: append([]string{}, pointers...)}
		if utf8.ValidString(payload) {
			v.Payload = payload
		} else {
			v.PayloadHex = hex.EncodeToString([]byte(payload))
		}
		key, err := Derive([]byte(payload), pointers)
		var fe *FieldError
		switch {
		case err == nil:
			v.Key = key
		case errors.As(err, &fe):
			v.Error = &vectorError{Pointer: fe.Pointer, Message: fe.Error()}
		default:
			panic(err)
		}
		out = append(out, v)
	}
	for _, c := range deriveCases {
		add(c.name, c.payload, c.pointers)
	}
	for _, c := range numberCases {
		add("number "+c.in, `{"n":`+c.in+`}`, []string{"/n"})
	}
	for _, bits := range []uint64{
		0x0000000000000001, 0x8000000000000001, 0x7fefffffffffffff, 0xffefffffffffffff,
		0x4340000000000000, 0xc340000000000000, 0x4430000000000000, 0x44b52d02c7e14af5,
		0x44b52d02c7e14af6, 0x44b52d02c7e14af7, 0x444b1ae4d6e2ef4e, 0x444b1ae4d6e2ef4f,
		0x444b1ae4d6e2ef50, 0x3eb0c6f7a0b5ed8c, 0x3eb0c6f7a0b5ed8d, 0x41b3de4355555553,
		0x41b3de4355555554, 0x41b3de4355555555, 0x41b3de4355555556, 0x41b3de4355555557,
		0xbecbf647612f3696, 0x43143ff3c1cb0959,
	} {
		lit := strconv.FormatFloat(math.Float64frombits(bits), 'e', -1, 64)
		add("RFC 8785 appendix B "+strconv.FormatUint(bits, 16), `{"n":`+lit+`}`, []string{"/n"})
	}
	for _, c := range errorCases {
		add(c.name, c.payload, c.pointers)
	}
	// The key_fields list in a message is cut after 300 bytes, counted
	// without its closing bracket, and never inside a character.
	for _, n := range []int{290, 291, 292} {
		add("key_fields list of "+strconv.Itoa(9+n)+" bytes in a message", `{}`, []string{"/m", "/" + strings.Repeat("x", n)})
	}
	add("key_fields list cut inside a character", `{}`, []string{"/m", "/" + strings.Repeat("x", 289) + "éé"})
	return out
}

func TestVectors(t *testing.T) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(vectorCases()); err != nil {
		t.Fatal(err)
	}
	const path = "testdata/vectors.json"
	if *update {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(old, b.Bytes()) {
		t.Fatalf("%s is not what Derive answers now; if the change is meant, run go test -run TestVectors -update ./internal/jsonkey and check the other clients against it", path)
	}
}
