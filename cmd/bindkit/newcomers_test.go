package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/bindkit/bindkit/envtest"
)

// newcomersBug is one mistake a new author makes in a ProxyBinding's Do or
// Undo (testdata/proxy/types.go.txt), as edits of the correct file.
type newcomersBug struct {
	name  string
	edits []string // old, new, old, new, ...
	want  []string // what the one failure says
}

// newcomersBugs are the seven of issue 37, three more, and issue 55's
// two (a Do that changes its Binding, a Do that reads the clock).
var newcomersBugs = []newcomersBug{{
	name: "Do replaces each container's env wholesale",
	edits: []string{`	for _, e := range env {
		if j := slices.IndexFunc(c.Env, func(x corev1.EnvVar) bool { return x.Name == e.Name }); j >= 0 {
			c.Env[j] = e
		} else {
			c.Env = append(c.Env, e)
		}
	}
`, "\tc.Env = env\n"},
	want: []string{"Do breaks its promise to keep what the subject has", "removes template.spec.containers[bindingtest-app].env[LOG_LEVEL]", "fix: change only the entries Do adds"},
}, {
	name: "Do rebuilds each container from its name, image and env",
	edits: []string{"\t\t\tbindContainer(&list[i], b.env())\n",
		"\t\t\tlist[i] = corev1.Container{Name: list[i].Name, Image: list[i].Image, Env: list[i].Env}\n\t\t\tbindContainer(&list[i], b.env())\n"},
	want: []string{"Do breaks its promise to keep what the subject has", "removes template.spec.containers[bindingtest-app].ports[http]"},
}, {
	name: "Undo deletes the volume at the index Do remembered",
	edits: []string{
		"\t//FIELDS\n", "\tCAIndex int `json:\"-\"`\n",
		"\t\tspec.Volumes[i].VolumeSource = corev1.VolumeSource{ConfigMap: source}\n",
		"\t\tspec.Volumes[i].VolumeSource = corev1.VolumeSource{ConfigMap: source}\n\t\tb.CAIndex = i + 1\n",
		"\t\tspec.Volumes = append(spec.Volumes, corev1.Volume{Name: caVolume, VolumeSource: corev1.VolumeSource{ConfigMap: source}})\n",
		"\t\tspec.Volumes = append(spec.Volumes, corev1.Volume{Name: caVolume, VolumeSource: corev1.VolumeSource{ConfigMap: source}})\n\t\tb.CAIndex = len(spec.Volumes)\n",
		"\tspec.Volumes = slices.DeleteFunc(spec.Volumes, isCAVolume)\n",
		"\tif b.CAIndex > 0 && b.CAIndex <= len(spec.Volumes) {\n\t\tspec.Volumes = slices.Delete(spec.Volumes, b.CAIndex-1, b.CAIndex)\n\t}\n",
	},
	// Caught where it starts: Do keeps the index in the Binding.
	want: []string{"Do breaks its promise to leave its Binding alone", "CAIndex: 0 before, ", "fix: compute what Do needs in local variables"},
}, {
	name: "Do completes NO_PROXY in its Binding's spec",
	edits: []string{"func (b *ProxyBinding) env() []corev1.EnvVar {\n",
		"func (b *ProxyBinding) env() []corev1.EnvVar {\n\tb.Spec.NoProxy += \",.cluster.local\"\n"},
	want: []string{"Do breaks its promise to leave its Binding alone", `spec.noProxy: "localhost,.svc" before, "localhost,.svc,.cluster.local`},
}, {
	name: "Do stamps the time it bound in an annotation",
	edits: []string{"\tmeta.Annotations[caAnnotation] = b.Spec.CAConfigMap\n",
		"\tmeta.Annotations[caAnnotation] = b.Spec.CAConfigMap\n\tmeta.Annotations[\"proxy.example.com/bound-at\"] = time.Now().UTC().Format(time.RFC3339)\n",
		"\t\"slices\"\n", "\t\"slices\"\n\t\"time\"\n"},
	want: []string{"Do breaks its promise to be a function of the Binding and the subject", "its template changes at every admitted update of a workload, which rolls its pods", "never time.Now() in Do"},
}, {
	name: "Do appends without looking for its own entries",
	edits: []string{`	for _, e := range env {
		if j := slices.IndexFunc(c.Env, func(x corev1.EnvVar) bool { return x.Name == e.Name }); j >= 0 {
			c.Env[j] = e
		} else {
			c.Env = append(c.Env, e)
		}
	}
`, "\tc.Env = append(c.Env, env...)\n"},
	want: []string{"Do breaks its promise to be idempotent", "fix: look for what Do adds (by name) before adding it"},
}, {
	name: "Do builds the env from a Go map",
	edits: []string{`	return []corev1.EnvVar{
		{Name: "HTTP_PROXY", Value: b.Spec.Proxy},
		{Name: "HTTPS_PROXY", Value: b.Spec.Proxy},
		{Name: "NO_PROXY", Value: b.Spec.NoProxy},
	}
`, `	vars := map[string]string{"HTTP_PROXY": b.Spec.Proxy, "HTTPS_PROXY": b.Spec.Proxy, "NO_PROXY": b.Spec.NoProxy}
	var env []corev1.EnvVar
	for name, value := range vars {
		env = append(env, corev1.EnvVar{Name: name, Value: value})
	}
	return env
`},
	want: []string{"Do breaks its promise to be deterministic", "it orders entries differently", "in one run,", "slices.Sorted(maps.Keys(m))"},
}, {
	name: "Undo removes every env var that begins with HTTP",
	edits: []string{`	return e.Name == "HTTP_PROXY" || e.Name == "HTTPS_PROXY" || e.Name == "NO_PROXY"`,
		`	return strings.HasPrefix(e.Name, "HTTP") || e.Name == "NO_PROXY"`,
		"\t\"slices\"\n", "\t\"slices\"\n\t\"strings\"\n"},
	want: []string{"Undo breaks its promise to leave a subject Do never bound as it is", "user entries named like the Binding's own", "env[HTTP_PROXY_USER]"},
}, {
	name: "Do sets the env of the first container only",
	edits: []string{`	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			bindContainer(&list[i], b.env())
		}
	}
	source`, `	bindContainer(&spec.Containers[0], b.env())
	source`},
	// As generated: the scaffold's Reach is every container.
	want: []string{"Do breaks its promise to reach every container of spec.containers", "container bindingtest-sidecar lacks env HTTP_PROXY"},
}, {
	name:  "Do writes the annotation into a nil map",
	edits: []string{"\tif meta.Annotations == nil {\n\t\tmeta.Annotations = map[string]string{}\n\t}\n", ""},
	want:  []string{"Do breaks its promise not to panic on a bare pod template", "assignment to entry in nil map", "types.go:", "fix: check for nil maps"},
}, {
	name:  "Do mounts the CA under another name than its volume's",
	edits: []string{"corev1.VolumeMount{Name: caVolume,", `corev1.VolumeMount{Name: "proxy-certs",`},
	want:  []string{"Do breaks its promise to mount only volumes the pod has", `mounts volume "proxy-certs" at /etc/proxy-ca`, "(Do adds: proxy-ca)"},
}, {
	name: "Undo forgets the init containers",
	edits: []string{`	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			c := &list[i]`, `	for _, list := range [][]corev1.Container{spec.Containers} {
		for i := range list {
			c := &list[i]`},
	want: []string{"Undo breaks its promise to restore", "leaves template.spec.initContainers[bindingtest-setup].env[HTTP_PROXY], which Do added"},
}}

