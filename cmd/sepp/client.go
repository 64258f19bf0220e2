package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/sepp-dev/sepp"
	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
)

const defaultAddr = "http://127.0.0.1:50051"

// clientFlags are the flags every client command takes, persistent on the
// root so they go before or after the command.
type clientFlags struct {
	addr    string
	json    bool
	timeout time.Duration
	conn    connFlags
}

func (f *clientFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.addr, "addr", envOr("SEPP_ADDR", defaultAddr), "server address (env SEPP_ADDR)")
	fs.BoolVar(&f.json, "json", false, "print the API's JSON instead of a table (errors too, on stderr)")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "give up after this long (enqueue-batch: per batch)")
	f.conn.register(fs) // --token, --ca-file, --cert-file, --key-file (clienttls.go)
}

// check refuses a --timeout that would give up before a call begins.
func (f *clientFlags) check() error {
	if f.timeout <= 0 {
		return usagef("--timeout %v: want more than 0, like 10s", f.timeout)
	}
	return nil
}

// connect makes a client for the flags' server.
func (f *clientFlags) connect(ctx context.Context) (*sepp.Client, error) {
	// The server checks key lengths against its own limit, which may be
	// above the client's default.
	cfg := sepp.Config{DisableBatching: true, MaxIdempotencyKeyBytes: -1, FailFast: true}
	if err := f.conn.apply(&cfg, f.addr); err != nil {
		return nil, err
	}
	c, err := sepp.NewClient(ctx, f.addr, cfg)
	if err != nil {
		return nil, f.conn.explainConnect(f.addr, err) // clienttls.go
	}
	return c, nil
}

// call connects, runs fn within --timeout, and closes the connection.
func (f *clientFlags) call(fn func(ctx context.Context, c *sepp.Client) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(ctx, c)
}

// listing is an admin list call for people and scripts: the API's JSON of
// the answer with --json, else a table, header over one line per item, or
// the line none when there are no items.
type listing[T any] struct {
	fetch  func(c *sepp.Client, ctx context.Context) ([]T, error) // a method expression: (*sepp.Client).ListOutboxes
	proto  func([]T) proto.Message
	none   string
	header []string
	cells  func(T) []string
}

func (l listing[T]) print(env *cliEnv) error {
	cf := &env.cf
	var items []T
	err := cf.call(func(ctx context.Context, c *sepp.Client) (err error) {
		items, err = l.fetch(c, ctx)
		return err
	})
	if err != nil {
		return err
	}
	if cf.json {
		return cf.output(env.stdout, l.proto(items), nil)
	}
	if len(items) == 0 {
		_, err := fmt.Fprintln(env.stdout, l.none)
		return err
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(l.header, "\t"))
	for _, it := range items {
		fmt.Fprintln(tw, strings.Join(l.cells(it), "\t"))
	}
	return tw.Flush()
}

// orDash is s, or "-" for nothing.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// row is one line of a two-column table.
type row struct{ k, v string }

