package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
)

// crModule is the controller-runtime adapter's module, which a kubebuilder
// project requires beside bindkit's.
const crModule = bindkitModule + "/controllerruntime"

// kubebuilderUsage is the help of `bindkit kubebuilder`.
const kubebuilderUsage = `usage: bindkit kubebuilder create binding -group GROUP -version VERSION -kind KIND [flags]

Adds a Binding kind to a kubebuilder project (go/v4 layout, as kubebuilder
init wrote it), in the project's own layout, as kubebuilder create api
adds a kind. Run it at the project's root. It writes:

  api/VERSION/KIND_types.go            the type, with Do and Undo to fill in,
                                       its size bounds as markers
  api/VERSION/KIND_contract_test.go    bindingtest.CheckContract, CheckBounded
  internal/controller/KIND_wiring.go   wiring.New and the RBAC markers
  internal/controller/KIND_wiring_test.go
                                       specs in the envtest suite: the kind in a
                                       Manager (crtest.Start) binds Deployments
  config/bindkit/                      the webhook configuration, admission
                                       policies and aggregated roles, and the
                                       transformers that keep namePrefix and
                                       cert-manager's CA injection off them
and edits cmd/main.go (controllerruntime.Add; the Lease's namespace from
SYSTEM_NAMESPACE, so that --leader-elect runs outside a pod too),
PROJECT, the Makefile (controller-gen ` + ControllerToolsVersion + `, make test with
KUBEBUILDER_ASSETS set), config/default, config/crd, config/rbac and,
the first time, what kubebuilder create webhook enables (config/webhook's
Service, config/certmanager's Certificate, the patch mounting it). bindkit's
webhook configurations are not annotated for cert-manager's CA injection:
bindkit writes their caBundle from the Certificate's Secret, one writer.

It edits nothing unless every edit succeeds, overwrites no file, then
requires bindkit in go.mod and runs make manifests generate (-make=false
skips it). Then: fill in the spec, Example, Do and Undo; make manifests
generate; make test.

Flags:`

// kubebuilderFlags are the flags of `bindkit kubebuilder create binding`.
type kubebuilderFlags struct {
	group, version, kind, plural, dir, replace string
	make                                       bool
}

func runKubebuilder(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kubebuilder", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f kubebuilderFlags
	fs.StringVar(&f.group, "group", "", "the API `group` as kubebuilder create api names it (region: region.<domain>) (required)")
	fs.StringVar(&f.version, "version", "", "the API `version`, e.g. v1 (required)")
	fs.StringVar(&f.kind, "kind", "", "the Binding's `kind`, e.g. RegionBinding (required)")
	fs.StringVar(&f.plural, "plural", "", "the resource, when not the kind's regular plural in lower case")
	fs.StringVar(&f.dir, "dir", ".", "the project's root `directory`, holding PROJECT")
	fs.StringVar(&f.replace, "replace", "", "a `directory` holding a bindkit checkout that go.mod replaces bindkit (and its controllerruntime module) with; without it, the bindkit version running this command, else the latest")
	fs.BoolVar(&f.make, "make", true, "run make manifests generate after the edits")
	fs.Usage = func() {
		fmt.Fprintln(stderr, kubebuilderUsage)
		fs.PrintDefaults()
	}
	if len(args) >= 2 && args[0] == "create" && args[1] == "binding" {
		args = args[2:]
	} else if len(args) == 0 || !strings.HasPrefix(args[0], "-") {
		fmt.Fprintf(stderr, "bindkit kubebuilder: want the command create binding, have %q\n", args)
		fs.Usage()
		return errUsage
	}
	if err := parseFlagsOnly(fs, args, stderr); err != nil {
		return err
	}
	return addKubebuilderBinding(ctx, f, stdout, stderr)
}

// addKubebuilderBinding adds the kind f names to the project in f.dir.
func addKubebuilderBinding(ctx context.Context, f kubebuilderFlags, stdout, stderr io.Writer) error {
	p, err := readKubebuilderProject(f.dir)
	if err != nil {
		return err
	}
	d, err := newKBData(p, f.group, f.version, f.kind, f.plural)
	if err != nil {
		return err
	}
	e := newEdits(f.dir)
	for _, step := range []func(*edits, kbData) error{
		func(e *edits, _ kbData) error { return writeAPI(e, &d) },
		writeController, editMain, writeBindkitConfig, editKustomize,
		func(e *edits, _ kbData) error { return editMakefile(e) },
	} {
		if err := step(e, d); err != nil {
			return err
		}
	}
	written, err := e.write()
	if err != nil {
		return err
	}
	if err := p.addResource(f.dir, d); err != nil {
		return fmt.Errorf("PROJECT: %w", err)
	}
	reportEdits(stdout, e, written)
	if err := requireBindkit(ctx, f.dir, f.replace, stdout, stderr); err != nil {
		return err
	}
	if f.make {
		if err := runIn(ctx, f.dir, stdout, stderr, "make", "manifests", "generate"); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, `
next:
  edit %s/%s_types.go: the spec's fields (each with a bound), their values in Example, Do and Undo
  make manifests generate
  make test        # the contract test, and the kind inside a Manager on envtest
`, d.APIDir, d.Lower)
	return nil
}

// reportEdits prints the files written, created ones first, and what the
// user must do by hand.
func reportEdits(w io.Writer, e *edits, written []string) {
	slices.SortFunc(written, func(a, b string) int {
		switch {
		case e.created[a] == e.created[b]:
			return strings.Compare(a, b)
		case e.created[a]:
			return -1
		}
		return 1
	})
	for _, rel := range written {
		verb := "edited "
		if e.created[rel] {
			verb = "created"
		}
		fmt.Fprintf(w, "%s %s\n", verb, rel)
	}
	fmt.Fprintln(w, "edited  PROJECT")
	for _, warning := range e.warnings {
		fmt.Fprintf(w, "warning: %s\n", warning)
	}
}

// requireBindkit makes the project in dir require bindkit and its
// controllerruntime module (the version running this command, else the
// latest; or the checkout replace names), then tidies go.mod.
func requireBindkit(ctx context.Context, dir, replace string, stdout, stderr io.Writer) error {
	var steps [][]string
	if replace != "" {
		target, err := replacePath(dir, replace)
		if err != nil {
			return err
		}
		const pseudo = "@v0.0.0-00010101000000-000000000000"
		steps = append(steps, []string{"mod", "edit",
			"-require=" + bindkitModule + pseudo, "-replace=" + bindkitModule + "=" + target,
			"-require=" + crModule + pseudo, "-replace=" + crModule + "=" + target + "/controllerruntime"})
	} else {
		version := "latest"
		if info, ok := debug.ReadBuildInfo(); ok && info.Main.Path == bindkitModule && info.Main.Version != "" && info.Main.Version != "(devel)" {
			version = info.Main.Version
		}
		steps = append(steps, []string{"get", bindkitModule + "@" + version, crModule + "@" + version})
	}
	steps = append(steps, []string{"mod", "tidy"})
	for _, args := range steps {
		if err := runIn(ctx, dir, stdout, stderr, "go", args...); err != nil {
			return err
		}
	}
	return nil
}

// runIn runs name with args in dir, echoing the command to stdout and its
// output to stderr.
func runIn(ctx context.Context, dir string, stdout, stderr io.Writer, name string, args ...string) error {
	fmt.Fprintf(stdout, "%s %s\n", name, strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Run(); err != nil {
		abs, _ := filepath.Abs(dir)
		return fmt.Errorf("%s %s in %s: %w", name, strings.Join(args, " "), abs, err)
	}
	return nil
}
