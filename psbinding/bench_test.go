package psbinding

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/test/fixtures"
)

// BenchmarkAdmit measures one admission decision on a ~3 KB Deployment with
// n Bindings in the request's namespace, each selecting its own app label.
func BenchmarkAdmit(b *testing.B) {
	raw, err := json.Marshal(fixtures.RealisticDeployment("ns", "web"))
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("object size: %d bytes", len(raw))
	for _, n := range []int{10, 1000, 10000} {
		bindings := make([]Bindable, 0, n+1)
		for i := range n {
			sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app-%d", i)}}
			bindings = append(bindings, newEnvBinding("ns", fmt.Sprintf("b%05d", i), deploymentRef("ns", "", sel), "BOUND", "yes"))
		}
		run := func(name string, bindings []Bindable, reqNS string, wantPatch bool) {
			var a admitter
			a.setIndex(bindings)
			req := deploymentRequest(admissionv1.Create, reqNS, "web", raw)
			ctx := context.Background()
			b.Run(fmt.Sprintf("%s/n=%d", name, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					resp := a.admit(ctx, req)
					if !resp.Allowed || (len(resp.Patch) > 0) != wantPatch {
						b.Fatalf("unexpected response: %+v", resp)
					}
				}
			})
		}
		run("no-binding-in-namespace", bindings, "other", false)
		run("none-matching", bindings, "ns", false)
		sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
		run("selector-match", append(bindings, newEnvBinding("ns", "match", deploymentRef("ns", "", sel), "BOUND", "yes")), "ns", true)
		run("exact-match", append(bindings, newEnvBinding("ns", "match", deploymentRef("ns", "web", nil), "BOUND", "yes")), "ns", true)
	}
}

// BenchmarkReconcileBound is the reconcile a subject event causes once its
// selector Binding has bound everything (the steady state of a bound
// namespace): n subjects in the cache, all recording the Binding at its
// generation, nothing to write. Each event re-runs it, so its cost is paid
// per create or update of any subject.
func BenchmarkReconcileBound(b *testing.B) {
	for _, n := range []int{10, 600} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			binding := newEnvBinding("ns", "gh", deploymentRef("ns", "", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}), "TOKEN", "t")
			binding.Generation = 1
			binding.Finalizers = []string{"test.bindkit.dev/envbindings"}
			binding.Annotations = map[string]string{SubjectKindsAnnotation: "apps/v1/Deployment"}
			objects := []runtime.Object{binding}
			for i := range n {
				d := testDeployment("ns", fmt.Sprintf("web-%04d", i), map[string]string{"app": "web"}, corev1.EnvVar{Name: "TOKEN", Value: "t"})
				d.Annotations = duck.SetBound(d.Annotations, duck.Bound{{Resource: envBindingsGVR.GroupResource(), Name: "gh"}: 1})
				objects = append(objects, d)
			}
			f := newReconcilerFixture(b, objects...)
			ctx := context.Background()
			inf, _, err := f.r.Factory.Get(ctx, deploymentsGVR)
			if err != nil {
				b.Fatal(err)
			}
			if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
				b.Fatal("subject cache not synced")
			}
			if err := f.r.Reconcile(ctx, "ns/gh"); err != nil { // the status, once
				b.Fatal(err)
			}
			f.client.ClearActions()
			b.ReportAllocs()
			for b.Loop() {
				if err := f.r.Reconcile(ctx, "ns/gh"); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			for _, a := range f.client.Actions() {
				if a.GetVerb() != "get" {
					b.Fatalf("a bound Binding's reconcile wrote: %v", a)
				}
			}
		})
	}
}

// BenchmarkPrivateCopy is what giving Do a copy of its own costs each
// application (privateCopy): a copy of BenchmarkAdmit's Bindings, one
// naming its subject and one selecting it.
func BenchmarkPrivateCopy(b *testing.B) {
	for _, tc := range []struct {
		name    string
		binding Bindable
	}{
		{"exact", newEnvBinding("ns", "match", deploymentRef("ns", "web", nil), "BOUND", "yes")},
		{"selector", newEnvBinding("ns", "match", deploymentRef("ns", "", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}), "BOUND", "yes")},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := privateCopy(tc.binding); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