// protoJSON is the API's JSON of m: protojson with camelCase names, and
// every field, so that an empty list prints as [].
func protoJSON(m proto.Message) ([]byte, error) {
	b, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		return nil, err
	}
	// protojson varies its spacing on purpose; print it the same each time.
	var compact, out bytes.Buffer
	if err := json.Compact(&compact, b); err != nil {
		return nil, err
	}
	if err := json.Indent(&out, compact.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// output prints m as the API's JSON (--json) or rows as a table for people.
func (f *clientFlags) output(w io.Writer, m proto.Message, rows []row) error {
	if f.json {
		b, err := protoJSON(m)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	return printRows(w, rows)
}

// outputJSON is output for a result that is the CLI's own (a summary, a dry
// run), not one API response.
func (f *clientFlags) outputJSON(w io.Writer, v any, rows []row) error {
	if f.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	return printRows(w, rows)
}

// say prints v as JSON (--json) or msg as a line.
func (f *clientFlags) say(w io.Writer, v any, msg string) error {
	if f.json {
		return f.outputJSON(w, v, nil)
	}
	_, err := fmt.Fprintln(w, msg)
	return err
}

func printRows(w io.Writer, rows []row) error {
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

// parseRunAt reads --run-at (and a batch line's runAt): an RFC 3339 time or
// a delay from now.
func parseRunAt(s string) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return time.Now().Add(d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("run-at %q: want an RFC 3339 time (2026-12-01T09:00:00Z) or a delay (10m)", s)
	}
	return t, nil
}

func enqueueCmd(env *cliEnv) *cobra.Command {
	var req sepp.EnqueueRequest
	var payload, payloadFile, runAt string
	var priority, maxAttempts int
	var headers headerFlag
	cmd := &cobra.Command{
		Use:   "enqueue --queue Q --type T [--key K] [--payload DATA | --payload-file F]",
		Short: "enqueue one job",
		Args:  cobra.NoArgs,
	}
	fs := cmd.Flags()
	fs.StringVar(&req.Queue, "queue", "", "queue name (required)")
	fs.StringVar(&req.JobType, "type", "", "job type (required)")
	// A Func, not a string flag: --key "" (an unset variable in a script)
	// must reach the server as an empty key and fail, not enqueue unkeyed.
	fs.Func("key", "idempotency key: a repeat within the dedup window returns the original job", func(k string) error {
		req.IdempotencyKey = &k
		return nil
	})
	fs.StringVar(&payload, "payload", "", "payload, as given")
	fs.StringVar(&payloadFile, "payload-file", "", "read the payload from this `file` (- for stdin)")
	fs.IntVar(&priority, "priority", 0, "higher runs first")
	fs.StringVar(&runAt, "run-at", "", "run not before this RFC 3339 time, or after a delay such as 10m")
	fs.IntVar(&maxAttempts, "max-attempts", 0, "attempts before the job is dead-lettered (0: the queue's)")
	fs.Var(&headers, "header", "header `k=v` (repeatable)")
	cmd.MarkFlagRequired("queue")
	cmd.MarkFlagRequired("type")
	cmd.MarkFlagsMutuallyExclusive("payload", "payload-file")
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) (err error) {
		cf := &env.cf
		switch {
		case payloadFile == "-":
			req.Payload, err = io.ReadAll(env.stdin)
		case payloadFile != "":
			req.Payload, err = os.ReadFile(payloadFile)
		default:
			req.Payload = []byte(payload)
		}
		if err != nil {
			return err
		}
		if runAt != "" {
			if req.RunAt, err = parseRunAt(runAt); err != nil {
				return usagef("--%v", err)
			}
		}
		if err := checkRange("--priority", int64(priority), math.MinInt32, math.MaxInt32, "higher runs first"); err != nil {
			return err
		}
		if err := checkRange("--max-attempts", int64(maxAttempts), 0, math.MaxInt32, "0: the queue's max_attempts"); err != nil {
			return err
		}
		req.Priority = int32(priority)
		req.MaxAttempts = int32(maxAttempts)
		req.Headers = headers.m

		var ack *sepp.Ack
		err = cf.call(func(ctx context.Context, c *sepp.Client) (err error) {
			ack, err = c.Enqueue(ctx, req)
			return err
		})
		if err != nil {
			return err
		}
		return cf.output(env.stdout, ackProto(ack), ackRows(ack))
	})
	return cmd
}

