package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/spf13/cobra"

	"github.com/sepp-dev/sepp"
)

// batchLine is one line of an enqueue-batch file: the API's EnqueueRequest
// in its JSON names, except that payload is any JSON value (a string gives
// its text, anything else its JSON text) and payloadBase64 carries binary.
type batchLine struct {
	Queue          string            `json:"queue"`
	JobType        string            `json:"jobType"`
	IdempotencyKey *string           `json:"idempotencyKey"`
	Payload        json.RawMessage   `json:"payload"`
	PayloadBase64  *string           `json:"payloadBase64"`
	Headers        map[string]string `json:"headers"`
	Priority       int32             `json:"priority"`
	RunAt          string            `json:"runAt"`
	MaxAttempts    int32             `json:"maxAttempts"`
}

// parseBatchLine turns one line into a request; queue and jobType default
// to --queue and --type.
func parseBatchLine(b []byte, defQueue, defType string) (sepp.EnqueueRequest, error) {
	var l batchLine
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return sepp.EnqueueRequest{}, fmt.Errorf("not a JSON object of the enqueue-batch format: %v", err)
	}
	if dec.More() {
		return sepp.EnqueueRequest{}, errors.New("more than one JSON value on the line")
	}
	req := sepp.EnqueueRequest{Queue: l.Queue, JobType: l.JobType, IdempotencyKey: l.IdempotencyKey,
		Headers: l.Headers, Priority: l.Priority, MaxAttempts: l.MaxAttempts}
	if req.Queue == "" {
		req.Queue = defQueue
	}
	if req.JobType == "" {
		req.JobType = defType
	}
	if req.Queue == "" || req.JobType == "" {
		return req, errors.New(`needs "queue" and "jobType" (or --queue and --type)`)
	}
	raw := bytes.TrimSpace(l.Payload)
	switch {
	case l.PayloadBase64 != nil && len(raw) > 0 && !bytes.Equal(raw, []byte("null")):
		return req, errors.New(`give "payload" or "payloadBase64", not both`)
	case l.PayloadBase64 != nil:
		p, err := base64.StdEncoding.DecodeString(*l.PayloadBase64)
		if err != nil {
			return req, fmt.Errorf("payloadBase64: %v", err)
		}
		req.Payload = p
	case len(raw) == 0 || bytes.Equal(raw, []byte("null")):
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return req, fmt.Errorf("payload: %v", err)
		}
		req.Payload = []byte(s)
	default:
		var c bytes.Buffer
		if err := json.Compact(&c, raw); err != nil {
			return req, fmt.Errorf("payload: %v", err)
		}
		req.Payload = c.Bytes()
	}
	if l.RunAt != "" {
		t, err := parseRunAt(l.RunAt)
		if err != nil {
			return req, err
		}
		req.RunAt = t
	}
	return req, nil
}

