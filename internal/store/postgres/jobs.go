package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/storerule"
)

// isDeadlock reports a transaction PostgreSQL chose as a deadlock's victim
// (and rolled back).
func isDeadlock(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "40P01"
}

func pgID(id store.JobID) pgtype.UUID { return pgtype.UUID{Bytes: id, Valid: true} }

const jobColumns = `id, queue, job_type, payload, idempotency_key, priority, run_at, max_attempts, attempts,
 headers, state, created_at, finalized_at, result, last_error, follows, ckey, waiting, rkey, rwaiting, rfrees_at`

// scanJob scans the jobColumns of row, then into extra, if any.
func scanJob(row pgx.Row, extra ...any) (*store.Job, error) {
	var (
		j                    store.Job
		id                   pgtype.UUID
		key, headers, result []byte
		runAt, createdAt     int64
		finalizedAt          *int64
		lastError            *string
		state                int16
		follows              pgtype.UUID
		ckey, rkey           *string
		waiting, rwaiting    bool
		rfreesAt             *int64
	)
	if err := row.Scan(append([]any{&id, &j.Queue, &j.JobType, &j.Payload, &key, &j.Priority, &runAt, &j.MaxAttempts,
		&j.Attempts, &headers, &state, &createdAt, &finalizedAt, &result, &lastError, &follows, &ckey, &waiting, &rkey, &rwaiting, &rfreesAt}, extra...)...); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, store.ErrJobNotFound
		}
		return nil, err
	}
	j.ID = id.Bytes
	if follows.Valid {
		j.FollowsJobID = follows.Bytes
	}
	if key != nil {
		k := string(key)
		j.IdempotencyKey = &k
	}
	var err error
	if j.Headers, err = storerule.DecodeHeaders(headers); err != nil {
		return nil, fmt.Errorf("postgres: job %x: %w", j.ID, err)
	}
	j.RunAt, j.CreatedAt = fromMicros(runAt), fromMicros(createdAt)
	if finalizedAt != nil {
		j.FinalizedAt = fromMicros(*finalizedAt)
	}
	j.State = store.JobState(state)
	if ckey != nil {
		j.ConcurrencyKey, j.HasConcurrency = *ckey, true
	}
	if rkey != nil {
		j.RateKey, j.HasRate = *rkey, true
	}
	if !j.State.Finalized() {
		switch {
		case follows.Valid:
			j.Hold = store.HoldFollowUp
		case waiting:
			j.Hold = store.HoldConcurrency
		case rwaiting:
			j.Hold = store.HoldRate
			if rfreesAt != nil {
				j.HeldUntil = fromMicros(*rfreesAt)
			}
		}
	}
	if j.Hold != store.HoldNone {
		j.State = store.JobStateScheduled
	}
	j.Result = result
	if lastError != nil {
		j.LastError = *lastError
	}
	if j.Payload == nil {
		j.Payload = []byte{}
	}
	return &j, nil
}

// EnqueueBatch implements store.Store. The whole batch is one transaction:
// it claims and locks every dedup record the batch is judged by (claim),
// lets storerule.Group.Decide decide the batch against them, and writes what
// was decided (claims.write).
func (s *Store) EnqueueBatch(ctx context.Context, p *store.EnqueueBatchParams) ([]store.EnqueueResult, error) {
	now := micros(p.Now)
	jobs, err := storerule.PrepareBatch(p.Jobs, now)
	if err != nil {
		return nil, err
	}
	results := make([]store.EnqueueResult, len(jobs))
	start := time.Now()
	for attempt := 1; ; attempt++ {
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			clear(results)
			// On a copy: a hit that replaces changes the job of the batch it
			// replaces, and a transaction run again starts from the request.
			return enqueueInTx(ctx, tx, p.Atomic, now, slices.Clone(jobs), results)
		})
		// Claims are taken in key order, so enqueues do not deadlock each
		// other; a deadlock with another kind of transaction (the sweeper,
		// or a Complete, which locks a job and then its record, while a hit
		// that replaces locks them the other way) rolled everything back,
		// and the batch runs again.
		if !isDeadlock(err) || attempt == 3 {
			break
		}
	}
	if err == nil && s.onCommit != nil {
		s.onCommit(1, len(jobs), time.Since(start))
	}
	if err != nil {
		var je *store.JobError
		if errors.As(err, &je) {
			storerule.NameBatchOriginal(je, jobs)
			return nil, je
		}
		return nil, translate(ctx, err)
	}
	return results, nil
}

