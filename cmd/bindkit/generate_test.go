package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/bindkit/bindkit/envtest"
)

var update = flag.Bool("update", false, "regenerate the repository's generated files instead of checking them (make generate)")

// repositoryAPIs are bindkit's own API packages and where their CRDs go:
// `make generate` writes them (go test -run TestRepositoryGeneratedFilesAreCurrent -update).
var repositoryAPIs = []struct {
	pkg, crdDir string
}{
	{"./examples/githubbinding/pkg/apis/bindings/v1alpha1", "config"},
	{"./examples/configbinding/pkg/apis/bindings/v1alpha1", "examples/configbinding/config"},
	{"./examples/sinkbinding/pkg/apis/bindings/v1alpha1", "examples/sinkbinding/config"},
	// A declarative kind whose users write its Spec in the Binding, for
	// bindkit's own tests: its CRD carries declarative.Spec's rules.
	{"./test/declaredbinding/v1alpha1", "test/declaredbinding/config"},
	// The walkthrough's CRD is the hand-written one of a knative user, on
	// purpose without CEL guards: only its deep copies are generated.
	{"./examples/knativewalkthrough/pkg/apis/bindings/v1alpha1", ""},
}

// TestRepositoryGeneratedFilesAreCurrent regenerates the deep copies and
// CRDs of bindkit's examples as `bindkit generate -check` does and fails,
// with the difference, when one in the repository is stale. The admission
// policies generate also keeps are checked by their own tests
// (bindingtest.CheckManifests), which make test runs: running them again
// here, once per API package, took most of this test's 474 s in CI. With
// -update it writes the files and then runs those tests once, to write
// the policies (make generate).
func TestRepositoryGeneratedFilesAreCurrent(t *testing.T) {
	t.Parallel() // controller-gen's minutes overlap the other scaffolding tests'
	if testing.Short() {
		t.Skip("runs controller-gen over the examples: 20 s (make test runs it)")
	}
	if minor := os.Getenv(envtest.KubeMinorEnv); minor != "" && minor != envtest.NewestMinor {
		t.Skipf("uses no control plane: run once, in the newest minor's pass (%s=%s)", envtest.KubeMinorEnv, minor)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	header := filepath.Join(root, "hack", "boilerplate.go.txt")
	for _, api := range repositoryAPIs {
		var stdout, stderr bytes.Buffer
		if err := generate(t.Context(), root, []string{api.pkg}, api.crdDir, header, !*update, &stdout, &stderr); err != nil {
			t.Errorf("bindkit generate %s: %v\n%s%s", api.pkg, err, stdout.Bytes(), stderr.Bytes())
		}
	}
	if *update {
		var stdout, stderr bytes.Buffer
		if err := runManifestTests(t.Context(), root, false, &stdout, &stderr); err != nil {
			t.Errorf("writing the admission policies: %v\n%s%s", err, stdout.Bytes(), stderr.Bytes())
		}
	}
}
