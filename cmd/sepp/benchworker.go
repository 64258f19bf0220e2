package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/worker"
)

const benchWorkerLong = `A worker process with a no-op handler (sleeping --sleep) for every job type,
for load and crash tests. It runs until SIGINT or SIGTERM, then shuts down
gracefully.`

// runBenchWorker is a worker process with a no-op handler (optionally
// sleeping) for every job type: the worker side of load and crash tests. It
// runs until SIGINT or SIGTERM, then shuts down gracefully.
func runBenchWorker(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sepp bench worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", envOr("SEPP_ADDR", defaultAddr), "server address (env SEPP_ADDR)")
	queues := fs.String("queues", "", "comma-separated queues to work on (required)")
	c := fs.Int("c", 16, "worker goroutines")
	sleep := fs.Duration("sleep", 0, "how long each job's handler sleeps")
	record := fs.String("record", "", "append a line \"JOB_ID ATTEMPT LEASE_TOKEN\" to this `file` when a handler starts")
	var conn connFlags
	conn.register(fs) // --token, --ca-file, --cert-file, --key-file (clienttls.go)
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	if *queues == "" {
		return usagef("--queues is required: the comma-separated queues to work on, like --queues emails,reports")
	}
	if err := checkRange("-c", int64(*c), 1, math.MaxInt64, "worker goroutines"); err != nil {
		return err
	}
	if *sleep < 0 {
		return usagef("--sleep %v: want 0 or more", *sleep)
	}
	var rec *os.File
	if *record != "" {
		f, err := os.OpenFile(*record, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		rec = f
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// Waits for the server, logging each wait, so start order does not matter.
	cfg := sepp.Config{Logger: logger}
	if err := conn.apply(&cfg, *addr); err != nil {
		return err
	}
	client, err := sepp.NewClient(ctx, *addr, cfg)
	if err != nil {
		return err
	}
	defer client.Close()
	w := worker.New(client, worker.Config{Queues: strings.Split(*queues, ","), Concurrency: *c, Wait: time.Second, Logger: logger})
	var mu sync.Mutex
	w.HandleAll(func(ctx context.Context, j *worker.Job) ([]byte, error) {
		if rec != nil {
			mu.Lock()
			fmt.Fprintf(rec, "%s %d %s\n", j.ID, j.Attempt, j.LeaseToken)
			mu.Unlock()
		}
		if *sleep > 0 {
			t := time.NewTimer(*sleep)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return nil, nil
	})
	fmt.Fprintln(stdout, "worker: running")
	return w.Run(ctx)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
