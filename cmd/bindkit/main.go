// Command bindkit is the Binding author's tool: it creates a Binding
// module, generates its deep copies and CRDs, and builds the control plane
// its real-apiserver tests run against.
//
//	bindkit new -module example.com/envbinding -kind EnvBinding [-group bindings.example.com] [-dir envbinding]
//	bindkit kubebuilder create binding -group region -version v1 -kind RegionBinding
//	bindkit generate [-crd-dir config] [-header FILE] [-check] [PACKAGE...]
//	bindkit controlplane [-minor 1.37]
//	bindkit audit [-n NAMESPACE] [-o table|json|yaml] [-fix]
//	bindkit version
//
// Run it from the Go module proxy to create a module:
//
//	go run github.com/bindkit/bindkit/cmd/bindkit@latest new -module example.com/envbinding -kind EnvBinding
//
// and, in a module that requires bindkit (a module `bindkit new` made
// lists it as a tool), as `go tool bindkit generate` or `go run
// github.com/bindkit/bindkit/cmd/bindkit generate`, so it runs at the
// bindkit version the module requires. `bindkit help COMMAND` describes
// each command's flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// command is one subcommand.
type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"new", "create a Binding module: type, wiring, generated code and YAML, tests", runNew},
		{"kubebuilder", "add a Binding kind to a kubebuilder project, in the project's own layout (create binding)", runKubebuilder},
		{"generate", "generate deep copies and CRDs with controller-gen " + ControllerToolsVersion, runGenerate},
		{"audit", "report records bindkit keeps on workloads that are not the truth, with their fixes", runAudit},
		{"controlplane", "put the newest minor's control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) into the user cache, using binaries already on the machine", runControlPlane},
		{"version", "print the module version and VCS revision bindkit was built from", runVersion},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	code := exitStatus(err)
	if code != 0 && code != 2 {
		fmt.Fprintln(os.Stderr, "bindkit:", err)
	}
	os.Exit(code)
}

// exitStatus is the process's exit status after err: 0 for none (or
// help), 2 for bad usage (said already), 3 when audit found records that
// are not the truth (as kubectl bindkit audit exits), 1 for any other
// error.
func exitStatus(err error) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	case errors.Is(err, errFindings):
		return 3
	}
	return 1
}

// errUsage is returned after a usage message has been printed.
var errUsage = errors.New("usage")

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) == 2 {
			return run(ctx, []string{args[1], "-h"}, stdout, stderr)
		}
		usage(stderr)
		if len(args) == 0 {
			return errUsage
		}
		return flag.ErrHelp
	}
	if args[0] == "--version" || args[0] == "-version" {
		args[0] = "version" // as the controllers' flag
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "bindkit: unknown command %q\n", args[0])
	usage(stderr)
	return errUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: bindkit COMMAND [flags]")
	fmt.Fprintln(w)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-13s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "bindkit help COMMAND describes a command's flags.")
}

// parse parses a subcommand's flags, printing errors and help to stderr.
func parse(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	return nil
}

// parseFlagsOnly is parse for a subcommand that takes flags and no
// arguments: an argument is a usage error, named on stderr.
func parseFlagsOnly(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "bindkit %s: unexpected arguments %q\n", fs.Name(), fs.Args())
		return errUsage
	}
	return nil
}
