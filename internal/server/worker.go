package server

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
	"unicode/utf8"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/wakeup"
)

// Bounds on Reserve's arguments.
const (
	maxWait = 5 * time.Minute
	// safetyRecheck: waiting Reserve and ClaimEffect calls wake by
	// notification only (package wakeup): an enqueue, a requeue, a resume,
	// an effect completed or released on this node; the same from other
	// nodes through the store's Notifier (PostgreSQL LISTEN/NOTIFY); a
	// run-at, a retry or a lease expiry this node learnt of, at its time
	// (one timer for the earliest); the sweeper's release of expired leases.
	// What no notification carries (a job another node scheduled for later,
	// a lease another node handed out or that a worker extended, jobs stored
	// before this process started) is found by a safety re-check at this
	// interval: one waiter of each queue (and of each effect key) looks
	// again, and one that finds jobs wakes the others of its queue. Such a
	// job may so wait up to this long after it came due while workers wait.
	safetyRecheck = 10 * time.Second
)

// workerService implements WorkerService for both stacks.
type workerService struct {
	seppv1.UnimplementedWorkerServiceServer
	s *Server
}

func (w *workerService) Reserve(ctx context.Context, req *seppv1.ReserveRequest) (*seppv1.ReserveResponse, error) {
	s := w.s
	queues := req.GetQueues()
	if len(queues) == 0 {
		return nil, invalidField("queues", "name at least one queue to reserve from")
	}
	if aerr := s.checkReserveLimits(req); aerr != nil { // limits.go
		return nil, aerr
	}
	if n := len(req.GetWorkerId()); n > maxWorkerIDBytes {
		return nil, invalidField("worker_id", "is %d bytes; the limit is %d", n, maxWorkerIDBytes)
	}
	lease, aerr := msOr("lease_ms", req.GetLeaseMs(), 0, "the queue's lease_ms")
	if aerr != nil {
		return nil, aerr
	}
	for _, q := range queues {
		if aerr := s.checkQueue(q); aerr != nil {
			return nil, aerr
		}
		// Without lease_ms the shortest lease of the queues applies, so no
		// job is held longer than its queue allows.
		if ql := s.cfg.Queue(q).Lease(); req.GetLeaseMs() == 0 && (lease == 0 || ql < lease) {
			lease = ql
		}
	}
	max := int(req.GetMaxJobs())
	switch {
	case max < 0:
		return nil, invalidField("max_jobs", "must be between 0 and %d (0 means 1), got %d", s.cfg.Limits.MaxReserveJobs, max)
	case max == 0:
		max = 1
	}
	wait, done, aerr := s.longPoll(ctx, req.GetWaitMs(), maxWait) // limits.go
	if aerr != nil {
		return nil, aerr
	}
	defer done()
	var jobs []store.ReservedJob
	var now, tried time.Time // tried: the last store call's start, for its span (tracing.go)
	_, err := s.wake.Wait(ctx, queues, wakeup.WaitOptions{Deadline: s.local.Now().Add(wait)},
		func() (bool, time.Duration, error) {
			now = s.now()
			if s.tracer != nil {
				tried = time.Now()
			}
			var err error
			jobs, err = s.store.Reserve(ctx, &store.ReserveParams{
				Queues: queues, WorkerID: req.GetWorkerId(), Max: max, Lease: lease, Now: now,
				// Jobs held by their rate key: wake this node's waiters
				// when the window has room.
				WakeAt: s.wake.At,
			})
			return len(jobs) > 0, 0, err
		})
	if err != nil {
		return nil, err
	}
	// Should a lease end without a Complete or Fail, its job is deliverable
	// again then: wake this node's waiters at that time.
	for i, r := range jobs {
		if i == 0 || r.Job.Queue != jobs[i-1].Job.Queue || !r.LeaseExpiresAt.Equal(jobs[i-1].LeaseExpiresAt) {
			s.wake.At(r.Job.Queue, r.LeaseExpiresAt)
		}
	}
	s.metrics.reserved.Add(float64(len(jobs)))
	if s.tracer != nil {
		s.traceReserve(ctx, tried, req, jobs)
	}
	return s.reserved(jobs, now, lease), nil
}

