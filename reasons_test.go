package sepp

import (
	"testing"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
)

// webhookOnly are the reasons only webhook endpoints answer with; a client
// call never gets them.
var webhookOnly = map[seppv1.Reason]bool{seppv1.Reason_SIGNATURE_INVALID: true, seppv1.Reason_METHOD_NOT_ALLOWED: true}

// Every reason of the proto enum has its sentinel, and no sentinel names a
// reason the enum lacks.
func TestSentinelsAreTheProtoReasons(t *testing.T) {
	want := 0
	for n, name := range seppv1.Reason_name {
		r := seppv1.Reason(n)
		if r == seppv1.Reason_REASON_UNSPECIFIED || webhookOnly[r] {
			continue
		}
		want++
		if sentinels[name] == nil {
			t.Errorf("reason %s has no sentinel error", name)
		}
	}
	for name := range sentinels {
		if _, ok := seppv1.Reason_value[name]; !ok {
			t.Errorf("sentinel %s is not a value of sepp.v1.Reason", name)
		}
	}
	if len(sentinels) != want {
		t.Errorf("%d sentinels, want %d", len(sentinels), want)
	}
}
