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

	"github.com/sepp-dev/sepp/internal/outboxsql"
)

const outboxSchemaLong = `Print the DDL of an outbox table for the app's own database: the table the
app writes a row into, inside its own transaction, for each job; the dead
table (TABLE_dead) where rows Sepp refused for good are moved with their
reason; and on PostgreSQL the trigger that wakes the relay (NOTIFY). Every
statement can be run again. Name the database in the config's [[outboxes]]
and sepp serve relays each committed row into a job, once.

  sepp outbox schema --dialect postgres | psql "$APP_DATABASE_URL"
  sepp outbox schema --dialect mysql | mariadb app
  sepp outbox schema --dialect sqlite | sqlite3 app.db`

func outboxSchemaCmd(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{Use: "schema --dialect postgres|mysql|sqlite [--table T]",
		Short: "print the DDL of an outbox table", Long: outboxSchemaLong, Args: cobra.NoArgs}
	dialect := cmd.Flags().String("dialect", "", `the app database's dialect: "postgres", "mysql" (MySQL 8, MariaDB 10.6+) or "sqlite" (required)`)
	table := cmd.Flags().String("table", outboxsql.DefaultTable, "the table's name (optionally schema.table); the dead table is its name with _dead")
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		if *dialect == "" {
			return usagef("outbox schema: --dialect is required: postgres, mysql or sqlite")
		}
		d, err := outboxsql.ParseDialect(*dialect)
		if err != nil {
			return usagef("outbox schema: --%v", err)
		}
		ddl, err := outboxsql.Schema(d, *table)
		if err != nil {
			return usagef("outbox schema: --%v", err)
		}
		_, err = fmt.Fprintf(env.stdout, "%s;\n", ddl)
		return err
	})
	return cmd
}

func outboxListCmd(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{Use: "list", Short: "the outboxes the server relays: lag, rows relayed and dead, last error", Args: cobra.NoArgs}
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		cf := &env.cf
		var obs []sepp.OutboxInfo
		err := cf.call(func(ctx context.Context, c *sepp.Client) (err error) {
			obs, err = c.ListOutboxes(ctx)
			return err
		})
		if err != nil {
			return err
		}
		if cf.json {
			return cf.output(env.stdout, outboxesProto(obs), nil)
		}
		if len(obs) == 0 {
			_, err := fmt.Fprintln(env.stdout, "no [[outboxes]] in the server's config")
			return err
		}
		tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "OUTBOX\tDIALECT\tTABLE\tLAG\tRELAYED\tDEAD\tLAST ERROR")
		for _, o := range obs {
			lag := o.Lag.Round(time.Millisecond).String()
			if o.CheckedAt.IsZero() {
				lag = "-"
			}
			last := o.LastError
			if last == "" {
				last = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\n", o.Name, o.Dialect, o.Table, lag, o.Relayed, o.Dead, last)
		}
		return tw.Flush()
	})
	return cmd
}

func outboxesProto(obs []sepp.OutboxInfo) *seppv1.ListOutboxesResponse {
	res := &seppv1.ListOutboxesResponse{Outboxes: []*seppv1.OutboxInfo{}}
	for _, o := range obs {
		p := &seppv1.OutboxInfo{Name: o.Name, Dialect: o.Dialect, Table: o.Table, LagMs: o.Lag.Milliseconds(),
			Relayed: o.Relayed, Dead: o.Dead, LastError: o.LastError}
		if !o.CheckedAt.IsZero() {
			p.CheckedAt = timestamppb.New(o.CheckedAt)
		}
		res.Outboxes = append(res.Outboxes, p)
	}
	return res
}
