package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sepp-dev/sepp"
)

const defaultAddr = "http://127.0.0.1:50051"

// clientFlags are the flags every client command takes.
type clientFlags struct {
	addr    string
	json    bool
	timeout time.Duration
	conn    connFlags
}

func (f *clientFlags) register(fs *flag.FlagSet) {
	addr := os.Getenv("SEPP_ADDR")
	if addr == "" {
		addr = defaultAddr
	}
	fs.StringVar(&f.addr, "addr", addr, "server address (env SEPP_ADDR)")
	fs.BoolVar(&f.json, "json", false, "print JSON instead of a table")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "give up after this long")
	f.conn.register(fs) // --token, --ca-file, --cert-file, --key-file (clienttls.go)
}

// call connects, runs fn within --timeout, and closes the connection.
func (f *clientFlags) call(fn func(ctx context.Context, c *sepp.Client) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	// The server checks key lengths against its own limit, which may be
	// above the client's default.
	cfg := sepp.Config{DisableBatching: true, MaxIdempotencyKeyBytes: -1, FailFast: true}
	if err := f.conn.apply(&cfg, f.addr); err != nil {
		return err
	}
	c, err := sepp.NewClient(ctx, f.addr, cfg)
	if err != nil {
		return fmt.Errorf("%w\n(is the server running? start it with: sepp serve)", err)
	}
	defer c.Close()
	return fn(ctx, c)
}

// row is one line of a two-column table.
type row struct{ k, v string }

// output prints v as JSON (--json) or rows as a table for people.
func (f *clientFlags) output(w io.Writer, v any, rows []row) error {
	if f.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\n", r.k, r.v)
	}
	return tw.Flush()
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format(time.RFC3339Nano)
}

func runEnqueue(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sepp enqueue", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs)
	var req sepp.EnqueueRequest
	fs.StringVar(&req.Queue, "queue", "", "queue name (required)")
	fs.StringVar(&req.JobType, "type", "", "job type (required)")
	// A Func, not a string flag: --key "" (an unset variable in a script)
	// must reach the server as an empty key and fail, not enqueue unkeyed.
	fs.Func("key", "idempotency key: a repeat within the dedup window returns the original job", func(k string) error {
		req.IdempotencyKey = &k
		return nil
	})
	payload := fs.String("payload", "", "payload, as given")
	payloadFile := fs.String("payload-file", "", "read the payload from this `file` (- for stdin)")
	priority := fs.Int("priority", 0, "higher runs first")
	runAt := fs.String("run-at", "", "run not before this RFC 3339 time, or after a delay such as 10m")
	maxAttempts := fs.Int("max-attempts", 0, "attempts before the job is dead-lettered (0: the queue's)")
	var headers headerFlag
	fs.Var(&headers, "header", "header `k=v` (repeatable)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 || req.Queue == "" || req.JobType == "" {
		fmt.Fprintln(stderr, "usage: sepp enqueue --queue Q --type T [--key K] [--payload DATA | --payload-file F]")
		return exitCode(2)
	}
	switch {
	case *payload != "" && *payloadFile != "":
		return fmt.Errorf("give --payload or --payload-file, not both")
	case *payloadFile == "-":
		req.Payload, err = io.ReadAll(os.Stdin)
	case *payloadFile != "":
		req.Payload, err = os.ReadFile(*payloadFile)
	default:
		req.Payload = []byte(*payload)
	}
	if err != nil {
		return err
	}
	if *runAt != "" {
		if d, derr := time.ParseDuration(*runAt); derr == nil {
			req.RunAt = time.Now().Add(d)
		} else if req.RunAt, err = time.Parse(time.RFC3339Nano, *runAt); err != nil {
			return fmt.Errorf("--run-at %q: want an RFC 3339 time (2026-12-01T09:00:00Z) or a delay (10m)", *runAt)
		}
	}
	req.Priority = int32(*priority)
	req.MaxAttempts = int32(*maxAttempts)
	req.Headers = headers.m

	var ack *sepp.Ack
	err = cf.call(func(ctx context.Context, c *sepp.Client) (err error) {
		ack, err = c.Enqueue(ctx, req)
		return err
	})
	if err != nil {
		return err
	}
	rows := []row{{"job_id", ack.JobID}, {"deduplicated", fmt.Sprint(ack.Deduplicated)}}
	if ack.Deduplicated {
		rows = append(rows, row{"payload_mismatch", fmt.Sprint(ack.PayloadMismatch)},
			row{"original_enqueued_at", fmtTime(ack.OriginalEnqueuedAt)})
		if ack.Replaced {
			rows = append(rows, row{"replaced", "true"})
		}
	}
	if !ack.DedupExpiresAt.IsZero() { // keyed, or keyed by content
		rows = append(rows, row{"dedup_expires_at", fmtTime(ack.DedupExpiresAt)})
	}
	return cf.output(stdout, ack, rows)
}

