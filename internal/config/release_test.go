package config

import (
	"slices"
	"strings"
	"testing"
)

// TestReleaseKeyOn: release_key_on takes any subset of the final states,
// defaults to none, and refuses other values and repeats, naming the valid
// values.
func TestReleaseKeyOn(t *testing.T) {
	c, err := Parse("sepp.toml", []byte("[[queues]]\nname = \"reports\"\nrelease_key_on = [\"dead\", \"completed\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Queue("reports").ReleaseKeyOn; !slices.Equal(got, []string{"dead", "completed"}) {
		t.Fatalf("release_key_on = %q", got)
	}
	if got := c.Queue("other").ReleaseKeyOn; len(got) != 0 {
		t.Fatalf("an undeclared queue's release_key_on = %q, want none", got)
	}
	for _, tt := range []struct{ value, want string }{
		{`["failed"]`, `sepp.toml:3: queues[0].release_key_on: "failed" is not a final state; the valid values are "dead", "cancelled" and "completed"`},
		{`["dead", "dead"]`, `sepp.toml:3: queues[0].release_key_on: "dead" is listed twice; list each state once`},
		{`"dead"`, `queues[0].release_key_on`},
	} {
		_, err := Parse("sepp.toml", []byte("[[queues]]\nname = \"reports\"\nrelease_key_on = "+tt.value+"\n"))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("release_key_on = %s: %v, want %q", tt.value, err, tt.want)
		}
	}
}
