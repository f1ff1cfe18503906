package main

import (
	"bytes"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/bindkit/bindkit/envtest"
)

// TestNewScaffoldsAPassingModule is the Binding author's path, whole:
// `bindkit new` creates a module in a temporary directory outside the
// repository, whose only replace points at this checkout; its generated
// files are current, it vets clean, and its tests pass as generated,
// the one against a real kube-apiserver (envtest, bindingtest.Run)
// included. The control plane comes from BINDKIT_BIN_DIR, as for bindkit's
// own tests; without it the generated test skips and so does this one,
// except under CI=true, where the generated test fails.
func TestNewScaffoldsAPassingModule(t *testing.T) {
	t.Parallel() // minutes of builds and a control plane: beside the other scaffolding tests
	if testing.Short() {
		t.Skip("scaffolds a module, vets and tests it twice: minutes (make test runs it)")
	}
	if minor := os.Getenv(envtest.KubeMinorEnv); minor != "" && minor != envtest.NewestMinor {
		// What a minor can change here, the kube-apiserver's handling of a
		// kind's CRD, webhook and policies as bindkit generates them, the
		// examples and test/authority prove on every minor (make test runs
		// cmd/bindkit in the newest minor's pass only).
		t.Skipf("what it adds to TestNewcomersKindsOnAControlPlane does not depend on the minor: run once, in the newest minor's pass (%s=%s)", envtest.KubeMinorEnv, minor)
	}
	checkout, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "envbinding")
	var stdout, stderr bytes.Buffer
	args := []string{"new", "-module", "example.com/envbinding", "-kind", "EnvBinding", "-dir", dir, "-replace", checkout}
	if err := run(t.Context(), args, &stdout, &stderr); err != nil {
		t.Fatalf("bindkit %s: %v\n%s%s", strings.Join(args, " "), err, stdout.Bytes(), stderr.Bytes())
	}

	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	// go.mod names the checkout relative to the module, so the two move together.
	target, err := replacePath(dir, checkout)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(gomod), "replace "); got != 1 || !strings.Contains(string(gomod), "replace github.com/bindkit/bindkit => "+target+"\n") {
		t.Errorf("go.mod replaces %d modules, want bindkit with %s (%s) only:\n%s", got, target, checkout, gomod)
	}
	if !strings.Contains(string(gomod), "tool github.com/bindkit/bindkit/cmd/bindkit") {
		t.Errorf("go.mod lacks bindkit as a tool:\n%s", gomod)
	}
	for _, f := range []string{"apis/v1alpha1/zz_generated.deepcopy.go", "config/300-envbinding.yaml", "config/201-clusterrole.yaml", "cmd/controller/main.go"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("bindkit new wrote no %s: %v", f, err)
		}
	}

	goIn := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), "go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s in the new module: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	goIn("vet", "./...")
	// The module's own bindkit, as its author runs it, finds nothing stale.
	if out := goIn("tool", "bindkit", "generate", "-check"); !strings.Contains(out, "3 generated file(s) current") {
		t.Errorf("go tool bindkit generate -check in the new module:\n%s", out)
	}
	testModule := func(what string) {
		t.Helper()
		out := goIn("test", "-count=1", "-v", "./...")
		if strings.Contains(out, "--- SKIP: TestWithRealAPIServer") && os.Getenv("CI") != "true" {
			t.Skipf("%s: the real-apiserver test skipped (no control plane):\n%s", what, out)
		}
		for _, want := range []string{"--- PASS: TestContract ", "--- PASS: TestWithRealAPIServer "} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: go test ./...: no %q:\n%s", what, want, out)
			}
		}
	}
	testModule("the module as generated")
	if t.Failed() {
		return
	}

	// The README's tutorial, applied to the module as it tells: each Go
	// snippet of "Writing a Binding" is a file, named on its first line.
	snippets := readmeSnippets(t, "../../docs/getting-started.md", "## Writing a Binding")
	for path, content := range snippets {
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(path)), []byte(content), 0o644); err != nil {
			t.Fatalf("README snippet %s: %v", path, err)
		}
	}
	if _, ok := snippets["apis/v1alpha1/types.go"]; !ok || len(snippets) < 3 {
		t.Fatalf("README's tutorial has the snippets %v, want the type file, the wiring and main", slices.Sorted(maps.Keys(snippets)))
	}
	goIn("tool", "bindkit", "generate")
	crd, err := os.ReadFile(filepath.Join(dir, "config", "300-envbinding.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(crd), "value:") {
		t.Errorf("the CRD generated from the README's type has no spec.value:\n%s", crd)
	}
	goIn("vet", "./...")
	testModule("the README's EnvBinding")
}

