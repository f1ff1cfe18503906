package psbinding

import (
	"context"
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzAdmit feeds arbitrary object bytes to a request that Bindings are in
// scope for: whatever arrives, admit answers (allowed, or a 400 that says
// what was wrong) and never panics; any patch it returns is valid JSON.
func FuzzAdmit(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","labels":{"app":"web"}},"spec":{"template":{"spec":{"containers":[{"name":"a"}]}}}}`))
	f.Add([]byte(`{"metadata":{"labels":{"app":"web"}},"spec":{"template":null}}`))
	f.Add([]byte(`{"metadata":{"labels":{"app":7}}}`))
	f.Add([]byte(`{"spec":{},"metadata":{"name":"web"}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(``))

	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	var a admitter
	a.setIndex([]Bindable{
		newEnvBinding("ns", "exact", deploymentRef("ns", "web", nil), "EXACT", "1"),
		newEnvBinding("ns", "selector", deploymentRef("ns", "", sel), "SELECTED", "2"),
	})
	f.Fuzz(func(t *testing.T, raw []byte) {
		resp := a.admit(context.Background(), deploymentRequest(admissionv1.Create, "ns", "web", raw))
		if !resp.Allowed && (resp.Result == nil || resp.Result.Code != 400 || resp.Result.Message == "") {
			t.Fatalf("denied without a 400 and a message: %+v", resp.Result)
		}
		if len(resp.Patch) > 0 && !json.Valid(resp.Patch) {
			t.Fatalf("invalid patch JSON: %s", resp.Patch)
		}
	})
}
