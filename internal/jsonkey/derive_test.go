package jsonkey

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"
)

type deriveCase struct {
	name     string
	payload  string
	pointers []string
	want     string
}

var deriveCases = []deriveCase{
	{"spec example", `{"amount":100,"account":"acc-123"}`, []string{"/account", "/amount"}, `["acc-123",100]`},
	{"order of pointers is kept", `{"amount":100,"account":"acc-123"}`, []string{"/amount", "/account"}, `[100,"acc-123"]`},
	{"whitespace and other members ignored", " \t\r\n{ \"x\" : [1, 2] ,\n \"account\" : \"acc-123\" , \"amount\" : 1.00e2 }\n", []string{"/account", "/amount"}, `["acc-123",100]`},
	{"whole document", `{"b":1,"a":[true,false,null]}`, []string{""}, `[{"a":[true,false,null],"b":1}]`},
	{"nested object value sorted", `{"order":{"z":1,"a":{"y":2,"b":[{"d":1,"c":2}]}}}`, []string{"/order"}, `[{"a":{"b":[{"c":2,"d":1}],"y":2},"z":1}]`},
	{"nested member", `{"order":{"id":"o-1","lines":[{"sku":"A"},{"sku":"B"}]}}`, []string{"/order/id", "/order/lines/1/sku"}, `["o-1","B"]`},
	{"array index 0 and 10", `{"a":[0,1,2,3,4,5,6,7,8,9,"ten"]}`, []string{"/a/0", "/a/10"}, `[0,"ten"]`},
	{"~1 is a slash", `{"a/b":1,"a":{"b":2}}`, []string{"/a~1b"}, `[1]`},
	{"~0 is a tilde", `{"m~n":"tilde","m~1n":"literal"}`, []string{"/m~0n", "/m~01n"}, `["tilde","literal"]`},
	{"empty member name", `{"":"empty","a":{"":"nested empty"}}`, []string{"/", "/a/"}, `["empty","nested empty"]`},
	{"member names are compared decoded", `{"\u0061cc":"x"}`, []string{"/acc"}, `["x"]`},
	{"escapes in strings", `{"s":"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/"}`, []string{"/s"}, `["€$\u000f\nA'B\"\\\\\"/"]`},
	{"control characters", `{"s":"\u0000\u0001\b\t\n\u000b\f\r\u001f\u007f"}`, []string{"/s"}, "[\"\\u0000\\u0001\\b\\t\\n\\u000b\\f\\r\\u001f\x7f\"]"},
	{"U+2028 and U+2029 literal", `{"s":"\u2028\u2029"}`, []string{"/s"}, "[\"\u2028\u2029\"]"},
	{"non-ASCII literal", `{"s":"\u00e9\ud83d\ude00","t":"é😀"}`, []string{"/s", "/t"}, `["é😀","é😀"]`},
	{"uppercase hex escape", `{"s":"\u00C9\uD83D\uDE00"}`, []string{"/s"}, `["É😀"]`},
	{"literals", `{"literals":[null,true,false]}`, []string{"/literals", "/literals/1"}, `[[null,true,false],true]`},
	{"empty containers", `{"o":{},"a":[]}`, []string{"/o", "/a"}, `[{},[]]`},
	{"precision goes to doubles", `{"n":9007199254740993}`, []string{"/n"}, `[9007199254740992]`},
	{"overflow elsewhere is fine", `{"n":1,"big":1e400}`, []string{"/n"}, `[1]`},
	{"underflow is zero", `{"n":1e-400,"m":-1e-400}`, []string{"/n", "/m"}, `[0,0]`},
	{
		"RFC 8785 3.2.2 example",
		`{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001], "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/", "literals": [null, true, false]}`,
		[]string{""},
		`[{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}]`,
	},
	{
		"RFC 8785 3.2.3 sorting",
		`{"\u20ac": "Euro Sign", "\r": "Carriage Return", "\ufb33": "Hebrew Letter Dalet With Dagesh", "1": "One", "\ud83d\ude00": "Emoji: Grinning Face", "\u0080": "Control", "\u00f6": "Latin Small Letter O With Diaeresis"}`,
		[]string{""},
		"[{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u20ac\":\"Euro Sign\",\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}]",
	},
}

