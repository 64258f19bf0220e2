package pebble

import (
	"context"
	"crypto/rand"
	"errors"
	"slices"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/storerule"
)

// maxPromote bounds how many scheduled jobs that came due one Reserve moves
// into the ready index; the rest move on the next call.
const maxPromote = 4096

// promoteDue moves scheduled jobs whose run-at has come into their queues'
// ready index. The job records keep state scheduled: a scheduled job whose
// run-at has passed is available (storerule.VisibleState).
func promoteDue(t *tx, now int64) error {
	prefix := []byte{kindScheduled}
	n := 0
	return t.walk(prefix, upTo(prefix, now), true, func(k, v []byte) (bool, error) {
		if n == maxPromote {
			return false, nil
		}
		runAt := readInt64(k[1:])
		var id store.JobID
		copy(id[:], k[9:])
		queue, rest, ok := splitName(v)
		if !ok || len(rest) != 8 {
			return false, errCorrupt
		}
		priority := int32(readInt64([]byte(rest)))
		if err := t.setIndex(readyPrefix(queue), readyKey(queue, priority, runAt, id), nil); err != nil {
			return false, err
		}
		if err := t.del(k); err != nil {
			return false, err
		}
		t.taken(prefix, k)
		n++
		return true, nil
	})
}

// expireLeases releases every lease that ended at or before now, as
// storerule.AfterLeaseExpiry says.
func expireLeases(t *tx, now int64) (int, error) {
	prefix := []byte{kindLease}
	n := 0
	err := t.walk(prefix, upTo(prefix, now), true, func(k, _ []byte) (bool, error) {
		var id store.JobID
		copy(id[:], k[9:])
		if err := t.del(k); err != nil {
			return false, err
		}
		t.taken(prefix, k)
		r, err := getJob(t.b, id)
		if errors.Is(err, store.ErrJobNotFound) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if r.State != store.JobStateReserved || !storerule.LeaseEnded(r.LeaseExpires, now) {
			return true, nil
		}
		state, lastError := storerule.AfterLeaseExpiry(r.Attempts, r.MaxAttempts)
		if state != store.JobStateDead {
			if err := t.leaveReserved(r, state, now); err != nil {
				return false, err
			}
		}
		r.State, r.RunAt, r.HasToken, r.LeaseExpires, r.WorkerID = state, now, false, 0, ""
		if state == store.JobStateDead {
			r.FinalizedAt, r.LastError = now, lastError
			if err := t.finalize(r); err != nil {
				return false, err
			}
		} else if err := t.index(r, now); err != nil {
			return false, err
		}
		n++
		return true, t.putJob(r)
	})
	return n, err
}

// candidate is a ready entry found by Reserve.
type candidate struct {
	queue    string
	key      []byte
	priority int32
	runAt    int64
	id       store.JobID
	// behind: an entry before this one in its queue was left in place, so
	// taking this one must not move the queue's cursor past it.
	behind bool
}

