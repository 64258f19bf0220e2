package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/protobuf/proto"

	"github.com/sepp-dev/sepp"
	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
)

func queuesCmd(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{Use: "queues", Short: "jobs by state, dedup records, paused, per queue", Args: cobra.NoArgs}
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		cf := &env.cf
		qs, err := listQueues(cf)
		if err != nil {
			return err
		}
		if cf.json {
			return cf.output(env.stdout, queuesProto(qs), nil)
		}
		held := heldColumns(qs)
		tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "QUEUE\tSCHEDULED\tAVAILABLE\tRESERVED\tCOMPLETED\tDEAD\tCANCELLED\tDEDUP RECORDS\tPAUSED\t")
		for _, h := range held {
			fmt.Fprintf(tw, "%s\t", h.title)
		}
		fmt.Fprintln(tw)
		for _, q := range qs {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%v\t", q.Name, q.Scheduled, q.Available, q.Reserved,
				q.Completed, q.Dead, q.Cancelled, q.DedupRecords, q.Paused)
			for _, h := range held {
				fmt.Fprintf(tw, "%d\t", h.count(q))
			}
			fmt.Fprintln(tw)
		}
		return tw.Flush()
	})
	return cmd
}

// heldColumn is a column of held jobs (counted in SCHEDULED) in the queue
// table.
type heldColumn struct {
	title string
	count func(sepp.QueueInfo) int64
}

// heldColumns returns the held-job columns the queue table shows: those
// some queue of qs has a held job in, so the table of a server without
// follow-ups, concurrency limits or rates looks as it always did.
func heldColumns(qs []sepp.QueueInfo) []heldColumn {
	all := []heldColumn{
		{"HELD FOLLOW-UP", func(q sepp.QueueInfo) int64 { return q.HeldFollowUp }},
		{"HELD CONCURRENCY", func(q sepp.QueueInfo) int64 { return q.HeldConcurrency }},
		{"HELD RATE", func(q sepp.QueueInfo) int64 { return q.HeldRate }},
	}
	var out []heldColumn
	for _, h := range all {
		if slices.ContainsFunc(qs, func(q sepp.QueueInfo) bool { return h.count(q) != 0 }) {
			out = append(out, h)
		}
	}
	return out
}

func queuePauseCmd(env *cliEnv, pause bool) *cobra.Command {
	verb := map[bool]string{true: "pause", false: "resume"}[pause]
	short := map[bool]string{true: "stop delivery from QUEUE (enqueues still succeed)", false: "restart delivery from QUEUE"}[pause]
	cmd := &cobra.Command{Use: verb + " QUEUE [--create]", Short: short, Args: cobra.ExactArgs(1)}
	var conf confirmFlags
	var opts sepp.PauseOptions
	cmd.Flags().BoolVar(&opts.Create, "create", false,
		verb+" a queue the server does not know yet (not declared in [[queues]], no jobs); without it such a name is refused as a likely typo")
	if pause {
		conf.register(cmd.Flags())
	}
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		cf := &env.cf
		queue := args[0]
		if pause && conf.dryRun {
			return pauseDryRun(env, queue, opts)
		}
		if pause {
			if err := confirm(env, conf, "pause delivery from queue %s?", queue); err != nil {
				return err
			}
		}
		err := cf.call(func(ctx context.Context, c *sepp.Client) error {
			if pause {
				return c.PauseQueue(ctx, queue, opts)
			}
			return c.ResumeQueue(ctx, queue, opts)
		})
		if err != nil {
			return err
		}
		rows := []row{{"queue", queue}, {"paused", fmt.Sprint(pause)}}
		if pause {
			return cf.output(env.stdout, &seppv1.PauseQueueResponse{}, rows)
		}
		return cf.output(env.stdout, &seppv1.ResumeQueueResponse{}, rows)
	})
	return cmd
}

// listQueues is one ListQueues call.
func listQueues(cf *clientFlags) (qs []sepp.QueueInfo, err error) {
	err = cf.call(func(ctx context.Context, c *sepp.Client) (err error) {
		qs, err = c.ListQueues(ctx)
		return err
	})
	return qs, err
}

// pauseDryRun says what queue pause would do: pause the queue, or be
// refused for a queue the server does not know (the queues it lists are
// those it knows), as the server refuses it.
func pauseDryRun(env *cliEnv, queue string, opts sepp.PauseOptions) error {
	cf := &env.cf
	known := opts.Create
	if !known {
		qs, err := listQueues(cf)
		if err != nil {
			return err
		}
		known = slices.ContainsFunc(qs, func(q sepp.QueueInfo) bool { return q.Name == queue })
	}
	if !known {
		return &sepp.Error{Code: "not_found", Reason: sepp.ErrUnknownQueue.Error(), Index: -1, Metadata: map[string]string{"queue": queue},
			Message: fmt.Sprintf("dry run: queue %q is not declared and has no jobs; pausing it would be refused: declare it in [[queues]] or pass --create to pause it before its first job", queue)}
	}
	return cf.say(env.stdout, map[string]any{"dryRun": true, "queue": queue, "wouldPause": true},
		fmt.Sprintf("dry run: would pause delivery from queue %s; nothing done", queue))
}