func TestDerive(t *testing.T) {
	for _, tt := range deriveCases {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Derive([]byte(tt.payload), tt.pointers)
			if err != nil {
				t.Fatalf("Derive: %v", err)
			}
			if got != tt.want {
				t.Fatalf("Derive = %s\nwant      %s", got, tt.want)
			}
		})
	}
}

// The number table of RFC 8785 appendix B (IEEE-754 bits and the JCS form),
// and the cases of ECMAScript's Number::toString at each boundary.
func TestNumberBits(t *testing.T) {
	tests := []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	}
	for _, tt := range tests {
		f := math.Float64frombits(tt.bits)
		if got := string(appendNumber(nil, f)); got != tt.want {
			t.Errorf("%016x (%v): got %s, want %s", tt.bits, f, got, tt.want)
		}
	}
}

var numberCases = []struct{ in, want string }{
	{"0", "0"},
	{"-0", "0"},
	{"-0.0e-5", "0"},
	{"1", "1"},
	{"-1", "-1"},
	{"1.0", "1"},
	{"4.50", "4.5"},
	{"2e-3", "0.002"},
	{"1E30", "1e+30"},
	{"1e21", "1e+21"},
	{"1e+21", "1e+21"},
	{"999999999999999999999", "1e+21"},
	{"100000000000000000000", "100000000000000000000"},
	{"123456789012345678901", "123456789012345680000"},
	{"1e20", "100000000000000000000"},
	{"1e-7", "1e-7"},
	{"1.5e-7", "1.5e-7"},
	{"0.000001", "0.000001"},
	{"0.0000012345", "0.0000012345"},
	{"1e-6", "0.000001"},
	{"0.1", "0.1"},
	{"0.30000000000000004", "0.30000000000000004"},
	{"333333333.33333329", "333333333.3333333"},
	{"0.000000000000000000000000001", "1e-27"},
	{"1e+23", "1e+23"},
	{"5e-324", "5e-324"},
	{"2e-324", "0"},
	{"3e-324", "5e-324"},
	{"1.7976931348623157e308", "1.7976931348623157e+308"},
	{"1.7976931348623158e308", "1.7976931348623157e+308"},
	{"9007199254740993", "9007199254740992"},
	{"9007199254740995", "9007199254740996"},
	{"-123.456e-2", "-1.23456"},
	{"12345678901234567890", "12345678901234567000"},
	{"0e99999999999999999999", "0"},
	{"1e-99999999999999999999", "0"},
	{"0.1e1", "1"},
	{"-1E-7", "-1e-7"},
	{"123e-20", "1.23e-18"},
	{"1" + strings.Repeat("0", 400) + "e-400", "1"},
}

func TestNumberLiterals(t *testing.T) {
	for _, tt := range numberCases {
		got, err := Derive([]byte(`{"n":`+tt.in+`}`), []string{"/n"})
		if err != nil {
			t.Errorf("%s: %v", tt.in, err)
			continue
		}
		if want := "[" + tt.want + "]"; got != want {
			t.Errorf("%s: got %s, want %s", tt.in, got, want)
		}
	}
}

// Member names sort by UTF-16 code units, which differs from the order of
// code points (and of UTF-8 bytes) for U+E000-U+FFFF against supplementary
// characters.
func TestCompareUTF16(t *testing.T) {
	names := []string{
		"", "a", "ab", "b", "\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001F600", "\ufb33",
		"\uffff", "\ue000", "\ud7ff", "\U00010000", "\U0010FFFF", "\U0001F600a", "\U0001F601", "a\U0001F600", "a\uffff",
	}
	units := func(s string) []uint16 { return utf16.Encode([]rune(s)) }
	for _, a := range names {
		for _, b := range names {
			want := slices.Compare(units(a), units(b))
			if got := compareUTF16(a, b); got != want {
				t.Errorf("compareUTF16(%+q, %+q) = %d, want %d", a, b, got, want)
			}
		}
	}
}

var acct = []string{"/account", "/amount"}