// Reserve implements store.Worker.
func (s *Store) Reserve(ctx context.Context, p *store.ReserveParams) ([]store.ReservedJob, error) {
	now := p.Now.UnixMicro()
	expires := storerule.LeaseEnd(now, p.Lease)
	var out []store.ReservedJob
	err := s.submit(ctx, func(t *tx) error {
		out = out[:0]
		if _, err := expireLeases(t, now); err != nil {
			return err
		}
		if err := promoteDue(t, now); err != nil {
			return err
		}
		if err := fireRateTimers(t, p, now); err != nil {
			return err
		}
		// One lease token for the whole call, as on SQLite: a lease is the
		// pair (job id, token), and a redelivery draws a new token.
		var token store.LeaseToken
		rand.Read(token[:])
		// A job whose concurrency key has no free slot leaves the ready
		// index for its key's waiting list as Reserve reaches it, so the
		// next walk finds the jobs after it; walk until Max are taken or
		// no job was set aside.
		for waited := true; waited && len(out) < p.Max; {
			waited = false
			cands, err := readyJobs(t, p.Queues, p.Max-len(out), now)
			if err != nil {
				return err
			}
			for _, c := range cands {
				took, err := reserveOne(t, c, p, token, expires, now)
				if err != nil {
					return err
				}
				if took == nil {
					waited = true
					continue
				}
				out = append(out, *took)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// reserveOne leases the ready job c, unless its concurrency key has no free
// slot: it then waits for one, and reserveOne returns nil.
func reserveOne(t *tx, c candidate, p *store.ReserveParams, token store.LeaseToken, expires, now int64) (*store.ReservedJob, error) {
	r, err := getJob(t.b, c.id)
	if err != nil {
		return nil, err
	}
	if err := t.del(c.key); err != nil {
		return nil, err
	}
	if !c.behind {
		t.taken(readyPrefix(c.queue), c.key)
	}
	if r.Conc != nil && !r.Slot {
		if took, err := t.takeSlot(r); err != nil || !took {
			return nil, err
		}
	}
	if r.Rate != nil {
		if took, err := t.rateGate(r, p, now); err != nil || !took {
			return nil, err
		}
	}
	r.State, r.Attempts = store.JobStateReserved, r.Attempts+1
	r.LeaseToken, r.HasToken, r.LeaseExpires, r.WorkerID = token, true, expires, p.WorkerID
	if err := t.putJob(r); err != nil {
		return nil, err
	}
	if err := t.setIndex([]byte{kindLease}, leaseKey(expires, r.ID), nil); err != nil {
		return nil, err
	}
	j, err := r.job()
	if err != nil {
		return nil, err
	}
	return &store.ReservedJob{Job: j, LeaseToken: token, LeaseExpiresAt: storerule.FromMicros(expires)}, nil
}

// readyJobs returns up to max ready jobs of the unpaused queues among
// queues, best first: each queue's best from the head of its ready index,
// then merged. What is taken of each queue is a prefix of its index, so the
// cursor moves past exactly what was taken. An entry whose run-at is after
// now (only when the clock went back since it was promoted) is left.
func readyJobs(t *tx, queues []string, max int, now int64) ([]candidate, error) {
	var all []candidate
	for _, q := range slices.Compact(slices.Sorted(slices.Values(queues))) {
		v, _, err := get(t.b, pausedKey(q))
		if err != nil {
			return nil, err
		}
		if isPaused(v) {
			continue
		}
		prefix := readyPrefix(q)
		n, behind := 0, false
		err = t.walk(prefix, prefixEnd(prefix), false, func(k, _ []byte) (bool, error) {
			if n == max {
				return false, nil
			}
			c := candidate{queue: q, key: append([]byte(nil), k...), behind: behind}
			c.priority, c.runAt, c.id = decodeReady(k, len(prefix))
			if c.runAt > now {
				behind = true
				return true, nil
			}
			all = append(all, c)
			n++
			return true, nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.SortStableFunc(all, func(a, b candidate) int {
		return storerule.DeliveryOrder(a.priority, a.runAt, a.id, b.priority, b.runAt, b.id)
	})
	return all[:min(len(all), max)], nil
}

// heldJob reads job id and checks that token holds its lease at now.
func heldJob(t *tx, id store.JobID, token store.LeaseToken, now int64) (*record, error) {
	r, err := getJob(t.b, id)
	if errors.Is(err, store.ErrJobNotFound) {
		return nil, logicalError{store.ErrLeaseLost}
	}
	if err != nil {
		return nil, err
	}
	if r.State != store.JobStateReserved || !r.HasToken || r.LeaseToken != token || storerule.LeaseEnded(r.LeaseExpires, now) {
		return r, logicalError{store.ErrLeaseLost}
	}
	return r, nil
}

// Complete implements store.Worker. The token stays on the completed job,
// so a retried Complete can be told from a stale one.
func (s *Store) Complete(ctx context.Context, p *store.CompleteParams) ([]store.CompleteResult, error) {
	now := p.Now.UnixMicro()
	out := make([]store.CompleteResult, len(p.Jobs))
	err := s.submit(ctx, func(t *tx) error {
		for i, j := range p.Jobs {
			out[i] = store.CompleteResult{}
			r, err := heldJob(t, j.ID, j.LeaseToken, now)
			var le logicalError
			if errors.As(err, &le) {
				if r != nil && r.State == store.JobStateCompleted && r.HasToken && r.LeaseToken == j.LeaseToken {
					out[i].AlreadyCompleted = true
				} else {
					out[i].Err = store.ErrLeaseLost
				}
				continue
			}
			if err != nil {
				return err
			}
			if err := t.unindex(r); err != nil {
				return err
			}
			r.State, r.FinalizedAt, r.Result, r.LeaseExpires = store.JobStateCompleted, now, j.Result, 0
			if err := t.putJob(r); err != nil {
				return err
			}
			if err := t.finalize(r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Fail implements store.Worker. The token stays on the failed job, so a
// retried Fail can be told from a stale one.
func (s *Store) Fail(ctx context.Context, p *store.FailParams) (*store.FailResult, error) {
	now := p.Now.UnixMicro()
	res := &store.FailResult{}
	err := s.submit(ctx, func(t *tx) error {
		r, err := heldJob(t, p.ID, p.LeaseToken, now)
		var le logicalError
		if errors.As(err, &le) {
			return failedBefore(r, p.LeaseToken, res)
		}
		if err != nil {
			return err
		}
		if err := t.unindex(r); err != nil {
			return err
		}
		state, runAt := storerule.AfterFail(p, r.Queue, r.Attempts, r.MaxAttempts)
		r.LastError, r.LeaseExpires = p.Error, 0
		if state == store.JobStateDead {
			*res = store.FailResult{State: store.JobStateDead}
			r.State, r.FinalizedAt = store.JobStateDead, now
			if err := t.finalize(r); err != nil {
				return err
			}
			return t.putJob(r)
		}
		*res = store.FailResult{State: store.JobStateScheduled, NextRunAt: storerule.FromMicros(runAt)}
		if err := t.leaveReserved(r, store.JobStateScheduled, now); err != nil {
			return err
		}
		r.State, r.RunAt, r.WorkerID = store.JobStateScheduled, runAt, ""
		if err := t.index(r, now); err != nil {
			return err
		}
		return t.putJob(r)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// failedBefore judges a Fail whose token holds no lease: when that token's
// Fail was committed (the job waits for its retry, or is dead, still under
// this token) it is a retry and gets the job's state now; otherwise the
// token is stale.
func failedBefore(r *record, token store.LeaseToken, res *store.FailResult) error {
	if r == nil || !r.HasToken || r.LeaseToken != token {
		return logicalError{store.ErrLeaseLost}
	}
	repeat, ok := storerule.RepeatedFail(r.State, r.RunAt)
	if !ok {
		return logicalError{store.ErrLeaseLost}
	}
	*res = repeat
	return nil
}

// ExtendLease implements store.Worker.
func (s *Store) ExtendLease(ctx context.Context, p *store.ExtendLeaseParams) (time.Time, error) {
	now := p.Now.UnixMicro()
	expires := storerule.LeaseEnd(now, p.Lease)
	err := s.submit(ctx, func(t *tx) error {
		r, err := heldJob(t, p.ID, p.LeaseToken, now)
		if err != nil {
			return err
		}
		if err := t.del(leaseKey(r.LeaseExpires, r.ID)); err != nil {
			return err
		}
		r.LeaseExpires = expires
		if err := t.setIndex([]byte{kindLease}, leaseKey(expires, r.ID), nil); err != nil {
			return err
		}
		return t.putJob(r)
	})
	if err != nil {
		return time.Time{}, err
	}
	return storerule.FromMicros(expires), nil
}
