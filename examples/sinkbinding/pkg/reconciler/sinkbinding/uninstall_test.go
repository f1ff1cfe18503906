package sinkbinding_test

import (
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/policy"
)

// TestUninstallRemovesThePolicyThroughExampleBinary runs the example
// binary by policy (default flags) until the policy admits, stops it and
// runs it with --uninstall: the policy and every binding of it are gone,
// so a subject created afterwards is not bound (before, the policy
// outlived the uninstall and went on binding new subjects).
func TestUninstallRemovesThePolicyThroughExampleBinary(t *testing.T) {
	r := newRig(t, "uninstall-")
	for i, name := range []string{"one", "two"} {
		if _, err := r.dyn.Resource(sinkBindings).Namespace(r.ns).Create(t.Context(), sinkBinding(r.ns, name,
			map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "selector": map[string]any{"matchLabels": map[string]any{"app": fmt.Sprintf("web-%d", i)}}}, "https://sink.example.com/u"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	policyName := policy.MutatingPolicyName(sinkBindings.GroupResource())
	bindingsOfPolicy := func() (int, error) {
		list, err := r.kube.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().List(t.Context(), metav1.ListOptions{LabelSelector: policy.PolicyLabel + "=" + policy.PolicyLabelValue(policyName)})
		if err != nil {
			return 0, err
		}
		return len(list.Items), nil
	}
	ctrl := r.start()
	poll(t, "the policy to bind a Deployment", func() (string, error) {
		got, err := r.create(t.Context(), shapes["Deployment"].object(r.ns, "probe", map[string]string{"app": "web-1"}), true)
		if err != nil {
			return err.Error(), nil
		}
		problem, _ := bound(got, shapes["Deployment"].podSpec, "two", "https://sink.example.com/u")
		return problem, nil
	})
	if n, err := bindingsOfPolicy(); err != nil || n < 2 {
		t.Fatalf("the policy's bindings: %d, %v; want one per Binding", n, err)
	}
	r.stop(ctrl)
	done := r.start("--uninstall")
	if exited, err := done.Exited(); !exited || err != nil {
		t.Fatalf("--uninstall: exited %v, %v\n%s", exited, err, done.LogTail(40))
	}
	if _, err := r.kube.AdmissionregistrationV1().MutatingAdmissionPolicies().Get(t.Context(), policyName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the policy is still there after --uninstall (%v)", err)
	}
	if n, err := bindingsOfPolicy(); err != nil || n != 0 {
		t.Errorf("the policy's bindings after --uninstall: %d, %v; want none", n, err)
	}
	got, err := r.create(t.Context(), shapes["Deployment"].object(r.ns, "after", map[string]string{"app": "web-1"}), false)
	if err != nil {
		t.Fatal(err)
	}
	if _, unbound := bound(got, shapes["Deployment"].podSpec, "", ""); !unbound {
		t.Errorf("a Deployment created after --uninstall was bound: %v", got.GetAnnotations())
	}
}
