package server

import (
	"context"
	"encoding/hex"
	"errors"
	"log/slog"
	"slices"
	"strings"

	"connectrpc.com/connect"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/storerule"
)

const (
	defaultPageSize = 100
	maxPageSize     = 1000
)

// adminService implements AdminService for both stacks.
type adminService struct {
	seppv1.UnimplementedAdminServiceServer
	s *Server
}

func (a *adminService) ListQueues(ctx context.Context, _ *seppv1.ListQueuesRequest) (*seppv1.ListQueuesResponse, error) {
	stats, err := a.s.store.ListQueues(ctx, &store.ListQueuesParams{Now: a.s.now()})
	if err != nil {
		return nil, err
	}
	byName := map[string]*seppv1.QueueInfo{}
	for _, q := range a.s.cfg.Queues { // declared queues are listed even when empty
		byName[q.Name] = &seppv1.QueueInfo{Name: q.Name}
	}
	for _, q := range queueInfos(stats) {
		byName[q.Name] = q
	}
	res := &seppv1.ListQueuesResponse{}
	for _, q := range byName {
		if mayListQueue(ctx, q.Name) { // a token limited to some queues sees those (auth.go)
			res.Queues = append(res.Queues, q)
		}
	}
	slices.SortFunc(res.Queues, func(a, b *seppv1.QueueInfo) int { return strings.Compare(a.Name, b.Name) })
	return res, nil
}