// enqueueInTx claims the records the batch is judged by, decides the batch
// against them and writes what was decided.
func enqueueInTx(ctx context.Context, tx pgx.Tx, atomic bool, now int64, jobs []storerule.Job, results []store.EnqueueResult) error {
	c, err := claim(ctx, tx, now, jobs)
	if err != nil {
		return err
	}
	if err := c.Decide(atomic, now, jobs, results); err != nil {
		return err
	}
	return c.write(ctx, tx)
}

// claims are the dedup records of one enqueue's keys, claimed and locked in
// its transaction, in the group that decides the enqueue against them.
type claims struct {
	*storerule.Group
	keys []claimedKey // in claim order
}

// claimedKey is a key of the batch and what its claim found.
type claimedKey struct {
	k storerule.Key
	// first is the record the claim inserts when the key has none: the one
	// the first job naming the key creates (storerule.Keys).
	first storerule.Record
	// inserted: the key had no record, and the claim inserted first.
	inserted bool
}

// claimKeySQL claims a key: it inserts the record when the key has none,
// and otherwise locks the one it has (ON CONFLICT DO UPDATE locks the row
// even when its WHERE lets it update nothing). A claim of a key that a
// transaction on any node holds waits for that transaction to end and then
// sees its record, so there is one job per live key. It returns a row only
// when it inserted.
const claimKeySQL = `INSERT INTO sepp_dedup (queue, key, job_id, first_enqueued_at, expires_at, fingerprint, hits)
 VALUES ($1, $2, $3, $4, $5, $6, 0)
 ON CONFLICT (queue, key) DO UPDATE SET hits = sepp_dedup.hits WHERE false
 RETURNING job_id`

// horizonSQL reads the dedup horizon (storerule.Stale). It goes in the
// pipelined batch of an enqueue's claims, after them, with no lock: under
// READ COMMITTED it reads a snapshot taken after every claim ran, so if a
// sweep deleted a record a claim would have found, the read sees the
// horizon that sweep raised in the same transaction. A lock would serialize
// enqueues.
const horizonSQL = `SELECT horizon FROM sepp_dedup_horizon`

// claim claims every key of jobs, job keys and rule keys alike
// (storerule.Keys), then reads the records the claims found. The claims lock
// rows, so they go in (queue, key) order: two enqueues with keys in common,
// on any nodes, then wait for each other instead of deadlocking.
func claim(ctx context.Context, tx pgx.Tx, now int64, jobs []storerule.Job) (*claims, error) {
	c := &claims{Group: storerule.NewGroup()}
	storerule.Keys(jobs, now, map[storerule.Key]bool{}, func(k storerule.Key, first storerule.Record) {
		c.keys = append(c.keys, claimedKey{k: k, first: first})
	})
	if len(c.keys) == 0 {
		return c, nil
	}
	slices.SortFunc(c.keys, func(a, b claimedKey) int {
		return cmp.Or(strings.Compare(a.k.Queue, b.k.Queue), strings.Compare(a.k.Key, b.k.Key))
	})
	if err := c.lock(ctx, tx); err != nil {
		return nil, err
	}
	return c, c.read(ctx, tx, now, jobs)
}

// lock sends the claims and, after them, the read of the horizon, in one
// round trip.
func (c *claims) lock(ctx context.Context, tx pgx.Tx) error {
	b := &pgx.Batch{}
	for i := range c.keys {
		ck := &c.keys[i]
		f := &ck.first
		b.Queue(claimKeySQL, ck.k.Queue, []byte(ck.k.Key), pgID(f.JobID), f.FirstEnqueuedAt, f.ExpiresAt, f.Fingerprint[:]).
			QueryRow(func(row pgx.Row) error {
				var id pgtype.UUID
				err := row.Scan(&id)
				if errors.Is(err, pgx.ErrNoRows) {
					return nil // the key has a record, now locked
				}
				ck.inserted = err == nil
				return err
			})
	}
	b.Queue(horizonSQL).QueryRow(func(row pgx.Row) error { return row.Scan(&c.Horizon) })
	return tx.SendBatch(ctx, b).Close()
}