// readmeSnippets returns the Go snippets of a README section, by the path
// each names on its first line ("// apis/v1alpha1/types.go"). A snippet
// that names no path fails the test: every snippet of the tutorial is
// compiled.
func readmeSnippets(t *testing.T, readme, heading string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	start := strings.Index(text, "\n"+heading+"\n")
	if start < 0 {
		t.Fatalf("%s has no section %q", readme, heading)
	}
	section := text[start+1:]
	if end := strings.Index(section[len(heading):], "\n## "); end >= 0 {
		section = section[:len(heading)+end]
	}
	snippets := map[string]string{}
	for _, block := range strings.Split(section, "```go\n")[1:] {
		code, _, ok := strings.Cut(block, "```\n")
		if !ok {
			t.Fatalf("%s: an unterminated Go snippet in %q", readme, heading)
		}
		first, _, _ := strings.Cut(code, "\n")
		path, ok := strings.CutPrefix(first, "// ")
		if !ok || strings.ContainsAny(path, " \t") || !strings.HasSuffix(path, ".go") {
			t.Fatalf("%s: a Go snippet in %q does not name its file on its first line (// path/file.go):\n%s", readme, heading, code)
		}
		snippets[path] = code
	}
	return snippets
}

func TestNewScaffoldData(t *testing.T) {
	got, err := newScaffoldData("example.com/team/envbinding", "EnvBinding", "")
	if err != nil {
		t.Fatal(err)
	}
	want := scaffoldData{
		Module: "example.com/team/envbinding", Package: "envbinding", Kind: "EnvBinding", Lower: "envbinding",
		Resource: "envbindings", Group: "bindings.example.com", Component: "envbinding-controller",
		Namespace: "envbinding-system", WebhookConfiguration: "envbindings.bindings.example.com", CRDFile: "300-envbinding.yaml",
		PoliciesFile: "310-envbinding-admission-policies.yaml", RolesFile: "320-envbinding-roles.yaml", EnvName: "ENVBINDING_VALUE",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("newScaffoldData (-want +got):\n%s", diff)
	}
	for _, tc := range []struct{ module, kind, group, wantErr string }{
		{"", "EnvBinding", "", "-module is required"},
		{"example.com/x y", "EnvBinding", "", "is not a module path"},
		{"example.com/envbinding", "", "", "-kind is required"},
		{"example.com/envbinding", "envBinding", "", `-kind "envBinding"`},
		{"example.com/envbinding", "Env-Binding", "", `-kind "Env-Binding"`},
		{"example.com/envbinding", "EnvBinding", "Bindings", `-group "Bindings"`},
		{"example.com/envbinding", "EnvBinding", "bindings", `-group "bindings"`},
	} {
		_, err := newScaffoldData(tc.module, tc.kind, tc.group)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("newScaffoldData(%q, %q, %q) = %v, want an error with %q", tc.module, tc.kind, tc.group, err, tc.wantErr)
		}
	}
}

func TestNewRefusesAnExistingDirectory(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"new", "-module", "example.com/envbinding", "-kind", "EnvBinding", "-dir", dir}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("bindkit new into an existing directory: %v, want an error", err)
	}
}

// TestScaffoldRBACIsConfigs: the roles `bindkit new` writes grant what the
// repository's config/ grants githubbinding, rule for rule, which
// config's tests prove is enough (the controller runs under it against a
// real kube-apiserver, its metrics scraped through the metrics-reader
// role) and no more than the allowlist.
func TestScaffoldRBACIsConfigs(t *testing.T) {
	data, err := newScaffoldData("github.com/bindkit/bindkit/examples/githubbinding", "GithubBinding", "bindings.bindkit.dev")
	if err != nil {
		t.Fatal(err)
	}
	data.WebhookConfiguration = "githubbindings.webhook.bindkit.dev"
	dir := t.TempDir()
	if err := writeScaffold(dir, data); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"201-clusterrole.yaml", "203-role.yaml", "205-metrics-reader.yaml"} {
		var want, got struct {
			Rules []rbacv1.PolicyRule `json:"rules"`
		}
		decodeYAML(t, filepath.Join("..", "..", "config", f), &want)
		decodeYAML(t, filepath.Join(dir, "config", f), &got)
		if len(want.Rules) == 0 {
			t.Fatalf("config/%s has no rules", f)
		}
		if diff := cmp.Diff(want.Rules, got.Rules); diff != "" {
			t.Errorf("the scaffold's config/%s differs from the repository's (-repository +scaffold):\n%s", f, diff)
		}
	}
}

func decodeYAML(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096).Decode(into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestReplacePathIsRelativeToTheModule: -replace writes a path relative to
// the new module, so the two move together.
func TestReplacePathIsRelativeToTheModule(t *testing.T) {
	tests := []struct{ dir, replace, want string }{
		{"../envbinding", ".", "../bindkit"}, // the working directory is cmd/bindkit
		{"envbinding", ".", ".."},
		{"a/b/envbinding", "..", "../../../.."},
		{"envbinding", "envbinding/vendor/bindkit", "./vendor/bindkit"},
	}
	for _, tc := range tests {
		got, err := replacePath(tc.dir, tc.replace)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("replacePath(%q, %q) = %q, want %q", tc.dir, tc.replace, got, tc.want)
		}
	}
}