type headerFlag struct{ m map[string]string }

func (h *headerFlag) String() string { return "" }

func (h *headerFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("want k=v, got %q", v)
	}
	if h.m == nil {
		h.m = map[string]string{}
	}
	h.m[k] = val
	return nil
}

func jobRows(j *sepp.Job) []row {
	key := j.IdempotencyKey
	if key == "" {
		key = "-"
	}
	return []row{
		{"job_id", j.ID}, {"queue", j.Queue}, {"job_type", j.JobType}, {"state", string(j.State)},
		{"idempotency_key", key}, {"priority", fmt.Sprint(j.Priority)},
		{"attempts", fmt.Sprintf("%d of %d", j.Attempts, j.MaxAttempts)},
		{"created_at", fmtTime(j.CreatedAt)}, {"run_at", fmtTime(j.RunAt)}, {"finalized_at", fmtTime(j.FinalizedAt)},
		{"payload", fmt.Sprintf("%d bytes", len(j.Payload))}, {"last_error", j.LastError},
	}
}

func runJobGet(args []string, stdout, stderr io.Writer) error {
	return jobCommand("sepp job get", args, stdout, stderr, (*sepp.Client).GetJob)
}

func runJobCancel(args []string, stdout, stderr io.Writer) error {
	return jobCommand("sepp job cancel", args, stdout, stderr, (*sepp.Client).CancelJob)
}

func jobCommand(name string, args []string, stdout, stderr io.Writer,
	call func(*sepp.Client, context.Context, string) (*sepp.Job, error)) error {
	cf, id, err := oneArg(name, "JOB_ID", args, stderr)
	if err != nil {
		return err
	}
	var j *sepp.Job
	err = cf.call(func(ctx context.Context, c *sepp.Client) (err error) {
		j, err = call(c, ctx, id)
		return err
	})
	if err != nil {
		return err
	}
	return cf.output(stdout, j, jobRows(j))
}

// oneArg parses the flags and the one positional argument of a client
// command.
func oneArg(name, argName string, args []string, stderr io.Writer) (cf clientFlags, arg string, err error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf.register(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return cf, "", err
	}
	if len(pos) != 1 {
		fmt.Fprintf(stderr, "usage: %s %s\n", name, argName)
		return cf, "", exitCode(2)
	}
	return cf, pos[0], nil
}

// keyArgs parses the flags and the KEY of "sepp key ...".
func keyArgs(name string, args []string, stderr io.Writer) (cf clientFlags, queue, key string, err error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf.register(fs)
	fs.StringVar(&queue, "queue", "", "queue name (required)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return cf, "", "", err
	}
	if len(pos) != 1 || queue == "" {
		fmt.Fprintf(stderr, "usage: %s --queue Q KEY\n", name)
		return cf, "", "", exitCode(2)
	}
	return cf, queue, pos[0], nil
}

func runKeyLookup(args []string, stdout, stderr io.Writer) error {
	cf, queue, key, err := keyArgs("sepp key lookup", args, stderr)
	if err != nil {
		return err
	}
	var l *sepp.KeyLookup
	err = cf.call(func(ctx context.Context, c *sepp.Client) (err error) {
		l, err = c.LookupIdempotencyKey(ctx, queue, key)
		return err
	})
	if err != nil {
		return err
	}
	rows := []row{{"found", fmt.Sprint(l.Found)}}
	if l.Found {
		rows = append(rows, row{"job_id", l.JobID}, row{"state", string(l.State)},
			row{"first_enqueued_at", fmtTime(l.FirstEnqueuedAt)}, row{"expires_at", fmtTime(l.ExpiresAt)},
			row{"hits", fmt.Sprint(l.Hits)})
		if len(l.Result) > 0 {
			rows = append(rows, row{"result", fmt.Sprintf("%d bytes", len(l.Result))})
		}
		if l.Policy != "" {
			rows = append(rows, row{"policy", l.Policy})
		}
	}
	return cf.output(stdout, l, rows)
}

func runKeyRelease(args []string, stdout, stderr io.Writer) error {
	cf, queue, key, err := keyArgs("sepp key release", args, stderr)
	if err != nil {
		return err
	}
	var released bool
	var jobID string
	err = cf.call(func(ctx context.Context, c *sepp.Client) (err error) {
		released, jobID, err = c.ReleaseIdempotencyKey(ctx, queue, key)
		return err
	})
	if err != nil {
		return err
	}
	out := struct {
		Released bool   `json:"released"`
		JobID    string `json:"jobId,omitempty"`
	}{released, jobID}
	rows := []row{{"released", fmt.Sprint(released)}}
	if released {
		rows = append(rows, row{"job_id", jobID})
	}
	return cf.output(stdout, out, rows)
}
