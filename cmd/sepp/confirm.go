package main

import (
	"bufio"
	"fmt"
	"strings"

	"github.com/spf13/pflag"
)

// confirmFlags are the flags of a destructive command: dlq purge, key
// release, queue pause.
type confirmFlags struct {
	yes, dryRun bool
}

func (f *confirmFlags) register(fs *pflag.FlagSet) {
	fs.BoolVarP(&f.yes, "yes", "y", false, "do it without asking (needed when stdin is not a terminal)")
	fs.BoolVar(&f.dryRun, "dry-run", false, "say what would be done, and do nothing")
}

// confirm asks on a terminal, and refuses on a non-interactive stdin unless
// --yes: a script that pipes into sepp must say --yes to destroy anything.
func confirm(env *cliEnv, f confirmFlags, format string, args ...any) error {
	if f.yes {
		return nil
	}
	question := fmt.Sprintf(format, args...)
	if !env.stdinTTY {
		return usagef("%s: stdin is not a terminal, so there is no one to ask; pass --yes to confirm (or --dry-run to see what would be done)", strings.TrimSuffix(question, "?"))
	}
	fmt.Fprintf(env.stderr, "%s [y/N] ", question)
	line, _ := bufio.NewReader(env.stdin).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return fmt.Errorf("not confirmed; nothing done")
}
