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
 headers, state, created_at, finalized_at, result, last_error`

func scanJob(row pgx.Row) (*store.Job, error) {
	var (
		j                    store.Job
		id                   pgtype.UUID
		key, headers, result []byte
		runAt, createdAt     int64
		finalizedAt          *int64
		lastError            *string
		state                int16
	)
	if err := row.Scan(&id, &j.Queue, &j.JobType, &j.Payload, &key, &j.Priority, &runAt, &j.MaxAttempts,
		&j.Attempts, &headers, &state, &createdAt, &finalizedAt, &result, &lastError); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, store.ErrJobNotFound
		}
		return nil, err
	}
	j.ID = id.Bytes
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
	j.Result = result
	if lastError != nil {
		j.LastError = *lastError
	}
	if j.Payload == nil {
		j.Payload = []byte{}
	}
	return &j, nil
}

// EnqueueBatch implements store.Store. The whole batch is one transaction
// of three pipelined rounds: each keyed job claims its (queue, key) with
// INSERT ... ON CONFLICT (which waits for a concurrent claim of the same key
// on any node and then sees it, so exactly one job is created per live key);
// the jobs whose key was live read the record; the new jobs are copied in.
// Round 1 also reads the dedup horizon, after the claims, and a batch older
// than it fails whole (storerule.Stale).
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
			return enqueueInTx(ctx, tx, p.Atomic, now, jobs, results)
		})
		// Claims are taken in key order, so enqueues do not deadlock each
		// other; a deadlock with another kind of transaction (the sweeper)
		// rolled everything back, and the batch runs again.
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

const claimKeySQL = `INSERT INTO sepp_dedup (queue, key, job_id, first_enqueued_at, expires_at, fingerprint, hits)
 VALUES ($1, $2, $3, $4, $5, $6, 0)
 ON CONFLICT (queue, key) DO UPDATE SET job_id = EXCLUDED.job_id, first_enqueued_at = EXCLUDED.first_enqueued_at,
   expires_at = EXCLUDED.expires_at, fingerprint = EXCLUDED.fingerprint, hits = 0
 WHERE sepp_dedup.expires_at <= $4
 RETURNING job_id`

// horizonSQL reads the dedup horizon (storerule.Stale). It goes in the
// pipelined batch of an enqueue's claims, after them, with no lock: under
// READ COMMITTED it reads a snapshot taken after every claim ran, so if a
// sweep deleted a record a claim would have found, the read sees the
// horizon that sweep raised in the same transaction. A lock would serialize
// enqueues.
const horizonSQL = `SELECT horizon FROM sepp_dedup_horizon`

// readHorizon reads the result of horizonSQL from br and judges an enqueue
// at now by it.
func readHorizon(br pgx.BatchResults, now int64) error {
	var horizon int64
	if err := br.QueryRow().Scan(&horizon); err != nil {
		return err
	}
	return storerule.Stale(now, horizon)
}

// enqueueInTx decides with the rules of storerule: the claim (round 1) is
// where a record at or past its expiry counts as absent; a live record is
// judged by storerule.Hit.
//
// Each pass works on a copy of the jobs, so nothing of a pass that is undone
// (or of a transaction retried after a deadlock) stays in them. A pass of a
// non-atomic batch whose rule refusals changed what its other items saw (an
// item was a hit on, or refused by, a job the batch then refused) is rolled
// back to a savepoint taken at its start and run again without the items
// refused for good; each pass removes at least one, so this ends.
func enqueueInTx(ctx context.Context, tx pgx.Tx, atomic bool, now int64, jobs []storerule.Job, results []store.EnqueueResult) error {
	todo := make([]int, len(jobs))
	for i := range todo {
		todo[i] = i
	}
	savepoint := !atomic && len(jobs) > 1 && slices.ContainsFunc(jobs, func(j storerule.Job) bool { return len(j.Rules) > 0 })
	for {
		pass := make([]storerule.Job, len(todo))
		res := make([]store.EnqueueResult, len(todo))
		for k, i := range todo {
			pass[k] = jobs[i]
		}
		refused, err := enqueuePass(ctx, tx, atomic, savepoint, now, pass, res)
		var je *store.JobError
		if errors.As(err, &je) {
			je.Index = todo[je.Index]
		}
		if err != nil {
			return err
		}
		if refused == nil {
			for k, i := range todo {
				results[i] = res[k]
			}
			return nil
		}
		if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT sepp_enqueue"); err != nil {
			return err
		}
		keep := make([]int, 0, len(todo))
		for k, i := range todo {
			if refused[k] {
				results[i] = res[k]
			} else {
				keep = append(keep, i)
			}
		}
		todo = keep
	}
}

// enqueuePass is one pass of enqueueInTx over jobs. When the pass must be
// undone and run again it returns the items refused for good (refused) and
// writes nothing further; results then holds their refusals.
func enqueuePass(ctx context.Context, tx pgx.Tx, atomic, savepoint bool, now int64, jobs []storerule.Job, results []store.EnqueueResult) (refused []bool, err error) {
	// Round 1: claim every key. The claims lock dedup rows, so they go in
	// (queue, key) order: two batches with the same keys in other orders,
	// on any nodes, then wait for each other instead of deadlocking. The
	// sort is stable, so of a key twice in one batch the first in job order
	// claims and the second sees it and returns no row.
	order := make([]int, 0, len(jobs))
	for i := range jobs {
		if jobs[i].Keyed {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Or(strings.Compare(jobs[a].Queue, jobs[b].Queue), strings.Compare(jobs[a].Key, jobs[b].Key))
	})
	claims := &pgx.Batch{}
	if savepoint {
		claims.Queue("SAVEPOINT sepp_enqueue")
	}
	for _, i := range order {
		pj := &jobs[i]
		claims.Queue(claimKeySQL, pj.Queue, []byte(pj.Key), pgID(pj.ID), now, now+pj.Window, pj.Fingerprint[:])
	}
	if len(order) > 0 {
		claims.Queue(horizonSQL)
	}
	live := make([]bool, len(jobs))           // the key was live: a hit or a conflict
	liveJob := make([]store.JobID, len(jobs)) // the job its record names
	if claims.Len() > 0 {
		br := tx.SendBatch(ctx, claims)
		if savepoint {
			if _, err := br.Exec(); err != nil {
				br.Close()
				return nil, err
			}
		}
		for _, i := range order {
			var got pgtype.UUID
			err := br.QueryRow().Scan(&got)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
				live[i] = true
			case err != nil:
				br.Close()
				return nil, err
			}
		}
		if len(order) > 0 {
			if err := readHorizon(br, now); err != nil {
				br.Close()
				return nil, err
			}
		}
		if err := br.Close(); err != nil {
			return nil, err
		}
	}
	// Round 2: read the live records, decide hits and conflicts.
	reads := &pgx.Batch{}
	for i := range jobs {
		if live[i] {
			reads.Queue(`SELECT job_id, first_enqueued_at, expires_at, fingerprint FROM sepp_dedup
 WHERE queue = $1 AND key = $2 FOR UPDATE`, jobs[i].Queue, []byte(jobs[i].Key))
		}
	}
	hits := &pgx.Batch{}
	type replacing struct {
		i   int
		rec storerule.Record
	}
	var replaces []replacing
	if reads.Len() > 0 {
		br := tx.SendBatch(ctx, reads)
		for i := range jobs {
			if !live[i] {
				continue
			}
			var id pgtype.UUID
			var rec storerule.Record
			var stored []byte
			if err := br.QueryRow().Scan(&id, &rec.FirstEnqueuedAt, &rec.ExpiresAt, &stored); err != nil {
				br.Close()
				return nil, err
			}
			rec.JobID = id.Bytes
			liveJob[i] = rec.JobID
			copy(rec.Fingerprint[:], stored)
			r, err := storerule.Hit(&rec, &jobs[i])
			if err != nil && atomic {
				br.Close()
				return nil, &store.JobError{Index: i, Err: err}
			}
			results[i], results[i].Err = r, err
			if err == nil {
				hits.Queue(`UPDATE sepp_dedup SET hits = hits + 1 WHERE queue = $1 AND key = $2`, jobs[i].Queue, []byte(jobs[i].Key))
				if jobs[i].Replace {
					replaces = append(replaces, replacing{i, rec})
				}
			}
		}
		if err := br.Close(); err != nil {
			return nil, err
		}
	}
	// Round 2a: hits that replace a waiting original (on_duplicate =
	// "replace" or "debounce").
	for _, rp := range replaces {
		if err := replaceHit(ctx, tx, now, jobs, live, rp.i, &rp.rec, &results[rp.i]); err != nil {
			return nil, err
		}
	}
	// Round 2b: the uniqueness rules of the jobs to create, claimed like
	// keys, in job order, so an earlier job of the batch holds a rule key
	// against a later one.
	violated, holder, err := claimRules(ctx, tx, atomic, now, jobs, live, results)
	if err != nil {
		return nil, err
	}
	if refused := voidRefusals(jobs, live, liveJob, violated, holder); refused != nil {
		return refused, nil
	}
	if err := undoRefused(ctx, tx, jobs, violated); err != nil {
		return nil, err
	}
	// Round 3: count the hits and copy the new jobs in.
	var rows [][]any
	created := map[string]bool{}
	for i := range jobs {
		if live[i] || violated[i] {
			continue
		}
		pj := &jobs[i]
		results[i] = storerule.Created(pj, now)
		var key []byte
		if pj.Keyed {
			key = []byte(pj.Key)
		}
		rows = append(rows, []any{pgID(pj.ID), pj.Queue, pj.JobType, pj.Payload, key, pj.Priority, pj.RunAt,
			pj.MaxAttempts, pj.Headers, int16(pj.State), now, int16(pj.ReleaseKeyOn)})
		created[pj.Queue] = true
	}
	if hits.Len() > 0 {
		if err := tx.SendBatch(ctx, hits).Close(); err != nil {
			return nil, err
		}
	}
	if len(rows) > 0 {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"sepp_jobs"}, []string{"id", "queue", "job_type", "payload",
			"idempotency_key", "priority", "run_at", "max_attempts", "headers", "state", "created_at", "release_key_on"},
			pgx.CopyFromRows(rows)); err != nil {
			return nil, err
		}
	}
	for q := range created {
		if err := notifyJobs(ctx, tx, q); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// voidRefusals reports whether a rule refusal of this pass changed what
// other items saw: an item was a hit on (or a conflict with) a job the pass
// refused, or was refused on a rule key that a refused job had claimed. If
// so it returns the refusals that hold whatever the rest decides: those by
// a record of another call, and those by a job of the batch that was not
// refused itself (such a job is created in every later pass too). Otherwise
// it returns nil.
func voidRefusals(jobs []storerule.Job, live []bool, liveJob []store.JobID, violated []bool, holder []store.JobID) []bool {
	if !slices.Contains(violated, true) {
		return nil
	}
	refusedJob := map[store.JobID]bool{}
	for i := range jobs {
		if violated[i] {
			refusedJob[jobs[i].ID] = true
		}
	}
	void := false
	for i := range jobs {
		void = void || (live[i] && refusedJob[liveJob[i]]) || (violated[i] && refusedJob[holder[i]])
	}
	if !void {
		return nil
	}
	final := make([]bool, len(jobs))
	for i := range jobs {
		final[i] = violated[i] && !refusedJob[holder[i]]
	}
	return final
}

// replaceHit gives the original job of the hit jobs[i] (record rec) the
// request's payload, headers, priority and run-at while it still waits
// (storerule.Replacement): a job of this batch not copied in yet, or a
// stored one, locked. The record takes the request's fingerprint.
func replaceHit(ctx context.Context, tx pgx.Tx, now int64, jobs []storerule.Job, live []bool, i int, rec *storerule.Record, res *store.EnqueueResult) error {
	j := &jobs[i]
	for m := range jobs {
		if live[m] || jobs[m].ID != rec.JobID {
			continue
		}
		// Created by this batch, copied in below.
		runAt, st, ok := storerule.Replacement(j, rec, jobs[m].State, jobs[m].RunAt, now)
		if ok {
			o := &jobs[m]
			o.Payload, o.Headers, o.Priority, o.RunAt, o.State = j.Payload, j.Headers, j.Priority, runAt, st
			res.Replaced, res.RunAt = true, storerule.FromMicros(runAt)
			return setFingerprint(ctx, tx, j)
		}
		return nil
	}
	var state int16
	var runAt int64
	err := tx.QueryRow(ctx, `SELECT state, run_at FROM sepp_jobs WHERE id = $1 FOR UPDATE`, pgID(rec.JobID)).Scan(&state, &runAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // deleted by retention: nothing waits
	}
	if err != nil {
		return err
	}
	newRunAt, st, ok := storerule.Replacement(j, rec, storerule.VisibleState(store.JobState(state), runAt, now), runAt, now)
	if !ok {
		return nil
	}
	if _, err := tx.Exec(ctx, `UPDATE sepp_jobs SET payload = $2, headers = $3, priority = $4, run_at = $5, state = $6 WHERE id = $1`,
		pgID(rec.JobID), j.Payload, j.Headers, j.Priority, newRunAt, int16(st)); err != nil {
		return err
	}
	res.Replaced, res.RunAt = true, storerule.FromMicros(newRunAt)
	if err := setFingerprint(ctx, tx, j); err != nil {
		return err
	}
	if st == store.JobStateAvailable {
		return notifyJobs(ctx, tx, j.Queue)
	}
	return nil
}

func setFingerprint(ctx context.Context, tx pgx.Tx, j *storerule.Job) error {
	_, err := tx.Exec(ctx, `UPDATE sepp_dedup SET fingerprint = $3 WHERE queue = $1 AND key = $2`, j.Queue, []byte(j.Key), j.Fingerprint[:])
	return err
}

// claimRules claims the rule keys of the jobs that are not live (to be
// created). A job whose rule key a live record holds is refused with a
// *store.RuleViolationError (the whole call, if atomic); holder names the
// job of that record. undoRefused then deletes what the refused jobs
// claimed, so a refused enqueue writes nothing.
func claimRules(ctx context.Context, tx pgx.Tx, atomic bool, now int64, jobs []storerule.Job, live []bool, results []store.EnqueueResult) (violated []bool, holder []store.JobID, err error) {
	violated = make([]bool, len(jobs))
	holder = make([]store.JobID, len(jobs))
	type claim struct{ i, r int }
	var claims []claim
	b := &pgx.Batch{}
	noFingerprint := make([]byte, len(store.Fingerprint{}))
	for i := range jobs {
		if live[i] {
			continue
		}
		for r, rule := range jobs[i].Rules {
			b.Queue(claimKeySQL, rule.Queue, []byte(rule.Key), pgID(jobs[i].ID), now, now+rule.Window, noFingerprint)
			claims = append(claims, claim{i, r})
		}
	}
	if b.Len() == 0 {
		return violated, holder, nil
	}
	// The rule claims come after round 1: they need a horizon read of their
	// own, after them.
	b.Queue(horizonSQL)
	// A refused claim reads the record that holds the rule key, in the same
	// batch.
	br := tx.SendBatch(ctx, b)
	var held []claim
	for _, c := range claims {
		var got pgtype.UUID
		switch err := br.QueryRow().Scan(&got); {
		case errors.Is(err, pgx.ErrNoRows):
			held = append(held, c)
		case err != nil:
			br.Close()
			return nil, nil, err
		}
	}
	if err := readHorizon(br, now); err != nil {
		br.Close()
		return nil, nil, err
	}
	if err := br.Close(); err != nil {
		return nil, nil, err
	}
	if len(held) == 0 {
		return violated, holder, nil
	}
	reads := &pgx.Batch{}
	for _, c := range held {
		rule := &jobs[c.i].Rules[c.r]
		reads.Queue(`SELECT job_id, first_enqueued_at, expires_at FROM sepp_dedup WHERE queue = $1 AND key = $2`, rule.Queue, []byte(rule.Key))
	}
	br = tx.SendBatch(ctx, reads)
	defer br.Close()
	for _, c := range held { // in job order: a job's first refused rule decides
		var id pgtype.UUID
		var rec storerule.Record
		if err := br.QueryRow().Scan(&id, &rec.FirstEnqueuedAt, &rec.ExpiresAt); err != nil {
			return nil, nil, err
		}
		if violated[c.i] {
			continue
		}
		rec.JobID = id.Bytes
		verr := storerule.RuleViolated(jobs[c.i].Rules[c.r].Name, &rec)
		if atomic {
			return nil, nil, &store.JobError{Index: c.i, Err: verr}
		}
		violated[c.i], holder[c.i] = true, rec.JobID
		results[c.i] = store.EnqueueResult{Err: verr}
	}
	return violated, holder, br.Close()
}

// undoRefused deletes the records the refused jobs claimed, their keys' and
// their rules', where the records still name them.
func undoRefused(ctx context.Context, tx pgx.Tx, jobs []storerule.Job, violated []bool) error {
	undo := &pgx.Batch{}
	const del = `DELETE FROM sepp_dedup WHERE queue = $1 AND key = $2 AND job_id = $3`
	for i, j := range jobs {
		if !violated[i] {
			continue
		}
		if j.Keyed {
			undo.Queue(del, j.Queue, []byte(j.Key), pgID(j.ID))
		}
		for _, r := range j.Rules {
			undo.Queue(del, r.Queue, []byte(r.Key), pgID(j.ID))
		}
	}
	if undo.Len() == 0 {
		return nil
	}
	return tx.SendBatch(ctx, undo).Close()
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
 CASE WHEN j.state = 1 AND j.run_at <= $3 THEN 2 ELSE j.state END, j.result
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
