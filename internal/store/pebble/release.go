package pebble

import (
	"errors"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/storerule"
)

// releaseKey deletes, in t, the dedup record of r, which has just reached
// its final state, when the job's release_key_on names that state and the
// record still names the job: a record that a newer job took over after
// its expiry stays. A record it deletes is counted in t.released.
func releaseKey(t *tx, r *record) error {
	if r.IdempotencyKey == nil || !r.ReleaseKeyOn.Releases(r.State) {
		return nil
	}
	key := *r.IdempotencyKey
	d, err := getDedup(t.b, r.Queue, key)
	if err != nil || d == nil || d.JobID != r.ID {
		return err
	}
	if err := t.delDedup(storerule.Key{Queue: r.Queue, Key: key}); err != nil {
		return err
	}
	if err := t.del(dedupExpKey(d.ExpiresAt, r.Queue, key)); err != nil {
		return err
	}
	if t.released == nil {
		t.released = map[string]int{}
	}
	t.released[r.Queue]++
	return nil
}

// releaseFollower makes the follow-up that waits for r, which reached a
// final state in this batch, deliverable: it no longer follows anything and
// enters the index its run-at puts it in, at r's finalization time.
func (t *tx) releaseFollower(r *record) error {
	if r.Follower == (store.JobID{}) {
		return nil
	}
	f, err := getJob(t.b, r.Follower)
	if errors.Is(err, store.ErrJobNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if f.FollowsJobID != r.ID || f.State.Finalized() {
		return nil // cancelled while it waited
	}
	f.FollowsJobID = store.JobID{}
	if err := t.putJob(f); err != nil {
		return err
	}
	if t.ready == nil {
		t.ready = map[string]bool{}
	}
	t.ready[f.Queue] = true
	return t.index(f, r.FinalizedAt)
}
