package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
)

const rootLong = `sepp: a job queue whose retries never become duplicates.

One binary: the server (sepp serve), the CLI that talks to it, and the
benchmark driver. Client commands take --addr (default http://127.0.0.1:50051,
env SEPP_ADDR; https://host:port for TLS), --token (env SEPP_TOKEN),
--ca-file, --cert-file and --key-file (env SEPP_CA_FILE, SEPP_CERT_FILE,
SEPP_KEY_FILE), before or after the command, and --json for the API's own
JSON (errors too, on stderr).

Exit status:
  0  ok
  1  error (also: --addr or --ca-file does not fit the server's TLS)
  2  usage: unknown command or flag, missing argument or required flag,
     a flag's value out of its range, or a destructive command without
     --yes on a non-interactive stdin
  3  not found: JOB_NOT_FOUND, UNKNOWN_QUEUE, a key lookup that finds nothing,
     a dlq requeue or purge JOB_ID that is no dead job
  4  unavailable: the server is down or did not answer in time
  5  permission: UNAUTHENTICATED or PERMISSION_DENIED
  6  restore: the folder is no backup, or an incomplete or damaged one

docs/cli.md describes every command.`

// cliEnv is what the commands of one run share.
type cliEnv struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	cf             clientFlags
	// stdinTTY and stderrTTY: whether to prompt, and to draw progress.
	stdinTTY, stderrTTY bool
}

// ranError marks an error returned by a command's own code, as opposed to
// one cobra found in the command line (a usage error).
type ranError struct{ err error }

func (e *ranError) Error() string { return e.err.Error() }
func (e *ranError) Unwrap() error { return e.err }

// runE wraps a command's function so that its errors are told apart from
// cobra's usage errors.
func runE(fn func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := fn(cmd, args); err != nil {
			return &ranError{err}
		}
		return nil
	}
}

func isTerminal(f any) bool {
	file, ok := f.(*os.File)
	return ok && term.IsTerminal(int(file.Fd()))
}

// runCLI builds the command tree, runs args, prints usage errors (and returns
// exitCode(2) for them), and returns the command's error and whether --json
// was given.
func runCLI(args []string, stdin io.Reader, stdout, stderr io.Writer) (bool, error) {
	env := &cliEnv{stdin: stdin, stdout: stdout, stderr: stderr, stdinTTY: isTerminal(stdin), stderrTTY: isTerminal(stderr)}
	root := newRoot(env)
	args = longSingleDash(root, args)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteC()
	if err == nil {
		return env.cf.json, nil
	}
	var re *ranError
	if errors.As(err, &re) {
		err = re.err
		var ue *usageError
		if !errors.As(err, &ue) {
			return env.cf.json, err
		}
	}
	var code exitCode
	if errors.As(err, &code) {
		return env.cf.json, err
	}
	// A usage error: cobra's (unknown command or flag, missing required
	// flag, wrong arguments) or a command's own.
	if cmd == nil {
		cmd = root
	}
	if serr := mistypedCommand(root, cmd, args, err); serr != nil {
		err = serr
	}
	msg := err.Error()
	if env.cf.json {
		reportError(stderr, &usageError{msg}, true)
	} else {
		fmt.Fprintf(stderr, "sepp: %s\nRun '%s --help' for usage.\n", strings.TrimRight(strings.TrimPrefix(msg, "sepp: "), "\n"), cmd.CommandPath())
	}
	return env.cf.json, exitCode(exitUsage)
}

// longSingleDash rewrites -name to --name for the long flags of the
// commands: the CLI took Go-style single-dash flags (-queue q) before cobra.
func longSingleDash(root *cobra.Command, args []string) []string {
	names := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) { names[f.Name] = true })
		c.PersistentFlags().VisitAll(func(f *pflag.Flag) { names[f.Name] = true })
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	out := make([]string, len(args))
	copy(out, args)
	for i, a := range out {
		if a == "--" {
			break
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' {
			name, _, _ := strings.Cut(a[1:], "=")
			if len(name) > 1 && names[name] {
				out[i] = "-" + a
			}
		}
	}
	return out
}

// unknownSub answers a command group given a word that is none of its
// commands, with cobra's suggestions.
func unknownSub(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		cmd.SetOut(cmd.ErrOrStderr())
		cmd.Usage()
		return exitCode(exitUsage)
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t") + "\n"
	}
	return errors.New(msg) // not a ranError: a usage error
}

