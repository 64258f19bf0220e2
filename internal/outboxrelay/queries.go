package outboxrelay

import (
	"strconv"
	"strings"

	"github.com/sepp-dev/sepp/internal/outboxsql"
)

// queries are a relay's statements in its dialect.
type queries struct {
	dialect outboxsql.Dialect
	table   string
	// claim reads and locks the oldest rows ($1: how many).
	claim string
	// moveDead copies a row into the dead table ($1 reason, $2 message,
	// $3 id); the delete of relayed rows removes it from the table.
	moveDead string
	// lag is the age of the oldest row, in milliseconds (NULL: none).
	lag string
}

func newQueries(d outboxsql.Dialect, table string) queries {
	dead := outboxsql.DeadTable(table)
	q := queries{dialect: d, table: table}
	cols := outboxsql.Columns
	switch d {
	case outboxsql.Postgres:
		q.claim = "SELECT " + strings.Replace(cols, "headers", "headers::text", 1) + " FROM " + table +
			" ORDER BY created_at, id LIMIT $1 FOR UPDATE SKIP LOCKED"
		q.moveDead = "INSERT INTO " + dead + " (" + cols + ", reason, message) SELECT " + cols + ", $1, $2 FROM " + table +
			" WHERE id = $3 ON CONFLICT (id) DO NOTHING"
		q.lag = "SELECT EXTRACT(EPOCH FROM (clock_timestamp() - min(created_at))) * 1000 FROM " + table
	case outboxsql.MySQL:
		q.claim = "SELECT " + cols + " FROM " + table + " ORDER BY created_at, id LIMIT ? FOR UPDATE SKIP LOCKED"
		q.moveDead = "INSERT IGNORE INTO " + dead + " (" + cols + ", reason, message) SELECT " + cols + ", ?, ? FROM " + table + " WHERE id = ?"
		q.lag = "SELECT TIMESTAMPDIFF(MICROSECOND, MIN(created_at), UTC_TIMESTAMP(6)) / 1000 FROM " + table
	case outboxsql.SQLite:
		// One writer at a time: the transaction takes SQLite's write lock
		// at its start (_txlock=immediate), so no FOR UPDATE is needed.
		q.claim = "SELECT " + cols + " FROM " + table + " ORDER BY created_at, id LIMIT ?"
		q.moveDead = "INSERT INTO " + dead + " (" + cols + ", reason, message) SELECT " + cols + ", ?, ? FROM " + table +
			" WHERE id = ? ON CONFLICT (id) DO NOTHING"
		q.lag = "SELECT (julianday('now') - julianday(MIN(created_at))) * 86400000.0 FROM " + table
	}
	return q
}

// deleteRows deletes n rows by id.
func (q queries) deleteRows(n int) string {
	var b strings.Builder
	b.WriteString("DELETE FROM " + q.table + " WHERE id IN (")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		if q.dialect == outboxsql.Postgres {
			b.WriteString("$" + strconv.Itoa(i+1))
		} else {
			b.WriteByte('?')
		}
	}
	b.WriteByte(')')
	return b.String()
}
