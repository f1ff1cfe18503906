package bindingtest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bindkit/bindkit/policy"
	"github.com/bindkit/bindkit/wiring"
)

// UpdateManifestsEnv names the environment variable that makes
// CheckManifests write the manifests instead of checking them:
//
//	BINDKIT_UPDATE_MANIFESTS=1 go test ./...
const UpdateManifestsEnv = "BINDKIT_UPDATE_MANIFESTS"

// AdmissionPoliciesFileName is where a kind's admission policies go in its
// config/ directory: numbered after its CRD (300-<singular>.yaml), as
// config/ of a module `bindkit new` made is laid out.
func AdmissionPoliciesFileName(singular string) string {
	return "310-" + singular + "-admission-policies.yaml"
}

// CheckManifests fails t when the file at path does not hold exactly the
// admission policies kind's Webhook programs (wiring.Kind.AdmissionPolicies:
// the authority policy, the namespace guard, the requested-by record), as
// policy.Manifests writes them under ManifestsHeader; with UpdateManifestsEnv set, it writes them
// there instead. A kind installed from manifests is then guarded from its
// install on, with no process running, and the process finds the objects
// as it would program them.
func CheckManifests(t testing.TB, kind *wiring.Kind, path string) {
	t.Helper()
	objs, err := kind.AdmissionPolicies()
	if err != nil {
		t.Fatalf("%s: admission policies: %v", kind.GVK.Kind, err)
	}
	want, err := policy.Manifests(objs, ManifestsHeader(kind.GVR.GroupResource().String()))
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv(UpdateManifestsEnv) != "" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", path)
		return
	}
	have, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v; write it with %s=1 go test (or bindkit generate)", path, err, UpdateManifestsEnv)
	}
	if diff := cmp.Diff(string(want), string(have)); diff != "" {
		t.Errorf("%s is not what %s programs (-programmed +file); write it with %s=1 go test (or bindkit generate):\n%s", path, kind.GVK.Kind, UpdateManifestsEnv, diff)
	}
}

// ManifestsHeader is the comment heading the admission policies file of
// the Binding kind whose group resource is gr.
func ManifestsHeader(gr string) string {
	return "Generated from the admission policies on " + gr + " (wiring.Kind.AdmissionPolicies): do not edit.\n" +
		"Regenerate with bindkit generate, or " + UpdateManifestsEnv + "=1 go test."
}