// queueInfos turns a store's counts into the API's, sorted by name:
// ListQueues's and a backup's manifest's.
func queueInfos(stats []store.QueueStats) []*seppv1.QueueInfo {
	out := make([]*seppv1.QueueInfo, 0, len(stats))
	for _, st := range stats {
		out = append(out, &seppv1.QueueInfo{
			Name:            st.Name,
			Scheduled:       st.Counts[store.JobStateScheduled],
			Available:       st.Counts[store.JobStateAvailable],
			Reserved:        st.Counts[store.JobStateReserved],
			HeldFollowUp:    st.Held[store.HoldFollowUp],
			HeldConcurrency: st.Held[store.HoldConcurrency],
			HeldRate:        st.Held[store.HoldRate],
			Completed:       st.Counts[store.JobStateCompleted],
			Dead:            st.Counts[store.JobStateDead],
			Cancelled:       st.Counts[store.JobStateCancelled],
			DedupRecords:    st.DedupRecords,
			Paused:          st.Paused,
		})
	}
	slices.SortFunc(out, func(a, b *seppv1.QueueInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (a *adminService) ListJobs(ctx context.Context, req *seppv1.ListJobsRequest) (*seppv1.ListJobsResponse, error) {
	p := &store.ListJobsParams{Queue: req.GetQueue(), State: store.JobState(req.GetState()), Limit: int(req.GetPageSize()), Now: a.s.now()}
	if p.Queue != "" {
		if aerr := a.s.checkQueue(p.Queue); aerr != nil {
			return nil, aerr
		}
	}
	if p.State < 0 || p.State > store.JobStateCancelled {
		return nil, invalidField("state", "must be a job state other than JOB_STATE_DELETED, got %d", p.State)
	}
	switch {
	case p.Limit < 0 || p.Limit > maxPageSize:
		return nil, invalidField("page_size", "must be between 0 and %d (0: %d), got %d", maxPageSize, defaultPageSize, p.Limit)
	case p.Limit == 0:
		p.Limit = defaultPageSize
	}
	if tok := req.GetPageToken(); tok != "" {
		if len(tok) != 2*len(p.After) {
			return nil, invalidField("page_token", "must be a next_page_token from an earlier ListJobs")
		}
		if _, err := hex.Decode(p.After[:], []byte(tok)); err != nil {
			return nil, invalidField("page_token", "must be a next_page_token from an earlier ListJobs")
		}
	}
	jobs, err := a.s.store.ListJobs(ctx, p)
	if err != nil {
		return nil, err
	}
	res := &seppv1.ListJobsResponse{Jobs: make([]*seppv1.Job, len(jobs))}
	for i, j := range jobs {
		res.Jobs[i] = jobToProto(j, p.Now)
	}
	if len(jobs) == p.Limit {
		last := jobs[len(jobs)-1].ID
		res.NextPageToken = hex.EncodeToString(last[:])
	}
	return res, nil
}

// deadSelection validates the selector shared by RequeueDeadJobs and
// PurgeDeadJobs: a queue, job ids, or all.
func (a *adminService) deadSelection(queue string, ids []string, all bool) (*store.DeadJobsParams, error) {
	if queue == "" && len(ids) == 0 && !all {
		return nil, invalidField("queue", "say which dead jobs: a queue, job_ids, or all = true")
	}
	p := &store.DeadJobsParams{Queue: queue, Now: a.s.now()}
	if queue != "" {
		if aerr := a.s.checkQueue(queue); aerr != nil {
			return nil, aerr
		}
	}
	for _, s := range ids {
		id, aerr := parseJobID(s)
		if aerr != nil {
			return nil, aerr
		}
		p.IDs = append(p.IDs, id)
	}
	if len(p.IDs) > maxPageSize {
		return nil, invalidField("job_ids", "has %d ids; the limit is %d", len(p.IDs), maxPageSize)
	}
	return p, nil
}

// deadJobs runs op, the store's requeue or purge, on the dead jobs p
// selects. A job selected by id on a queue the caller's token may not touch
// is left out and listed with the ids that named no dead job, where an id
// no job has would be (hiddenJob); the audit line names those ids.
func (a *adminService) deadJobs(ctx context.Context, p *store.DeadJobsParams,
	op func(context.Context, *store.DeadJobsParams) (store.DeadJobsResult, error)) (store.DeadJobsResult, error) {
	mayTouch := make([]store.JobID, 0, len(p.IDs))
	var hidden []store.JobID
	for _, id := range p.IDs {
		err := a.s.checkJobQueue(ctx, id) // auth.go
		var h *hiddenJob
		switch {
		case errors.As(err, &h):
			hidden = append(hidden, id)
		case err != nil:
			return store.DeadJobsResult{}, err
		default:
			mayTouch = append(mayTouch, id)
		}
	}
	if len(hidden) == 0 {
		return op(ctx, p)
	}
	auditNote(ctx, slog.String("hidden_job_ids", strings.Join(formatJobIDs(hidden), ",")))
	var res store.DeadJobsResult
	if len(mayTouch) > 0 { // none: the store would take the selection for all
		q := *p
		q.IDs = mayTouch
		var err error
		if res, err = op(ctx, &q); err != nil {
			return res, err
		}
	}
	done := map[store.JobID]bool{}
	for _, id := range mayTouch {
		done[id] = true
	}
	for _, id := range res.NotDead {
		done[id] = false
	}
	res.NotDead = storerule.NotDead(p.IDs, done)
	return res, nil
}

func (a *adminService) RequeueDeadJobs(ctx context.Context, req *seppv1.RequeueDeadJobsRequest) (*seppv1.RequeueDeadJobsResponse, error) {
	p, err := a.deadSelection(req.GetQueue(), req.GetJobIds(), req.GetAll())
	if err != nil {
		return nil, err
	}
	res, err := a.deadJobs(ctx, p, a.s.store.RequeueDead)
	if err != nil {
		return nil, err
	}
	a.s.log.Info("dead jobs requeued", "queue", req.GetQueue(), "job_ids", len(req.GetJobIds()), "requeued", res.N, "missing", len(res.NotDead))
	a.s.wake.NotifyPrefix("") // any queue may have got jobs
	return &seppv1.RequeueDeadJobsResponse{Requeued: int64(res.N), MissingJobIds: formatJobIDs(res.NotDead)}, nil
}

func (a *adminService) PurgeDeadJobs(ctx context.Context, req *seppv1.PurgeDeadJobsRequest) (*seppv1.PurgeDeadJobsResponse, error) {
	p, err := a.deadSelection(req.GetQueue(), req.GetJobIds(), req.GetAll())
	if err != nil {
		return nil, err
	}
	res, err := a.deadJobs(ctx, p, a.s.store.PurgeDead)
	if err != nil {
		return nil, err
	}
	a.s.log.Info("dead jobs purged", "queue", req.GetQueue(), "job_ids", len(req.GetJobIds()), "purged", res.N, "missing", len(res.NotDead))
	return &seppv1.PurgeDeadJobsResponse{Purged: int64(res.N), MissingJobIds: formatJobIDs(res.NotDead)}, nil
}

// formatJobIDs is ids as the API writes job ids.
func formatJobIDs(ids []store.JobID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = formatJobID(id)
	}
	return out
}

func (a *adminService) PauseQueue(ctx context.Context, req *seppv1.PauseQueueRequest) (*seppv1.PauseQueueResponse, error) {
	return &seppv1.PauseQueueResponse{}, a.setPaused(ctx, req.GetQueue(), true, req.GetCreate())
}

func (a *adminService) ResumeQueue(ctx context.Context, req *seppv1.ResumeQueueRequest) (*seppv1.ResumeQueueResponse, error) {
	return &seppv1.ResumeQueueResponse{}, a.setPaused(ctx, req.GetQueue(), false, req.GetCreate())
}

// setPaused pauses or resumes queue. A queue the server does not know
// (knownQueue) is refused unless create: a mistyped name would otherwise be
// answered "paused" and stay listed, paused, while the real queue delivers.
func (a *adminService) setPaused(ctx context.Context, queue string, paused, create bool) error {
	if aerr := a.s.checkQueue(queue); aerr != nil {
		return aerr
	}
	if !create {
		known, err := a.knownQueue(ctx, queue)
		if err != nil {
			return err
		}
		if !known {
			return unknownQueueToPause(queue, paused)
		}
	}
	if err := a.s.store.SetQueuePaused(ctx, &store.SetQueuePausedParams{Queue: queue, Paused: paused}); err != nil {
		return err
	}
	if paused {
		a.s.log.Info("queue paused", "queue", queue)
	} else {
		a.s.log.Info("queue resumed", "queue", queue)
	}
	if !paused {
		a.s.wake.Notify(queue)
	}
	return nil
}

// knownQueue reports whether ListQueues lists queue: it is declared in
// [[queues]], or the store has jobs, dedup records or a pause flag of it.
func (a *adminService) knownQueue(ctx context.Context, queue string) (bool, error) {
	if a.s.cfg.Declared(queue) {
		return true, nil
	}
	stats, err := a.s.store.ListQueues(ctx, &store.ListQueuesParams{Now: a.s.now()})
	if err != nil {
		return false, err
	}
	for _, q := range stats {
		if q.Name == queue {
			return true, nil
		}
	}
	return false, nil
}

// unknownQueueToPause is PauseQueue's (paused) or ResumeQueue's answer for a
// queue the server does not know.
func unknownQueueToPause(queue string, paused bool) *apiError {
	msg := "queue %q is not declared and has no jobs; declare it in [[queues]] or pass --create (create: true) to pause it before its first job"
	if !paused {
		msg = "queue %q is not declared and has no jobs, so it is not paused; check the name (sepp queues lists the queues), or pass --create (create: true) to resume it anyway"
	}
	e := newError(connect.CodeNotFound, ReasonUnknownQueue, msg, queue)
	e.metadata = map[string]string{"queue": queue}
	return e
}
