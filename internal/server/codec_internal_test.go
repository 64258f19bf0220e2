package server

import "testing"

func TestLoneSurrogate(t *testing.T) {
	for _, tc := range []struct {
		json string
		at   int // -1: none
	}{
		{`{"k":"\ud83d\ude00"}`, -1},
		{`{"k":"\ud800"}`, 6},
		{`{"k":"\udc00"}`, 6},
		{`{"k":"\ud800\ud800"}`, 6},
		{`{"k":"x\\ud800"}`, -1}, // an escaped backslash, then text
		{`{"k":"\"\ud800"}`, 8},  // an escaped quote does not end the string
		{`{"\udfff":1}`, 2},
		{`{"k":"\u00e9"}`, -1},
		{`{"k":"\ud800`, 6},
	} {
		at, ok := loneSurrogate([]byte(tc.json))
		if !ok {
			at = -1
		}
		if at != tc.at {
			t.Errorf("loneSurrogate(%s) = %d, want %d", tc.json, at, tc.at)
		}
	}
}
