package bench

import (
	"context"
	"fmt"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// admitScenario is one row of the admission comparison: which Bindings
// exist, which namespace the request is in and whether it must be patched.
type admitScenario struct {
	name      string
	match     matchKind
	namespace string
	wantPatch bool
}

var admitScenarios = []admitScenario{
	{"no-binding-in-namespace", matchNone, otherNamespace, false},
	{"none-matching", matchNone, bindingNamespace, false},
	{"selector-match", matchSelector, bindingNamespace, true},
	{"exact-match", matchExact, bindingNamespace, true},
}

// admitter is what both frameworks' admission controllers offer.
type admitter interface {
	Admit(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse
}

// BenchmarkAdmit measures one admission decision on the same ~3 KB
// Deployment CREATE by bindkit's psbinding and by knative.dev/pkg's
// psbinding, each with an index built by its own reconcile from the same
// n selector Bindings (plus the matching one, where the scenario has one).
// Both run the same Do; each framework computes its own JSON patch.
func BenchmarkAdmit(b *testing.B) {
	b.Setenv("SYSTEM_NAMESPACE", systemNamespace) // knative's reconcile reads it
	secrets := corelisters.NewSecretLister(secretIndexer(b, map[string][]byte{"ca-cert.pem": []byte("not a real CA bundle")}))
	ctx := context.Background()
	for _, sc := range admitScenarios {
		for _, n := range []int{10, 1000, 10000} {
			set := bindingSet{n: n, match: sc.match}
			raw := deploymentRaw(b, sc.namespace)
			impls := []struct {
				name string
				new  func() admitter
			}{
				{"bindkit", func() admitter { return bindkitAdmission(b, set, secrets) }},
				{"knative", func() admitter { return knativeAdmission(b, set, secrets) }},
			}
			for _, impl := range impls {
				b.Run(fmt.Sprintf("scenario=%s/n=%d/impl=%s", sc.name, n, impl.name), func(b *testing.B) {
					ac := impl.new()
					req := deploymentRequest(sc.namespace, raw)
					checkAdmit(b, ac.Admit(ctx, req), sc.wantPatch)
					b.ReportAllocs()
					for b.Loop() {
						resp := ac.Admit(ctx, req)
						if !resp.Allowed {
							b.Fatalf("denied: %+v", resp.Result)
						}
					}
				})
			}
		}
	}
}

// checkAdmit fails b unless resp allows the request and carries a patch
// exactly when one is wanted, so a benchmark cannot measure a wrong answer.
func checkAdmit(b *testing.B, resp *admissionv1.AdmissionResponse, wantPatch bool) {
	b.Helper()
	if !resp.Allowed {
		b.Fatalf("request denied: %+v", resp.Result)
	}
	if got := len(resp.Patch) > 0; got != wantPatch {
		b.Fatalf("patch present = %v, want %v (patch %s)", got, wantPatch, resp.Patch)
	}
}
