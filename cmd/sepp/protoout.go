package main

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sepp-dev/sepp"
	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
)

// The Go client answers in Go types; --json prints the API's messages, so
// these turn the answers back into them, field for field.

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

var stateProto = map[sepp.JobState]seppv1.JobState{
	sepp.JobStateScheduled: seppv1.JobState_JOB_STATE_SCHEDULED,
	sepp.JobStateAvailable: seppv1.JobState_JOB_STATE_AVAILABLE,
	sepp.JobStateReserved:  seppv1.JobState_JOB_STATE_RESERVED,
	sepp.JobStateCompleted: seppv1.JobState_JOB_STATE_COMPLETED,
	sepp.JobStateDead:      seppv1.JobState_JOB_STATE_DEAD,
	sepp.JobStateCancelled: seppv1.JobState_JOB_STATE_CANCELLED,
	sepp.JobStateDeleted:   seppv1.JobState_JOB_STATE_DELETED,
}

var holdProto = map[sepp.JobHold]seppv1.JobHold{
	sepp.JobHoldFollowUp:    seppv1.JobHold_JOB_HOLD_FOLLOW_UP,
	sepp.JobHoldConcurrency: seppv1.JobHold_JOB_HOLD_CONCURRENCY,
	sepp.JobHoldRate:        seppv1.JobHold_JOB_HOLD_RATE,
}

func jobProto(j *sepp.Job) *seppv1.Job {
	p := &seppv1.Job{
		JobId: j.ID, Queue: j.Queue, JobType: j.JobType, Payload: j.Payload, Priority: j.Priority,
		RunAt: ts(j.RunAt), MaxAttempts: j.MaxAttempts, Attempts: j.Attempts, Headers: j.Headers,
		State: stateProto[j.State], CreatedAt: ts(j.CreatedAt), FinalizedAt: ts(j.FinalizedAt),
		Result: j.Result, LastError: j.LastError, FollowsJobId: j.FollowsJobID, ConcurrencyKey: j.ConcurrencyKey,
		RateKey: j.RateKey, HeldBy: holdProto[j.HeldBy], HeldUntil: ts(j.HeldUntil),
	}
	if j.IdempotencyKey != "" {
		k := j.IdempotencyKey
		p.IdempotencyKey = &k
	}
	return p
}

func ackProto(a *sepp.Ack) *seppv1.EnqueueResponse {
	return &seppv1.EnqueueResponse{JobId: a.JobID, Deduplicated: a.Deduplicated, PayloadMismatch: a.PayloadMismatch,
		OriginalEnqueuedAt: ts(a.OriginalEnqueuedAt), DedupExpiresAt: ts(a.DedupExpiresAt), Replaced: a.Replaced,
		IdempotencyKey: a.IdempotencyKey, FollowsJobId: a.FollowsJobID, DelayedUntil: ts(a.DelayedUntil)}
}

func lookupProto(l *sepp.KeyLookup) *seppv1.LookupIdempotencyKeyResponse {
	return &seppv1.LookupIdempotencyKeyResponse{Found: l.Found, JobId: l.JobID, FirstEnqueuedAt: ts(l.FirstEnqueuedAt),
		ExpiresAt: ts(l.ExpiresAt), Hits: l.Hits, State: stateProto[l.State], Result: l.Result, Policy: l.Policy,
		IdempotencyKey: l.IdempotencyKey}
}

func queuesProto(qs []sepp.QueueInfo) *seppv1.ListQueuesResponse {
	res := &seppv1.ListQueuesResponse{Queues: []*seppv1.QueueInfo{}}
	for _, q := range qs {
		res.Queues = append(res.Queues, &seppv1.QueueInfo{Name: q.Name, Scheduled: q.Scheduled, Available: q.Available,
			Reserved: q.Reserved, Completed: q.Completed, Dead: q.Dead, Cancelled: q.Cancelled,
			DedupRecords: q.DedupRecords, Paused: q.Paused, HeldFollowUp: q.HeldFollowUp,
			HeldConcurrency: q.HeldConcurrency, HeldRate: q.HeldRate})
	}
	return res
}

func pageProto(p *sepp.JobPage) *seppv1.ListJobsResponse {
	res := &seppv1.ListJobsResponse{Jobs: []*seppv1.Job{}, NextPageToken: p.NextPageToken}
	for _, j := range p.Jobs {
		res.Jobs = append(res.Jobs, jobProto(j))
	}
	return res
}