var errorCases = []struct {
	name     string
	payload  string
	pointers []string
	pointer  string   // the FieldError's Pointer
	contains []string // in Error()
}{
	{"missing member", `{"account":"acc-123"}`, acct, "/amount", []string{`field "/amount": not in the payload; the queue derives its idempotency key from key_fields ["/account","/amount"], so every job needs them, or send an explicit key`}},
	{"missing nested member", `{"order":{}}`, []string{"/order/id"}, "/order/id", []string{`the object at "/order" has no member "id"`}},
	{"index out of range", `{"a":[1,2]}`, []string{"/a/2"}, "/a/2", []string{"no element 2", `"/a" is an array of 2`}},
	{"dash index", `{"a":[1,2]}`, []string{"/a/-"}, "/a/-", []string{`"-" names the element after the last one`}},
	{"leading zero index", `{"a":[1,2]}`, []string{"/a/01"}, "/a/01", []string{`"01" is not an array index`}},
	{"signed index", `{"a":[1,2]}`, []string{"/a/+1"}, "/a/+1", []string{`"+1" is not an array index`}},
	{"empty index", `{"a":[1,2]}`, []string{"/a/"}, "/a/", []string{`"" is not an array index`}},
	{"huge index", `{"a":[1,2]}`, []string{"/a/99999999999999999999999"}, "/a/99999999999999999999999", []string{"no element"}},
	{"into a scalar", `{"a":"text"}`, []string{"/a/b"}, "/a/b", []string{`"/a" is a string`}},
	{"into null", `{"a":null}`, []string{"/a/0"}, "/a/0", []string{`"/a" is null`}},
	{"bad pointer syntax", `{"a":1}`, []string{"a"}, "a", []string{"is not a JSON pointer", `must start with "/"`}},
	{"bad tilde", `{"a~2":1}`, []string{"/a~2"}, "/a~2", []string{"is not a JSON pointer"}},
	{"overflow", `{"amount":1e400,"account":"x"}`, acct, "/amount", []string{"1e400", "beyond the range of IEEE-754 doubles"}},
	{"overflow nested", `{"account":{"n":[-2e308]},"amount":1}`, acct, "/account", []string{"-2e308"}},
	{"huge exponent", `{"account":"a","amount":1e99999999999999999999}`, acct, "/amount", []string{"beyond the range"}},
	{"no pointers", `{"a":1}`, nil, "", []string{"no key_fields"}},
	{"empty payload", ``, acct, "", []string{"payload: is empty, not a JSON object"}},
	{"whitespace payload", "  \n", acct, "", []string{"not valid JSON"}},
	{"array payload", `["acc-123",100]`, acct, "", []string{"payload: is an array, not a JSON object", "or an explicit key"}},
	{"string payload", `"acc"`, acct, "", []string{"is a string, not a JSON object"}},
	{"number payload", `100`, acct, "", []string{"is a number, not a JSON object"}},
	{"null payload", `null`, acct, "", []string{"is null, not a JSON object"}},
	{"not JSON", `account=acc-123`, acct, "", []string{"payload: is not valid JSON", "byte offset 0"}},
	{"trailing garbage", `{"account":"a","amount":1} x`, acct, "", []string{"after the JSON value"}},
	{"two documents", `{"account":"a","amount":1}{}`, acct, "", []string{"after the JSON value"}},
	{"truncated", `{"account":"a","amount":1`, acct, "", []string{"not valid JSON"}},
	{"trailing comma", `{"account":"a","amount":1,}`, acct, "", []string{"not valid JSON"}},
	{"single quotes", `{'account':'a'}`, acct, "", []string{"not valid JSON"}},
	{"duplicate member", `{"account":"a","amount":1,"amount":2}`, acct, "", []string{`duplicate member name "amount" in the object at ""`}},
	{"duplicate nested, escaped", `{"account":"a","amount":1,"x":[{"k":1,"\u006b":2}]}`, acct, "", []string{`duplicate member name "k" in the object at "/x/0"`}},
	{"invalid UTF-8", "{\"account\":\"a\xff\",\"amount\":1}", acct, "", []string{"invalid UTF-8"}},
	{"invalid UTF-8 in a name", "{\"\xc3\":1}", acct, "", []string{"invalid UTF-8"}},
	{"encoded surrogate", "{\"account\":\"\xed\xa0\x80\",\"amount\":1}", acct, "", []string{"invalid UTF-8"}},
	{"overlong encoding", "{\"account\":\"\xc0\xaf\",\"amount\":1}", acct, "", []string{"invalid UTF-8"}},
	{"lone high surrogate", `{"account":"\ud83d","amount":1}`, acct, "", []string{"lone surrogate"}},
	{"lone low surrogate", `{"account":"\ude00","amount":1}`, acct, "", []string{"lone surrogate"}},
	{"reversed surrogates", `{"account":"\ude00\ud83d","amount":1}`, acct, "", []string{"lone surrogate"}},
	{"raw control char", "{\"account\":\"a\nb\",\"amount\":1}", acct, "", []string{"control character"}},
	{"bad escape", `{"account":"\x41","amount":1}`, acct, "", []string{`invalid escape \x`}},
	{"short unicode escape", `{"account":"\u12","amount":1}`, acct, "", []string{`invalid \u escape`}},
	{"byte order mark", "\ufeff{\"account\":\"a\",\"amount\":1}", acct, "", []string{"not valid JSON"}},
	{"leading zero number", `{"account":"a","amount":01}`, acct, "", []string{"not valid JSON"}},
	{"plus number", `{"account":"a","amount":+1}`, acct, "", []string{"not valid JSON"}},
	{"bare dot", `{"account":"a","amount":1.}`, acct, "", []string{"after '.'"}},
	{"empty exponent", `{"account":"a","amount":1e}`, acct, "", []string{"exponent"}},
	{"NaN", `{"account":"a","amount":NaN}`, acct, "", []string{"not valid JSON"}},
	{"Infinity", `{"account":"a","amount":Infinity}`, acct, "", []string{"not valid JSON"}},
	{"bad literal", `{"account":"a","amount":tru}`, acct, "", []string{"not valid JSON"}},
	{"too deep", strings.Repeat(`{"a":`, maxDepth+1) + "1" + strings.Repeat("}", maxDepth+1), []string{"/a"}, "", []string{"nested more than"}},
}

