package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Exit statuses, one meaning each, for scripts.
const (
	// ExitOK: done. The rollout is complete (or undone), the plan changes
	// no subject, the audit found nothing, the control was applied.
	ExitOK = 0
	// ExitError: the command failed: the cluster could not be reached,
	// read or written, no such object, nothing to undo to, a Binding that
	// cannot roll out until someone fixes it.
	ExitError = 1
	// ExitUsage: the command line is wrong.
	ExitUsage = 2
	// ExitChanges: plan would change subjects; audit found records that
	// are not the truth; rollout status is not done (still rolling out or
	// undoing, with --watch=false or past --timeout).
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
// exit status.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := run(ctx, args, stdout, stderr)
	var ee *exitError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.Is(err, errUsage):
		return ExitUsage
	case errors.As(err, &ee):
		if ee.err != nil {
			fmt.Fprintln(stderr, "error:", ee.err)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "error:", err)
	return ExitError
}

// command is one subcommand: its name, one line to say what it does, its
// usage and examples, and what it runs.
type command struct {
	name, summary, usage string
	run                  func(ctx context.Context, o *options, args []string) error
	// flags adds the command's own flags.
	flags func(fs *flag.FlagSet, o *options)
}

func commands() []command {
	return []command{planCommand(), rolloutCommand(), whyCommand(), auditCommand()}
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
		return flag.ErrHelp
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

// valuedGlobalFlags are the flags every command takes that take a value.
var valuedGlobalFlags = map[string]bool{
	"-kubeconfig": true, "--kubeconfig": true, "-context": true, "--context": true,
	"-n": true, "-namespace": true, "--namespace": true, "-o": true, "-output": true, "--output": true,
}

// commandFirst moves the flags given before the command after it:
// kubectl's flags go anywhere on the line, the command's name included
// (kubectl bindkit --kubeconfig k plan ...).
func commandFirst(args []string) []string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case !strings.HasPrefix(a, "-"):
			if i == 0 {
				return args
			}
			out := append([]string{a}, args[:i]...)
			return append(out, args[i+1:]...)
		case valuedGlobalFlags[a]:
			i++ // its value
		}
	}
	return args
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
Use "kubectl bindkit COMMAND --help" for a command's flags and examples.
`+exitStatuses)
}

// exitStatuses documents the exit statuses in every help.
const exitStatuses = `
Exit status:
  0  done: rollout complete (or undone), plan changes nothing, audit clean,
     control applied
  1  error: the cluster, the object, or nothing to undo to
  2  bad usage
  3  plan changes subjects; audit found records that are not the truth;
     rollout still in progress (--watch=false, or --timeout passed)
  4  rollout paused
  5  rollout halted
`

// options are the flags every command shares, kubectl's, and the
// command's own.
type options struct {
	kubeconfig, context, namespace string
	allNamespaces                  bool
	output                         string
	// rollout status
	watch   bool
	timeout time.Duration
	// audit
	fix bool

	stdout, stderr io.Writer
	cluster        *cluster // set by connect
}

// parseAndRun parses c's flags (anywhere among its arguments, as kubectl
// does) and runs it.
func (c command) parseAndRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := &options{stdout: stdout, stderr: stderr}
	fs := flag.NewFlagSet("kubectl bindkit "+c.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "path to the kubeconfig `file` (default: $KUBECONFIG, then ~/.kube/config)")
	fs.StringVar(&o.context, "context", "", "the kubeconfig `context` to use (default: the current one)")
	fs.StringVar(&o.namespace, "namespace", "", "the `namespace` (default: the context's)")
	fs.StringVar(&o.namespace, "n", "", "short for --namespace")
	fs.StringVar(&o.output, "output", "", "output `format`: table (the default), json or yaml")
	fs.StringVar(&o.output, "o", "", "short for --output")
	if c.flags != nil {
		c.flags(fs, o)
	}
	fs.Usage = func() {
		fmt.Fprintf(stdout, "%s\n\nUsage:\n  %s\n\nFlags:\n", c.summary, c.usage)
		printFlags(stdout, fs)
		fmt.Fprint(stdout, exitStatuses)
	}
	positional, err := parseInterspersed(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	switch o.output {
	case "", "table", "json", "yaml":
	default:
		fmt.Fprintf(stderr, "error: --output %q: want table, json or yaml\n", o.output)
		return errUsage
	}
	return c.run(ctx, o, positional)
}

// connect loads the kubeconfig into o.cluster, once the command line is
// known to be right.
func (o *options) connect() error {
	if o.cluster != nil {
		return nil
	}
	cl, err := newCluster(o)
	if err != nil {
		return err
	}
	o.cluster = cl
	return nil
}

// printFlags lists fs's flags as kubectl does: "-n, --namespace", a
// short form (a flag whose usage is "short for --name") beside its long
// one.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	short := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) {
		if long, ok := strings.CutPrefix(f.Usage, "short for --"); ok {
			short[long] = f.Name
		}
	})
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fs.VisitAll(func(f *flag.Flag) {
		if strings.HasPrefix(f.Usage, "short for --") {
			return
		}
		names := "    --" + f.Name
		if s, ok := short[f.Name]; ok {
			names = "-" + s + ", --" + f.Name
		}
		arg, usage := flag.UnquoteUsage(f)
		if arg != "" {
			names += " " + arg
		}
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0s" {
			usage += " (default " + f.DefValue + ")"
		}
		fmt.Fprintf(tw, "  %s\t%s\n", names, usage)
	})
	tw.Flush()
}

// parseInterspersed parses fs's flags wherever they stand among args, as
// kubectl does ("rollout pause sink -n demo"), and returns the other
// arguments in order.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(positional, rest...), nil // after "--", no more flags
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// usageError prints a usage mistake of command c and ends with ExitUsage.
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