// readOriginalSQL reads and locks the job that the record of a key, live at
// $3, names, which a hit may replace or follow (storerule.Originals). The
// lock keeps its state until the enqueue commits: a Complete on another
// node waits, and then its trigger sees the follow-up this enqueue wrote.
const readOriginalSQL = `SELECT id, state, run_at, follows FROM sepp_jobs
 WHERE id = (SELECT job_id FROM sepp_dedup WHERE queue = $1 AND key = $2 AND expires_at > $3) FOR UPDATE`

// read reads, in one round trip, the records the claims found (locked by
// them) into the group, and the jobs that the records of keys whose hits
// need them (storerule.Originals) name.
func (c *claims) read(ctx context.Context, tx pgx.Tx, now int64, jobs []storerule.Job) error {
	var replacing map[storerule.Key]bool
	storerule.Originals(jobs, func(k storerule.Key) {
		if replacing == nil {
			replacing = map[storerule.Key]bool{}
		}
		replacing[k] = true
	})
	b := &pgx.Batch{}
	for _, ck := range c.keys {
		if ck.inserted {
			continue
		}
		k, e := ck.k, &storerule.Entry{Stored: true}
		c.Records[k] = e
		b.Queue(`SELECT job_id, first_enqueued_at, expires_at, fingerprint, slots FROM sepp_dedup WHERE queue = $1 AND key = $2`,
			k.Queue, []byte(k.Key)).QueryRow(func(row pgx.Row) error {
			var id pgtype.UUID
			var fp []byte
			err := row.Scan(&id, &e.FirstEnqueuedAt, &e.ExpiresAt, &fp, &e.Slots)
			e.JobID = id.Bytes
			copy(e.Fingerprint[:], fp)
			return err
		})
		if replacing[k] {
			b.Queue(readOriginalSQL, k.Queue, []byte(k.Key), now).QueryRow(func(row pgx.Row) error {
				var id pgtype.UUID
				var state int16
				var runAt int64
				var follows pgtype.UUID
				switch err := row.Scan(&id, &state, &runAt, &follows); {
				case errors.Is(err, pgx.ErrNoRows):
					return nil // expired, or deleted by retention: nothing to replace
				case err != nil:
					return err
				}
				e.Original = &storerule.Job{ID: id.Bytes, Queue: k.Queue, State: store.JobState(state), RunAt: runAt, Follows: follows.Bytes}
				return nil
			})
		}
	}
	if b.Len() == 0 {
		return nil
	}
	return tx.SendBatch(ctx, b).Close()
}

// write writes what the group decided, in one round trip and a COPY: the
// rows of the claimed keys as decided, the stored jobs hits replaced, and
// the new jobs. The notifications go in the same round trip: they are
// delivered at commit.
func (c *claims) write(ctx context.Context, tx pgx.Tx) error {
	b := &pgx.Batch{}
	for _, ck := range c.keys {
		c.writeRecord(b, ck)
	}
	announce := map[string]bool{}
	for _, o := range c.Replaced {
		b.Queue(`UPDATE sepp_jobs SET payload = $2, headers = $3, priority = $4, run_at = $5, state = $6 WHERE id = $1`,
			pgID(o.ID), o.Payload, o.Headers, o.Priority, o.RunAt, int16(o.State))
		if o.State == store.JobStateAvailable {
			announce[o.Queue] = true
		}
	}
	for _, j := range c.New {
		if j.Follows != (store.JobID{}) {
			// The original, locked since read, now has a follow-up.
			b.Queue(`UPDATE sepp_jobs SET flow = flow | 1 WHERE id = $1`, pgID(j.Follows))
			continue // waits: nothing to announce
		}
		announce[j.Queue] = true
	}
	for q := range announce {
		queueNotifyJobs(b, q)
	}
	admitted := arrive(b, c.New)
	if b.Len() > 0 {
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
	}
	return copyJobs(ctx, tx, c.New, admitted)
}

// arriveSQL admits up to $4 jobs arriving at the concurrency key ($1, $2)
// with limit $3 (ordered, $5: only when none waits before them), counts
// the rest waiting, and returns how many it admitted. The key's row is locked until
// the enqueue commits, so enqueues of one key on any node take their turns.
const arriveSQL = `UPDATE sepp_concurrency c SET active = c.active + x.adm, waiting = c.waiting + $4 - x.adm
 FROM (SELECT CASE WHEN $5 AND waiting > 0 THEN 0 ELSE LEAST(GREATEST($3 - active, 0), $4) END AS adm
  FROM sepp_concurrency WHERE queue = $1 AND key = $2 FOR UPDATE) x
 WHERE c.queue = $1 AND c.key = $2 RETURNING x.adm`

