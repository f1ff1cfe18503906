package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/bindkit/bindkit/envtest"
)

// The kubebuilder and kustomize the integration test scaffolds and builds
// with, from the Go module proxy: kubebuilder's newest release, and the
// kustomize its Makefile pins.
const (
	kubebuilderCLI = "sigs.k8s.io/kubebuilder/v4@v4.16.0"
	kustomizeCLI   = "sigs.k8s.io/kustomize/kustomize/v5@v5.8.1"
)

// TestKubebuilderAddsABindingKindToAKubebuilderProject is the kubebuilder
// user's path, whole, outside the repository: kubebuilder itself scaffolds
// a project (init, create api Region, create webhook Region --defaulting,
// so that kubebuilder's cert-manager CA injection is on), `bindkit
// kubebuilder create binding` adds RegionBinding (go.mod replacing bindkit
// with this checkout); then config/default builds with kustomize, where
// kubebuilder's webhook configuration is annotated for cert-manager's CA
// injection and bindkit's is not (one writer of its caBundle) and keeps
// its name; the project's own make test passes on the binaries bindkit's
// tests use (KUBEBUILDER_ASSETS), running the generated contract test and
// the envtest specs that bind Deployments through a Manager (crtest);
// bindkit generate writes the CRD make manifests wrote; go build ./...
// passes; a second run refuses and leaves the project alone. Then the
// project's Manager runs as a user runs it (checkManagerRuns): two
// replicas of its binary under the generated RBAC, against a control
// plane with running pods, through a leader's SIGKILL and caches that
// cannot sync.
// Without binaries it skips, except under CI=true, where it fails.
func TestKubebuilderAddsABindingKindToAKubebuilderProject(t *testing.T) {
	t.Parallel() // minutes of builds and a control plane: beside the other scaffolding tests
	if testing.Short() {
		t.Skip("scaffolds a kubebuilder project, builds and tests it: minutes (make test runs it)")
	}
	if minor := os.Getenv(envtest.KubeMinorEnv); minor != "" && minor != envtest.NewestMinor {
		t.Skipf("the project's envtest runs the newest minor: run once, in its pass (%s=%s)", envtest.KubeMinorEnv, minor)
	}
	assets, err := envtest.BinaryDir(envtest.Options{})
	if err != nil {
		if envtest.InCI() {
			t.Fatalf("CI=true: %v", err)
		}
		t.Skipf("no control plane for the project's make test: %v", err)
	}
	checkout, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	tools := t.TempDir()
	for _, cli := range []string{kubebuilderCLI, kustomizeCLI} {
		runOrFail(t, "", []string{"GOBIN=" + tools}, "go", "install", cli)
	}
	dir := filepath.Join(t.TempDir(), "regions")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	kubebuilder := filepath.Join(tools, "kubebuilder")
	runOrFail(t, dir, nil, kubebuilder, "init", "--domain", "example.com", "--repo", "example.com/regions")
	runOrFail(t, dir, nil, kubebuilder, "create", "api", "--group", "region", "--version", "v1", "--kind", "Region", "--resource", "--controller", "--make=false")
	runOrFail(t, dir, nil, kubebuilder, "create", "webhook", "--group", "region", "--version", "v1", "--kind", "Region", "--defaulting", "--make=false")

	args := []string{"kubebuilder", "create", "binding", "-dir", dir, "-group", "region", "-version", "v1", "-kind", "RegionBinding", "-replace", checkout}
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), args, &stdout, &stderr); err != nil {
		t.Fatalf("bindkit %s: %v\n%s%s", strings.Join(args, " "), err, stdout.Bytes(), stderr.Bytes())
	}
	if strings.Contains(stdout.String(), "warning:") {
		t.Errorf("bindkit kubebuilder warns on a project kubebuilder %s wrote:\n%s", kubebuilderCLI, stdout.Bytes())
	}
	checkKustomizeBuild(t, filepath.Join(tools, "kustomize"), dir)
	checkRunAgainRefuses(t, dir, args)

	// controller-runtime's envtest gives its kube-apiserver 20 s to start,
	// less than it takes on 2 cores busy with make test's other lanes.
	runOrFail(t, dir, []string{"KUBEBUILDER_ASSETS=" + assets, "KUBEBUILDER_CONTROLPLANE_START_TIMEOUT=3m"}, "make", "test")
	cover, err := os.ReadFile(filepath.Join(dir, "cover.out"))
	if err != nil {
		t.Fatal(err)
	}
	if !ranLines(cover, "example.com/regions/internal/controller/regionbinding_wiring.go:") {
		t.Errorf("make test ran nothing of NewRegionBinding: the envtest specs of regionbinding_wiring_test.go did not run")
	}
	checkOneCRD(t, dir)
	runOrFail(t, dir, nil, "go", "build", "./...")
	checkManagerRuns(t, dir, filepath.Join(tools, "kustomize"))
}