// TestContractCatchesNewcomersBugs is a new author's ProxyBinding (three
// proxy env vars and a CA ConfigMap mounted in every container and init
// container) in a module `bindkit new` scaffolds outside the repository,
// with no control plane: the correct kind passes the generated tests,
// whose checks on a server say what they skipped; and each of twelve
// mistakes newcomers make in Do or Undo (testdata/proxy/types.go.txt,
// newcomersBugs) fails the generated contract test once, at its line, in
// at most 30 lines of go test output that name the call, the promise, the
// field and the fix. No generated file is edited: the scaffold's Reach
// holds Do to every container (ContractOptions.Reach).
func TestContractCatchesNewcomersBugs(t *testing.T) {
	t.Parallel() // thirteen go test runs: beside the other scaffolding tests
	if testing.Short() {
		t.Skip("scaffolds a module and runs go test in it thirteen times: minutes (make test runs it)")
	}
	if minor := os.Getenv(envtest.KubeMinorEnv); minor != "" && minor != envtest.NewestMinor {
		t.Skipf("uses no control plane: run once, in the newest minor's pass (%s=%s)", envtest.KubeMinorEnv, minor)
	}
	m := scaffoldModule(t, "example.com/proxybinding", "ProxyBinding")
	good := m.read("testdata/proxy/types.go.txt")
	m.writeTypes(good)

	out, err := m.goTest(noBinaries(t), "-v", "./...")
	if err != nil {
		t.Fatalf("the generated tests fail on a correct ProxyBinding without a control plane: %v\n%s", err, out)
	}
	for _, want := range []string{
		"--- PASS: TestContract ", "--- SKIP: TestContract/on_the_API_server ",
		"skipped (the checks without a server ran and passed): Do and Undo on a Deployment",
		"--- SKIP: TestExampleIsValid ", "--- SKIP: TestWithRealAPIServer ", "the fastest way to get them: `go tool bindkit controlplane`",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("go test -v ./... without a control plane: no %q:\n%s", want, out)
		}
	}

	for _, bug := range newcomersBugs {
		t.Run(bug.name, func(t *testing.T) {
			src := good
			for i := 0; i+1 < len(bug.edits); i += 2 {
				if !strings.Contains(src, bug.edits[i]) {
					t.Fatalf("the ProxyBinding has no %q", bug.edits[i])
				}
				src = strings.Replace(src, bug.edits[i], bug.edits[i+1], 1)
			}
			m.writeTypesOnly(src) // the bugs change no type: the generated files stay
			defer m.writeTypesOnly(good)
			out, err := m.goTest(noBinaries(t), "-run", "^TestContract$", "./apis/v1alpha1")
			if err == nil {
				t.Fatalf("the contract test passes:\n%s", out)
			}
			if n := strings.Count(out, "contract_test.go:"); n != 1 {
				t.Errorf("%d failures reported at contract_test.go, want 1:\n%s", n, out)
			}
			for _, w := range bug.want {
				if !strings.Contains(out, w) {
					t.Errorf("the failure does not say %q:\n%s", w, out)
				}
			}
			if n := strings.Count(out, "\n"); n > 30 {
				t.Errorf("%d lines of output, want at most 30:\n%s", n, out)
			}
			t.Logf("go test output (%d lines):\n%s", strings.Count(out, "\n"), out)
		})
	}
}