func plural(n int64, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// shorten cuts s to its first line and at most n runes.
func shorten(s string, n int) string {
	s, _, cut := strings.Cut(s, "\n")
	r := []rune(s)
	if len(r) > n {
		return string(r[:n-1]) + "…"
	}
	if cut {
		return s + " …"
	}
	return s
}

// listJobs prints one page of jobs as a table, or as JSON.
func listJobs(env *cliEnv, req sepp.ListJobsRequest) error {
	cf := &env.cf
	if err := checkRange("--limit", int64(req.PageSize), 1, maxListLimit, "jobs per page"); err != nil {
		return err
	}
	var page *sepp.JobPage
	if err := cf.call(func(ctx context.Context, c *sepp.Client) (err error) {
		page, err = c.ListJobs(ctx, req)
		return err
	}); err != nil {
		return err
	}
	if cf.json {
		return cf.output(env.stdout, pageProto(page), nil)
	}
	stdout := env.stdout
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB ID\tQUEUE\tTYPE\tSTATE\tPRIORITY\tRUN AT\tATTEMPTS\tKEY\tLAST ERROR")
	for _, j := range page.Jobs {
		key := j.IdempotencyKey
		if key == "" {
			key = "-"
		}
		runAt := "-"
		if !j.RunAt.IsZero() {
			runAt = j.RunAt.Local().Format(time.RFC3339)
		}
		lastErr := shorten(j.LastError, 60)
		if lastErr == "" {
			lastErr = "-"
		}
		state := string(j.State)
		if j.HeldBy != "" {
			state += " (held: " + string(j.HeldBy) + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%d/%d\t%s\t%s\n", j.ID, j.Queue, j.JobType, state, j.Priority, runAt,
			j.Attempts, j.MaxAttempts, key, lastErr)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.NextPageToken != "" {
		fmt.Fprintf(stdout, "more: --page-token %s\n", page.NextPageToken)
	}
	return nil
}

// maxListLimit is the most jobs ListJobs returns a page: the server's
// limit on page_size.
const maxListLimit = 1000

func jobListFlags(fs *pflag.FlagSet, req *sepp.ListJobsRequest) {
	fs.StringVar(&req.Queue, "queue", "", "only this queue")
	fs.IntVar(&req.PageSize, "limit", 100, fmt.Sprintf("jobs per page (1 to %d)", maxListLimit))
	fs.StringVar(&req.PageToken, "page-token", "", "the next page, as printed by the previous one")
}

func jobsListCmd(env *cliEnv) *cobra.Command {
	var req sepp.ListJobsRequest
	var state string
	cmd := &cobra.Command{Use: "list [--queue Q] [--state S]", Short: "list jobs", Args: cobra.NoArgs}
	jobListFlags(cmd.Flags(), &req)
	cmd.Flags().StringVar(&state, "state", "", "only this state: scheduled, available, reserved, completed, dead or cancelled")
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		req.State = sepp.JobState(state)
		switch req.State {
		case "", sepp.JobStateScheduled, sepp.JobStateAvailable, sepp.JobStateReserved, sepp.JobStateCompleted,
			sepp.JobStateDead, sepp.JobStateCancelled:
		default:
			return usagef("--state %q: want scheduled, available, reserved, completed, dead or cancelled", state)
		}
		return listJobs(env, req)
	})
	return cmd
}

func dlqListCmd(env *cliEnv) *cobra.Command {
	req := sepp.ListJobsRequest{State: sepp.JobStateDead}
	cmd := &cobra.Command{Use: "list [--queue Q]", Short: "list dead jobs", Args: cobra.NoArgs}
	jobListFlags(cmd.Flags(), &req)
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error { return listJobs(env, req) })
	return cmd
}

// countDead counts the dead jobs sel selects, with ListJobs, and returns the
// ids of sel.JobIDs that name no dead job, as the server would.
func countDead(ctx context.Context, c *sepp.Client, sel sepp.DeadJobs) (int64, []string, error) {
	if len(sel.JobIDs) > 0 {
		// The listed jobs (of sel.Queue, when given too), as the server
		// selects them.
		var n int64
		var missing []string
		seen := map[string]bool{}
		for _, id := range sel.JobIDs {
			if seen[id] {
				continue
			}
			seen[id] = true
			j, err := c.GetJob(ctx, id)
			if err != nil && !errors.Is(err, sepp.ErrJobNotFound) {
				return 0, nil, err
			}
			if err == nil && j.State == sepp.JobStateDead && (sel.Queue == "" || j.Queue == sel.Queue) {
				n++
			} else {
				missing = append(missing, id)
			}
		}
		return n, missing, nil
	}
	req := sepp.ListJobsRequest{State: sepp.JobStateDead, PageSize: maxListLimit}
	if !sel.All {
		req.Queue = sel.Queue
	}
	var n int64
	for {
		page, err := c.ListJobs(ctx, req)
		if err != nil {
			return 0, nil, err
		}
		n += int64(len(page.Jobs))
		if page.NextPageToken == "" {
			return n, nil, nil
		}
		req.PageToken = page.NextPageToken
	}
}

