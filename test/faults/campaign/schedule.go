package main

import (
	"context"
	"fmt"
	"time"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/test/faults/history"
)

// The schedule every node runs (-schedule): `@every 1s` with catch_up =
// "all", on a queue of its own that no worker takes from, so the final
// state holds every tick's job. Whatever the faults do, the checker wants
// one job per tick and no tick missing (history/check_schedule.go).
const (
	scheduleName    = "tick"
	scheduleQueue   = "periodic"
	scheduleJobType = "tick"
	scheduleEvery   = time.Second
)

// scheduleConfig is the schedule's part of a node's config.
func scheduleConfig() string {
	return fmt.Sprintf("[[queues]]\nname = %q\n\n[[schedules]]\nname = %q\ncron = \"@every %v\"\nqueue = %q\njob_type = %q\ncatch_up = \"all\"\n\n",
		scheduleQueue, scheduleName, scheduleEvery, scheduleQueue, scheduleJobType)
}

// readSchedule reads the schedule's queue back through node n.
func readSchedule(ctx context.Context, n nodeConn, start time.Time) (*history.ScheduleState, error) {
	s := &history.ScheduleState{Name: scheduleName, Queue: scheduleQueue, JobType: scheduleJobType,
		EveryMS: scheduleEvery.Milliseconds(), Start: history.At(start), Jobs: []history.Job{}}
	token := ""
	for {
		var res *seppv1.ListJobsResponse
		err := retry(ctx, func(ctx context.Context) error {
			var err error
			res, err = n.admin.ListJobs(ctx, &seppv1.ListJobsRequest{Queue: scheduleQueue, PageSize: 1000, PageToken: token})
			return err
		})
		if err != nil {
			return s, fmt.Errorf("list jobs of %s: %w", scheduleQueue, err)
		}
		for _, j := range res.GetJobs() {
			s.Jobs = append(s.Jobs, history.Job{ID: j.GetJobId(), Queue: j.GetQueue(), Key: j.GetIdempotencyKey(),
				JobType: j.GetJobType(), State: stateName(j.GetState()), CreatedAt: history.At(j.GetCreatedAt().AsTime())})
		}
		if token = res.GetNextPageToken(); token == "" {
			return s, nil
		}
	}
}
