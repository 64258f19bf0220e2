package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sepp-dev/sepp"
	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
)

// schedulesCmd is sepp schedules: the server's [[schedules]], each with its
// last and next tick.
func schedulesCmd(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{Use: "schedules", Short: "the [[schedules]] the server fires: cron, last and next tick, last error", Args: cobra.NoArgs}
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		cf := &env.cf
		var ss []sepp.ScheduleInfo
		err := cf.call(func(ctx context.Context, c *sepp.Client) (err error) {
			ss, err = c.ListSchedules(ctx)
			return err
		})
		if err != nil {
			return err
		}
		if cf.json {
			return cf.output(env.stdout, schedulesProto(ss), nil)
		}
		if len(ss) == 0 {
			_, err := fmt.Fprintln(env.stdout, "no [[schedules]] in the server's config")
			return err
		}
		tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SCHEDULE\tCRON\tZONE\tQUEUE\tCATCH UP\tLAST TICK\tNEXT TICK\tLAST ERROR")
		for _, s := range ss {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Cron, s.Timezone, s.Queue, s.CatchUp,
				tickText(s.LastTick), tickText(s.NextTick), orDash(s.LastError))
		}
		return tw.Flush()
	})
	return cmd
}

// tickText writes a tick in UTC, as the tick's job key has it; "-" for none.
func tickText(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func schedulesProto(ss []sepp.ScheduleInfo) *seppv1.ListSchedulesResponse {
	res := &seppv1.ListSchedulesResponse{Schedules: []*seppv1.ScheduleInfo{}}
	for _, s := range ss {
		p := &seppv1.ScheduleInfo{Name: s.Name, Cron: s.Cron, Timezone: s.Timezone, Queue: s.Queue, JobType: s.JobType,
			CatchUp: s.CatchUp, LastJobId: s.LastJobID, LastError: s.LastError}
		if !s.LastTick.IsZero() {
			p.LastTick = timestamppb.New(s.LastTick)
		}
		if !s.NextTick.IsZero() {
			p.NextTick = timestamppb.New(s.NextTick)
		}
		res.Schedules = append(res.Schedules, p)
	}
	return res
}