// arrive queues on b the admission of the new jobs that arrive at their
// concurrency keys (storerule.ArrivesAt, storerule.Admits), in the order
// given, keys in order so that enqueues do not deadlock, and returns,
// filled once b has run, how many of each key's jobs were admitted: its
// first ones. A follow-up arrives when it stops waiting, in the trigger
// that releases it.
func arrive(b *pgx.Batch, jobs []*storerule.Job) map[storerule.Key]*int64 {
	var keys []storerule.Key
	n := map[storerule.Key]int64{}
	limit := map[storerule.Key]int{}
	ordered := map[storerule.Key]bool{}
	for _, j := range jobs {
		if arrives(j) {
			c := j.Concurrency
			k := storerule.Key{Queue: j.Queue, Key: c.Key}
			if n[k] == 0 {
				keys = append(keys, k)
			}
			n[k]++
			limit[k], ordered[k] = c.Limit, c.Ordered
		}
	}
	if len(keys) == 0 {
		return nil
	}
	slices.SortFunc(keys, func(a, b storerule.Key) int {
		return cmp.Or(strings.Compare(a.Queue, b.Queue), strings.Compare(a.Key, b.Key))
	})
	admitted := map[storerule.Key]*int64{}
	for _, k := range keys {
		adm := new(int64)
		admitted[k] = adm
		b.Queue(`INSERT INTO sepp_concurrency (queue, key) VALUES ($1, $2) ON CONFLICT DO NOTHING`, k.Queue, k.Key)
		b.Queue(arriveSQL, k.Queue, k.Key, limit[k], n[k], ordered[k]).QueryRow(func(row pgx.Row) error { return row.Scan(adm) })
	}
	return admitted
}

// arrives reports whether the new job j arrives at its concurrency key
// when it is written.
func arrives(j *storerule.Job) bool {
	return j.Concurrency != nil && j.Follows == (store.JobID{}) && storerule.ArrivesAt(j.Concurrency, j.RunAt, j.CreatedAt)
}

// writeRecord queues on b the write that leaves the row of a claimed key as
// the group decided: none when it is already so.
func (c *claims) writeRecord(b *pgx.Batch, ck claimedKey) {
	k, e := ck.k, c.Records[ck.k]
	switch {
	case e == nil:
		// Claimed for a job that was not created.
		b.Queue(`DELETE FROM sepp_dedup WHERE queue = $1 AND key = $2`, k.Queue, []byte(k.Key))
	case e.Created:
		if !ck.inserted || e.Record != ck.first || e.Hits > 0 || e.Slots != nil {
			b.Queue(`UPDATE sepp_dedup SET job_id = $3, first_enqueued_at = $4, expires_at = $5, fingerprint = $6, hits = $7, slots = $8
 WHERE queue = $1 AND key = $2`, k.Queue, []byte(k.Key), pgID(e.JobID), e.FirstEnqueuedAt, e.ExpiresAt, e.Fingerprint[:], e.Hits, e.Slots)
		}
	case e.Hits > 0:
		// Hit; a hit that replaced the job also gave the record its
		// fingerprint.
		b.Queue(`UPDATE sepp_dedup SET hits = hits + $3, fingerprint = $4 WHERE queue = $1 AND key = $2`,
			k.Queue, []byte(k.Key), e.Hits, e.Fingerprint[:])
	}
}

