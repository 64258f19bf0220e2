// Command worker runs the "send_confirmation" jobs of the exactly-once
// example. For each order it writes one ledger row through the inbox, in the
// shop's PostgreSQL database, and sends one confirmation mail to the mail
// sink under an effect key, however many times the job is delivered.
//
//	DATABASE_URL=postgres://... SEPP_ADDR=http://127.0.0.1:50051 MAIL_URL=http://127.0.0.1:8025/mail worker
//
// The effect key replays the receipt once the mail's record is stored. A
// worker killed after the sink took the mail and before the record was
// stored leaves the key to the next holder once its lease ends, so the
// mail is sent under a message id named after the effect key, and a
// holder first asks the sink whether that message went out already.
// MAIL_LOOKUP=off skips that question, to show the gap it closes.
package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/effect"
	"github.com/sepp-dev/sepp/inbox"
	"github.com/sepp-dev/sepp/worker"
)

// confirmation is the job's payload, as the app writes it.
type confirmation struct {
	Order string `json:"order"`
	Email string `json:"email"`
	Cents int64  `json:"cents"`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	db, err := sql.Open("pgx", os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ib := inbox.New(db, inbox.Postgres)
	if err := ib.CreateTable(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS ledger (
  order_id TEXT NOT NULL,
  cents    BIGINT NOT NULL,
  booked_at TIMESTAMPTZ NOT NULL DEFAULT now())`); err != nil {
		log.Fatal(err)
	}

	// Completions and effect results are resent after a transport error
	// (the server restarting): more resends ride out a longer restart.
	client, err := sepp.NewClient(ctx, os.Getenv("SEPP_ADDR"), sepp.Config{EnqueueRetries: 10})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	mailURL := os.Getenv("MAIL_URL")
	lookup := os.Getenv("MAIL_LOOKUP") != "off"

	w := worker.New(client, worker.Config{Queues: []string{"mails"}, ShutdownTimeout: 5 * time.Second})
	w.Handle("send_confirmation", func(ctx context.Context, job *worker.Job) ([]byte, error) {
		var c confirmation
		if err := json.Unmarshal(job.Payload, &c); err != nil || c.Order == "" {
			return nil, worker.Permanent(fmt.Errorf("bad payload %q: %v", job.Payload, err))
		}

		// 1. The ledger row, in the shop's database: the inbox records
		// the message id in the same transaction, so a redelivery
		// commits nothing new.
		booked, err := ib.Process(ctx, "ledger", "order-"+c.Order+".ledger", func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO ledger (order_id, cents) VALUES ($1, $2)`, c.Order, c.Cents)
			return err
		})
		if err != nil {
			return nil, err
		}

		// 2. The mail, outside any transaction: an effect key names it
		// (this order's confirmation), so a redelivery replays the
		// receipt instead of sending again.
		key := "order-" + c.Order + ".confirmation"
		res, err := effect.Do(ctx, client, "mail.confirmation", key,
			effect.Options{TTL: 7 * 24 * time.Hour, Lease: 10 * time.Second},
			func(ctx context.Context) ([]byte, error) {
				// Only one holder runs this at a time. A holder before
				// this one may have sent the mail and died before its
				// receipt was stored: ask the sink first.
				msgID := "<" + key + "@shop.example>"
				if lookup {
					receipt, err := findMail(ctx, mailURL, msgID)
					if err != nil {
						return nil, err
					}
					if receipt != nil {
						slog.Info("mail already at the sink, sent by a holder that died before storing its receipt; not sending again",
							"key", key, "receipt", string(receipt))
						return receipt, nil
					}
				}
				return sendMail(ctx, mailURL, msgID, c, job)
			})
		if err != nil {
			return nil, err
		}
		slog.Info("confirmation handled", "job_id", job.ID, "attempt", job.Attempt, "order", c.Order,
			"booked_now", booked, "mail_replayed", res.Replayed, "receipt", string(res.Value))
		return res.Value, nil
	})
	slog.Info("worker running", "pid", os.Getpid())
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

// findMail asks the sink for the receipt of the mail sent with msgID: nil
// when there is none.
func findMail(ctx context.Context, mailURL, msgID string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, mailURL+"?message_id="+url.QueryEscape(msgID), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	receipt, err := io.ReadAll(resp.Body)
	switch {
	case err != nil:
		return nil, err
	case resp.StatusCode == http.StatusNotFound:
		return nil, nil
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("mail sink: %s: %s", resp.Status, receipt)
	}
	return bytes.TrimSpace(receipt), nil
}

// sendMail posts the mail to the sink, which delivers every mail it is
// given (it does not deduplicate), and returns its receipt.
func sendMail(ctx context.Context, mailURL, msgID string, c confirmation, job *worker.Job) ([]byte, error) {
	body, _ := json.Marshal(map[string]any{
		"message_id": msgID,
		"to":         c.Email,
		"subject":    "Your order " + c.Order,
		"order":      c.Order,
		// For reading the sink's file, not for deduplication: which
		// process and delivery sent it.
		"pid":     os.Getpid(),
		"job":     job.ID,
		"attempt": job.Attempt,
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, mailURL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	receipt, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("mail sink: %s: %s", resp.Status, receipt)
	}
	return bytes.TrimSpace(receipt), nil
}
