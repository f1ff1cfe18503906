package main

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"flag"
	"fmt"
	"go/format"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"text/template"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/bindkit/bindkit/bindingtest"
	"github.com/bindkit/bindkit/policy"
	"github.com/bindkit/bindkit/wiring"
)

// scaffold holds the files `bindkit new` writes, as text/templates of
// scaffoldData, each at its path in the new module plus ".tmpl".
//
//go:embed scaffold
var scaffold embed.FS

// bindkitModule is the framework's module path.
const bindkitModule = "github.com/bindkit/bindkit"

// scaffoldData is what the scaffold's templates are executed with.
type scaffoldData struct {
	// Module is the new module's path, e.g. example.com/envbinding.
	Module string
	// Package is the name of the module's root package, which wires the
	// kind: Kind in lower case, e.g. envbinding.
	Package string
	// Kind is the Binding's kind, e.g. EnvBinding; Lower is it in lower
	// case, Resource its plural, e.g. envbindings.
	Kind, Lower, Resource string
	// Group is the API group, e.g. bindings.example.com.
	Group string
	// Component names the controller's process and its Deployment,
	// ServiceAccount and roles, e.g. envbinding-controller; Namespace is
	// where it runs, e.g. envbinding-system.
	Component, Namespace string
	// WebhookConfiguration is the MutatingWebhookConfiguration's name,
	// wiring.New's default: <Resource>.<Group>.
	WebhookConfiguration string
	// CRDFile is the CRD's file name in config/, PoliciesFile its
	// admission policies', RolesFile its aggregated ClusterRoles'.
	CRDFile, PoliciesFile, RolesFile string
}