// copyJobs copies the new jobs in; admitted says how many of the first
// arriving jobs of each concurrency key took a slot (arrive), the others
// wait.
func copyJobs(ctx context.Context, tx pgx.Tx, jobs []*storerule.Job, admitted map[storerule.Key]*int64) error {
	if len(jobs) == 0 {
		return nil
	}
	rows := make([][]any, len(jobs))
	for i, j := range jobs {
		var rkey *string
		var rlimit *int32
		var rperiod *int64
		if r := j.Rate; r != nil {
			l, p := int32(r.Limit), r.Period.Microseconds()
			rkey, rlimit, rperiod = &r.Key, &l, &p
		}
		var ckey *string
		var climit *int32
		var ordered, slot, waiting bool
		if c := j.Concurrency; c != nil {
			ckey, ordered = &c.Key, c.Ordered
			l := int32(c.Limit)
			climit = &l
			if adm := admitted[storerule.Key{Queue: j.Queue, Key: c.Key}]; adm != nil && arrives(j) {
				slot = *adm > 0
				waiting = !slot
				*adm--
			}
		}
		var key []byte
		if j.Keyed {
			key = []byte(j.Key)
		}
		var follows pgtype.UUID
		if j.Follows != (store.JobID{}) {
			follows = pgID(j.Follows)
		}
		rows[i] = []any{pgID(j.ID), j.Queue, j.JobType, j.Payload, key, j.Priority, j.RunAt,
			j.MaxAttempts, j.Headers, int16(j.State), j.CreatedAt, int16(j.ReleaseKeyOn), follows,
			ckey, climit, ordered, slot, waiting, rkey, rlimit, rperiod}
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"sepp_jobs"}, []string{"id", "queue", "job_type", "payload",
		"idempotency_key", "priority", "run_at", "max_attempts", "headers", "state", "created_at", "release_key_on", "follows",
		"ckey", "climit", "cordered", "slot", "waiting", "rkey", "rlimit", "rperiod"},
		pgx.CopyFromRows(rows))
	return err
}

// GetJob implements store.Store.
func (s *Store) GetJob(ctx context.Context, p *store.GetJobParams) (*store.Job, error) {
	j, err := scanJob(s.pool.QueryRow(ctx, `SELECT `+jobColumns+` FROM sepp_jobs WHERE id = $1`, pgID(p.ID)))
	if err != nil && !errors.Is(err, store.ErrJobNotFound) {
		return nil, translate(ctx, err)
	}
	return j, err
}

var cancelSQL = releasing(`UPDATE sepp_jobs SET state = $1, finalized_at = $2, lease_token = NULL,
 lease_expires_at = NULL WHERE id = $3`, store.ReleaseOnCancelled)

// CancelJob implements store.Store.
func (s *Store) CancelJob(ctx context.Context, p *store.CancelJobParams) (*store.Job, error) {
	var job *store.Job
	var freed []string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		freed = nil
		j, err := scanJob(tx.QueryRow(ctx, `SELECT `+jobColumns+` FROM sepp_jobs WHERE id = $1 FOR UPDATE`, pgID(p.ID)))
		if err != nil {
			return err
		}
		if !j.State.Finalized() {
			now := micros(p.Now)
			var n int64
			if err := tx.QueryRow(ctx, cancelSQL, int16(store.JobStateCancelled), now, pgID(p.ID)).Scan(&n, &freed); err != nil {
				return err
			}
			j.State, j.FinalizedAt = store.JobStateCancelled, fromMicros(now)
		}
		job = j
		return nil
	})
	if err != nil {
		return nil, translate(ctx, err)
	}
	s.keysReleased(freed)
	return job, nil
}

// LookupDedup implements store.Store.
func (s *Store) LookupDedup(ctx context.Context, p *store.LookupDedupParams) (*store.DedupLookup, error) {
	now := micros(p.Now)
	l := store.DedupLookup{Record: store.DedupRecord{Queue: p.Queue, Key: p.Key}}
	var (
		id             pgtype.UUID
		first, expires int64
		fp             []byte
		state          *int16
	)
	err := s.pool.QueryRow(ctx, `SELECT d.job_id, d.first_enqueued_at, d.expires_at, d.fingerprint, d.hits,
 CASE WHEN j.state IN (1, 2) AND (j.follows IS NOT NULL OR j.waiting OR j.rwaiting) THEN 1 WHEN j.state = 1 AND j.run_at <= $3 THEN 2 ELSE j.state END, j.result
 FROM sepp_dedup d LEFT JOIN sepp_jobs j ON j.id = d.job_id
 WHERE d.queue = $1 AND d.key = $2 AND d.expires_at > $3`, p.Queue, []byte(p.Key), now).
		Scan(&id, &first, &expires, &fp, &l.Record.Hits, &state, &l.Result)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrDedupNotFound
	}
	if err != nil {
		return nil, translate(ctx, err)
	}
	l.Record.JobID = id.Bytes
	copy(l.Record.Fingerprint[:], fp)
	l.Record.FirstEnqueuedAt, l.Record.ExpiresAt = fromMicros(first), fromMicros(expires)
	l.JobState = store.JobStateDeleted
	if state != nil {
		l.JobState = store.JobState(*state)
	}
	return &l, nil
}

