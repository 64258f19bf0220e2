package server_test

import (
	"strings"
	"testing"

	"github.com/sepp-dev/sepp/internal/testserver"
)

// TestJSONLoneSurrogate: a JSON string escaping half of a UTF-16 surrogate
// pair (in a field, a map key, a bytes field) is INVALID_FIELD naming the
// escape and its position, not protojson's "unexpected EOF".
func TestJSONLoneSurrogate(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{})
	const pair = `is half of a UTF-16 surrogate pair, without the other half, which is no character: write a character above U+FFFF as the whole pair (\ud83d\ude00 for U+1F600), or as UTF-8`
	for _, tc := range []struct{ body, want string }{
		{`{"queue":"a","jobType":"t","idempotency_key":"\ud800"}`, `(line 1:47): \ud800 ` + pair},
		{`{"queue":"a","jobType":"t","headers":{"\ud800":"x"}}`, `(line 1:40): \ud800 ` + pair},
		{`{"queue":"a","jobType":"t","payload":"\udc00"}`, `(line 1:39): \udc00 ` + pair},
		{"{\"queue\":\"a\",\n \"jobType\":\"é\\ud83d\\u0041\"}", `(line 2:14): \ud83d ` + pair},
	} {
		status, body := postJSON(t, srv.URL+"/sepp.v1.JobService/Enqueue", tc.body)
		want := "request: cannot decode the sepp.v1.EnqueueRequest message: " + tc.want
		if status != 400 || reasonOf(t, body) != "INVALID_FIELD" || body["message"] != want {
			t.Errorf("%s: %d %v\nwant 400 INVALID_FIELD %q", tc.body, status, body, want)
		}
	}
	// A whole pair is a character.
	status, body := postJSON(t, srv.URL+"/sepp.v1.JobService/Enqueue", `{"queue":"a","jobType":"t","idempotencyKey":"\ud83d\ude00"}`)
	if status != 200 || !strings.HasPrefix(body["jobId"].(string), "0") {
		t.Fatalf("a whole pair: %d %v", status, body)
	}
}