func ackRows(ack *sepp.Ack) []row {
	rows := []row{{"job_id", ack.JobID}, {"deduplicated", fmt.Sprint(ack.Deduplicated)}}
	if ack.Deduplicated {
		rows = append(rows, row{"payload_mismatch", fmt.Sprint(ack.PayloadMismatch)},
			row{"original_enqueued_at", fmtTime(ack.OriginalEnqueuedAt)})
		if ack.Replaced {
			rows = append(rows, row{"replaced", "true"})
		}
	}
	if ack.FollowsJobID != "" { // when_running = "run_again": a follow-up of the running job
		rows = append(rows, row{"follows_job_id", ack.FollowsJobID})
	}
	if !ack.DelayedUntil.IsZero() { // a rule with action = "delay"
		rows = append(rows, row{"delayed_until", fmtTime(ack.DelayedUntil)})
	}
	if !ack.DedupExpiresAt.IsZero() { // keyed, or keyed by content
		rows = append(rows, row{"dedup_expires_at", fmtTime(ack.DedupExpiresAt)})
	}
	return rows
}

type headerFlag struct{ m map[string]string }

func (h *headerFlag) String() string { return "" }
func (h *headerFlag) Type() string   { return "k=v" }

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

// showBytes shows a payload or result for people: indented JSON if it is
// JSON, else the text if it is UTF-8, else hex.
func showBytes(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	var v any
	if json.Unmarshal(b, &v) == nil {
		var out bytes.Buffer
		if json.Indent(&out, b, "", "  ") == nil {
			return out.String()
		}
	}
	if utf8.Valid(b) {
		return string(b)
	}
	return hex.EncodeToString(b)
}

func bytesKind(b []byte) string {
	var v any
	switch {
	case len(b) == 0:
		return "0 bytes"
	case json.Unmarshal(b, &v) == nil:
		return fmt.Sprintf("%d bytes, JSON", len(b))
	case utf8.Valid(b):
		return fmt.Sprintf("%d bytes, text", len(b))
	}
	return fmt.Sprintf("%d bytes, hex", len(b))
}

func jobRows(j *sepp.Job) []row {
	key := j.IdempotencyKey
	if key == "" {
		key = "-"
	}
	rows := []row{{"job_id", j.ID}, {"queue", j.Queue}, {"job_type", j.JobType}, {"state", string(j.State)}}
	// What holds back a job whose run-at has come; only on held jobs.
	if j.HeldBy != "" {
		rows = append(rows, row{"held_by", string(j.HeldBy)})
	}
	if !j.HeldUntil.IsZero() {
		rows = append(rows, row{"held_until", fmtTime(j.HeldUntil)})
	}
	if j.FollowsJobID != "" {
		rows = append(rows, row{"follows_job_id", j.FollowsJobID})
	}
	rows = append(rows, row{"idempotency_key", key})
	if j.ConcurrencyKey != "" {
		rows = append(rows, row{"concurrency_key", j.ConcurrencyKey})
	}
	if j.RateKey != "" {
		rows = append(rows, row{"rate_key", j.RateKey})
	}
	rows = append(rows, row{"priority", fmt.Sprint(j.Priority)},
		row{"attempts", fmt.Sprintf("%d of %d", j.Attempts, j.MaxAttempts)},
		row{"created_at", fmtTime(j.CreatedAt)}, row{"run_at", fmtTime(j.RunAt)}, row{"finalized_at", fmtTime(j.FinalizedAt)})
	if len(j.Headers) == 0 {
		rows = append(rows, row{"headers", "-"})
	} else {
		names := make([]string, 0, len(j.Headers))
		for k := range j.Headers {
			names = append(names, k)
		}
		sort.Strings(names)
		for i, k := range names {
			label := ""
			if i == 0 {
				label = "headers"
			}
			rows = append(rows, row{label, k + "=" + j.Headers[k]})
		}
	}
	lastErr := j.LastError
	if lastErr == "" {
		lastErr = "-"
	}
	rows = append(rows, row{"last_error", strings.ReplaceAll(lastErr, "\n", "\n\t")},
		row{"payload", bytesKind(j.Payload)}, row{"result", bytesKind(j.Result)})
	return rows
}

