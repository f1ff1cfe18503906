package main

import (
	"bytes"
	"flag"
	"os"
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
// CRDs of bindkit's examples with `bindkit generate -check` and fails, with
// the difference, when one in the repository is stale.
func TestRepositoryGeneratedFilesAreCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("runs controller-gen over the examples: 20 s (make test runs it)")
	}
	if minor := os.Getenv(envtest.KubeMinorEnv); minor != "" && minor != envtest.NewestMinor {
		t.Skipf("uses no control plane: run once, in the newest minor's pass (%s=%s)", envtest.KubeMinorEnv, minor)
	}
	t.Chdir("../..")
	for _, api := range repositoryAPIs {
		args := []string{"generate", "-header", "hack/boilerplate.go.txt", "-crd-dir", api.crdDir}
		if !*update {
			args = append(args, "-check")
		}
		var stdout, stderr bytes.Buffer
		if err := run(t.Context(), append(args, api.pkg), &stdout, &stderr); err != nil {
			t.Errorf("bindkit %v: %v\n%s%s", args, err, stdout.Bytes(), stderr.Bytes())
		}
	}
}
