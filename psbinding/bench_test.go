package psbinding

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
