package server

import (
	"context"
	"errors"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/storerule"
)

func (j *jobService) GetJob(ctx context.Context, req *seppv1.GetJobRequest) (*seppv1.GetJobResponse, error) {
	id, aerr := parseJobID(req.GetJobId())
	if aerr != nil {
		return nil, aerr
	}
	job, err := j.s.store.GetJob(ctx, &store.GetJobParams{ID: id})
	if err != nil {
		return nil, err
	}
	if err := hideJob(ctx, job.Queue); err != nil { // a token limited to other queues: as if there were no such job (auth.go)
		return nil, err
	}
	return &seppv1.GetJobResponse{Job: jobToProto(job, j.s.now())}, nil
}

func (j *jobService) CancelJob(ctx context.Context, req *seppv1.CancelJobRequest) (*seppv1.CancelJobResponse, error) {
	id, aerr := parseJobID(req.GetJobId())
	if aerr != nil {
		return nil, aerr
	}
	if err := j.s.checkJobQueue(ctx, id); err != nil { // auth.go
		return nil, err
	}
	job, err := j.s.store.CancelJob(ctx, &store.CancelJobParams{ID: id, Now: j.s.now()})
	if err != nil {
		return nil, err
	}
	return &seppv1.CancelJobResponse{Job: jobToProto(job, j.s.now())}, nil
}

func (j *jobService) LookupIdempotencyKey(ctx context.Context, req *seppv1.LookupIdempotencyKeyRequest) (*seppv1.LookupIdempotencyKeyResponse, error) {
	key, aerr := j.s.lookupKey(req.GetQueue(), req.GetIdempotencyKey(), req.GetPayload())
	if aerr != nil {
		return nil, aerr
	}
	l, err := j.s.store.LookupDedup(ctx, &store.LookupDedupParams{Queue: req.GetQueue(), Key: key, Now: j.s.now()})
	if errors.Is(err, store.ErrDedupNotFound) {
		return &seppv1.LookupIdempotencyKeyResponse{Found: false, IdempotencyKey: key}, nil
	}
	if err != nil {
		return nil, err
	}
	return &seppv1.LookupIdempotencyKeyResponse{
		Found:           true,
		JobId:           formatJobID(l.Record.JobID),
		FirstEnqueuedAt: timestamppb.New(l.Record.FirstEnqueuedAt),
		ExpiresAt:       timestamppb.New(l.Record.ExpiresAt),
		Hits:            l.Record.Hits,
		State:           seppv1.JobState(l.JobState),
		Result:          l.Result,
		Policy:          j.s.cfg.Queue(req.GetQueue()).DedupPolicy(),
		IdempotencyKey:  key,
	}, nil
}

func (j *jobService) ReleaseIdempotencyKey(ctx context.Context, req *seppv1.ReleaseIdempotencyKeyRequest) (*seppv1.ReleaseIdempotencyKeyResponse, error) {
	key, aerr := j.s.lookupKey(req.GetQueue(), req.GetIdempotencyKey(), req.GetPayload())
	if aerr != nil {
		return nil, aerr
	}
	rec, err := j.s.store.ReleaseDedup(ctx, &store.ReleaseDedupParams{Queue: req.GetQueue(), Key: key, Now: j.s.now()})
	if errors.Is(err, store.ErrDedupNotFound) {
		return &seppv1.ReleaseIdempotencyKeyResponse{Released: false, IdempotencyKey: key}, nil
	}
	if err != nil {
		return nil, err
	}
	j.s.log.Info("idempotency key released", "queue", rec.Queue, j.s.keyAttr(rec.Key), "job_id", formatJobID(rec.JobID))
	return &seppv1.ReleaseIdempotencyKeyResponse{Released: true, JobId: formatJobID(rec.JobID), IdempotencyKey: key}, nil
}

// jobToProto converts a stored job; a scheduled job whose run-at has passed
// at now is reported as available, unless it is held (a waiting follow-up).
func jobToProto(j *store.Job, now time.Time) *seppv1.Job {
	state := storerule.VisibleState(j.State, j.RunAt.UnixMicro(), now.UnixMicro(), j.Hold != store.HoldNone)
	p := &seppv1.Job{
		JobId:          formatJobID(j.ID),
		Queue:          j.Queue,
		JobType:        j.JobType,
		Payload:        j.Payload,
		IdempotencyKey: j.IdempotencyKey,
		Priority:       j.Priority,
		RunAt:          timestamppb.New(j.RunAt),
		MaxAttempts:    j.MaxAttempts,
		Attempts:       j.Attempts,
		Headers:        j.Headers,
		State:          seppv1.JobState(state),
		CreatedAt:      timestamppb.New(j.CreatedAt),
		Result:         j.Result,
		LastError:      j.LastError,
	}
	if !j.FinalizedAt.IsZero() {
		p.FinalizedAt = timestamppb.New(j.FinalizedAt)
	}
	if j.FollowsJobID != (store.JobID{}) {
		p.FollowsJobId = formatJobID(j.FollowsJobID)
	}
	if j.HasConcurrency {
		p.ConcurrencyKey = j.ConcurrencyKey
	}
	if j.HasRate {
		p.RateKey = j.RateKey
	}
	if !j.HeldUntil.IsZero() {
		p.HeldUntil = timestamppb.New(j.HeldUntil)
	}
	p.HeldBy = seppv1.JobHold(j.Hold)
	return p
}

func asJobError(err error) *store.JobError {
	var je *store.JobError
	if errors.As(err, &je) {
		return je
	}
	return nil
}