func (s *Server) reserved(jobs []store.ReservedJob, now time.Time, lease time.Duration) *seppv1.ReserveResponse {
	res := &seppv1.ReserveResponse{Jobs: make([]*seppv1.ReservedJob, len(jobs))}
	for i, r := range jobs {
		res.Jobs[i] = &seppv1.ReservedJob{
			Job:            jobToProto(r.Job, now),
			LeaseToken:     hex.EncodeToString(r.LeaseToken[:]),
			Attempt:        r.Job.Attempts,
			LeaseExpiresAt: timestamppb.New(r.LeaseExpiresAt),
			LeaseMs:        lease.Milliseconds(),
		}
	}
	return res
}

// lease parses the (job_id, lease_token) pair of Complete, Fail and
// ExtendLease.
func parseLease(jobID, token string) (store.JobID, store.LeaseToken, *apiError) {
	var t store.LeaseToken
	id, aerr := parseJobID(jobID)
	if aerr != nil {
		return id, t, aerr
	}
	if len(token) != 2*len(t) {
		return id, t, invalidField("lease_token", "must be the %d-character token Reserve returned", 2*len(t))
	}
	if _, err := hex.Decode(t[:], []byte(token)); err != nil {
		return id, t, invalidField("lease_token", "must be the token Reserve returned: %v", err)
	}
	return id, t, nil
}

func leaseLost(err error) error {
	if errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrJobNotFound) {
		return newError(connect.CodeFailedPrecondition, ReasonLeaseLost,
			"this lease token no longer holds the job's lease (it expired, or the job was redelivered, finished or cancelled): stop working on the job; another delivery owns it")
	}
	return err
}

func (w *workerService) Complete(ctx context.Context, req *seppv1.CompleteRequest) (*seppv1.CompleteResponse, error) {
	res, err := w.CompleteBatch(ctx, &seppv1.CompleteBatchRequest{Completions: []*seppv1.CompleteRequest{req}})
	if err != nil {
		return nil, err
	}
	r := res.GetResults()[0]
	if e := r.GetError(); e != nil {
		return nil, &apiError{code: codeOf(e.GetCode()), reason: e.GetReason(), msg: e.GetMessage()}
	}
	return &seppv1.CompleteResponse{AlreadyCompleted: r.GetAlreadyCompleted()}, nil
}

func (w *workerService) completeBatch(ctx context.Context, req *seppv1.CompleteBatchRequest) (*seppv1.CompleteBatchResponse, error) {
	s := w.s
	if aerr := checkCount(s.cfg, req); aerr != nil { // max_batch_size, counts.go
		return nil, aerr
	}
	results := make([]*seppv1.CompleteBatchResult, len(req.GetCompletions()))
	jobs := make([]store.CompletedJob, 0, len(results))
	index := make([]int, 0, len(results))
	for i, c := range req.GetCompletions() {
		results[i] = &seppv1.CompleteBatchResult{}
		id, token, aerr := parseLease(c.GetJobId(), c.GetLeaseToken())
		if aerr == nil && int64(len(c.GetResult())) > s.cfg.Server.MaxPayloadBytes {
			aerr = newError(connect.CodeInvalidArgument, ReasonPayloadTooLarge,
				"result is %d bytes; the limit is %d (max_payload_bytes): store large results elsewhere and return a reference",
				len(c.GetResult()), s.cfg.Server.MaxPayloadBytes)
		}
		if aerr != nil {
			results[i].Error = itemError(aerr).GetError()
			continue
		}
		jobs = append(jobs, store.CompletedJob{ID: id, LeaseToken: token, Result: c.GetResult()})
		index = append(index, i)
	}
	if len(jobs) > 0 {
		done, err := s.store.Complete(ctx, &store.CompleteParams{Jobs: jobs, Now: s.now()})
		if err != nil {
			return nil, err
		}
		for k, d := range done {
			switch {
			case d.Err != nil:
				results[index[k]].Error = itemError(toAPIError(leaseLost(d.Err))).GetError()
			case d.AlreadyCompleted:
				results[index[k]].AlreadyCompleted = true
			default:
				s.metrics.completions.WithLabelValues("completed").Inc()
			}
		}
	}
	return &seppv1.CompleteBatchResponse{Results: results}, nil
}

