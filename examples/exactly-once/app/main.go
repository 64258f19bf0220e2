// Command app is the shop of the exactly-once example: an HTTP API whose
// POST /orders takes an Idempotency-Key and, in one PostgreSQL transaction,
// inserts the order and an outbox row for the job that mails the order's
// confirmation. `sepp serve` relays the outbox row into the job.
//
//	DATABASE_URL=postgres://... SEPP_ADDR=http://127.0.0.1:50051 LISTEN=127.0.0.1:8080 app
//
// The Idempotency-Key middleware answers a client's retries with the first
// answer. A retry that comes after this process died between its commit and
// storing the answer runs the handler again, so the insert is idempotent on
// the key too: the orders table has the key in a unique column, and the
// outbox row is written only by the transaction that inserted the order.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"log"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/google/uuid"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/idempotency"
	"github.com/sepp-dev/sepp/outbox"
)

const schema = `CREATE TABLE IF NOT EXISTS orders (
  id              TEXT PRIMARY KEY,
  idempotency_key TEXT NOT NULL UNIQUE,
  email           TEXT NOT NULL,
  cents           BIGINT NOT NULL,
  created_at      TIMESTAMPTZ NOT NULL DEFAULT now()
)`

// orderRequest is the body of POST /orders.
type orderRequest struct {
	Email string `json:"email"`
	Cents int64  `json:"cents"`
}

// confirmation is the payload of the "send_confirmation" job.
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
	if _, err := db.ExecContext(ctx, schema); err != nil {
		log.Fatal(err)
	}
	client, err := sepp.NewClient(ctx, os.Getenv("SEPP_ADDR"), sepp.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	mux := http.NewServeMux()
	mux.Handle("POST /orders", idempotency.Middleware(client, idempotency.Options{
		Scope:    "api.orders",
		Required: true,
		// A claim whose holder died frees after this; the client's
		// retries get 409 until then.
		Lease: 3 * time.Second,
	})(createOrder(db)))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })

	srv := &http.Server{Addr: os.Getenv("LISTEN"), Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	slog.Info("app listening", "addr", srv.Addr, "pid", os.Getpid())
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}

// createOrder inserts the order and its confirmation job in one
// transaction, and answers 201 with the order's id.
func createOrder(db *sql.DB) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req orderRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Email == "" || req.Cents <= 0 {
			http.Error(w, `{"error":"want {\"email\": \"...\", \"cents\": 1299}"}`, http.StatusBadRequest)
			return
		}
		key := r.Header.Get("Idempotency-Key") // the middleware made sure there is one
		id, err := insertOrder(r.Context(), db, key, req)
		if err != nil {
			slog.Error("create order", "key", key, "err", err)
			// A 5xx releases the key: the client's retry runs this again.
			http.Error(w, `{"error":"try again"}`, http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/orders/"+id)
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]string{"order": id})
	}
}

// insertOrder commits the order and the outbox row together, or returns
// the order an earlier run of the same key committed.
func insertOrder(ctx context.Context, db *sql.DB, key string, req orderRequest) (string, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return "", err
	}
	defer tx.Rollback()
	id := uuid.NewString()
	res, err := tx.ExecContext(ctx, `INSERT INTO orders (id, idempotency_key, email, cents) VALUES ($1, $2, $3, $4)
		ON CONFLICT (idempotency_key) DO NOTHING`, id, key, req.Email, req.Cents)
	if err != nil {
		return "", err
	}
	if n, err := res.RowsAffected(); err != nil {
		return "", err
	} else if n == 0 {
		// An earlier run committed this key's order (and its outbox row)
		// but died before its answer was stored: answer with that order.
		if err := tx.QueryRowContext(ctx, `SELECT id FROM orders WHERE idempotency_key = $1`, key).Scan(&id); err != nil {
			return "", err
		}
		slog.Info("order committed by an earlier run of this key; answering with it", "key", key, "order", id)
		return id, nil
	}
	payload, _ := json.Marshal(confirmation{Order: id, Email: req.Email, Cents: req.Cents})
	// No IdempotencyKey: the relay enqueues the row with its own id as
	// the key, so a relay that dies before deleting the row makes no
	// second job.
	if _, err := outbox.Enqueue(ctx, tx, sepp.EnqueueRequest{
		Queue: "mails", JobType: "send_confirmation", Payload: payload,
	}); err != nil {
		return "", err
	}
	return id, tx.Commit()
}