// ReleaseDedup implements store.Store.
func (s *Store) ReleaseDedup(ctx context.Context, p *store.ReleaseDedupParams) (*store.DedupRecord, error) {
	rec := &store.DedupRecord{Queue: p.Queue, Key: p.Key}
	var (
		id             pgtype.UUID
		first, expires int64
		fp             []byte
	)
	err := s.pool.QueryRow(ctx, `DELETE FROM sepp_dedup WHERE queue = $1 AND key = $2
 RETURNING job_id, first_enqueued_at, expires_at, fingerprint, hits`, p.Queue, []byte(p.Key)).
		Scan(&id, &first, &expires, &fp, &rec.Hits)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrDedupNotFound
	}
	if err != nil {
		return nil, translate(ctx, err)
	}
	if expires <= micros(p.Now) {
		return nil, store.ErrDedupNotFound // expired: deleted, but it was not live
	}
	rec.JobID = id.Bytes
	copy(rec.Fingerprint[:], fp)
	rec.FirstEnqueuedAt, rec.ExpiresAt = fromMicros(first), fromMicros(expires)
	return rec, nil
}

// Sweep implements store.Store. SKIP LOCKED lets nodes sweep at once
// without doing the same rows twice.
func (s *Store) Sweep(ctx context.Context, p *store.SweepParams) (*store.SweepResult, error) {
	now := micros(p.Now)
	res := &store.SweepResult{}
	var freed []string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		*res = store.SweepResult{}
		// Leases first: a job row, then its dedup record (release_key_on),
		// the order Complete, Fail and CancelJob lock them in, so that a
		// sweep and a Complete of a job whose record has expired do not
		// deadlock.
		n, f, err := expireLeases(ctx, tx, now)
		if err != nil {
			return err
		}
		res.LeasesExpired, freed = int(n), f
		// Dedup records up to the cut, with the horizon raised to it in the
		// same transaction, so no enqueue sees the deletions without the
		// horizon (storerule.SweepCut). The horizon row is locked last,
		// for the commit alone: the sweeps of several nodes queue on it only
		// there, and hold nothing an enqueue waits for, since enqueues read
		// it without a lock.
		cut := storerule.SweepCut(now)
		t, err := tx.Exec(ctx, `DELETE FROM sepp_dedup WHERE (queue, key) IN
 (SELECT queue, key FROM sepp_dedup WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)`, cut, p.Limit)
		if err != nil {
			return err
		}
		res.DedupRecords = int(t.RowsAffected())
		t, err = tx.Exec(ctx, `DELETE FROM sepp_effects WHERE (scope, key) IN
 (SELECT scope, key FROM sepp_effects WHERE expires_at IS NOT NULL AND expires_at <= $1 ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)`, now, p.Limit)
		if err != nil {
			return err
		}
		res.Effects = int(t.RowsAffected())
		budget := int64(p.Limit)
		for _, c := range storerule.Retentions(p) {
			if budget == 0 {
				break
			}
			t, err := tx.Exec(ctx, `DELETE FROM sepp_jobs WHERE id IN
 (SELECT id FROM sepp_jobs WHERE state = $1 AND finalized_at IS NOT NULL AND finalized_at <= $2
  ORDER BY finalized_at LIMIT $3 FOR UPDATE SKIP LOCKED)`, int16(c.State), c.Before, budget)
			if err != nil {
				return err
			}
			budget -= t.RowsAffected()
			res.Jobs += int(t.RowsAffected())
		}
		_, err = tx.Exec(ctx, `UPDATE sepp_dedup_horizon SET horizon = GREATEST(horizon, $1) WHERE id = 1`, cut)
		return err
	})
	if err != nil {
		return nil, translate(ctx, err)
	}
	s.keysReleased(freed)
	return res, nil
}

// Ping implements store.Store: one read of the schema version, on a pooled
// connection.
func (s *Store) Ping(ctx context.Context) error {
	var v int
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM sepp_schema_migrations`).Scan(&v); err != nil {
		return translate(ctx, err)
	}
	return nil
}
