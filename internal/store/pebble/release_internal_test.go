package pebble

import (
	"testing"

	"github.com/sepp-dev/sepp/internal/store"
)

// TestRecordReleaseKeyOn: the release_key_on field round-trips, and a
// record written without it (as every record was before it existed) reads
// back as releasing nothing.
func TestRecordReleaseKeyOn(t *testing.T) {
	key := "k"
	r := &record{Job: store.Job{Queue: "q", JobType: "t", Payload: []byte("{}"), IdempotencyKey: &key,
		State: store.JobStateAvailable, MaxAttempts: 3}, RunAt: 5, CreatedAt: 5, WorkerID: "w"}
	old := encodeJob(r)
	got, err := decodeJob(r.ID, old)
	if err != nil || got.ReleaseKeyOn != 0 {
		t.Fatalf("a record without the field: %+v %v", got, err)
	}
	r.ReleaseKeyOn = store.ReleaseOnDead | store.ReleaseOnCancelled
	b := encodeJob(r)
	if len(b) <= len(old) || string(b[:len(old)]) != string(old) {
		t.Fatal("the field must be appended after the earlier fields")
	}
	got, err = decodeJob(r.ID, b)
	if err != nil || got.ReleaseKeyOn != r.ReleaseKeyOn || got.WorkerID != "w" {
		t.Fatalf("round trip: %+v %v", got, err)
	}
}