// checkOneCRD checks that bindkit generate writes the CRD make manifests
// wrote: the generated type's bounds are markers, so the bounds generate
// adds change nothing.
func checkOneCRD(t *testing.T, dir string) {
	t.Helper()
	crdDir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if err := generate(t.Context(), dir, []string{"./api/..."}, crdDir, "", false, &stdout, &stderr); err != nil {
		t.Fatalf("bindkit generate in the project: %v\n%s%s", err, stdout.Bytes(), stderr.Bytes())
	}
	read := func(path string) map[string]any {
		t.Helper()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var crd map[string]any
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return crd
	}
	byManifests := read(filepath.Join(dir, "config", "crd", "bases", "region.example.com_regionbindings.yaml"))
	byGenerate := read(filepath.Join(crdDir, CRDFileName("regionbinding")))
	if diff := cmp.Diff(byManifests, byGenerate); diff != "" {
		t.Errorf("the CRD of make manifests and that of bindkit generate differ (-make manifests +bindkit generate):\n%s", diff)
	}
}

// checkKustomizeBuild builds config/default and checks bindkit's
// MutatingWebhookConfiguration beside kubebuilder's: named as bindkit
// programs it, with no cert-manager annotation (bindkit writes its
// caBundle), its Service kustomize's; kubebuilder's annotated.
func checkKustomizeBuild(t *testing.T, kustomize, dir string) {
	t.Helper()
	out := runOrFail(t, dir, nil, kustomize, "build", "config/default")
	type webhookConfig struct {
		Annotations map[string]string
		Service     string
	}
	got := map[string]webhookConfig{}
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("kustomize build config/default: %v", err)
		}
		if u.GetKind() != "MutatingWebhookConfiguration" {
			continue
		}
		hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
		var service string
		if len(hooks) > 0 {
			service, _, _ = unstructured.NestedString(hooks[0].(map[string]any), "clientConfig", "service", "name")
		}
		got[u.GetName()] = webhookConfig{Annotations: u.GetAnnotations(), Service: service}
	}
	want := map[string]webhookConfig{
		"regionbindings.region.example.com": {Service: "regions-webhook-service"},
		"regions-mutating-webhook-configuration": {
			Annotations: map[string]string{"cert-manager.io/inject-ca-from": "regions-system/regions-serving-cert"},
			Service:     "regions-webhook-service",
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kustomize build config/default: MutatingWebhookConfigurations (-want +got):\n%s", diff)
	}
}

// checkRunAgainRefuses runs bindkit kubebuilder again for the same kind:
// it must fail saying PROJECT has it, and change no file.
func checkRunAgainRefuses(t *testing.T, dir string, args []string) {
	t.Helper()
	before := treeDigest(t, dir)
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), args, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "PROJECT already has region/v1 RegionBinding") {
		t.Errorf("bindkit kubebuilder create binding again: %v, want PROJECT already has region/v1 RegionBinding", err)
	}
	if diff := cmp.Diff(before, treeDigest(t, dir)); diff != "" {
		t.Errorf("bindkit kubebuilder create binding changed the project when it refused (-before +after):\n%s", diff)
	}
}

// treeDigest returns the content of every file under dir but bin/, by
// path.
func treeDigest(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			if d != nil && d.IsDir() && d.Name() == "bin" {
				return filepath.SkipDir
			}
			return err
		}
		content, err := os.ReadFile(path)
		files[path] = string(content)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// ranLines reports whether the coverage profile ran a statement of the
// file prefix names.
func ranLines(profile []byte, prefix string) bool {
	s := bufio.NewScanner(bytes.NewReader(profile))
	for s.Scan() {
		line := s.Text()
		if strings.HasPrefix(line, prefix) && !strings.HasSuffix(line, " 0") {
			return true
		}
	}
	return false
}

