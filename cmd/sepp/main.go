// Command sepp is Sepp's server, CLI and benchmark driver in one binary.
//
//	sepp serve [--config sepp.toml] [--check-config]
//	sepp enqueue --queue q --type t [--key k] [--payload ... | --payload-file f]
//	sepp enqueue-batch --file jobs.jsonl [--atomic]
//	sepp job get ID | sepp job cancel ID
//	sepp key lookup --queue q KEY | sepp key release --queue q KEY
//	sepp token create --name N --roles producer,worker [--queues 'payments*']
//	sepp webhook test --path /hooks/x --key k --body @file [--scheme github --secret-env NAME]
//	sepp bench enqueue [-n 100000] [-c 32] [-dup 0.2] [-payload 256]
//
// main only wires flags to a command; the work lives in the packages. The
// command tree is cobra's (commands.go); docs/cli.md describes it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"syscall"

	"github.com/sepp-dev/sepp"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// The exit statuses, documented in docs/cli.md and "sepp --help".
const (
	exitOK          = 0
	exitError       = 1
	exitUsage       = 2
	exitNotFound    = 3
	exitUnavailable = 4
	exitAuth        = 5
	exitRefused     = 6
)

// exitCode errors carry the process exit status of an error already
// reported: 2 for usage errors.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit %d", int(e)) }

// usageError is a mistake in the command line: reported, then exit 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// checkRange refuses a numeric flag outside lo..hi (no upper bound when hi
// is math.MaxInt64) as a usage error that names the flag and its range;
// note, if any, says what the numbers mean. The CLI checks what it can
// before a call, so the answer names --limit, not the server's page_size.
func checkRange(flag string, v, lo, hi int64, note string) error {
	if v >= lo && v <= hi {
		return nil
	}
	want := fmt.Sprintf("%d to %d", lo, hi)
	if hi == math.MaxInt64 {
		want = fmt.Sprintf("%d or more", lo)
	}
	if note != "" {
		want += " (" + note + ")"
	}
	return usagef("%s %d: want %s", flag, v, want)
}

func main() {
	os.Exit(execute(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// execute runs the command line and reports its error on stderr (as JSON
// under --json), and returns the exit status.
func execute(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	jsonOut, err := runCLI(args, stdin, stdout, stderr)
	if err == nil {
		return exitOK
	}
	var code exitCode
	if errors.As(err, &code) {
		return int(code)
	}
	reportError(stderr, err, jsonOut)
	return exitStatus(err)
}

// run is the command line without the final report, for the tests, with an
// empty stdin that is not a terminal: usage errors are reported and come
// back as exitCode(2), other errors as they are.
func run(args []string, stdout, stderr io.Writer) error {
	_, err := runCLI(args, strings.NewReader(""), stdout, stderr)
	return err
}

// exitStatus maps an error to the documented exit status.
func exitStatus(err error) int {
	var ue *usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	var se *sepp.Error
	if errors.As(err, &se) {
		switch se.Reason {
		case sepp.ErrJobNotFound.Error(), sepp.ErrUnknownQueue.Error(), "KEY_NOT_FOUND":
			return exitNotFound
		case sepp.ErrUnavailable.Error():
			return exitUnavailable
		case sepp.ErrUnauthenticated.Error(), sepp.ErrPermissionDenied.Error():
			return exitAuth
		}
		switch se.Code {
		case "not_found":
			return exitNotFound
		case "unavailable", "deadline_exceeded":
			return exitUnavailable
		case "unauthenticated", "permission_denied":
			return exitAuth
		}
		return exitError
	}
	var nf *notFoundError
	if errors.As(err, &nf) {
		return exitNotFound
	}
	var br *backupRefused
	if errors.As(err, &br) {
		return exitRefused
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ECONNREFUSED) ||
		strings.Contains(err.Error(), "connection refused") {
		return exitUnavailable
	}
	return exitError
}

// notFoundError is a lookup that found nothing (key lookup): exit 3.
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string { return e.msg }

// jsonError is an error as --json prints it on stderr.
type jsonError struct {
	Code     string            `json:"code"`
	Reason   string            `json:"reason"`
	Message  string            `json:"message"`
	Metadata map[string]string `json:"metadata"`
}

func toJSONError(err error) jsonError {
	var se *sepp.Error
	if errors.As(err, &se) {
		md := se.Metadata
		if md == nil {
			md = map[string]string{}
		}
		return jsonError{Code: se.Code, Reason: se.Reason, Message: se.Message, Metadata: md}
	}
	je := jsonError{Code: "unknown", Reason: "CLI_ERROR", Message: strings.TrimPrefix(err.Error(), "sepp: "), Metadata: map[string]string{}}
	var ue *usageError
	var nf *notFoundError
	switch {
	case errors.As(err, &ue):
		je.Code, je.Reason = "invalid_argument", "USAGE"
	case errors.As(err, &nf):
		je.Code, je.Reason = "not_found", "KEY_NOT_FOUND"
	case exitStatus(err) == exitUnavailable:
		je.Code, je.Reason = "unavailable", sepp.ErrUnavailable.Error()
	}
	return je
}

// reportError prints err on stderr: "sepp: ..." for people, one JSON object
// under --json.
func reportError(stderr io.Writer, err error, jsonOut bool) {
	if jsonOut {
		b, _ := json.Marshal(toJSONError(err))
		fmt.Fprintf(stderr, "%s\n", b)
		return
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "sepp: ") {
		msg = "sepp: " + msg
	}
	fmt.Fprintln(stderr, msg)
}
