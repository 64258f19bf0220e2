package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

const data = "../history/testdata/"

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{data + "keyed_retries.jsonl"}, 0, "result: valid"},
		{[]string{data + "phantom_and_twice.jsonl"}, 1, "effect ran twice"},
		{[]string{"-json", data + "phantom_and_twice.jsonl"}, 1, `"kind": "phantom job"`},
		{[]string{data + "no-such-file.jsonl"}, 2, ""},
		{nil, 2, ""},
	} {
		var out, errOut bytes.Buffer
		code := run(tc.args, strings.NewReader(""), &out, &errOut)
		if code != tc.code {
			t.Errorf("%v: exit %d, want %d\n%s%s", tc.args, code, tc.code, out.String(), errOut.String())
		}
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("%v: output lacks %q:\n%s", tc.args, tc.want, out.String())
		}
	}
}

func TestRunStdinJSON(t *testing.T) {
	in := `{"process":1,"op":"enqueue","queue":"q","key":"k","start":0,"end":10,"outcome":"ok","job_id":"J1"}` + "\n" +
		`{"state":{"jobs":[],"queues":[{"queue":"q","dedup_window_ms":1000}]}}` + "\n"
	var out, errOut bytes.Buffer
	if code := run([]string{"-json", "-"}, strings.NewReader(in), &out, &errOut); code != 1 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var rep struct {
		Violations []struct{ Kind string } `json:"violations"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Violations) != 1 || rep.Violations[0].Kind != "acked job missing" {
		t.Errorf("violations: %+v", rep.Violations)
	}
}