// mistypedCommand answers a command line whose command is mistyped and
// followed by flags ("sepp enqeue --queue a"): cobra stops at the group
// (root, or "jobs"), parses the flags meant for the missing command against
// the group's and reports the first as unknown. The mistyped word is the
// news, so it gets unknownSub's answer, with its suggestions. nil when err is
// something else.
func mistypedCommand(root, cmd *cobra.Command, args []string, err error) error {
	msg := err.Error()
	if !cmd.HasSubCommands() || !(strings.HasPrefix(msg, "unknown flag: ") || strings.HasPrefix(msg, "unknown shorthand flag: ")) {
		return nil
	}
	_, rest, ferr := root.Find(args) // args less the words naming cmd
	if ferr != nil {
		return nil
	}
	word := firstPositional(cmd.Flags(), rest)
	if word == "" {
		return nil
	}
	for _, sub := range cmd.Commands() {
		if sub.Name() == word || sub.HasAlias(word) {
			return nil
		}
	}
	return unknownSub(cmd, []string{word})
}

// firstPositional returns the first argument of args that is neither a flag
// of fs nor the value of one, up to the first flag fs does not know: whether
// that one takes a value is anyone's guess ("sepp jobs --queue emails" lacks
// its command; "emails" is not one). "" if none.
func firstPositional(fs *pflag.FlagSet, args []string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || !strings.HasPrefix(a, "-") || a == "-" {
			if a == "--" {
				i++
			}
			if i < len(args) {
				return args[i]
			}
			return ""
		}
		var f *pflag.Flag
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "--") {
			f = fs.Lookup(name)
		} else if len(name) == 1 {
			f = fs.ShorthandLookup(name)
		}
		if f == nil {
			return ""
		}
		if !hasValue && f.NoOptDefVal == "" {
			i++ // the flag's value
		}
	}
	return ""
}

func group(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short, Args: cobra.ArbitraryArgs, RunE: unknownSub, SuggestionsMinimumDistance: 2}
	c.AddCommand(subs...)
	return c
}

// legacy is a command that parses its own Go-style flags (serve, bench ...):
// they accept -n as well as --n, as they always did. Its help is cobra's,
// like every other command's: fn's flag set, shown in cobra's Flags section
// ("sepp serve --help" and "sepp help serve" alike).
func legacy(env *cliEnv, use, short, long string, fn legacyFunc) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short, Long: long, DisableFlagParsing: true}
	c.RunE = runE(func(cmd *cobra.Command, args []string) error {
		for _, a := range args {
			if a == "--" {
				break
			}
			if a == "-json" || a == "--json" || a == "--json=true" || a == "-json=true" {
				env.cf.json = true // errors as JSON too
			}
		}
		err := fn(args, env.stdout, env.stderr)
		var h *helpRequested
		if errors.As(err, &h) {
			legacyHelp(cmd, h.fs)
			return nil
		}
		return err
	})
	c.SetHelpFunc(func(cmd *cobra.Command, _ []string) {
		var h *helpRequested
		if err := fn([]string{"-h"}, io.Discard, io.Discard); errors.As(err, &h) {
			legacyHelp(cmd, h.fs)
		}
	})
	// Global Flags would list --addr, --json ...: the root's, which a
	// legacy command does not parse (those that talk to a server have their
	// own --addr, in Flags).
	c.SetUsageTemplate(legacyUsageTemplate)
	return c
}

// legacyFunc runs a legacy command: it parses args with a Go flag set of its
// own (parseInterspersed), so -h returns a *helpRequested.
type legacyFunc func(args []string, stdout, stderr io.Writer) error

// legacyUsageTemplate is cobra's usage template with the Flags section
// showing the legacy command's own flag set (legacyHelp), and no Global
// Flags section: cobra's flag sets of the command hold the root's flags
// (--addr, --json ...), which a legacy command does not parse; those that
// talk to a server have their own --addr.
var legacyUsageTemplate = func() string {
	const flags = `{{if .HasAvailableLocalFlags}}

Flags:
{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}`
	const global = `{{if .HasAvailableInheritedFlags}}

Global Flags:
{{.InheritedFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}`
	t := (&cobra.Command{}).UsageTemplate()
	if !strings.Contains(t, flags) || !strings.Contains(t, global) {
		panic("cobra's usage template has changed: update legacyUsageTemplate")
	}
	t = strings.Replace(t, flags, `

Flags:
{{index .Annotations "legacyFlags" | trimTrailingWhitespaces}}`, 1)
	return strings.Replace(t, global, "", 1)
}()

