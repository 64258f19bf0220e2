package postgres

import (
	"fmt"

	"github.com/sepp-dev/sepp/internal/store"
)

// releasing wraps update, an UPDATE of sepp_jobs that moves jobs into the
// final state whose store.ReleaseOn member is bit, so that the same
// statement deletes the dedup record of each job whose release_key_on holds
// bit, when the record still names the job: one that a newer job took over
// after its expiry stays (under a concurrent takeover, PostgreSQL re-checks
// job_id on the row's newest version). The statement returns the number of
// jobs updated.
func releasing(update string, bit store.ReleaseOn) string {
	return fmt.Sprintf(`WITH done AS (%s RETURNING id, queue, idempotency_key, release_key_on),
 freed AS (DELETE FROM sepp_dedup d USING done
  WHERE done.release_key_on & %d <> 0 AND d.queue = done.queue AND d.key = done.idempotency_key AND d.job_id = done.id)
SELECT count(*) FROM done`, update, bit)
}
