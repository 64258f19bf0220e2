package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/sepp-dev/sepp"
)

func runQueues(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sepp queues", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs)
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	var qs []sepp.QueueInfo
	if err := cf.call(func(ctx context.Context, c *sepp.Client) (err error) {
		qs, err = c.ListQueues(ctx)
		return err
	}); err != nil {
		return err
	}
	if cf.json {
		return cf.output(stdout, qs, nil)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "QUEUE\tSCHEDULED\tAVAILABLE\tRESERVED\tCOMPLETED\tDEAD\tCANCELLED\tDEDUP RECORDS\tPAUSED\t")
	for _, q := range qs {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%v\t\n", q.Name, q.Scheduled, q.Available, q.Reserved,
			q.Completed, q.Dead, q.Cancelled, q.DedupRecords, q.Paused)
	}
	return tw.Flush()
}

func runQueuePause(args []string, stdout, stderr io.Writer, pause bool) error {
	verb := map[bool]string{true: "pause", false: "resume"}[pause]
	cf, queue, err := oneArg("sepp queue "+verb, "QUEUE", args, stderr)
	if err != nil {
		return err
	}
	err = cf.call(func(ctx context.Context, c *sepp.Client) error {
		if pause {
			return c.PauseQueue(ctx, queue)
		}
		return c.ResumeQueue(ctx, queue)
	})
	if err != nil {
		return err
	}
	out := struct {
		Queue  string `json:"queue"`
		Paused bool   `json:"paused"`
	}{queue, pause}
	return cf.output(stdout, out, []row{{"queue", queue}, {"paused", fmt.Sprint(pause)}})
}

// listJobs prints one page of jobs as a table, or as JSON.
func listJobs(cf *clientFlags, stdout io.Writer, req sepp.ListJobsRequest) error {
	var page *sepp.JobPage
	if err := cf.call(func(ctx context.Context, c *sepp.Client) (err error) {
		page, err = c.ListJobs(ctx, req)
		return err
	}); err != nil {
		return err
	}
	if cf.json {
		return cf.output(stdout, page, nil)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB ID\tQUEUE\tTYPE\tSTATE\tATTEMPTS\tKEY\tLAST ERROR")
	for _, j := range page.Jobs {
		lastErr, _, _ := strings.Cut(j.LastError, "\n")
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\n", j.ID, j.Queue, j.JobType, j.State, j.Attempts, j.MaxAttempts,
			j.IdempotencyKey, lastErr)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.NextPageToken != "" {
		fmt.Fprintf(stdout, "more: --page-token %s\n", page.NextPageToken)
	}
	return nil
}

func jobListFlags(fs *flag.FlagSet, req *sepp.ListJobsRequest) {
	fs.StringVar(&req.Queue, "queue", "", "only this queue")
	fs.IntVar(&req.PageSize, "limit", 100, "jobs per page (at most 1000)")
	fs.StringVar(&req.PageToken, "page-token", "", "the next page, as printed by the previous one")
}

func runJobsList(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sepp jobs list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs)
	var req sepp.ListJobsRequest
	jobListFlags(fs, &req)
	state := fs.String("state", "", "only this state: scheduled, available, reserved, completed, dead or cancelled")
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	req.State = sepp.JobState(*state)
	switch req.State {
	case "", sepp.JobStateScheduled, sepp.JobStateAvailable, sepp.JobStateReserved, sepp.JobStateCompleted,
		sepp.JobStateDead, sepp.JobStateCancelled:
	default:
		return fmt.Errorf("--state %q: want scheduled, available, reserved, completed, dead or cancelled", *state)
	}
	return listJobs(&cf, stdout, req)
}

func runDLQList(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sepp dlq list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs)
	req := sepp.ListJobsRequest{State: sepp.JobStateDead}
	jobListFlags(fs, &req)
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	return listJobs(&cf, stdout, req)
}

func runDLQ(verb string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sepp dlq "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs)
	var sel sepp.DeadJobs
	fs.StringVar(&sel.Queue, "queue", "", "the dead jobs of this queue")
	fs.BoolVar(&sel.All, "all", false, "every dead job")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	sel.JobIDs = pos
	if sel.Queue == "" && !sel.All && len(sel.JobIDs) == 0 {
		fmt.Fprintf(stderr, "usage: sepp dlq %s [--queue Q | --all | JOB_ID...]\n", verb)
		return exitCode(2)
	}
	var n int64
	err = cf.call(func(ctx context.Context, c *sepp.Client) (err error) {
		if verb == "requeue" {
			n, err = c.RequeueDeadJobs(ctx, sel)
		} else {
			n, err = c.PurgeDeadJobs(ctx, sel)
		}
		return err
	})
	if err != nil {
		return err
	}
	key := verb + "d"
	return cf.output(stdout, map[string]int64{key: n}, []row{{key, fmt.Sprint(n)}})
}
