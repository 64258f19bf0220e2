package outbox_test

import (
	"context"
	"database/sql"
	"log"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/outbox"
)

// The order and its confirmation mail are one fact: the job exists if and
// only if the transaction commits.
func ExampleEnqueue() {
	ctx := context.Background()
	db, err := sql.Open("pgx", "postgres://app@127.0.0.1:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	orderID, cents := "o-1042", 4200
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id, cents) VALUES ($1, $2)`, orderID, cents); err != nil {
		log.Fatal(err)
	}
	if _, err := outbox.Enqueue(ctx, tx, sepp.EnqueueRequest{
		Queue:          "emails",
		JobType:        "order_confirmation",
		Payload:        []byte(`{"order":"` + orderID + `"}`),
		IdempotencyKey: sepp.Key("confirm-" + orderID),
	}); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
}

// A Writer names the dialect, the table, or the server's limits.
func ExampleWriter() {
	ctx := context.Background()
	db, err := sql.Open("mysql", "app:secret@tcp(127.0.0.1:3306)/app")
	if err != nil {
		log.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback()
	w := outbox.Writer{Dialect: outbox.MySQL, MaxPayloadBytes: 4 << 20}
	id, err := w.Enqueue(ctx, tx, sepp.EnqueueRequest{Queue: "emails", JobType: "welcome", Payload: []byte(`{"user":7}`)})
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("row %s", id)
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
}
