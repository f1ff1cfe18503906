package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// ControllerToolsVersion is the sigs.k8s.io/controller-tools release whose
// controller-gen `bindkit generate` runs. `go run` builds it from the Go
// module proxy at that version, outside the current module's go.mod, and
// the Go build cache keeps the binary.
const ControllerToolsVersion = "v0.23.0"

// controllerGen is controller-gen's package at ControllerToolsVersion.
const controllerGen = "sigs.k8s.io/controller-tools/cmd/controller-gen@" + ControllerToolsVersion

// generatedMarkers are the markers that make a package an API package:
// deep copies or CRDs to generate.
var generatedMarkers = []string{"+kubebuilder:object:generate", "+kubebuilder:object:root", "+k8s:deepcopy-gen", "+groupName="}

// CRDFileName is where generate writes the CRD of a kind in the CRD
// directory: numbered after the namespace and RBAC (100-, 200-) and before
// the webhook configuration (500-), as config/ of a module `bindkit new`
// made is laid out.
func CRDFileName(singular string) string { return "300-" + singular + ".yaml" }

func runGenerate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("generate", flag.ContinueOnError)
	crdDir := fs.String("crd-dir", "config", "`directory` the CRDs go to, each as "+CRDFileName("<singular>")+"; empty for deep copies only")
	header := fs.String("header", "", "`file` whose text heads each generated Go file")
	check := fs.Bool("check", false, "write nothing; fail, showing the difference, when a generated file differs from the one in place")
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: bindkit generate [flags] [PACKAGE...]

Generates, with controller-gen `+ControllerToolsVersion+`, the deep-copy methods
(zz_generated.deepcopy.go) of every API package among PACKAGEs (default ./...),
and a CustomResourceDefinition for each kind marked +kubebuilder:object:root:
its OpenAPI schema from the Go types and their markers (bindkit's
tracker.Reference and duck.Status bring their own), the status subresource
(+kubebuilder:subresource:status) and printer columns (+kubebuilder:printcolumn);
beside each CRD, the ClusterRoles that aggregate writing its Bindings into
Kubernetes' admin and edit roles and reading them into view (320-<singular>-roles.yaml).
Then it runs the tests that keep a kind's admission policies in config/
(those calling bindingtest.CheckManifests), which write them.
An API package is one with +kubebuilder:object:generate, +kubebuilder:object:root,
+k8s:deepcopy-gen or +groupName markers.

controller-gen is built from the Go module proxy by "go run", once, into the Go
build cache; it never enters the module's go.mod.

