package postgres

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/storerule"
)

// gatedJob is a job Reserve picked that must first take a slot of its
// concurrency key (conc set) or a place in its rate key's window (rate
// set).
type gatedJob struct {
	id       store.JobID
	queue    string
	priority int32
	runAt    int64
	conc     *store.ConcurrencyKey
	rate     *store.RateKey
}

// takeSlotsSQL gives up to $4 jobs of the unordered concurrency key ($1,
// $2) with limit $3 slots, counts the rest waiting, and returns how many
// took one. The key's row stays locked until the Reserve commits.
const takeSlotsSQL = `UPDATE sepp_concurrency c SET active = c.active + x.adm, waiting = c.waiting + $4 - x.adm
 FROM (SELECT LEAST(GREATEST($3 - active, 0), $4) AS adm
  FROM sepp_concurrency WHERE queue = $1 AND key = $2 FOR UPDATE) x
 WHERE c.queue = $1 AND c.key = $2 RETURNING x.adm`

func keyOrder(a, b storerule.Key) int {
	return cmp.Or(strings.Compare(a.Queue, b.Queue), strings.Compare(a.Key, b.Key))
}

// group groups the jobs by key, in order of first appearance, and returns
// the keys in key order (so that transactions lock them in one order and
// do not deadlock).
func group(jobs []gatedJob, key func(gatedJob) (storerule.Key, bool)) ([]storerule.Key, map[storerule.Key][]gatedJob) {
	by := map[storerule.Key][]gatedJob{}
	var keys []storerule.Key
	for _, g := range jobs {
		k, ok := key(g)
		if !ok {
			continue
		}
		if by[k] == nil {
			keys = append(keys, k)
		}
		by[k] = append(by[k], g)
	}
	slices.SortFunc(keys, keyOrder)
	return keys, by
}

// gate passes the gated jobs, best first, through their concurrency keys
// (storerule.Admits) and then their rate keys (storerule.RateRoom): those
// that pass both are leased and appended to out; the others wait, for a
// slot or for their rate window (keeping a slot they took). It reports
// whether any waits.
func gate(ctx context.Context, tx pgx.Tx, p *store.ReserveParams, out []store.ReservedJob, gated []gatedJob, token store.LeaseToken, now, expires int64) ([]store.ReservedJob, bool, error) {
	// RETURNING gives no order: the best jobs of a key go first.
	slices.SortFunc(gated, func(a, b gatedJob) int {
		return storerule.DeliveryOrder(a.priority, a.runAt, a.id, b.priority, b.runAt, b.id)
	})
	concWait := map[store.JobID]bool{}
	keys, byKey := group(gated, func(g gatedJob) (storerule.Key, bool) {
		if g.conc == nil {
			return storerule.Key{}, false
		}
		return storerule.Key{Queue: g.queue, Key: g.conc.Key}, true
	})
	if len(keys) > 0 {
		adm := make([]int64, len(keys))
		b := &pgx.Batch{}
		for i, k := range keys {
			b.Queue(`INSERT INTO sepp_concurrency (queue, key) VALUES ($1, $2) ON CONFLICT DO NOTHING`, k.Queue, k.Key)
			b.Queue(takeSlotsSQL, k.Queue, k.Key, byKey[k][0].conc.Limit, len(byKey[k])).QueryRow(func(row pgx.Row) error { return row.Scan(&adm[i]) })
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return nil, false, err
		}
		for i, k := range keys {
			for _, g := range byKey[k][adm[i]:] {
				concWait[g.id] = true
			}
		}
	}
	rateWait := map[store.JobID]int64{}
	keys, byKey = group(gated, func(g gatedJob) (storerule.Key, bool) {
		if g.rate == nil || concWait[g.id] {
			return storerule.Key{}, false
		}
		return storerule.Key{Queue: g.queue, Key: g.rate.Key}, true
	})
	if len(keys) > 0 {
		recs := make([]rateRow, len(keys))
		b := &pgx.Batch{}
		for i, k := range keys {
			rk := byKey[k][0].rate
			b.Queue(`INSERT INTO sepp_rate (queue, key, rlimit, period) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`,
				k.Queue, k.Key, rk.Limit, rk.Period.Microseconds())
			b.Queue(`SELECT slots, waiting, timer FROM sepp_rate WHERE queue = $1 AND key = $2 FOR UPDATE`, k.Queue, k.Key).
				QueryRow(func(row pgx.Row) error { return row.Scan(&recs[i].slots, &recs[i].waiting, &recs[i].timer) })
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return nil, false, err
		}
		b = &pgx.Batch{}
		for i, k := range keys {
			rec := &recs[i]
			rk := byKey[k][0].rate
			for _, g := range byKey[k] {
				room, frees := storerule.RateRoom(rk, rec.slots, now)
				if room == 0 {
					rateWait[g.id] = frees
					rec.waiting++
					if rec.timer == nil || *rec.timer > frees {
						rec.timer = &frees
					}
					continue
				}
				rec.slots = storerule.RateTake(rk, rec.slots, now)
			}
			if rec.waiting == 0 {
				last := rec.slots[len(rec.slots)-1] + rk.Period.Microseconds()
				rec.timer = &last
			} else if p.WakeAt != nil {
				p.WakeAt(k.Queue, fromMicros(*rec.timer))
			}
			b.Queue(`UPDATE sepp_rate SET rlimit = $3, period = $4, slots = $5, waiting = $6, timer = $7 WHERE queue = $1 AND key = $2`,
				k.Queue, k.Key, rk.Limit, rk.Period.Microseconds(), rec.slots, rec.waiting, rec.timer)
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return nil, false, err
		}
	}
	var lease, wait, rwait []pgtype.UUID
	var rfrees []int64
	for _, g := range gated {
		switch f, ok := rateWait[g.id]; {
		case concWait[g.id]:
			wait = append(wait, pgID(g.id))
		case ok:
			rwait = append(rwait, pgID(g.id))
			rfrees = append(rfrees, f)
		default:
			lease = append(lease, pgID(g.id))
		}
	}
	b := &pgx.Batch{}
	if len(wait) > 0 {
		b.Queue(`UPDATE sepp_jobs SET waiting = true WHERE id = ANY($1)`, wait)
	}
	if len(rwait) > 0 {
		// A job of a concurrency key got its slot before its rate window.
		b.Queue(`UPDATE sepp_jobs j SET rwaiting = true, rfrees_at = x.f, slot = j.ckey IS NOT NULL
 FROM unnest($1::uuid[], $2::bigint[]) AS x(id, f) WHERE j.id = x.id`, rwait, rfrees)
	}
	if b.Len() > 0 {
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return nil, false, err
		}
	}
	waited := len(wait)+len(rwait) > 0
	if len(lease) == 0 {
		return out, waited, nil
	}
	rows, err := tx.Query(ctx, `UPDATE sepp_jobs SET state = 3, slot = ckey IS NOT NULL, attempts = attempts + 1, lease_token = $2,
 lease_expires_at = $3, worker_id = $4 WHERE id = ANY($1) RETURNING `+jobColumns, lease, token[:], expires, p.WorkerID)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, false, err
		}
		out = append(out, store.ReservedJob{Job: j, LeaseToken: token, LeaseExpiresAt: fromMicros(expires)})
	}
	return out, waited, rows.Err()
}