// TestNewcomersKindsOnAControlPlane: the correct ProxyBinding, and a
// declarative kind written from the README (a declarative.Spec with env,
// a ConfigMap volume the server gives a defaultMode, and its mount), pass
// every generated test against a real kube-apiserver, unedited, with no
// output beyond the tests' names; and an Example that leaves a required
// field empty fails TestExampleIsValid naming the field.
func TestNewcomersKindsOnAControlPlane(t *testing.T) {
	t.Parallel() // two modules built and tested on control planes of their own
	if bins := os.Getenv(envtest.BinDirEnv); !isExecutable(filepath.Join(bins, "kube-apiserver")) && !envtest.InCI() {
		t.Skipf("needs a control plane: set %s to the binaries' directory (bindkit's repository: make tools)", envtest.BinDirEnv)
	}
	for _, kind := range []struct{ module, kind, types string }{
		{"example.com/proxybinding", "ProxyBinding", "testdata/proxy/types.go.txt"},
		{"example.com/sinkbinding", "SinkBinding", "testdata/declarative/types.go.txt"},
	} {
		t.Run(kind.kind, func(t *testing.T) {
			t.Parallel()
			m := scaffoldModule(t, kind.module, kind.kind)
			types := strings.Replace(m.read(kind.types), "//README\n", readmeDeclarative(t), 1)
			m.writeTypes(types)
			out, err := m.goTest(nil, "-v", "./...")
			if err != nil {
				t.Fatalf("go test -v ./...: %v\n%s", err, out)
			}
			quiet := regexp.MustCompile(`^(=== (RUN|PAUSE|CONT) |\s*--- PASS: |PASS$|ok\s|\?\s)`)
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				if !quiet.MatchString(line) {
					t.Errorf("go test -v ./... prints more than the tests' names and results: %q\n%s", line, out)
					break
				}
			}
			if strings.Contains(types, "Proxy:") {
				m.writeTypes(strings.Replace(types, `Proxy: "http://proxy.example:3128"`, `Proxy: ""`, 1))
				out, err := m.goTest(nil, "-run", "^TestExampleIsValid$", "./apis/v1alpha1")
				if err == nil || !strings.Contains(out, "spec.proxy") {
					t.Errorf("TestExampleIsValid with an empty spec.proxy: %v, want a failure naming spec.proxy:\n%s", err, out)
				}
			}
		})
	}
}

