package sepp

import (
	"context"
	"time"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
)

// QueueInfo describes a queue: its jobs by state, its live dedup records and
// whether delivery is paused.
type QueueInfo struct {
	Name         string `json:"name"`
	Scheduled    int64  `json:"scheduled"`
	Available    int64  `json:"available"`
	Reserved     int64  `json:"reserved"`
	Completed    int64  `json:"completed"`
	Dead         int64  `json:"dead"`
	Cancelled    int64  `json:"cancelled"`
	DedupRecords int64  `json:"dedupRecords"`
	Paused       bool   `json:"paused"`
	// Jobs whose run-at has come that are held back (counted in
	// Scheduled): waiting follow-ups, and jobs held by their key's
	// concurrency limit or rate.
	HeldFollowUp    int64 `json:"heldFollowUp"`
	HeldConcurrency int64 `json:"heldConcurrency"`
	HeldRate        int64 `json:"heldRate"`
}

// ListQueues lists the declared queues and every queue that has jobs.
func (c *Client) ListQueues(ctx context.Context) ([]QueueInfo, error) {
	res, err := c.admin.ListQueues(ctx, &seppv1.ListQueuesRequest{})
	if err != nil {
		return nil, fromRPC(ctx, err)
	}
	out := make([]QueueInfo, len(res.GetQueues()))
	for i, q := range res.GetQueues() {
		out[i] = QueueInfo{Name: q.GetName(), Scheduled: q.GetScheduled(), Available: q.GetAvailable(),
			Reserved: q.GetReserved(), Completed: q.GetCompleted(), Dead: q.GetDead(), Cancelled: q.GetCancelled(),
			DedupRecords: q.GetDedupRecords(), Paused: q.GetPaused(), HeldFollowUp: q.GetHeldFollowUp(),
			HeldConcurrency: q.GetHeldConcurrency(), HeldRate: q.GetHeldRate()}
	}
	return out, nil
}

// OutboxInfo is one [[outboxes]] table as the server's relay last saw it.
type OutboxInfo struct {
	Name    string `json:"name"`
	Dialect string `json:"dialect"` // "postgres", "mysql" or "sqlite"
	Table   string `json:"table"`
	// Lag is the age of the oldest row not yet relayed, at CheckedAt; 0
	// when the table was empty.
	Lag time.Duration `json:"lag"`
	// Relayed and Dead count the rows this server relayed into jobs, and
	// moved to the dead table, since it started.
	Relayed int64 `json:"relayed"`
	Dead    int64 `json:"dead"`
	// CheckedAt is when the relay last read the table (zero: not yet).
	CheckedAt time.Time `json:"checkedAt,omitzero"`
	// LastError is the last relay pass's error; empty when it succeeded.
	LastError string `json:"lastError,omitempty"`
}

// ListOutboxes lists the outboxes the server relays, in config order.
func (c *Client) ListOutboxes(ctx context.Context) ([]OutboxInfo, error) {
	res, err := c.admin.ListOutboxes(ctx, &seppv1.ListOutboxesRequest{})
	if err != nil {
		return nil, fromRPC(ctx, err)
	}
	out := make([]OutboxInfo, len(res.GetOutboxes()))
	for i, o := range res.GetOutboxes() {
		out[i] = OutboxInfo{Name: o.GetName(), Dialect: o.GetDialect(), Table: o.GetTable(),
			Lag: time.Duration(o.GetLagMs()) * time.Millisecond, Relayed: o.GetRelayed(), Dead: o.GetDead(), LastError: o.GetLastError()}
		if o.CheckedAt != nil {
			out[i].CheckedAt = o.GetCheckedAt().AsTime()
		}
	}
	return out, nil
}

// ScheduleInfo is one [[schedules]] entry of the server's config and where
// it stands. LastTick is shared by every node of the server's store; the
// last job and error are the answering node's.
type ScheduleInfo struct {
	Name     string `json:"name"`
	Cron     string `json:"cron"`     // as configured: "0 3 * * *", "@hourly", "@every 30s"
	Timezone string `json:"timezone"` // the IANA zone the cron fields are read in; "UTC" when not set
	Queue    string `json:"queue"`
	JobType  string `json:"jobType"`
	CatchUp  string `json:"catchUp"` // "none", "last" or "all"
	// LastTick is the latest tick whose job exists, enqueued by any node;
	// zero before the first.
	LastTick time.Time `json:"lastTick,omitzero"`
	// NextTick is the next tick to fire.
	NextTick time.Time `json:"nextTick,omitzero"`
	// LastJobID is the job of the latest tick the answering node fired.
	LastJobID string `json:"lastJobId,omitempty"`
	// LastError is the answering node's last error firing a tick; empty
	// after a success.
	LastError string `json:"lastError,omitempty"`
}

