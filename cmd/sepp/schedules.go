package main

import (
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sepp-dev/sepp"
	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
)

// schedulesCmd is sepp schedules: the server's [[schedules]], each with its
// last and next tick.
func schedulesCmd(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{Use: "schedules", Short: "the [[schedules]] the server fires: cron, last and next tick, last error", Args: cobra.NoArgs}
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		return listing[sepp.ScheduleInfo]{
			fetch:  (*sepp.Client).ListSchedules,
			proto:  func(ss []sepp.ScheduleInfo) proto.Message { return schedulesProto(ss) },
			none:   "no [[schedules]] in the server's config",
			header: []string{"SCHEDULE", "CRON", "ZONE", "QUEUE", "CATCH UP", "LAST TICK", "NEXT TICK", "LAST ERROR"},
			cells: func(s sepp.ScheduleInfo) []string {
				return []string{s.Name, s.Cron, s.Timezone, s.Queue, s.CatchUp, tickText(s.LastTick), tickText(s.NextTick), orDash(s.LastError)}
			},
		}.print(env)
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