// runOrFail runs name with args in dir (the test's working directory when
// empty), env added to the test's, and returns its output; an error fails
// the test with the output. It is stopped, with everything it started, a
// minute before the test's deadline, so that the test fails saying which
// command ran out of time and leaves nothing running.
func runOrFail(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	if deadline, ok := t.Deadline(); ok {
		ctx, cancel = context.WithDeadline(t.Context(), deadline.Add(-time.Minute))
	}
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	ownProcessGroup(cmd)
	cmd.WaitDelay = 10 * time.Second
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "GOWORK=off", "GOFLAGS="), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestKubebuilderRefusesWithoutEditing runs bindkit kubebuilder create
// binding where it cannot add a kind: each error names the file or flag
// at fault, and the directory is left as it was.
func TestKubebuilderRefusesWithoutEditing(t *testing.T) {
	const project = "domain: example.com\nlayout:\n- go.kubebuilder.io/v4\nprojectName: regions\nrepo: example.com/regions\nversion: \"3\"\n"
	kind := []string{"-group", "region", "-version", "v1", "-kind", "RegionBinding"}
	for _, tc := range []struct {
		name  string
		files map[string]string
		args  []string
		want  string
	}{
		{"no PROJECT", nil, kind, "PROJECT: no such file or directory (run it at the root of a kubebuilder project"},
		{"not YAML", map[string]string{"PROJECT": "layout: [\n"}, kind, "PROJECT: "},
		{"another layout", map[string]string{"PROJECT": strings.Replace(project, "go.kubebuilder.io/v4", "go.kubebuilder.io/v3", 1)}, kind,
			"PROJECT: layout [go.kubebuilder.io/v3]: bindkit edits go.kubebuilder.io/v4 projects"},
		{"no repo", map[string]string{"PROJECT": strings.Replace(project, "repo: example.com/regions\n", "", 1)}, kind, "PROJECT: no repo or projectName"},
		{"no group", map[string]string{"PROJECT": project}, kind[2:], "-group is required"},
		{"a lower-case kind", map[string]string{"PROJECT": project}, []string{"-group", "region", "-version", "v1", "-kind", "regionBinding"}, `-kind "regionBinding"`},
		{"a bad version", map[string]string{"PROJECT": project}, []string{"-group", "region", "-version", "1", "-kind", "RegionBinding"}, `-version "1"`},
		{"no cmd/main.go", map[string]string{"PROJECT": project}, kind, "cmd/main.go: no such file (kubebuilder init writes it)"},
		{"cmd/main.go without markers", map[string]string{"PROJECT": project, "cmd/main.go": "package main\n\nfunc main() {}\n"}, kind,
			`cmd/main.go: no "+kubebuilder:scaffold:imports" marker`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for rel, content := range tc.files {
				path := filepath.Join(dir, filepath.FromSlash(rel))
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			before := treeDigest(t, dir)
			args := append([]string{"kubebuilder", "create", "binding", "-dir", dir, "-make=false"}, tc.args...)
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), args, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("bindkit %s: %v, want an error containing %q", strings.Join(tc.args, " "), err, tc.want)
			}
			if diff := cmp.Diff(before, treeDigest(t, dir)); diff != "" {
				t.Errorf("the refused run changed the directory (-before +after):\n%s", diff)
			}
		})
	}
}

// TestKubebuilderUsage: the command is create binding, its help names
// what it writes, and anything else is a usage error.
func TestKubebuilderUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want error
	}{
		{[]string{"help", "kubebuilder"}, flag.ErrHelp},
		{[]string{"kubebuilder", "create", "binding", "-h"}, flag.ErrHelp},
		{[]string{"kubebuilder"}, errUsage},
		{[]string{"kubebuilder", "create", "api"}, errUsage},
	} {
		var stdout, stderr bytes.Buffer
		err := run(t.Context(), tc.args, &stdout, &stderr)
		if !errors.Is(err, tc.want) {
			t.Errorf("bindkit %s: %v, want %v", strings.Join(tc.args, " "), err, tc.want)
		}
		for _, want := range []string{"usage: bindkit kubebuilder create binding", "config/bindkit/", "cert-manager", "-replace"} {
			if !strings.Contains(stderr.String(), want) {
				t.Errorf("bindkit %s: stderr lacks %q:\n%s", strings.Join(tc.args, " "), want, stderr.Bytes())
			}
		}
	}
}

// TestLeaderElectionNamespace: the Lease's namespace joins kubebuilder's
// ctrl.Options after LeaderElectionID, at its indentation; Options that
// name one are left alone; without LeaderElectionID the user is told.
func TestLeaderElectionNamespace(t *testing.T) {
	const options = "\tmgr, err := ctrl.NewManager(cfg, ctrl.Options{\n\t\tLeaderElection:   enableLeaderElection,\n\t\tLeaderElectionID: \"6eeb1830.example.com\",\n\t})\n"
	added := strings.Replace(options, "example.com\",\n", "example.com\",\n"+
		"\t\t// [BINDKIT] The Lease in the namespace the Manager runs in, as bindkit's\n"+
		"\t\t// SYSTEM_NAMESPACE: in a pod, config/default sets it to the pod's own;\n"+
		"\t\t// outside a cluster (--leader-elect against a remote control plane)\n"+
		"\t\t// controller-runtime finds no namespace of its own and refuses to start.\n"+
		"\t\tLeaderElectionNamespace: os.Getenv(\"SYSTEM_NAMESPACE\"),\n", 1)
	named := strings.Replace(options, "\t})", "\t\tLeaderElectionNamespace: \"regions-system\",\n\t})", 1)
	for _, tc := range []struct {
		name, in, want string
		warns          int
	}{
		{"kubebuilder's Options", options, added, 0},
		{"a namespace named", named, named, 0},
		{"no LeaderElectionID", "\tctrl.Options{}\n", "\tctrl.Options{}\n", 1},
	} {
		e := newEdits(t.TempDir())
		if diff := cmp.Diff(tc.want, leaderElectionNamespace(e, tc.in)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
		if len(e.warnings) != tc.warns {
			t.Errorf("%s: warnings %q, want %d", tc.name, e.warnings, tc.warns)
		}
	}
}
