package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// Exit statuses, one meaning each, for scripts.
const (
	// ExitOK: done. The rollout is complete (or undone), the plan changes
	// no pod template, the audit found nothing, the control was applied.
	ExitOK = 0
	// ExitError: the command failed: the cluster could not be reached,
	// read or written, no such object, nothing to undo to, a Binding that
	// cannot roll out until someone fixes it.
	ExitError = 1
	// ExitUsage: the command line is wrong.
	ExitUsage = 2
	// ExitChanges: plan would change pod templates; audit found records
	// that are not the truth; rollout status is not done (still rolling
	// out or undoing, with --watch=false or past --timeout).
	ExitChanges = 3
	// ExitPaused: rollout status found the rollout paused: nothing moves
	// until it is resumed.
	ExitPaused = 4
	// ExitHalted: rollout status found the rollout halted: nothing moves
	// until the Binding is fixed or undone.
	ExitHalted = 5
)

// exitError is an error that ends the command with a given status.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// exit wraps err so that the command ends with code.
func exit(code int, err error) error { return &exitError{code: code, err: err} }

// quietExit ends the command with code, having said what there is to say.
func quietExit(code int) error { return &exitError{code: code} }

// errUsage ends the command with ExitUsage; the usage has been printed.
var errUsage = errors.New("usage")

// Main runs kubectl-bindkit with args (without the program's name),
// writing its output to stdout and its errors to stderr, and returns the
// exit status. An error is one line on stderr: what went wrong first
// (the cluster unreachable, the connection refused, a request timed out,
// forbidden, not found), not what failed because of it.
//
// Main does not touch process-wide state: the command (package main)
// silences klog, so that no client-go log line reaches the operator.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := run(ctx, args, stdout, stderr)
	var ee *exitError
	switch {
	case err == nil, errors.Is(err, pflag.ErrHelp):
		return ExitOK
	case errors.Is(err, errUsage):
		return ExitUsage
	case errors.As(err, &ee):
		if ee.err != nil {
			fmt.Fprintln(stderr, "error:", oneLine(ee.err))
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "error:", oneLine(err))
	return ExitError
}

// oneLine is err's message on one line.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// command is one subcommand: its name, one line to say what it does, its
// usage and examples, and what it runs.
type command struct {
	name, summary, usage string
	run                  func(ctx context.Context, o *options, args []string) error
	// flags adds the command's own flags.
	flags func(fs *pflag.FlagSet, o *options)
}

func commands() []command {
	return []command{planCommand(), rolloutCommand(), whyCommand(), auditCommand(), versionCommand()}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	args = commandFirst(args)
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) == 2 {
			return run(ctx, []string{args[1], "--help"}, stdout, stderr)
		}
		usage(stdout)
		if len(args) == 0 {
			return errUsage
		}
		return pflag.ErrHelp
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.parseAndRun(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "error: unknown command %q\n\n", args[0])
	usage(stderr)
	return errUsage
}

// commandFirst moves the flags given before the command after it:
// kubectl's flags go anywhere on the line, the command's name included
// (kubectl bindkit --kubeconfig k plan ...). Which flags take a value is
// read from the flag sets themselves.
func commandFirst(args []string) []string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return args
		case !strings.HasPrefix(a, "-") || a == "-":
			if i == 0 {
				return args
			}
			out := append([]string{a}, args[:i]...)
			return append(out, args[i+1:]...)
		case !strings.Contains(a, "=") && takesValue(a):
			i++ // its value
		}
	}
	return args
}

// takesValue reports whether the flag arg ("-n", "--kubeconfig") is one
// of a command's, or a connection flag, and takes a value.
func takesValue(arg string) bool {
	for _, c := range commands() {
		fs, _, _ := c.flagSets(&options{})
		var f *pflag.Flag
		if name, ok := strings.CutPrefix(arg, "--"); ok {
			f = fs.Lookup(name)
		} else if short := strings.TrimPrefix(arg, "-"); len(short) == 1 {
			f = fs.ShorthandLookup(short)
		}
		if f != nil {
			return f.NoOptDefVal == ""
		}
	}
	return false
}