// ListSchedules lists the server's [[schedules]], in config order.
func (c *Client) ListSchedules(ctx context.Context) ([]ScheduleInfo, error) {
	res, err := c.admin.ListSchedules(ctx, &seppv1.ListSchedulesRequest{})
	if err != nil {
		return nil, fromRPC(ctx, err)
	}
	out := make([]ScheduleInfo, len(res.GetSchedules()))
	for i, s := range res.GetSchedules() {
		out[i] = ScheduleInfo{Name: s.GetName(), Cron: s.GetCron(), Timezone: s.GetTimezone(), Queue: s.GetQueue(),
			JobType: s.GetJobType(), CatchUp: s.GetCatchUp(), LastJobID: s.GetLastJobId(), LastError: s.GetLastError()}
		if s.LastTick != nil {
			out[i].LastTick = s.GetLastTick().AsTime()
		}
		if s.NextTick != nil {
			out[i].NextTick = s.GetNextTick().AsTime()
		}
	}
	return out, nil
}

// ListJobsRequest filters and pages ListJobs.
type ListJobsRequest struct {
	Queue     string   // empty: every queue
	State     JobState // empty: every state
	PageSize  int      // zero: 100
	PageToken string   // from the previous page's NextPageToken
}

// JobPage is one page of jobs, oldest first. NextPageToken is empty on the
// last page.
type JobPage struct {
	Jobs          []*Job
	NextPageToken string
}

// ListJobs lists jobs by queue and state, a page at a time.
func (c *Client) ListJobs(ctx context.Context, req ListJobsRequest) (*JobPage, error) {
	res, err := c.admin.ListJobs(ctx, &seppv1.ListJobsRequest{Queue: req.Queue, State: stateToProto(req.State),
		PageSize: int32(req.PageSize), PageToken: req.PageToken})
	if err != nil {
		return nil, fromRPC(ctx, err)
	}
	page := &JobPage{NextPageToken: res.GetNextPageToken()}
	for _, j := range res.GetJobs() {
		page.Jobs = append(page.Jobs, jobFromProto(j))
	}
	return page, nil
}

// DeadJobs selects dead jobs: those of Queue, the listed JobIDs, or All.
type DeadJobs struct {
	Queue  string
	JobIDs []string
	All    bool
}

// RequeueDeadJobs makes the selected dead jobs available again with their
// attempts reset, and returns how many it requeued. When some of
// sel.JobIDs name no dead job, the others are still requeued: it returns
// their count and a *NotDeadError naming those ids.
func (c *Client) RequeueDeadJobs(ctx context.Context, sel DeadJobs) (int64, error) {
	res, err := c.admin.RequeueDeadJobs(ctx, &seppv1.RequeueDeadJobsRequest{Queue: sel.Queue, JobIds: sel.JobIDs, All: sel.All})
	if err != nil {
		return 0, fromRPC(ctx, err)
	}
	return res.GetRequeued(), notDead(res.GetMissingJobIds())
}

// PurgeDeadJobs deletes the selected dead jobs and returns how many. Their
// dedup records stay until their windows end. When some of sel.JobIDs name
// no dead job, the others are still purged: it returns their count and a
// *NotDeadError naming those ids.
func (c *Client) PurgeDeadJobs(ctx context.Context, sel DeadJobs) (int64, error) {
	res, err := c.admin.PurgeDeadJobs(ctx, &seppv1.PurgeDeadJobsRequest{Queue: sel.Queue, JobIds: sel.JobIDs, All: sel.All})
	if err != nil {
		return 0, fromRPC(ctx, err)
	}
	return res.GetPurged(), notDead(res.GetMissingJobIds())
}

func notDead(ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	return &NotDeadError{JobIDs: ids}
}

// PauseOptions tune PauseQueue and ResumeQueue. The zero value is the
// default.
type PauseOptions struct {
	// Create pauses (or resumes) a queue the server does not know: one
	// neither declared in [[queues]] nor holding jobs (none ListQueues
	// lists). Without it, the default, the server refuses such a queue with
	// ErrUnknownQueue, as most likely a mistyped name. Set it to pause a
	// queue before its first job.
	Create bool
}

// PauseQueue stops delivery from a queue. Enqueues still succeed. A queue
// the server does not know is refused with ErrUnknownQueue unless
// opts.Create (opts is optional; only the first is read).
func (c *Client) PauseQueue(ctx context.Context, queue string, opts ...PauseOptions) error {
	_, err := c.admin.PauseQueue(ctx, &seppv1.PauseQueueRequest{Queue: queue, Create: firstPauseOptions(opts).Create})
	return fromRPC(ctx, err)
}

// ResumeQueue resumes delivery from a paused queue. A queue the server does
// not know is refused with ErrUnknownQueue unless opts.Create.
func (c *Client) ResumeQueue(ctx context.Context, queue string, opts ...PauseOptions) error {
	_, err := c.admin.ResumeQueue(ctx, &seppv1.ResumeQueueRequest{Queue: queue, Create: firstPauseOptions(opts).Create})
	return fromRPC(ctx, err)
}

func firstPauseOptions(opts []PauseOptions) PauseOptions {
	if len(opts) == 0 {
		return PauseOptions{}
	}
	return opts[0]
}
