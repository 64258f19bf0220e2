package postgres

import (
	"fmt"
	"slices"

	"github.com/sepp-dev/sepp/internal/store"
)

// releasing wraps update, an UPDATE of sepp_jobs that moves jobs into the
// final state whose store.ReleaseOn member is bit, so that the same
// statement deletes the dedup record of each job whose release_key_on holds
// bit, when the record still names the job: one that a newer job took over
// after its expiry stays (under a concurrent takeover, PostgreSQL re-checks
// job_id on the row's newest version). The statement returns the number of
// jobs updated and the queues of the records it deleted (text[], one entry
// a record).
func releasing(update string, bit store.ReleaseOn) string {
	return fmt.Sprintf(`WITH done AS (%s RETURNING id, queue, idempotency_key, release_key_on),
 freed AS (DELETE FROM sepp_dedup d USING done
  WHERE done.release_key_on & %d <> 0 AND d.queue = done.queue AND d.key = done.idempotency_key AND d.job_id = done.id
  RETURNING d.queue)
SELECT count(*), (SELECT coalesce(array_agg(queue), '{}') FROM freed) FROM done`, update, bit)
}

// keysReleased reports to Options.OnKeyReleased, once per queue, the dedup
// records whose queues are freed, deleted by a transaction that has
// committed.
func (s *Store) keysReleased(freed []string) {
	if s.onKeyReleased == nil || len(freed) == 0 {
		return
	}
	slices.Sort(freed)
	for i := 0; i < len(freed); {
		j := i + 1
		for j < len(freed) && freed[j] == freed[i] {
			j++
		}
		s.onKeyReleased(freed[i], j-i)
		i = j
	}
}
