package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
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
		return listing[sepp.OutboxInfo]{
			fetch:  (*sepp.Client).ListOutboxes,
			proto:  func(obs []sepp.OutboxInfo) proto.Message { return outboxesProto(obs) },
			none:   "no [[outboxes]] in the server's config",
			header: []string{"OUTBOX", "DIALECT", "TABLE", "LAG", "RELAYED", "DEAD", "LAST ERROR"},
			cells: func(o sepp.OutboxInfo) []string {
				lag := o.Lag.Round(time.Millisecond).String()
				if o.CheckedAt.IsZero() {
					lag = "-"
				}
				return []string{o.Name, o.Dialect, o.Table, lag, strconv.FormatInt(o.Relayed, 10), strconv.FormatInt(o.Dead, 10), orDash(o.LastError)}
			},
		}.print(env)
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
