package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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
	if testing.Short() {
		t.Skip("-short: bindkit new builds and tests a module")
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
	if got := strings.Count(string(gomod), "replace "); got != 1 || !strings.Contains(string(gomod), "replace github.com/bindkit/bindkit => "+checkout) {
		t.Errorf("go.mod replaces %d modules, want bindkit with %s only:\n%s", got, checkout, gomod)
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
	if out := goIn("tool", "bindkit", "generate", "-check"); !strings.Contains(out, "2 generated file(s) current") {
		t.Errorf("go tool bindkit generate -check in the new module:\n%s", out)
	}
	out := goIn("test", "-count=1", "-v", "./...")
	if strings.Contains(out, "--- SKIP: TestWithRealAPIServer") && os.Getenv("CI") != "true" {
		t.Skipf("the new module's real-apiserver test skipped (no control plane):\n%s", out)
	}
	for _, want := range []string{"--- PASS: TestContract ", "--- PASS: TestWithRealAPIServer "} {
		if !strings.Contains(out, want) {
			t.Errorf("go test ./... in the new module: no %q:\n%s", want, out)
		}
	}
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
