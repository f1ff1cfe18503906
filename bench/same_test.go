package bench

import (
	"context"
	"encoding/json"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corelisters "k8s.io/client-go/listers/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/bindkit/bindkit/test/fixtures"
)

// TestSameMutation proves the comparison is fair: for every scenario the
// three implementations turn the request's Deployment into the same object
// (the realistic Deployment with the matching Binding's env var, volume and
// mounts), or leave it alone.
func TestSameMutation(t *testing.T) {
	t.Setenv("SYSTEM_NAMESPACE", systemNamespace)
	secrets := corelisters.NewSecretLister(secretIndexer(t, map[string][]byte{"ca-cert.pem": []byte("not a real CA bundle")}))
	scheme := runtime.NewScheme()
	if err := appsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, sc := range admitScenarios {
		t.Run(sc.name, func(t *testing.T) {
			set := bindingSet{n: 10, match: sc.match}
			raw := deploymentRaw(t, sc.namespace)
			req := deploymentRequest(sc.namespace, raw)

			want := fixtures.RealisticDeployment(sc.namespace, subjectName)
			if sc.wantPatch {
				newBindingSpec("match").do(&want.Spec.Template.Spec)
			}

			bk := bindkitAdmission(t, set, secrets).Admit(ctx, req)
			kn := knativeAdmission(t, set, secrets).Admit(ctx, req)
			cr := admission.WithDefaulter(scheme, newCRDefaulter(set)).Handle(ctx, admission.Request{AdmissionRequest: *req})
			crPatch, err := json.Marshal(cr.Patches)
			if err != nil {
				t.Fatal(err)
			}
			for name, patch := range map[string][]byte{"bindkit": bk.Patch, "knative": kn.Patch, "controller-runtime": crPatch} {
				got := applyPatch(t, raw, patch)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s: patched Deployment differs (-want +got):\n%s", name, diff)
				}
			}
		})
	}
}

// applyPatch applies a JSON patch (none when empty or null) to raw and
// decodes the result.
func applyPatch(t *testing.T, raw, patch []byte) *appsv1.Deployment {
	t.Helper()
	if len(patch) > 0 && string(patch) != "null" {
		p, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			t.Fatalf("decode patch %s: %v", patch, err)
		}
		if raw, err = p.Apply(raw); err != nil {
			t.Fatalf("apply patch %s: %v", patch, err)
		}
	}
	var d appsv1.Deployment
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	return &d
}