func TestDeriveErrors(t *testing.T) {
	for _, tt := range errorCases {
		t.Run(tt.name, func(t *testing.T) {
			key, err := Derive([]byte(tt.payload), tt.pointers)
			if err == nil {
				t.Fatalf("Derive = %s, want an error", key)
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %T (%v) is not a *FieldError", err, err)
			}
			if fe.Pointer != tt.pointer {
				t.Errorf("Pointer = %q, want %q (%v)", fe.Pointer, tt.pointer, err)
			}
			for _, s := range tt.contains {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

// A depth the limit allows still works, without a stack problem.
func TestDeep(t *testing.T) {
	payload := strings.Repeat(`{"a":`, maxDepth-1) + "[1]" + strings.Repeat("}", maxDepth-1)
	ptr := strings.Repeat("/a", maxDepth-2)
	got, err := Derive([]byte(payload), []string{ptr})
	if err != nil {
		t.Fatal(err)
	}
	if got != `[{"a":[1]}]` {
		t.Fatalf("got %s", got)
	}
}

// The canonical form of a document is what encoding/json reads back as the
// same values, and canonicalizing it again changes nothing.
func TestCanonicalIsStable(t *testing.T) {
	doc := `{"b":[1.5e300,-0.0,{"é":"\u0000\u2028","e":null}],"a":"\ud834\udd1e"}`
	c, err := canonicalize([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(c) {
		t.Fatalf("not valid JSON: %s", c)
	}
	c2, err := canonicalize(c)
	if err != nil || !bytes.Equal(c, c2) {
		t.Fatalf("again: %s, %v; want %s", c2, err, c)
	}
	want := "{\"a\":\"𝄞\",\"b\":[1.5e+300,0,{\"e\":null,\"é\":\"\\u0000\u2028\"}]}"
	if string(c) != want {
		t.Fatalf("got  %s\nwant %s", c, want)
	}
}