// rateRow is a sepp_rate row as gate and fireRateTimers change it.
type rateRow struct {
	queue, key string
	limit      int
	period     int64
	slots      []int64
	waiting    int64
	timer      *int64
}

// maxRateTimers bounds how many rate keys one Reserve looks at again.
const maxRateTimers = 256

// fireRateTimers looks again at the rate keys whose time has come, on any
// node's behalf (SKIP LOCKED: each key once): as many of their waiting
// jobs as their windows have room for become deliverable, announced to
// every node; a key with none waiting and no slot left in its window is
// deleted.
func fireRateTimers(ctx context.Context, tx pgx.Tx, p *store.ReserveParams, now int64) error {
	rows, err := tx.Query(ctx, `SELECT queue, key, rlimit, period, slots, waiting FROM sepp_rate
 WHERE timer <= $1 ORDER BY timer LIMIT $2 FOR UPDATE SKIP LOCKED`, now, maxRateTimers)
	if err != nil {
		return err
	}
	var due []rateRow
	for rows.Next() {
		var r rateRow
		if err := rows.Scan(&r.queue, &r.key, &r.limit, &r.period, &r.slots, &r.waiting); err != nil {
			rows.Close()
			return err
		}
		due = append(due, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(due) == 0 {
		return err
	}
	b := &pgx.Batch{}
	for _, r := range due {
		rk := &store.RateKey{Limit: r.limit, Period: time.Duration(r.period) * time.Microsecond}
		if r.waiting > 0 {
			room, _ := storerule.RateRoom(rk, r.slots, now)
			moved := min(int64(room), r.waiting)
			b.Queue(`UPDATE sepp_jobs SET rwaiting = false, rfrees_at = NULL WHERE id IN (SELECT id FROM sepp_jobs
 WHERE queue = $1 AND rkey = $2 AND rwaiting ORDER BY priority DESC, run_at, id LIMIT $3)`, r.queue, r.key, moved)
			var timer *int64
			if left := r.waiting - moved; left > 0 {
				next := storerule.RateNext(rk, r.slots, int(moved), now)
				timer = &next
				if p.WakeAt != nil {
					p.WakeAt(r.queue, fromMicros(next))
				}
			}
			b.Queue(`UPDATE sepp_rate SET waiting = waiting - $3, timer = $4 WHERE queue = $1 AND key = $2`, r.queue, r.key, moved, timer)
			if moved > 0 {
				queueNotifyJobs(b, r.queue)
			}
			continue
		}
		if n := len(r.slots); n > 0 && r.slots[n-1]+r.period > now {
			b.Queue(`UPDATE sepp_rate SET timer = $3 WHERE queue = $1 AND key = $2`, r.queue, r.key, r.slots[n-1]+r.period)
			continue
		}
		b.Queue(`DELETE FROM sepp_rate WHERE queue = $1 AND key = $2`, r.queue, r.key)
	}
	return tx.SendBatch(ctx, b).Close()
}

// rateWakes tells p.WakeAt when the first rate key of each of p's queues
// with waiting jobs is to be looked at again.
func rateWakes(ctx context.Context, tx pgx.Tx, p *store.ReserveParams) error {
	rows, err := tx.Query(ctx, `SELECT queue, min(timer) FROM sepp_rate WHERE queue = ANY($1) AND waiting > 0 GROUP BY queue`, p.Queues)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var queue string
		var at *int64
		if err := rows.Scan(&queue, &at); err != nil {
			return err
		}
		if at != nil {
			p.WakeAt(queue, fromMicros(*at))
		}
	}
	return rows.Err()
}