// printJob prints a job's table, then its payload and result in full.
func printJob(w io.Writer, j *sepp.Job) error {
	if err := printRows(w, jobRows(j)); err != nil {
		return err
	}
	for _, b := range []struct {
		name string
		data []byte
	}{{"payload", j.Payload}, {"result", j.Result}} {
		if len(b.data) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s:\n", b.name)
		for _, line := range strings.Split(strings.TrimRight(showBytes(b.data), "\n"), "\n") {
			fmt.Fprintf(w, "  %s\n", line)
		}
	}
	return nil
}

func jobCmd(env *cliEnv, verb, short string) *cobra.Command {
	cmd := &cobra.Command{Use: verb + " JOB_ID", Short: short, Args: cobra.ExactArgs(1)}
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		cf := &env.cf
		var j *sepp.Job
		err := cf.call(func(ctx context.Context, c *sepp.Client) (err error) {
			if verb == "get" {
				j, err = c.GetJob(ctx, args[0])
			} else {
				j, err = c.CancelJob(ctx, args[0])
			}
			return err
		})
		if err != nil {
			return err
		}
		if cf.json {
			var m proto.Message = &seppv1.GetJobResponse{Job: jobProto(j)}
			if verb == "cancel" {
				m = &seppv1.CancelJobResponse{Job: jobProto(j)}
			}
			return cf.output(env.stdout, m, nil)
		}
		return printJob(env.stdout, j)
	})
	return cmd
}

func keyLookupCmd(env *cliEnv) *cobra.Command {
	var queue string
	cmd := &cobra.Command{Use: "lookup --queue Q KEY", Short: "was KEY already enqueued on Q? (exit 3 if not)", Args: cobra.ExactArgs(1)}
	cmd.Flags().StringVar(&queue, "queue", "", "queue name (required)")
	cmd.MarkFlagRequired("queue")
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		cf := &env.cf
		key := args[0]
		var l *sepp.KeyLookup
		err := cf.call(func(ctx context.Context, c *sepp.Client) (err error) {
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
		if err := cf.output(env.stdout, lookupProto(l), rows); err != nil {
			return err
		}
		if !l.Found {
			// The answer is printed; the status says it too, for scripts.
			return exitCode(exitNotFound)
		}
		return nil
	})
	return cmd
}

func keyReleaseCmd(env *cliEnv) *cobra.Command {
	var queue string
	var cf confirmFlags
	cmd := &cobra.Command{Use: "release --queue Q KEY", Short: "forget KEY now (the job stays)", Args: cobra.ExactArgs(1)}
	cmd.Flags().StringVar(&queue, "queue", "", "queue name (required)")
	cmd.MarkFlagRequired("queue")
	cf.register(cmd.Flags())
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		key := args[0]
		if cf.dryRun {
			var l *sepp.KeyLookup
			if err := env.cf.call(func(ctx context.Context, c *sepp.Client) (err error) {
				l, err = c.LookupIdempotencyKey(ctx, queue, key)
				return err
			}); err != nil {
				return err
			}
			out := map[string]any{"dryRun": true, "queue": queue, "idempotencyKey": key, "wouldRelease": l.Found, "jobId": l.JobID}
			msg := fmt.Sprintf("dry run: key %q on queue %s is not recorded; nothing to release", key, queue)
			if l.Found {
				msg = fmt.Sprintf("dry run: would release key %q on queue %s (job %s stays); nothing done", key, queue, l.JobID)
			}
			return env.cf.say(env.stdout, out, msg)
		}
		if err := confirm(env, cf, "release key %q on queue %s?", key, queue); err != nil {
			return err
		}
		var released bool
		var jobID string
		err := env.cf.call(func(ctx context.Context, c *sepp.Client) (err error) {
			released, jobID, err = c.ReleaseIdempotencyKey(ctx, queue, key)
			return err
		})
		if err != nil {
			return err
		}
		rows := []row{{"released", fmt.Sprint(released)}}
		if released {
			rows = append(rows, row{"job_id", jobID})
		}
		return env.cf.output(env.stdout, &seppv1.ReleaseIdempotencyKeyResponse{Released: released, JobId: jobID, IdempotencyKey: key}, rows)
	})
	return cmd
}