Flags:`)
		fs.PrintDefaults()
	}
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	if err := generate(ctx, ".", fs.Args(), *crdDir, *header, *check, stdout, stderr); err != nil {
		return err
	}
	if *crdDir == "" {
		return nil
	}
	return runManifestTests(ctx, ".", *check, stdout, stderr)
}

// generate runs generate in the module directory dir: patterns (default
// ./...) and crdDir are relative to it.
func generate(ctx context.Context, dir string, patterns []string, crdDir, header string, check bool, stdout, stderr io.Writer) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	if header != "" {
		abs, err := filepath.Abs(header)
		if err != nil {
			return err
		}
		header = abs
	}
	if crdDir != "" && !filepath.IsAbs(crdDir) {
		crdDir = filepath.Join(dir, crdDir)
	}
	pkgs, err := apiPackages(ctx, dir, patterns)
	if err != nil {
		return err
	}
	if len(pkgs) == 0 {
		return fmt.Errorf("no API package (with %s markers) in %s", strings.Join(generatedMarkers, ", "), strings.Join(patterns, " "))
	}
	files := map[string][]byte{}
	for _, pkg := range pkgs {
		out, err := generatePackage(ctx, dir, pkg, crdDir, header, stderr)
		if err != nil {
			return err
		}
		for path, content := range out {
			files[path] = content
		}
	}
	paths := slices.Sorted(maps.Keys(files))
	if check {
		var stale []string
		for _, path := range paths {
			old, err := os.ReadFile(path)
			if err != nil && !os.IsNotExist(err) {
				return err
			}
			if !bytes.Equal(old, files[path]) {
				stale = append(stale, relative(path))
				fmt.Fprintf(stdout, "%s is stale (-in place +generated):\n%s\n", relative(path), cmp.Diff(lines(old), lines(files[path])))
			}
		}
		if len(stale) > 0 {
			return fmt.Errorf("%d generated file(s) stale: %s; run bindkit generate", len(stale), strings.Join(stale, ", "))
		}
		fmt.Fprintf(stdout, "%d generated file(s) current\n", len(paths))
		return nil
	}
	for _, path := range paths {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, files[path], 0o644); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s\n", relative(path))
	}
	return nil
}

func lines(b []byte) []string { return strings.Split(string(b), "\n") }

// relative returns path relative to the working directory when it is
// below it, for messages that read like the command line.
func relative(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	if rel, err := filepath.Rel(wd, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}

// apiPackage is a package generate runs controller-gen on.
type apiPackage struct {
	importPath, dir string
}

// apiPackages lists the packages that patterns match and that carry
// generation markers.
func apiPackages(ctx context.Context, dir string, patterns []string) ([]apiPackage, error) {
	cmd := exec.CommandContext(ctx, "go", append([]string{"list", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \"\\t\"}}"}, patterns...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %v\n%s", strings.Join(patterns, " "), err, stderr.Bytes())
	}
	var pkgs []apiPackage
	s := bufio.NewScanner(bytes.NewReader(out))
	for s.Scan() {
		fields := strings.Split(s.Text(), "\t")
		if len(fields) < 3 {
			continue
		}
		pkg := apiPackage{importPath: fields[0], dir: fields[1]}
		for _, f := range fields[2:] {
			if f == "zz_generated.deepcopy.go" {
				continue
			}
			src, err := os.ReadFile(filepath.Join(pkg.dir, f))
			if err != nil {
				return nil, err
			}
			if slices.ContainsFunc(generatedMarkers, func(m string) bool { return bytes.Contains(src, []byte(m)) }) {
				pkgs = append(pkgs, pkg)
				break
			}
		}
	}
	return pkgs, s.Err()
}

// generatePackage runs controller-gen on pkg into a temporary directory
// and returns the files it generated, by the path each belongs at.
func generatePackage(ctx context.Context, wd string, pkg apiPackage, crdDir, header string, stderr io.Writer) (map[string][]byte, error) {
	tmp, err := os.MkdirTemp("", "bindkit-generate-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	rel, err := filepath.Rel(wd, pkg.dir)
	if err != nil {
		return nil, err
	}
	object := "object"
	if header != "" {
		object += ":headerFile=" + header
	}
	args := []string{"run", controllerGen, object, "paths=./" + filepath.ToSlash(rel), "output:object:dir=" + filepath.Join(tmp, "object")}
	if crdDir != "" {
		args = append(args, "crd", "output:crd:dir="+filepath.Join(tmp, "crd"))
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = wd
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("controller-gen %s on %s: %w", ControllerToolsVersion, pkg.importPath, err)
	}
	out := map[string][]byte{}
	if deepcopy, err := os.ReadFile(filepath.Join(tmp, "object", "zz_generated.deepcopy.go")); err == nil {
		out[filepath.Join(pkg.dir, "zz_generated.deepcopy.go")] = deepcopy
	} else if !os.IsNotExist(err) {
		return nil, err
	}
	if crdDir == "" {
		return out, nil
	}
	crds, err := filepath.Glob(filepath.Join(tmp, "crd", "*.yaml"))
	if err != nil {
		return nil, err
	}
	for _, f := range crds {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var crd struct {
			Spec struct {
				Group string `json:"group"`
				Names struct {
					Singular string `json:"singular"`
					Plural   string `json:"plural"`
					Kind     string `json:"kind"`
				} `json:"names"`
			} `json:"spec"`
		}
		if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096).Decode(&crd); err != nil || crd.Spec.Names.Singular == "" {
			return nil, fmt.Errorf("controller-gen wrote %s, which names no singular: %v", filepath.Base(f), err)
		}
		if data, err = boundSpec(data); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Base(f), err)
		}
		head := fmt.Sprintf("# Generated by `bindkit generate` (controller-gen %s) from the Go types of\n# %s; edit them, not this file.\n", ControllerToolsVersion, pkg.importPath)
		out[filepath.Join(crdDir, CRDFileName(crd.Spec.Names.Singular))] = append([]byte(head), data...)
		names := crd.Spec.Names
		roles, err := aggregatedRoles(crd.Spec.Group, names.Plural, names.Kind, pkg.importPath)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Base(f), err)
		}
		out[filepath.Join(crdDir, RolesFileName(names.Singular))] = roles
	}
	return out, nil
}