func (w *workerService) fail(ctx context.Context, req *seppv1.FailRequest) (*seppv1.FailResponse, error) {
	s := w.s
	id, token, aerr := parseLease(req.GetJobId(), req.GetLeaseToken())
	if aerr != nil {
		return nil, aerr
	}
	if _, aerr := msOr("retry_after_ms", req.GetRetryAfterMs(), 0, "the queue's backoff"); aerr != nil {
		return nil, aerr
	}
	now := s.now()
	var jobQueue string
	retryAt := func(queue string, attempts int32) time.Time {
		jobQueue = queue
		if req.RetryAfterMs != nil {
			return now.Add(time.Duration(req.GetRetryAfterMs()) * time.Millisecond)
		}
		qc := s.cfg.Queue(queue)
		return now.Add(Backoff(attempts, qc.BackoffInitial(), qc.BackoffMax(), rand.Float64()))
	}
	res, err := s.store.Fail(ctx, &store.FailParams{
		ID: id, LeaseToken: token, Error: truncateError(req.GetError()), Permanent: req.GetPermanent(), RetryAt: retryAt, Now: now,
	})
	if err != nil {
		return nil, leaseLost(err)
	}
	out := &seppv1.FailResponse{State: seppv1.JobState(res.State), AlreadyFailed: res.AlreadyFailed}
	outcome := "dead"
	if res.State == store.JobStateScheduled {
		out.NextRunAt = timestamppb.New(res.NextRunAt)
		outcome = "retried"
		if jobQueue != "" {
			s.wake.At(jobQueue, res.NextRunAt) // the retry comes due then
		}
	}
	if !res.AlreadyFailed { // a retried call was counted the first time
		s.metrics.completions.WithLabelValues(outcome).Inc()
	}
	return out, nil
}

// maxErrorBytes bounds the error text kept with a failed job (a panic's
// stack can be long); the rest is cut with a note.
const maxErrorBytes = 16 << 10

func truncateError(e string) string {
	if len(e) <= maxErrorBytes {
		return e
	}
	cut := maxErrorBytes
	for cut > 0 && !utf8.RuneStart(e[cut]) {
		cut--
	}
	return e[:cut] + fmt.Sprintf("\n[... %d more bytes cut]", len(e)-cut)
}

// Backoff is the delay before attempt attempts+1 of a job: initial doubled
// for every attempt after the first, capped at max, with "equal jitter":
// a random point in the upper half, so retries of jobs that failed together
// spread out but never come sooner than half the nominal delay. rnd is in
// [0, 1).
func Backoff(attempts int32, initial, max time.Duration, rnd float64) time.Duration {
	d := initial
	for i := int32(1); i < attempts && d < max; i++ {
		d *= 2
	}
	d = min(d, max)
	return d/2 + time.Duration(rnd*float64(d-d/2))
}

func (w *workerService) ExtendLease(ctx context.Context, req *seppv1.ExtendLeaseRequest) (*seppv1.ExtendLeaseResponse, error) {
	id, token, aerr := parseLease(req.GetJobId(), req.GetLeaseToken())
	if aerr != nil {
		return nil, aerr
	}
	lease, aerr := msOr("lease_ms", req.GetLeaseMs(), 0, "refused: name the lease to extend to")
	if aerr != nil {
		return nil, aerr
	}
	if lease <= 0 {
		return nil, invalidField("lease_ms", "must be > 0, got %d", req.GetLeaseMs())
	}
	until, err := w.s.store.ExtendLease(ctx, &store.ExtendLeaseParams{ID: id, LeaseToken: token, Lease: lease, Now: w.s.now()})
	if err != nil {
		return nil, leaseLost(err)
	}
	return &seppv1.ExtendLeaseResponse{LeaseExpiresAt: timestamppb.New(until)}, nil
}