func dlqCmd(env *cliEnv, verb string) *cobra.Command {
	var sel sepp.DeadJobs
	var conf confirmFlags
	short := map[string]string{"requeue": "make dead jobs available again, attempts reset (exit 3 if a JOB_ID is no dead job)",
		"purge": "delete dead jobs (their dedup records stay until their windows end; exit 3 if a JOB_ID is no dead job)"}[verb]
	cmd := &cobra.Command{Use: verb + " [--queue Q | --all | JOB_ID...]", Short: short, Args: cobra.ArbitraryArgs}
	cmd.Flags().StringVar(&sel.Queue, "queue", "", "the dead jobs of this queue")
	cmd.Flags().BoolVar(&sel.All, "all", false, "every dead job")
	if verb == "purge" {
		conf.register(cmd.Flags())
	}
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		cf := &env.cf
		sel.JobIDs = args
		if sel.Queue == "" && !sel.All && len(sel.JobIDs) == 0 {
			return usagef("say which dead jobs: sepp dlq %s [--queue Q | --all | JOB_ID...]", verb)
		}
		where := "from queue " + sel.Queue
		switch {
		case sel.All:
			where = "from every queue"
		case len(sel.JobIDs) > 0 && sel.Queue != "":
			where = fmt.Sprintf("of the %d given, from queue %s", len(sel.JobIDs), sel.Queue)
		case len(sel.JobIDs) > 0:
			where = fmt.Sprintf("of the %d given", len(sel.JobIDs))
		}
		if verb == "purge" && (conf.dryRun || (!conf.yes && env.stdinTTY)) {
			var n int64
			var missing []string
			if err := cf.call(func(ctx context.Context, c *sepp.Client) (err error) {
				n, missing, err = countDead(ctx, c, sel)
				return err
			}); err != nil {
				return err
			}
			if conf.dryRun {
				if err := cf.say(env.stdout, map[string]any{"dryRun": true, "wouldPurge": fmt.Sprint(n), "missingJobIds": nonNil(missing)},
					fmt.Sprintf("dry run: would purge %d dead %s %s; nothing done", n, plural(n, "job"), where)); err != nil {
					return err
				}
				return reportNotDead(env, missing)
			}
			if err := confirm(env, conf, "purge %d dead %s %s?", n, plural(n, "job"), where); err != nil {
				return err
			}
		} else if verb == "purge" {
			if err := confirm(env, conf, "purge the dead jobs %s?", where); err != nil {
				return err
			}
		}
		var n int64
		var missing []string
		err := cf.call(func(ctx context.Context, c *sepp.Client) (err error) {
			if verb == "requeue" {
				n, err = c.RequeueDeadJobs(ctx, sel)
			} else {
				n, err = c.PurgeDeadJobs(ctx, sel)
			}
			var nd *sepp.NotDeadError
			if errors.As(err, &nd) { // the others were done: report both
				missing, err = nd.JobIDs, nil
			}
			return err
		})
		if err != nil {
			return err
		}
		key := verb + "d"
		rows := []row{{key, fmt.Sprint(n)}}
		var m proto.Message = &seppv1.PurgeDeadJobsResponse{Purged: n, MissingJobIds: missing}
		if verb == "requeue" {
			m = &seppv1.RequeueDeadJobsResponse{Requeued: n, MissingJobIds: missing}
		}
		if err := cf.output(env.stdout, m, rows); err != nil {
			return err
		}
		return reportNotDead(env, missing)
	})
	return cmd
}

// reportNotDead names, on stderr, the given ids that are no dead job, and
// makes the exit status 3, after the count of those that were done is
// printed. Under --json the printed answer carries them (missingJobIds).
func reportNotDead(env *cliEnv, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	if !env.cf.json {
		for _, id := range ids {
			fmt.Fprintf(env.stderr, "sepp: no dead job with id %s\n", id)
		}
		fmt.Fprintln(env.stderr, "(sepp dlq list shows the dead jobs; sepp job get ID, what became of one)")
	}
	return exitCode(exitNotFound)
}

// nonNil is list, or an empty list for nil, so that JSON prints [].
func nonNil(list []string) []string {
	if list == nil {
		return []string{}
	}
	return list
}
