package server_test

import (
	"strings"
	"testing"

	"github.com/sepp-dev/sepp/internal/testserver"
)

// TestQueueNameInvisibleCharacters: the API refuses a queue name holding an
// invisible character, saying which one and at which byte.
func TestQueueNameInvisibleCharacters(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	for _, tc := range []struct{ queue, want string }{
		{`pay\u200bments`, "U+200B at byte 3"},
		{`\u202eemails`, "U+202E at byte 0"},
		{`a\u0007b`, "U+0007 at byte 1"},
	} {
		status, body := postJSON(t, srv.URL+"/sepp.v1.JobService/Enqueue", `{"queue":"`+tc.queue+`","jobType":"t"}`)
		msg, _ := body["message"].(string)
		if status != 400 || reasonOf(t, body) != "INVALID_FIELD" || !strings.Contains(msg, tc.want) {
			t.Errorf("queue %s: %d %v, want 400 INVALID_FIELD naming %s", tc.queue, status, body, tc.want)
		}
	}
}