// legacyHelp prints cmd's help, in cobra's style, with the flags of fs.
func legacyHelp(cmd *cobra.Command, fs *flag.FlagSet) {
	pfs := pflag.NewFlagSet(cmd.Name(), pflag.ContinueOnError)
	pfs.AddGoFlagSet(fs)
	pfs.BoolP("help", "h", false, "help for "+cmd.Name())
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations["legacyFlags"] = pfs.FlagUsages()
	cmd.Parent().HelpFunc()(cmd, nil)
}

func newRoot(env *cliEnv) *cobra.Command {
	root := &cobra.Command{
		Use:           "sepp",
		Short:         "a job queue whose retries never become duplicates",
		Long:          rootLong,
		Version:       version,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.ArbitraryArgs,
		RunE:          unknownSub,

		SuggestionsMinimumDistance: 2,
	}
	root.SetVersionTemplate("sepp {{.Version}}\n")
	env.cf.register(root.PersistentFlags())
	root.PersistentPreRunE = func(*cobra.Command, []string) error { return env.cf.check() }

	root.AddCommand(
		legacy(env, "serve [--config FILE] [--check-config]", "run the server (no config needed)", serveLong, runServe),
		legacy(env, "migrate [--config FILE]", "apply the store's schema migrations and exit", migrateLong, runMigrate),
		enqueueCmd(env),
		enqueueBatchCmd(env),
		group("job", "show or cancel a job", jobCmd(env, "get", "show a job"), jobCmd(env, "cancel", "cancel a job that has not finished")),
		group("key", "look up or release an idempotency key", keyLookupCmd(env), keyReleaseCmd(env)),
		queuesCmd(env),
		group("queue", "pause or resume delivery from a queue", queuePauseCmd(env, true), queuePauseCmd(env, false)),
		group("jobs", "list jobs", jobsListCmd(env)),
		group("dlq", "the dead letter: list, requeue or purge dead jobs", dlqListCmd(env), dlqCmd(env, "requeue"), dlqCmd(env, "purge")),
		group("outbox", "the transactional outbox: tables an app writes jobs into, relayed by sepp serve", outboxSchemaCmd(env), outboxListCmd(env)),
		schedulesCmd(env),
		backupCmd(env),
		restoreCmd(env),
		group("token", "API tokens",
			legacy(env, "create --name N --roles R,R [--queues Q,Q]", "a new API token: its secret, and the [[auth.tokens]] lines", tokenCreateLong, runTokenCreate)),
		group("webhook", "webhooks",
			legacy(env, "test --path P --key K --body @FILE|TEXT [--scheme S --secret-env NAME]", "send a signed POST to a [[webhooks]] path", webhookTestLong, runWebhookTest)),
		group("bench", "benchmarks",
			legacy(env, "enqueue [-n 100000] [-c 32] [-dup 0.2] [-payload 256]", "measure keyed enqueue throughput", benchEnqueueLong, runBenchEnqueue),
			legacy(env, "e2e [-n 20000] [-p 32] [-c 64]", "measure enqueue-to-completion throughput", benchE2ELong, runBenchE2E),
			legacy(env, "worker --queues Q", "a no-op worker process, for load and crash tests", benchWorkerLong, runBenchWorker)),
		&cobra.Command{Use: "version", Short: "print the version", Args: cobra.NoArgs,
			Run: func(cmd *cobra.Command, args []string) { fmt.Fprintln(env.stdout, "sepp", version) }},
	)
	return root
}

// parseInterspersed parses the Go-style flags of a legacy command, which may
// come before or after positional arguments ("sepp bench worker x -c 4"),
// and returns the positionals. -h, -help and --help return a *helpRequested
// for the command to print its help in cobra's style; a flag it does not
// know is a usage error, in cobra's words.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard) // the flag package's own messages and usage
	fs.Usage = func() {}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, &helpRequested{fs}
			}
			return nil, usagef("%s", goFlagError(err))
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// helpRequested is a legacy command's -h: its flag set, to show.
type helpRequested struct{ fs *flag.FlagSet }

func (h *helpRequested) Error() string { return "help requested" }

// goFlagError words an error of the flag package as cobra words its own:
// "unknown flag: --bogus", and flags with two dashes.
func goFlagError(err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return "unknown flag: " + dashes(name)
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return "flag needs an argument: " + dashes(name)
	}
	return strings.Replace(msg, " for flag -", " for flag --", 1)
}

// dashes writes a flag name as it is typed: -n, --name.
func dashes(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}