// readmeDeclarative returns the methods of the author's guide's
// declarative kind, from Declare to the end of its Go snippet.
func readmeDeclarative(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../../docs/authors-guide.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## Declarative Bindings")
	_, block, ok2 := strings.Cut(section, "```go\n")
	block, _, ok3 := strings.Cut(block, "```\n")
	i := strings.Index(block, "func (b *SinkBinding) Declare()")
	if !ok || !ok2 || !ok3 || i < 0 {
		t.Fatal("docs/authors-guide.md has no declarative SinkBinding's Declare in a Go snippet of its section Declarative Bindings")
	}
	return block[i:]
}

// module is a Binding module `bindkit new` scaffolded for a test.
type module struct {
	t   *testing.T
	dir string
}

// scaffoldModule runs `bindkit new` into a temporary directory outside the
// repository, replacing bindkit with this checkout.
func scaffoldModule(t *testing.T, path, kind string) *module {
	t.Helper()
	checkout, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), filepath.Base(path))
	var stdout, stderr bytes.Buffer
	args := []string{"new", "-module", path, "-kind", kind, "-dir", dir, "-replace", checkout}
	if err := run(t.Context(), args, &stdout, &stderr); err != nil {
		t.Fatalf("bindkit %s: %v\n%s%s", strings.Join(args, " "), err, stdout.Bytes(), stderr.Bytes())
	}
	return &module{t: t, dir: dir}
}

// read returns a file of this package's directory.
func (m *module) read(path string) string {
	m.t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		m.t.Fatal(err)
	}
	return string(data)
}

// edit replaces old with new in a file of the module.
func (m *module) edit(path, old, new string) {
	m.t.Helper()
	full := filepath.Join(m.dir, filepath.FromSlash(path))
	data, err := os.ReadFile(full)
	if err != nil {
		m.t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(old)) {
		m.t.Fatalf("%s has no %q", path, old)
	}
	if err := os.WriteFile(full, bytes.Replace(data, []byte(old), []byte(new), 1), 0o644); err != nil {
		m.t.Fatal(err)
	}
}

// writeTypes writes the kind's type file and regenerates the deep copies
// and the CRD, as the author does.
func (m *module) writeTypes(src string) {
	m.t.Helper()
	m.writeTypesOnly(src)
	if out, err := m.goIn(nil, "tool", "bindkit", "generate"); err != nil {
		m.t.Fatalf("go tool bindkit generate: %v\n%s", err, out)
	}
}

// writeTypesOnly writes the kind's type file.
func (m *module) writeTypesOnly(src string) {
	m.t.Helper()
	if err := os.WriteFile(filepath.Join(m.dir, "apis", "v1alpha1", "types.go"), []byte(src), 0o644); err != nil {
		m.t.Fatal(err)
	}
}

// goTest runs go test -count=1 with args in the module.
func (m *module) goTest(env []string, args ...string) (string, error) {
	return m.goIn(env, append([]string{"test", "-count=1"}, args...)...)
}

// goIn runs the go command in the module, with env added to the
// process's environment.
func (m *module) goIn(env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(m.t.Context(), "go", args...)
	cmd.Dir = m.dir
	cmd.Env = append(append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly"), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// noBinaries is an environment in which envtest finds no control plane:
// empty user cache and setup-envtest store, no $KUBEBUILDER_ASSETS or
// $BINDKIT_BIN_DIR, not CI; the go command keeps its caches.
func noBinaries(t *testing.T) []string {
	t.Helper()
	var env []string
	for _, v := range []string{"GOCACHE", "GOMODCACHE", "GOPATH"} {
		out, err := exec.Command("go", "env", v).Output()
		if err != nil {
			t.Fatal(err)
		}
		env = append(env, v+"="+strings.TrimSpace(string(out)))
	}
	return append(env, "XDG_CACHE_HOME="+t.TempDir(), "XDG_DATA_HOME="+t.TempDir(),
		envtest.KubebuilderAssetsEnv+"=", envtest.BinDirEnv+"=", "CI=")
}
