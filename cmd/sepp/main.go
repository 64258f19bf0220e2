// Command sepp is Sepp's server, CLI and benchmark driver in one binary.
//
//	sepp serve [--config sepp.toml] [--check-config]
//	sepp enqueue --queue q --type t [--key k] [--payload ... | --payload-file f]
//	sepp job get ID | sepp job cancel ID
//	sepp key lookup --queue q KEY | sepp key release --queue q KEY
//	sepp token create --name N --roles producer,worker [--queues 'payments*']
//	sepp webhook test --path /hooks/x --key k --body @file [--scheme github --secret-env NAME]
//	sepp bench enqueue [-n 100000] [-c 32] [-dup 0.2] [-payload 256]
//
// main only wires flags to a command; the work lives in the packages.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

const usage = `sepp: a job queue whose retries never become duplicates.

Usage:
  sepp serve [--config FILE] [--check-config]   run the server (no config needed)
  sepp migrate [--config FILE]                  apply the store's schema migrations and exit
  sepp enqueue --queue Q --type T [--key K] [--payload DATA | --payload-file F]
  sepp job get ID                               show a job
  sepp job cancel ID                            cancel a job that has not finished
  sepp key lookup --queue Q KEY                 was KEY already enqueued on Q?
  sepp key release --queue Q KEY                forget KEY now (the job stays)
  sepp queues                                   jobs by state, dedup records, paused, per queue
  sepp queue pause|resume Q                     stop or restart delivery from Q
  sepp jobs list [--queue Q] [--state S]        list jobs
  sepp dlq list|requeue|purge [--queue Q | --all | ID...]   the dead letter
  sepp webhook test --path P --key K --body @FILE|TEXT [--scheme S --secret-env NAME]
                                                send a signed POST to a [[webhooks]] path
  sepp token create --name N --roles R,R [--queues Q,Q]
                                                a new API token: its secret, and the [[auth.tokens]] lines
  sepp bench enqueue [flags]                    measure keyed enqueue throughput
  sepp bench e2e [flags]                        measure enqueue-to-completion throughput
  sepp bench worker --queues Q [flags]          a no-op worker process, for load and crash tests
  sepp version

Client commands take --addr (default http://127.0.0.1:50051, env SEPP_ADDR;
https://host:port for TLS), --token (env SEPP_TOKEN), --ca-file, --cert-file
and --key-file (env SEPP_CA_FILE, SEPP_CERT_FILE, SEPP_KEY_FILE) and --json
for machine-readable output. Run "sepp COMMAND -h" for its flags.
`

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// exitCode errors carry the process exit status: 2 for usage errors.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit %d", int(e)) }

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	var code exitCode
	switch {
	case err == nil:
	case errors.As(err, &code):
		os.Exit(int(code))
	default:
		msg := err.Error()
		if !strings.HasPrefix(msg, "sepp: ") {
			msg = "sepp: " + msg
		}
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitCode(2)
	}
	cmd, rest := args[0], args[1:]
	sub := func() (string, []string) {
		if len(rest) == 0 {
			return "", nil
		}
		return rest[0], rest[1:]
	}
	switch cmd {
	case "serve":
		return runServe(rest, stdout, stderr)
	case "migrate":
		return runMigrate(rest, stdout, stderr)
	case "enqueue":
		return runEnqueue(rest, stdout, stderr)
	case "job":
		switch s, r := sub(); s {
		case "get":
			return runJobGet(r, stdout, stderr)
		case "cancel":
			return runJobCancel(r, stdout, stderr)
		}
	case "key":
		switch s, r := sub(); s {
		case "lookup":
			return runKeyLookup(r, stdout, stderr)
		case "release":
			return runKeyRelease(r, stdout, stderr)
		}
	case "queues":
		return runQueues(rest, stdout, stderr)
	case "queue":
		switch s, r := sub(); s {
		case "pause":
			return runQueuePause(r, stdout, stderr, true)
		case "resume":
			return runQueuePause(r, stdout, stderr, false)
		}
	case "jobs":
		switch s, r := sub(); s {
		case "list":
			return runJobsList(r, stdout, stderr)
		}
	case "dlq":
		switch s, r := sub(); s {
		case "list":
			return runDLQList(r, stdout, stderr)
		case "requeue":
			return runDLQ("requeue", r, stdout, stderr)
		case "purge":
			return runDLQ("purge", r, stdout, stderr)
		}
	case "token":
		switch s, r := sub(); s {
		case "create":
			return runTokenCreate(r, stdout, stderr)
		}
	case "webhook":
		switch s, r := sub(); s {
		case "test":
			return runWebhookTest(r, stdout, stderr)
		}
	case "bench":
		switch s, r := sub(); s {
		case "enqueue":
			return runBenchEnqueue(r, stdout, stderr)
		case "e2e":
			return runBenchE2E(r, stdout, stderr)
		case "worker":
			return runBenchWorker(r, stdout, stderr)
		}
	case "version", "--version":
		fmt.Fprintln(stdout, "sepp", version)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprintf(stderr, "sepp: unknown command %q\n\n%s", cmd, usage)
	return exitCode(2)
}

// parseInterspersed parses flags that may come before or after positional
// arguments ("sepp job get ID --json") and returns the positionals.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, exitCode(0)
			}
			return nil, exitCode(2)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}
