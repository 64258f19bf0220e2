package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sepp-dev/sepp/internal/store"
)

// The LISTEN/NOTIFY channels between nodes. A notification is sent inside
// the writing transaction, so it is delivered only if that commits.
const (
	jobsChannel    = "sepp_jobs"    // payload: a queue with new deliverable jobs
	effectsChannel = "sepp_effects" // an effect was completed or released
)

var _ store.Notifier = (*Store)(nil)

// notifyJobsSQL announces that queue $2 has deliverable jobs.
const notifyJobsSQL = `SELECT pg_notify($1, $2)`

// notifyJobs announces, inside tx, that queues have deliverable jobs.
func notifyJobs(ctx context.Context, tx pgx.Tx, queues ...string) error {
	for _, q := range queues {
		if _, err := tx.Exec(ctx, notifyJobsSQL, jobsChannel, q); err != nil {
			return err
		}
	}
	return nil
}

// queueNotifyJobs queues on b, to run in a transaction, the announcement
// that queue has deliverable jobs.
func queueNotifyJobs(b *pgx.Batch, queue string) { b.Queue(notifyJobsSQL, jobsChannel, queue) }

// Listen implements store.Notifier on one connection of its own, taken
// from the pool; after a lost connection it retries every second.
func (s *Store) Listen(ctx context.Context, onJobs func(queue string), onEffects func()) {
	for ctx.Err() == nil {
		s.listenOnce(ctx, onJobs, onEffects)
		t := time.NewTimer(time.Second)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
}

func (s *Store) listenOnce(ctx context.Context, onJobs func(queue string), onEffects func()) {
	pooled, err := s.pool.Acquire(ctx)
	if err != nil {
		return
	}
	// A connection that has listened is not handed back for other work.
	conn := pooled.Hijack()
	defer conn.Close(context.Background())
	for _, ch := range []string{jobsChannel, effectsChannel} {
		if _, err := conn.Exec(ctx, `LISTEN `+ch); err != nil {
			return
		}
	}
	// Whatever happened while no one listened: look again everywhere.
	onEffects()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return
		}
		switch n.Channel {
		case jobsChannel:
			onJobs(n.Payload)
		case effectsChannel:
			onEffects()
		}
	}
}