var (
	kindPattern  = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
	groupPattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$`)
)

// newScaffoldData validates the flags of `bindkit new` into scaffoldData.
func newScaffoldData(module, kind, group string) (scaffoldData, error) {
	switch {
	case module == "":
		return scaffoldData{}, errors.New("-module is required: the new module's path, e.g. example.com/envbinding")
	case strings.ContainsAny(module, " \t\\") || strings.HasPrefix(module, "/") || strings.HasSuffix(module, "/"):
		return scaffoldData{}, fmt.Errorf("-module %q is not a module path, e.g. example.com/envbinding", module)
	case kind == "":
		return scaffoldData{}, errors.New("-kind is required: the Binding's kind, e.g. EnvBinding")
	case !kindPattern.MatchString(kind):
		return scaffoldData{}, fmt.Errorf("-kind %q: want an upper-case letter, then letters and digits, e.g. EnvBinding", kind)
	}
	lower := strings.ToLower(kind)
	if group == "" {
		group = "bindings." + strings.SplitN(module, "/", 2)[0]
		if !strings.Contains(group[len("bindings."):], ".") {
			group = "bindings.example.com"
		}
	}
	if !groupPattern.MatchString(group) || len(group) > 253 {
		return scaffoldData{}, fmt.Errorf("-group %q: want a DNS subdomain with a dot, e.g. bindings.example.com", group)
	}
	resource := lower + "s"
	if strings.HasSuffix(lower, "s") {
		resource = lower + "es"
	}
	return scaffoldData{
		Module:               module,
		Package:              lower,
		Kind:                 kind,
		Lower:                lower,
		Resource:             resource,
		Group:                group,
		Component:            lower + "-controller",
		Namespace:            lower + "-system",
		WebhookConfiguration: resource + "." + group,
		CRDFile:              CRDFileName(lower),
		PoliciesFile:         bindingtest.AdmissionPoliciesFileName(lower),
		RolesFile:            RolesFileName(lower),
	}, nil
}

func runNew(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	flags := flag.NewFlagSet("new", flag.ContinueOnError)
	module := flags.String("module", "", "the new module's `path`, e.g. example.com/envbinding (required)")
	kind := flags.String("kind", "", "the Binding's `kind`, e.g. EnvBinding (required)")
	group := flags.String("group", "", "the API `group`; default bindings.<the module path's first element>, or bindings.example.com")
	dir := flags.String("dir", "", "the `directory` to create; default the module path's last element")
	replace := flags.String("replace", "", "a `directory` holding a bindkit checkout that the new module's go.mod replaces bindkit with, to build against an unreleased bindkit (a fork, a branch, bindkit's own tests); without it, the bindkit version running this command, else the latest")
	flags.Usage = func() {
		fmt.Fprintln(stderr, `usage: bindkit new -module PATH -kind KIND [flags]

Creates a Binding module in a new directory: the kind's Go type with Do and
Undo to fill in (apis/v1alpha1), its generated deep copies and CRD, its wiring
(one wiring.New call) and main, config/ to deploy it with least-privilege
RBAC and a kustomize base, a contract test (bindingtest.CheckContract:
without a server, then on workloads as the kube-apiserver stores them) and
a test against a real kube-apiserver (envtest, bindingtest.Run). Every test
passes as generated and binds with Example in the type file. Without a
control plane the contract's checks that need none still run, and the rest
is skipped, saying what (go test -v); "go tool bindkit controlplane" gets
the binaries once, in seconds from $KUBEBUILDER_ASSETS or setup-envtest's
directory, else by building them. bindkit is a tool of the module, so
"go tool bindkit generate" regenerates the code and CRD after you change
the types.

To build against a bindkit checkout (unreleased, a fork, a branch),
scaffold from it, the new module beside it:
  cd path/to/bindkit
  go run ./cmd/bindkit new -module example.com/envbinding -kind EnvBinding \
      -dir ../envbinding -replace .

Flags:`)
		flags.PrintDefaults()
	}
	if err := parseFlagsOnly(flags, args, stderr); err != nil {
		return err
	}
	data, err := newScaffoldData(*module, *kind, *group)
	if err != nil {
		return err
	}
	if *dir == "" {
		*dir = path.Base(*module)
	}
	if _, err := os.Stat(*dir); err == nil {
		return fmt.Errorf("%s exists; bindkit new creates a new directory", *dir)
	}
	if err := writeScaffold(*dir, data); err != nil {
		return err
	}
	if err := writeAdmissionPolicies(*dir, data); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "created %s (module %s, kind %s, group %s)\n", *dir, data.Module, data.Kind, data.Group)
	if err := initModule(ctx, *dir, data.Module, *replace, stdout, stderr); err != nil {
		return fmt.Errorf("%s: %w", *dir, err)
	}
	if err := generate(ctx, *dir, nil, "config", "", false, stdout, stderr); err != nil {
		return fmt.Errorf("%s: %w", *dir, err)
	}
	fmt.Fprintf(stdout, `
next:
  cd %s
  edit apis/v1alpha1/types.go: the spec's fields, their values in Example, Do and Undo
  go tool bindkit generate        # deep copies and config/%s
  go test ./...                   # the contract's checks without a server run; -v shows what is skipped
  go tool bindkit controlplane    # once: etcd and kube-apiserver for the rest (seconds with $KUBEBUILDER_ASSETS)
  go test ./...
`, *dir, data.CRDFile)
	return nil
}

// writeAdmissionPolicies writes the admission policies the new kind's
// webhook programs into its config/, as its TestAdmissionPoliciesInConfig
// keeps them.
func writeAdmissionPolicies(dir string, data scaffoldData) error {
	gvr := schema.GroupVersionResource{Group: data.Group, Version: "v1alpha1", Resource: data.Resource}
	objs, err := wiring.AdmissionPoliciesFor(gvr, wiring.Options{})
	if err != nil {
		return err
	}
	out, err := policy.Manifests(objs, bindingtest.ManifestsHeader(gvr.GroupResource().String()))
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "config", data.PoliciesFile), out, 0o644)
}

// writeScaffold executes the scaffold's templates with data into dir, and
// gofmts the Go files.
func writeScaffold(dir string, data scaffoldData) error {
	return fs.WalkDir(scaffold, "scaffold", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		text, err := scaffold.ReadFile(name)
		if err != nil {
			return err
		}
		rel := strings.TrimSuffix(strings.TrimPrefix(name, "scaffold/"), ".tmpl")
		tmpl, err := template.New(rel).Option("missingkey=error").Parse(string(text))
		if err != nil {
			return err
		}
		var out bytes.Buffer
		if err := tmpl.Execute(&out, data); err != nil {
			return err
		}
		content := out.Bytes()
		if strings.HasSuffix(rel, ".go") {
			if content, err = format.Source(content); err != nil {
				return fmt.Errorf("scaffold %s: %w", rel, err)
			}
		}
		target := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		return os.WriteFile(target, content, 0o644)
	})
}

// initModule makes dir a module that requires bindkit (the version running,
// else the latest; or the checkout replace names) with cmd/bindkit as a
// tool, and resolves its dependencies.
// replacePath is the checkout at replace (relative to the working
// directory) as the new module's go.mod names it: relative to the module
// in dir, so that the two move together (a path go.mod reads as a
// directory starts with ./ or ../). Paths on different volumes stay
// absolute.
func replacePath(dir, replace string) (string, error) {
	abs, err := filepath.Abs(replace)
	if err != nil {
		return "", err
	}
	moduleDir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(moduleDir, abs)
	if err != nil {
		return abs, nil
	}
	rel = filepath.ToSlash(rel)
	if !strings.HasPrefix(rel, "../") && rel != ".." {
		rel = "./" + rel
	}
	return rel, nil
}

func initModule(ctx context.Context, dir, module, replace string, stdout, stderr io.Writer) error {
	tool := bindkitModule + "/cmd/bindkit"
	steps := [][]string{{"mod", "init", module}}
	if replace != "" {
		target, err := replacePath(dir, replace)
		if err != nil {
			return err
		}
		steps = append(steps, []string{"mod", "edit", "-require=" + bindkitModule + "@v0.0.0-00010101000000-000000000000", "-replace=" + bindkitModule + "=" + target, "-tool=" + tool})
	} else {
		version := "latest"
		if info, ok := debug.ReadBuildInfo(); ok && info.Main.Path == bindkitModule && info.Main.Version != "" && info.Main.Version != "(devel)" {
			version = info.Main.Version
		}
		steps = append(steps, []string{"get", "-tool", tool + "@" + version})
	}
	steps = append(steps, []string{"mod", "tidy"})
	for _, args := range steps {
		fmt.Fprintf(stdout, "go %s\n", strings.Join(args, " "))
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off")
		cmd.Stdout, cmd.Stderr = stderr, stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
		}
	}
	return nil
}
