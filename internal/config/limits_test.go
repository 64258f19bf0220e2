package config

import (
	"strings"
	"testing"
)

func TestLimits(t *testing.T) {
	c, err := Parse("sepp.toml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Limits != defaultLimits() {
		t.Fatalf("defaults: %+v", c.Limits)
	}
	if got, want := c.Limits.RequestBytes(c.Server), int64(1<<20+1000*4096+128<<10); got != want {
		t.Fatalf("derived request bytes %d, want %d", got, want)
	}
	c, err = Parse("sepp.toml", []byte("[limits]\nmax_reserve_queues = 5\nmax_reserve_jobs = 6\nmax_long_polls_per_connection = 7\nmax_long_polls = 8\nmax_long_polls_per_client = 10\nmax_request_bytes = 9\nmax_queue_labels = 11\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (LimitsConfig{5, 6, 7, 8, 10, 9, 11, ConnectionLimits{}}); c.Limits != want || c.Limits.RequestBytes(c.Server) != 9 {
		t.Fatalf("got %+v", c.Limits)
	}
	for _, bad := range []string{
		"[limits]\nmax_reserve_queues = 0\n",
		"[limits]\nmax_long_polls = -1\n",
		"[limits]\nmax_request_bytes = 0\n",
		"[limits]\nmax_long_polls_per_client = 0\n",
		"[limits]\nmax_queue_labels = 0\n",
	} {
		_, err := Parse("sepp.toml", []byte(bad))
		if err == nil || !strings.Contains(err.Error(), "sepp.toml:2: limits.") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	// Left out, the per-client bound is 1000, at most half of the node's.
	for _, c := range []struct {
		l    LimitsConfig
		want int
	}{
		{LimitsConfig{MaxLongPolls: 10000}, 1000},
		{LimitsConfig{MaxLongPolls: 1500}, 750},
		{LimitsConfig{MaxLongPolls: 1}, 1},
		{LimitsConfig{MaxLongPolls: 8, MaxLongPollsPerClient: 8}, 8},
	} {
		if got := c.l.LongPollsPerClient(); got != c.want {
			t.Errorf("%+v: LongPollsPerClient %d, want %d", c.l, got, c.want)
		}
	}
	huge := ServerConfig{MaxPayloadBytes: 1 << 40, MaxBatchSize: 1 << 40}
	if got := (LimitsConfig{}).RequestBytes(huge); got != 1<<30 {
		t.Errorf("capped: %d", got)
	}
}
