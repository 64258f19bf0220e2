package pebble

import "github.com/sepp-dev/sepp/internal/store/storerule"

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
