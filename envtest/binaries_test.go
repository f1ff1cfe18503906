package envtest_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bindkit/bindkit/envtest"
)

// TestReleasesAreTheToolsModules: the versions envtest names (and `bindkit
// controlplane` builds into the cache) are those the repository's tools
// modules build into bin/ (hack/tools for the newest minor, hack/tools/k8s1NN
// for the others), so a Binding author tests against what bindkit is
// tested against.
func TestReleasesAreTheToolsModules(t *testing.T) {
	var got []envtest.Release
	for _, minor := range envtest.SupportedMinors() {
		dir := filepath.Join("..", "hack", "tools")
		if minor != envtest.NewestMinor {
			dir = filepath.Join(dir, "k8s"+strings.ReplaceAll(minor, ".", ""))
		}
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, envtest.Release{
			Minor:      minor,
			Kubernetes: requirement(t, data, "k8s.io/kubernetes"),
			Etcd:       requirement(t, data, "go.etcd.io/etcd/server/v3"),
		})
	}
	if diff := cmp.Diff(got, envtest.Releases()); diff != "" {
		t.Errorf("Releases() differ from the tools modules (-tools +envtest):\n%s", diff)
	}
	if envtest.Releases()[0].Minor != envtest.NewestMinor {
		t.Errorf("the first release is %s, want NewestMinor %s", envtest.Releases()[0].Minor, envtest.NewestMinor)
	}
}

func requirement(t *testing.T, goMod []byte, module string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(module) + `\s+(v\S+)`).FindSubmatch(goMod)
	if m == nil {
		t.Fatalf("go.mod requires no %s", module)
	}
	return string(m[1])
}

func TestCacheDirIsPerRelease(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", "/cache")
	t.Setenv("HOME", "/home/u")
	a, err := envtest.CacheDir(envtest.Releases()[0])
	if err != nil {
		t.Fatal(err)
	}
	b, err := envtest.CacheDir(envtest.Releases()[1])
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Errorf("two releases share the cache directory %s", a)
	}
	base, _ := os.UserCacheDir()
	if !strings.HasPrefix(a, filepath.Join(base, "bindkit")) {
		t.Errorf("CacheDir = %s, want it under %s", a, filepath.Join(base, "bindkit"))
	}
}

// TestKwokIsTheToolsModules: envtest.Kwok names the kwok that hack/tools/kwok
// builds into bin/.
func TestKwokIsTheToolsModules(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "hack", "tools", "kwok", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if got := requirement(t, data, "sigs.k8s.io/kwok"); got != envtest.Kwok {
		t.Errorf("hack/tools/kwok builds kwok %s, envtest.Kwok = %s", got, envtest.Kwok)
	}
}

// TestModulesShareClientGoBuilds: the modules below require what
// client-go, k8s.io/api and apimachinery are built from at the same
// versions as the module whose build runs before theirs in make test, so
// that on a fresh machine (CI) they reuse its compiled packages from the
// Go build cache: vet and the example controllers the newest control
// plane's (208 CPU seconds of compiling on an empty cache), kwok the
// older one's (its build 43 s instead of 66). A module missing from a
// list shows as a recompiled client-go in `go build -v` after
// `make tools`. kwok's x/oauth2 is kwok's own, newer, so its client-go
// above the transport is its own build anyway.
func TestModulesShareClientGoBuilds(t *testing.T) {
	for _, tc := range []struct {
		module, after string
		shared        []string
	}{
		{"go.mod", "hack/tools/go.mod", []string{
			"k8s.io/api", "k8s.io/apimachinery", "k8s.io/client-go",
			"golang.org/x/net", "golang.org/x/oauth2", "golang.org/x/sys", "golang.org/x/term", "golang.org/x/text",
			"github.com/go-logr/logr", "go.yaml.in/yaml/v3", "google.golang.org/protobuf",
		}},
		{"hack/tools/kwok/go.mod", "hack/tools/k8s136/go.mod", []string{
			"k8s.io/api", "k8s.io/apimachinery", "k8s.io/client-go",
			"golang.org/x/net", "golang.org/x/crypto", "golang.org/x/text", "sigs.k8s.io/structured-merge-diff/v6",
		}},
	} {
		module, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(tc.module)))
		if err != nil {
			t.Fatal(err)
		}
		after, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(tc.after)))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range tc.shared {
			if got, want := requirement(t, module, m), requirement(t, after, m); got != want {
				t.Errorf("%s requires %s %s, %s %s: align them (go get in one module)", tc.module, m, got, tc.after, want)
			}
		}
	}
}

// TestKwokStagesNameTheFailures: the stages shipped for Workloads select
// pods by the annotation and image the package documents, and a pod without
// them by their absence.
func TestKwokStagesNameTheFailures(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("kwok", "stages.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		selector string
		want     int
	}{
		// the annotation's crash-loop stage, the image's (which leaves
		// annotated pods to the first) and pod-ready
		{`.metadata.annotations["` + envtest.FailPodAnnotation + `"]`, 3},
		// the image's crash-loop stage and pod-ready
		{`values: ["` + envtest.FailingImage + `"]`, 2},
	} {
		if n := strings.Count(string(data), tc.selector); n != tc.want {
			t.Errorf("stages.yaml has %d selectors on %s, want %d", n, tc.selector, tc.want)
		}
	}
}