func usage(w io.Writer) {
	fmt.Fprint(w, `kubectl bindkit steers Binding rollouts: see what a change would do before
it lands, pause, resume and undo it, and ask a workload which Bindings
changed it.

Commands:
`)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Every command takes kubectl's connection flags (--kubeconfig, --context,
-n, --as, --request-timeout, --server, --token, ...).
Use "kubectl bindkit COMMAND --help" for a command's flags and examples.
`+exitStatuses)
}

// exitStatuses documents the exit statuses in every help.
const exitStatuses = `
Exit status:
  0  done: rollout complete (or undone), plan changes no pod template,
     audit clean, control applied
  1  error: the cluster (unreachable, refused, timed out, forbidden), the
     object (not found), or nothing to undo to
  2  bad usage
  3  plan changes pod templates; audit found records that are not the
     truth; rollout still in progress (--watch=false, or --timeout passed)
  4  rollout paused
  5  rollout halted
`

// options are the flags every command shares, kubectl's, and the
// command's own.
type options struct {
	// config holds kubectl's connection flags (--kubeconfig, --context,
	// -n, --as, --request-timeout, --server, --token, ...), as kubectl
	// and its plugins read them.
	config *genericclioptions.ConfigFlags
	output string
	// audit
	allNamespaces bool
	fix           bool
	// rollout status
	watch   bool
	timeout time.Duration

	stdout, stderr io.Writer
	cluster        *cluster // set by connect
}

// flagSets returns every flag c takes (own, then the connection flags),
// the command's own, and kubectl's connection flags, bound to o.
func (c command) flagSets(o *options) (all, own, conn *pflag.FlagSet) {
	o.config = genericclioptions.NewConfigFlags(true)
	own = pflag.NewFlagSet("kubectl bindkit "+c.name, pflag.ContinueOnError)
	own.StringVarP(&o.output, "output", "o", "", "output format: table (the default), json or yaml")
	if c.flags != nil {
		c.flags(own, o)
	}
	conn = pflag.NewFlagSet("connection", pflag.ContinueOnError)
	o.config.AddFlags(conn)
	all = pflag.NewFlagSet("kubectl bindkit "+c.name, pflag.ContinueOnError)
	all.AddFlagSet(own)
	all.AddFlagSet(conn)
	all.SetOutput(io.Discard) // errors are returned, and said once
	return all, own, conn
}

// parseAndRun parses c's flags (anywhere among its arguments, as kubectl
// does) and runs it.
func (c command) parseAndRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := &options{stdout: stdout, stderr: stderr}
	fs, own, conn := c.flagSets(o)
	fs.Usage = func() {
		fmt.Fprintf(stdout, "%s\n\nUsage:\n  %s\n\nFlags:\n%s\nConnection flags (kubectl's):\n%s", c.summary, c.usage, own.FlagUsages(), conn.FlagUsages())
		fmt.Fprint(stdout, exitStatuses)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return usageError(o, "%s: %v", c.name, err)
	}
	switch o.output {
	case "", "table", "json", "yaml":
	default:
		fmt.Fprintf(stderr, "error: --output %q: want table, json or yaml\n", o.output)
		return errUsage
	}
	err := c.run(ctx, o, fs.Args())
	if err != nil && o.cluster != nil {
		return o.cluster.explain(err)
	}
	return err
}

// connect reads kubectl's connection flags into o.cluster, once the
// command line is known to be right.
func (o *options) connect() error {
	if o.cluster != nil {
		return nil
	}
	cl, err := newCluster(o.config, o.stderr)
	if err != nil {
		return err
	}
	o.cluster = cl
	return nil
}

// usageError prints a usage mistake and ends with ExitUsage.
func usageError(o *options, format string, args ...any) error {
	fmt.Fprintf(o.stderr, "error: "+format+"\n", args...)
	fmt.Fprintln(o.stderr, `See "kubectl bindkit COMMAND --help".`)
	return errUsage
}

// oneObject reads "TYPE/NAME" or "TYPE NAME" from args.
func oneObject(o *options, what string, args []string) (kind, name string, err error) {
	switch {
	case len(args) == 1 && strings.Count(args[0], "/") == 1:
		kind, name, _ = strings.Cut(args[0], "/")
	case len(args) == 2 && !strings.Contains(args[0], "/"):
		kind, name = args[0], args[1]
	default:
		return "", "", usageError(o, "want one %s as TYPE/NAME (or TYPE NAME), got %q", what, args)
	}
	if kind == "" || name == "" {
		return "", "", usageError(o, "want one %s as TYPE/NAME, got %q", what, args)
	}
	return kind, name, nil
}
