// Command check reads a fault-campaign history (JSON Lines, see package
// github.com/sepp-dev/sepp/test/faults/history), checks it against Sepp's
// promise and prints the summary. It exits 0 when no violation was found,
// 1 on any violation and 2 when the history cannot be read.
//
//	go run ./test/faults/check history.jsonl
//	go run ./test/faults/check -json history.jsonl
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/sepp-dev/sepp/test/faults/history"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: check [-json] history.jsonl   (\"-\" reads standard input)")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	var (
		h   *history.History
		err error
	)
	if fs.Arg(0) == "-" {
		h, err = history.Read(stdin)
	} else {
		h, err = history.ReadFile(fs.Arg(0))
	}
	if err != nil {
		fmt.Fprintln(stderr, "check:", err)
		return 2
	}
	rep := history.Check(h)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintln(stderr, "check:", err)
			return 2
		}
	} else {
		fmt.Fprint(stdout, rep)
	}
	if !rep.OK() {
		return 1
	}
	return 0
}