// batchError is a line that failed, as the summary shows it.
type batchError struct {
	Line    int    `json:"line"`
	Code    string `json:"code"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// batchSummary is what enqueue-batch prints at the end. FollowUps and
// Delayed count jobs of Created: follow-ups of a running job (when_running
// = "run_again") and jobs a rule with action = "delay" scheduled for later.
type batchSummary struct {
	Lines       int          `json:"lines"`
	Created     int          `json:"created"`
	FollowUps   int          `json:"followUps,omitempty"`
	Delayed     int          `json:"delayed,omitempty"`
	Hits        int          `json:"hits"`
	Errors      int          `json:"errors"`
	NotSent     int          `json:"notSent"`
	FirstErrors []batchError `json:"firstErrors"`
}

const maxShownErrors = 5

func (s *batchSummary) fail(line int, err error) {
	s.Errors++
	be := batchError{Line: line, Code: "invalid_argument", Reason: "INVALID_LINE", Message: err.Error()}
	var se *sepp.Error
	if errors.As(err, &se) {
		be.Code, be.Reason, be.Message = se.Code, se.Reason, se.Message
	}
	s.FirstErrors = append(s.FirstErrors, be)
}

type numbered struct {
	line int
	req  sepp.EnqueueRequest
}

func enqueueBatchCmd(env *cliEnv) *cobra.Command {
	var file, defQueue, defType string
	var size int
	var atomic, progress bool
	cmd := &cobra.Command{
		Use:   "enqueue-batch --file FILE [--atomic] [--batch-size N]",
		Short: "enqueue the jobs of a JSON Lines file (- for stdin), in EnqueueBatch calls",
		Long: `Enqueue the jobs of a JSON Lines file, one job per line:

  {"queue":"emails","jobType":"receipt","idempotencyKey":"receipt-8a3f","payload":{"order":"8a3f"}}

Fields: queue, jobType, idempotencyKey, payload (any JSON value: a string is
sent as its text, anything else as its JSON text), payloadBase64 (binary,
instead of payload), headers, priority, runAt (RFC 3339 or a delay like 10m),
maxAttempts. Blank lines are skipped. --queue and --type fill in lines
without queue or jobType.

The lines go in EnqueueBatch calls of --batch-size jobs (the server's
max_batch_size, 1000 by default, is the most it takes). The summary counts
jobs created (and, when there are any, the follow-ups and delayed jobs among
them), hits (deduplicated against an earlier job) and errors, with the
first few errors by line number. --atomic makes each call atomic: all of its
jobs are written or none. Atomicity is per call, so per --batch-size lines,
unless the whole file fits one call; after a refused call the rest is not
sent. A progress line is drawn on stderr when it is a terminal.`,
		Args: cobra.NoArgs,
	}
	fs := cmd.Flags()
	fs.StringVarP(&file, "file", "f", "", "the JSON Lines `file` (- for stdin) (required)")
	fs.StringVar(&defQueue, "queue", "", "the queue of lines that name none")
	fs.StringVar(&defType, "type", "", "the job type of lines that name none")
	fs.IntVar(&size, "batch-size", 1000, "jobs per EnqueueBatch call (at most the server's max_batch_size)")
	fs.BoolVar(&atomic, "atomic", false, "make each call atomic: its jobs are all written or none (per call, not per file)")
	fs.BoolVar(&progress, "progress", false, "draw progress on stderr even when it is not a terminal")
	fs.MarkHidden("progress")
	cmd.MarkFlagRequired("file")
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		if size < 1 {
			return usagef("--batch-size %d: want at least 1", size)
		}
		var in io.Reader = env.stdin
		if file != "-" {
			f, err := os.Open(file)
			if err != nil {
				return err
			}
			defer f.Close()
			in = f
		}
		var sum batchSummary
		sum.FirstErrors = []batchError{}
		var jobs []numbered
		r := bufio.NewReaderSize(in, 1<<20)
		for n := 1; ; n++ {
			b, err := r.ReadBytes('\n')
			if len(bytes.TrimSpace(b)) > 0 {
				sum.Lines++
				req, perr := parseBatchLine(b, defQueue, defType)
				if perr != nil {
					sum.fail(n, fmt.Errorf("%v", perr))
				} else {
					jobs = append(jobs, numbered{n, req})
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return fmt.Errorf("read %s: %w", file, err)
			}
		}

		cf := &env.cf
		cctx, cancel := context.WithTimeout(context.Background(), cf.timeout)
		c, err := cf.connect(cctx)
		cancel()
		if err != nil {
			return err
		}
		defer c.Close()

		show := progress || env.stderrTTY
		sent := 0
		draw := func() {
			if show {
				fmt.Fprintf(env.stderr, "\renqueue-batch: %d/%d jobs sent, %d created, %d hits, %d errors", sent, len(jobs),
					sum.Created, sum.Hits, sum.Errors)
			}
		}
		draw()
		var stop error
		for start := 0; start < len(jobs); start += size {
			chunk := jobs[start:min(start+size, len(jobs))]
			reqs := make([]sepp.EnqueueRequest, len(chunk))
			for i, j := range chunk {
				reqs[i] = j.req
			}
			ctx, cancel := context.WithTimeout(context.Background(), cf.timeout)
			res, err := c.EnqueueBatch(ctx, reqs, sepp.BatchOptions{Atomic: atomic})
			cancel()
			if err != nil {
				var se *sepp.Error
				if atomic && errors.As(err, &se) && se.Index >= 0 && se.Index < len(chunk) {
					// The call wrote nothing: its refused line is the
					// error, the rest of the call and file were not sent.
					sum.fail(chunk[se.Index].line, err)
					sum.NotSent = len(jobs) - start - 1
					stop = fmt.Errorf("an atomic call was refused at line %d; it wrote nothing and the lines after it were not sent", chunk[se.Index].line)
				} else {
					sum.NotSent = len(jobs) - start
					stop = err
				}
				break
			}
			for i, r := range res {
				switch {
				case r.Err != nil:
					sum.fail(chunk[i].line, r.Err)
				case r.Ack.Deduplicated:
					sum.Hits++
				default:
					sum.Created++
					if r.Ack.FollowsJobID != "" {
						sum.FollowUps++
					}
					if !r.Ack.DelayedUntil.IsZero() {
						sum.Delayed++
					}
				}
			}
			sent += len(chunk)
			draw()
		}
		if show {
			fmt.Fprintln(env.stderr)
		}
		// Lines that failed here and lines the server refused, in order.
		sort.SliceStable(sum.FirstErrors, func(i, j int) bool { return sum.FirstErrors[i].Line < sum.FirstErrors[j].Line })
		sum.FirstErrors = sum.FirstErrors[:min(len(sum.FirstErrors), maxShownErrors)]
		rows := []row{{"lines", fmt.Sprint(sum.Lines)}, {"created", fmt.Sprint(sum.Created)}}
		if sum.FollowUps > 0 {
			rows = append(rows, row{"follow-ups", fmt.Sprintf("%d (of created: each waits for its key's running job to end)", sum.FollowUps)})
		}
		if sum.Delayed > 0 {
			rows = append(rows, row{"delayed", fmt.Sprintf("%d (of created: scheduled for when their rule's window has room)", sum.Delayed)})
		}
		rows = append(rows, row{"hits", fmt.Sprintf("%d (deduplicated)", sum.Hits)}, row{"errors", fmt.Sprint(sum.Errors)})
		if sum.NotSent > 0 {
			rows = append(rows, row{"not sent", fmt.Sprint(sum.NotSent)})
		}
		if err := cf.outputJSON(env.stdout, sum, rows); err != nil {
			return err
		}
		if !cf.json {
			for _, e := range sum.FirstErrors {
				fmt.Fprintf(env.stdout, "  line %d: %s: %s\n", e.Line, e.Reason, e.Message)
			}
			if sum.Errors > len(sum.FirstErrors) {
				fmt.Fprintf(env.stdout, "  (and %d more)\n", sum.Errors-len(sum.FirstErrors))
			}
		}
		if stop != nil {
			return stop
		}
		if sum.Errors > 0 {
			return fmt.Errorf("%d of %d lines failed", sum.Errors, sum.Lines)
		}
		return nil
	})
	return cmd
}
