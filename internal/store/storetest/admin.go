package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
)

func testPausedQueue(t *testing.T, s store.Store) {
	ctx := context.Background()
	pause := func(p bool) {
		t.Helper()
		if err := s.SetQueuePaused(ctx, &store.SetQueuePausedParams{Queue: "q", Paused: p}); err != nil {
			t.Fatal(err)
		}
	}
	pause(true)
	enqueueOne(t, s, t0, job("q", "k")) // enqueue is never paused
	enqueueOne(t, s, t0, job("other", ""))
	if got := reserve(t, s, t0, 10, "q"); len(got) != 0 {
		t.Fatalf("a paused queue delivered %d jobs", len(got))
	}
	if got := reserve(t, s, t0, 10, "q", "other"); len(got) != 1 || got[0].Job.Queue != "other" {
		t.Fatalf("pausing q held up another queue: %+v", got)
	}
	pause(false)
	if got := reserve(t, s, t0, 10, "q"); len(got) != 1 {
		t.Fatalf("after resume: %d jobs", len(got))
	}
}

func statsOf(t *testing.T, s store.Store, now time.Time, name string) store.QueueStats {
	t.Helper()
	qs, err := s.ListQueues(context.Background(), &store.ListQueuesParams{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if q.Name == name {
			return q
		}
	}
	t.Fatalf("queue %q not listed in %+v", name, qs)
	return store.QueueStats{}
}

func testListQueuesCounts(t *testing.T, s store.Store) {
	ctx := context.Background()
	future := job("q", "")
	future.RunAt = t0.Add(time.Hour)
	enqueue(t, s, t0, job("q", "a"), job("q", "b"), job("q", "c"), future)
	r := reserve(t, s, t0, 2, "q")
	if err := complete(s, r[0].Job.ID, r[0].LeaseToken, nil, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.SetQueuePaused(ctx, &store.SetQueuePausedParams{Queue: "q", Paused: true}); err != nil {
		t.Fatal(err)
	}
	q := statsOf(t, s, t0, "q")
	want := map[store.JobState]int64{store.JobStateAvailable: 1, store.JobStateReserved: 1, store.JobStateCompleted: 1, store.JobStateScheduled: 1}
	for st, n := range want {
		if q.Counts[st] != n {
			t.Fatalf("counts %v, want %v", q.Counts, want)
		}
	}
	if q.DedupRecords != 3 || !q.Paused {
		t.Fatalf("stats: %+v", q)
	}
	// Once its run-at passes, the scheduled job counts as available.
	if q := statsOf(t, s, t0.Add(time.Hour), "q"); q.Counts[store.JobStateAvailable] != 2 || q.Counts[store.JobStateScheduled] != 0 {
		t.Fatalf("after run_at: %v", q.Counts)
	}
}

func testListJobsPages(t *testing.T, s store.Store) {
	ctx := context.Background()
	var batch []store.EnqueueJob
	for range 5 {
		batch = append(batch, job("q", ""))
	}
	res := enqueue(t, s, t0, append(batch, job("other", ""))...)
	var got []store.JobID
	var after store.JobID
	for {
		page, err := s.ListJobs(ctx, &store.ListJobsParams{Queue: "q", State: store.JobStateAvailable, After: after, Limit: 2, Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, j := range page {
			got = append(got, j.ID)
		}
		after = page[len(page)-1].ID
	}
	if len(got) != 5 {
		t.Fatalf("listed %d jobs of q, want 5", len(got))
	}
	for i := range 5 {
		if got[i] != res[i].JobID {
			t.Fatalf("job %d listed out of order", i)
		}
	}
	dead, err := s.ListJobs(ctx, &store.ListJobsParams{State: store.JobStateDead, Limit: 10, Now: t0})
	if err != nil || len(dead) != 0 {
		t.Fatalf("dead jobs: %d %v", len(dead), err)
	}
}

func testDeadLetterRequeueAndPurge(t *testing.T, s store.Store) {
	ctx := context.Background()
	one := job("q", "k")
	one.MaxAttempts = 1
	id := enqueue(t, s, t0, one)[0].JobID
	r := reserve(t, s, t0, 1, "q")[0]
	if _, err := s.Fail(ctx, &store.FailParams{ID: id, LeaseToken: r.LeaseToken, Error: "boom", RetryAt: at(t0), Now: t0}); err != nil {
		t.Fatal(err)
	}
	n, err := s.RequeueDead(ctx, &store.DeadJobsParams{Queue: "q", Now: t0.Add(time.Minute)})
	if err != nil || n.N != 1 || len(n.NotDead) != 0 {
		t.Fatalf("requeue: %+v %v", n, err)
	}
	// By id: the job is available now, and the other id names nothing;
	// neither is a dead job, each is named once, in the order given.
	var unknown store.JobID
	unknown[0] = 0xfe
	n, err = s.RequeueDead(ctx, &store.DeadJobsParams{IDs: []store.JobID{id, unknown, id}, Now: t0.Add(time.Minute)})
	if err != nil || n.N != 0 || len(n.NotDead) != 2 || n.NotDead[0] != id || n.NotDead[1] != unknown {
		t.Fatalf("requeue of ids that are no dead jobs: %+v %v", n, err)
	}
	if j := getJob(t, s, id); j.State != store.JobStateAvailable || j.Attempts != 0 || !j.FinalizedAt.IsZero() {
		t.Fatalf("requeued job: %+v", j)
	}
	r = reserve(t, s, t0.Add(time.Minute), 1, "q")[0]
	if r.Job.Attempts != 1 {
		t.Fatalf("attempts after requeue: %d", r.Job.Attempts)
	}
	if _, err := s.Fail(ctx, &store.FailParams{ID: id, LeaseToken: r.LeaseToken, Error: "boom again", RetryAt: at(t0), Now: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	n, err = s.PurgeDead(ctx, &store.DeadJobsParams{IDs: []store.JobID{unknown, id, id}, Now: t0})
	if err != nil || n.N != 1 || len(n.NotDead) != 1 || n.NotDead[0] != unknown {
		t.Fatalf("purge: %+v %v, want 1 purged and the unknown id not dead", n, err)
	}
	if _, err := s.GetJob(ctx, &store.GetJobParams{ID: id}); !errors.Is(err, store.ErrJobNotFound) {
		t.Fatalf("purged job: %v", err)
	}
	l, err := lookup(t, s, t0, "q", "k")
	if err != nil || l.JobState != store.JobStateDeleted || l.Record.JobID != id {
		t.Fatalf("lookup after purge: %+v %v", l, err)
	}
}
